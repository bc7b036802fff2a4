"""float32 against float64 on the CPU: the default ``NystromRegressor`` fit on the same rows
given as float32 and as float64 (the fit follows its input's dtype).

    python benchmarks/float32.py run [--sets protein,cpusmall,kin8nm] [--runs 3]
    python benchmarks/float32.py table

Each fit in a fresh process, the dtypes alternating, median of ``--runs``; reported: fit
time, the chosen width and penalty, test RMSE, and the median |prediction difference|
between the two fits over the target's standard deviation. Data: ``benchmarks/defaults.py``'s
sets, first split. Writes ``results/float32.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "float32.json"


def worker(name: str, dtype: str, pred_out: str) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import defaults

    import kernelpath as kp

    Xtr, ytr, Xte, yte = defaults.load(name, 0)
    Xtr, Xte = Xtr.astype(dtype), Xte.astype(dtype)
    est = kp.NystromRegressor(random_state=0)
    t = time.perf_counter()
    est.fit(Xtr, ytr.astype(dtype))
    seconds = time.perf_counter() - t
    pred = np.asarray(est.predict(Xte), dtype=np.float64)
    np.save(pred_out, pred)
    return {
        "fit_s": seconds,
        "sigma": float(np.mean(est.kernel_.widths())),
        "penalty": float(est.best_params_["penalty"]),
        "test_rmse": defaults.test_error(name, yte, pred),
    }


def run(sets: list[str], runs: int) -> None:
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as folder:
        for name in sets:
            got: dict[str, list[dict[str, Any]]] = {"float64": [], "float32": []}
            for _ in range(runs):
                for dtype in got:
                    pred = f"{folder}/{name}-{dtype}.npy"
                    out = subprocess.run(
                        [sys.executable, __file__, "worker", name, dtype, pred],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    got[dtype].append(json.loads(out.stdout.strip().splitlines()[-1]))
            sys.path.insert(0, str(HERE))
            import defaults

            spread = float(np.std(defaults.load(name, 0)[3]))
            p64 = np.load(f"{folder}/{name}-float64.npy")
            p32 = np.load(f"{folder}/{name}-float32.npy")
            res[name] = {
                dtype: {
                    "fit_s": statistics.median(r["fit_s"] for r in rows),
                    **{k: rows[0][k] for k in ("sigma", "penalty", "test_rmse")},
                }
                for dtype, rows in got.items()
            }
            res[name]["median_diff_over_spread"] = float(np.median(np.abs(p64 - p32)) / spread)
            res[name]["runs"] = runs
            print(name, json.dumps(res[name]), flush=True)
            OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "| set | fit float64 (s) | fit float32 (s) | width 64 / 32 | penalty 64 / 32 "
        "| test RMSE 64 / 32 | median difference / spread |",
        "|---|---:|---:|---|---|---|---:|",
    ]
    for name, r in res.items():
        a, b = r["float64"], r["float32"]
        lines.append(
            f"| {name} | {a['fit_s']:.2f} | {b['fit_s']:.2f} | {a['sigma']:.3g} / "
            f"{b['sigma']:.3g} | {a['penalty']:.2g} / {b['penalty']:.2g} "
            f"| {a['test_rmse']:.4g} / {b['test_rmse']:.4g} "
            f"| {100 * r['median_diff_over_spread']:.2f}% |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--sets", default="protein,cpusmall,kin8nm")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(*a.args)))
    elif a.mode == "run":
        run(a.sets.split(","), a.runs)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
