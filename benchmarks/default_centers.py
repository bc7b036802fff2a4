"""The default number of centers without its old cap (issue 45): the default
``NystromRegressor`` on problem P at large n against the same fit with the 5,000 centers the
cap gave it.

    python benchmarks/default_centers.py run [--n 1000000] [--runs 1]
    python benchmarks/default_centers.py table

n_centers=None draws sqrt(n) log(n) centers for the hold-out's training rows (12,160 at
n = 10⁶: 800,000 rows); until stop 56 that number was capped at 5,000
(``MAX_CENTERS_DEFAULT``). Every other parameter is the default (scaled inputs, the width
screen, the λ path by CG on a 20% hold-out). Each fit runs in a fresh process
(``fresh.py``'s data and peak-memory sampling), the two alternating, median of ``--runs``;
reported: fit time, test RMSE (the noise floor is 0.1), centers, peak resident memory and
the factor CG took. Writes ``results/default_centers.json``.
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
OUT = HERE / "results" / "default_centers.json"
OLD_CAP = 5000


def worker(data: str, m: str) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from fresh import PeakMemory, _factor_info, _load

    import kernelpath as kp

    X, y, Xt, yt = _load(data, "float64")
    est = kp.NystromRegressor(random_state=0, n_centers=None if m == "default" else int(m))
    with PeakMemory() as mem:
        t = time.perf_counter()
        est.fit(X, y)
        sec = time.perf_counter() - t
    rmse = float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))
    return {
        "fit_s": sec,
        "test_rmse": rmse,
        "centers": int(est.centers_.shape[0]),
        "peak_mb": mem.mb,
        "factor": _factor_info(est),
        "best_params": est.best_params_,
    }


def run(n: int, runs: int) -> None:
    sys.path.insert(0, str(HERE))
    from run import machine_info

    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    machine = machine_info()  # this machine's ceilings, measured in the same run
    got: dict[str, list[dict[str, Any]]] = {"default": [], str(OLD_CAP): []}
    with tempfile.TemporaryDirectory() as data:
        subprocess.run(
            [sys.executable, str(HERE / "fresh.py"), "data", "--n", str(n), "--out", data],
            check=True,
        )
        for _ in range(runs):
            for m in got:
                out = subprocess.run(
                    [sys.executable, __file__, "worker", data, m],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                got[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(m, json.dumps(got[m][-1], default=float), flush=True)
    res[str(n)] = {
        m: {
            "fit_s": statistics.median(r["fit_s"] for r in rows),
            "fit_s_all": [r["fit_s"] for r in rows],
            **{k: rows[0][k] for k in ("test_rmse", "centers", "factor", "best_params")},
            "peak_mb": max(r["peak_mb"] for r in rows),
        }
        for m, rows in got.items()
    }
    res[str(n)]["machine"] = machine
    OUT.write_text(json.dumps(res, indent=2, default=float) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "| n | n_centers | centers | fit (s) | test RMSE | peak memory (GB) | factor |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for n, fits in res.items():
        for m, r in fits.items():
            if m == "machine":
                continue
            name = "None (√n log n)" if m == "default" else f"{int(m):,} (the old cap)"
            k = len(r["fit_s_all"])
            how = f" (median of {k})" if k > 1 else ""
            lines.append(
                f"| {int(n):,} | {name} | {r['centers']:,} | {r['fit_s']:.0f}{how} "
                f"| {r['test_rmse']:.4f} | {r['peak_mb'] / 1e3:.1f} | {r['factor']['factor']} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(*a.args), default=float))
    elif a.mode == "run":
        run(a.n, a.runs)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
