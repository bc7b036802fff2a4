"""float32 against float64 on the CPU: the default ``NystromRegressor`` fit on the same rows
given as float32 and as float64 (the fit follows its input's dtype).

    python benchmarks/run.py float32 run [--sets protein,cpusmall,kin8nm] [--runs 3]
    python benchmarks/run.py float32 table

Each fit in a fresh process, the dtypes alternating, median of ``--runs``; reported: fit
time, the chosen width and penalty, test RMSE, and the median |prediction difference|
between the two fits over the target's standard deviation. Data: ``benchmarks/defaults.py``'s
sets, first split. Writes ``results/float32.json``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from typing import Any

import fresh as h
import numpy as np


def fit_one(name: str, dtype: str, pred_out: str) -> dict[str, Any]:
    """The default fit of ``name``'s first split in ``dtype``; its predictions saved."""
    import defaults

    import kernelpath as kp

    Xtr, ytr, Xte, yte = defaults.load(name, 0)
    Xtr, Xte = Xtr.astype(dtype), Xte.astype(dtype)
    est, seconds, _ = h.timed(
        lambda: kp.NystromRegressor(random_state=0).fit(Xtr, ytr.astype(dtype))
    )
    pred = np.asarray(est.predict(Xte), dtype=np.float64)
    np.save(pred_out, pred)
    return {
        "fit_s": seconds,
        "sigma": float(np.mean(est.kernel_.widths())),
        "penalty": float(est.best_params_["penalty"]),
        "test_rmse": defaults.test_error(name, yte, pred),
    }


def run(sets: str = "protein,cpusmall,kin8nm", runs: int = 3) -> str:
    """Each set: the two dtypes alternating in fresh processes, median of ``runs``."""
    import defaults

    with tempfile.TemporaryDirectory() as folder:
        for name in h.names(sets):
            jobs = {
                dtype: lambda _, name=name, dtype=dtype: h.call(
                    "float32", "fit_one", name=name, dtype=dtype, pred_out=f"{folder}/{dtype}.npy"
                )
                for dtype in ("float64", "float32")
            }
            got = h.rounds(jobs, runs)
            spread = float(np.std(defaults.load(name, 0)[3]))
            p64, p32 = np.load(f"{folder}/float64.npy"), np.load(f"{folder}/float32.npy")
            entry: dict[str, Any] = {
                dtype: {
                    "fit_s": statistics.median(r["fit_s"] for r in rows),
                    **{k: rows[0][k] for k in ("sigma", "penalty", "test_rmse")},
                }
                for dtype, rows in got.items()
            }
            entry["median_diff_over_spread"] = float(np.median(np.abs(p64 - p32)) / spread)
            entry["runs"] = runs
            h.record("float32", name, entry)
    return table()


def table() -> str:
    """Fit time, chosen width and penalty, and test RMSE of each dtype, and how far apart."""
    cells = []
    for name, r in h.load("float32").items():
        a, b = r["float64"], r["float32"]
        cells.append(
            [
                name,
                f"{a['fit_s']:.2f}",
                f"{b['fit_s']:.2f}",
                f"{a['sigma']:.3g} / {b['sigma']:.3g}",
                f"{a['penalty']:.2g} / {b['penalty']:.2g}",
                f"{a['test_rmse']:.4g} / {b['test_rmse']:.4g}",
                f"{100 * r['median_diff_over_spread']:.2f}%",
            ]
        )
    header = ["set", "fit float64 (s)", "fit float32 (s)", "width 64 / 32", "penalty 64 / 32"]
    header += ["test RMSE 64 / 32", "median difference / spread"]
    return h.markdown(header, cells, "lrrlllr")


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table}))
