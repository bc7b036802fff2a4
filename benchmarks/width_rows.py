"""The default width on MNIST and the screen's rows: is the shift of the best width with n
(``fitting.widths.WIDTH_SHIFT``) right for MNIST, and would a screen on more rows
(``fitting.widths.SCREEN_ROWS``) choose better widths? (issue 45)

    python benchmarks/width_rows.py sigma [--m 5000] [--sigmas 1021.48,1275,1530,800]
    python benchmarks/width_rows.py sigma --m 20000 --sigmas 1275
    python benchmarks/width_rows.py rows [--rows 4000,16000,8000]
                                        [--sets mnist,ijcnn1,adult,protein] [--seeds 0,1,2]
    python benchmarks/width_rows.py table

``sigma``: MNIST's official split (60,000 / 10,000, ``scale=False``), float32,
``NystromClassifier(n_centers=m, kernel=Gaussian(sigma))`` at fixed widths (in pixel units,
0-255) with every other default (the λ path by CG on the 20% hold-out): the test error, the
validation error of the chosen point and the fit time. 1021.48 is the width the default
screen chooses.

``rows``: the default ``NystromClassifier(scale=False)`` on MNIST and, for the other sets,
``benchmarks/defaults.py``'s default estimators (CG and direct; official splits for ijcnn1
and adult, seeds 0-2 for protein) with ``SCREEN_ROWS`` set to each value: the width chosen
(the screen's vertex, its shift and sigma), the test error and the fit time. Only the sets
with more than 2 x 4,000 screen-able training rows are affected (MNIST, ijcnn1, adult,
protein of the shared sets).

Every fit runs in a fresh process; results go to ``results/width_rows.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "width_rows.json"
DATA = HERE.parent.parent / "shared" / "data"


def _mnist() -> tuple[np.ndarray, ...]:
    from kernelpath.datasets import load_shared

    d = load_shared("mnist", root=DATA)
    return (
        d["X_train"].astype(np.float32),
        d["y_train"],
        d["X_test"].astype(np.float32),
        d["y_test"],
    )


def sigma_one(m: int, sigma: float) -> dict[str, Any]:
    """MNIST at a fixed width, in this process."""
    from kernelpath import Gaussian, NystromClassifier

    X, y, Xt, yt = _mnist()
    est = NystromClassifier(scale=False, n_centers=m, random_state=0, kernel=Gaussian(sigma=sigma))
    t = time.perf_counter()
    est.fit(X, y)
    sec = time.perf_counter() - t
    return {
        "m": m,
        "sigma": sigma,
        "fit_s": sec,
        "test_error_pct": float(100 * np.mean(est.predict(Xt) != yt)),
        "val_error_pct": 100 * float(est.path_.best_val_error),
        "best_params": est.best_params_,
    }


def rows_one(name: str, seed: int, rows: int) -> dict[str, Any]:
    """The default fits of one set and seed with ``SCREEN_ROWS = rows``, in this process."""
    import kernelpath.fitting.widths as W

    W.SCREEN_ROWS = rows
    out: dict[str, Any] = {"set": name, "seed": seed, "rows": rows}
    if name == "mnist":
        from kernelpath import NystromClassifier

        X, y, Xt, yt = _mnist()
        est = NystromClassifier(scale=False, random_state=0)
        t = time.perf_counter()
        est.fit(X, y)
        sec = time.perf_counter() - t
        ws = est.path_.info["width_search"][0]
        out["cg"] = {
            "fit_s": sec,
            "test_error": float(100 * np.mean(est.predict(Xt) != yt)),
            "sigma": [float(ws["sigma"])],
            "screen_rows": ws["n_rows"],
            "screen_centers": ws["n_centers"],
            "vertex": ws["screen_best"],
            "shift": ws["shift"],
        }
        return out
    sys.path.insert(0, str(HERE))
    import defaults

    r = defaults.accuracy_one(name, seed, ["default"], solvers=("cg", "direct"))
    out["cg"], out["direct"] = r["default_cg"], r["default_direct"]
    return out


def _worker(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "worker", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def _load() -> dict[str, Any]:
    return json.loads(OUT.read_text()) if OUT.exists() else {"sigma": {}, "rows": {}}


def _save(res: dict[str, Any]) -> None:
    OUT.write_text(json.dumps(res, indent=1, default=float) + "\n")


def _host() -> str:
    """This host, by the BLAS kernels OpenBLAS picks here (``run.host_name``)."""
    sys.path.insert(0, str(HERE))
    from run import blas_libraries, host_name

    blas = blas_libraries()
    return host_name(blas[0]["architecture"] if blas else "?")


def table(res: dict[str, Any]) -> str:
    sys.path.insert(0, str(HERE))
    from run import host_cell, host_name

    lines = ["| MNIST, m | sigma (pixels) | validation error | test error | fit | host |"]
    lines.append("|---:|---:|---:|---:|---:|---|")
    for r in sorted(res["sigma"].values(), key=lambda r: (r["m"], r["sigma"])):
        lines.append(
            f"| {r['m']:,} | {r['sigma']:.0f} | {r['val_error_pct']:.2f}% "
            f"| {r['test_error_pct']:.2f}% | {r['fit_s']:.0f} s "
            f"| {host_cell(r.get('host') or host_name(None), r.get('note'))} |"
        )
    lines += ["", "| set | seed | screen rows | sigma[0] | CG error | CG fit | direct error |"]
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in sorted(res["rows"].values(), key=lambda r: (r["set"], r["seed"], r["rows"])):
        cg, di = r["cg"], r.get("direct")
        lines.append(
            f"| {r['set']} | {r['seed']} | {r['rows']:,} | {cg['sigma'][0]:.4g} "
            f"| {cg['test_error']:.4g} | {cg['fit_s']:.1f} s "
            f"| {'—' if di is None else format(di['test_error'], '.4g')} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["sigma", "rows", "table", "worker"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--m", type=int, default=5000)
    ap.add_argument("--sigmas", default="1021.4757804915483,1275,1530,800")
    ap.add_argument("--rows", default="4000,16000,8000")
    ap.add_argument("--sets", default="mnist,ijcnn1,adult,protein")
    ap.add_argument("--seeds", default="0,1,2")
    a = ap.parse_args()
    if a.mode == "worker":
        if a.args[0] == "sigma":
            r = sigma_one(int(a.args[1]), float(a.args[2]))
        else:
            r = rows_one(a.args[1], int(a.args[2]), int(a.args[3]))
        print(json.dumps(r, default=float))
        return 0
    res = _load()
    if a.mode == "table":
        print(table(res))
        return 0
    if a.mode == "sigma":
        for s in a.sigmas.split(","):
            r = _worker(["sigma", str(a.m), s])
            r["host"] = _host()
            res["sigma"][f"{a.m}/{float(s):.2f}"] = r
            _save(res)
            print(json.dumps(r, default=float), flush=True)
        return 0
    for name in a.sets.split(","):
        seeds = [int(s) for s in a.seeds.split(",")] if name == "protein" else [0]
        for seed in seeds:
            for rows in a.rows.split(","):
                r = _worker(["rows", name, str(seed), rows])
                res["rows"][f"{name}/{seed}/{rows}"] = r
                _save(res)
                print(json.dumps(r, default=float)[:300], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
