"""Scaled inputs, two ways to the same model (issue 24, part 1): standardize a copy of X and
fit one width, or fold the feature scales into per-feature widths on the raw X.

    python benchmarks/scaling.py run [--rounds 3]
    python benchmarks/scaling.py table

Data: problem P (x ~ N(0, I_20), y = sin<w, x> + 0.1 eps) at n = 200,000 and 1,000,000,
each feature then multiplied by 10^u, u uniform in [-3, 3] (raw units that differ by up to
six decades, as tabular data have), and cpusmall as it is on disk (12 features in their own
units). Every fit: ``NystromRegressor`` with its default CG solver and λ path, m = 2000,
``random_state=0``, the width the median heuristic gives on the standardized training
features (so the three fits below are the same model but for "raw"):

- ``raw``: the median heuristic on the raw features (what a default fit does today);
- ``copy``: StandardScaler on the training features (fit and transform timed with the fit),
  one width; predictions transform the test features too;
- ``fold``: the raw features, ``sigma`` = that width x the features' standard deviations
  (one width per feature), nothing copied.

Each fit runs in a fresh process (``fit`` timed, the copy's scaling included), the three
alternating, median of 3; reported: fit time, peak memory above the loaded data, test
RMSE, and the largest difference between the copy's and the fold's test predictions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path as FsPath
from typing import Any

import numpy as np

HERE = FsPath(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
from fresh import PeakMemory  # noqa: E402

WAYS = ("raw", "copy", "fold")


def make_p(n: int, out: str) -> None:
    """Problem P with features in raw units 10^u, u ~ U[-3, 3]; test rows from the same w."""
    rng = np.random.default_rng(0)
    d, n_test = 20, 50_000
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    units = 10.0 ** rng.uniform(-3, 3, d)
    for name, rows in (("train", n), ("test", n_test)):
        X = rng.standard_normal((rows, d))
        y = np.sin(X @ w) + 0.1 * rng.standard_normal(rows)
        np.save(os.path.join(out, f"X_{name}.npy"), X * units)
        np.save(os.path.join(out, f"y_{name}.npy"), y)


def make_cpusmall(out: str) -> None:
    import pandas as pd

    path = HERE.parent.parent / "shared" / "data" / "cpusmall" / "cpu_small.csv"
    df = pd.read_csv(path, skiprows=1, header=None)
    X, y = df.iloc[:, :-1].to_numpy(float), df.iloc[:, -1].to_numpy(float)
    perm = np.random.default_rng(0).permutation(len(X))
    cut = int(0.8 * len(X))
    for name, idx in (("train", perm[:cut]), ("test", perm[cut:])):
        np.save(os.path.join(out, f"X_{name}.npy"), X[idx])
        np.save(os.path.join(out, f"y_{name}.npy"), y[idx])


def fit_one(data: str, way: str) -> dict[str, Any]:
    from sklearn.preprocessing import StandardScaler

    from kernelpath import Gaussian, NystromRegressor
    from kernelpath.kernels import median_distance

    X = np.load(os.path.join(data, "X_train.npy"))
    y = np.load(os.path.join(data, "y_train.npy"))
    Xt = np.load(os.path.join(data, "X_test.npy"))
    yt = np.load(os.path.join(data, "y_test.npy"))
    scale = X.std(axis=0)  # the width's reference, not timed (the same for copy and fold)
    sigma = median_distance(X[:5000] / scale, 0)
    time.sleep(0.5)
    with PeakMemory() as mem:
        t = time.perf_counter()
        if way == "copy":
            sc = StandardScaler().fit(X)
            est = NystromRegressor(Gaussian(sigma), n_centers=2000, random_state=0)
            est.fit(sc.transform(X), y)
        elif way == "fold":
            sd = X.std(axis=0)
            est = NystromRegressor(Gaussian(sigma * sd), n_centers=2000, random_state=0)
            est.fit(X, y)
        else:
            est = NystromRegressor(n_centers=2000, random_state=0).fit(X, y)
        sec = time.perf_counter() - t
    pred = est.predict(sc.transform(Xt) if way == "copy" else Xt)
    np.save(os.path.join(data, f"pred_{way}.npy"), pred)
    return {
        "fit_s": sec,
        "peak_mb": mem.mb,
        "test_rmse": float(np.sqrt(np.mean((pred - yt) ** 2))),
        "best_params": {k: float(v) for k, v in est.best_params_.items()},
    }


def run(rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("P 200k", "P 1M", "cpusmall"):
            data = os.path.join(tmp, name.replace(" ", "_"))
            os.makedirs(data)
            if name == "cpusmall":
                make_cpusmall(data)
            else:
                make_p(200_000 if name == "P 200k" else 1_000_000, data)
            runs: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
            for r in range(rounds):
                for way in WAYS if r % 2 == 0 else WAYS[::-1]:
                    res = subprocess.run(
                        [sys.executable, __file__, "one", data, way],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    runs[way].append(json.loads(res.strip().splitlines()[-1]))
                    print(f"{name:9s} {way:5s} {runs[way][-1]['fit_s']:7.2f} s", flush=True)
            pc, pf = (np.load(os.path.join(data, f"pred_{w}.npy")) for w in ("copy", "fold"))
            out[name] = {
                w: {
                    "fit_s": statistics.median(x["fit_s"] for x in runs[w]),
                    "peak_mb": max(x["peak_mb"] for x in runs[w]),
                    "test_rmse": runs[w][0]["test_rmse"],
                    "best_params": runs[w][0]["best_params"],
                    "runs": runs[w],
                }
                for w in WAYS
            }
            out[name]["max_abs_copy_minus_fold"] = float(np.max(np.abs(pc - pf)))
    return out


def table() -> str:
    res = json.loads((RESULTS / "scaling.json").read_text())["result"]
    lines = [
        "| data | way | fit (s) | peak memory (MB) | test RMSE |",
        "|---|---|---:|---:|---:|",
    ]
    for name, r in res.items():
        for w in WAYS:
            x = r[w]
            lines.append(
                f"| {name} | {w} | {x['fit_s']:.2f} | {x['peak_mb']:.0f} | {x['test_rmse']:.4g} |"
            )
        lines.append(f"| {name} | copy − fold, largest | | | {r['max_abs_copy_minus_fold']:.1e} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--rounds", type=int, default=3)
    o = sub.add_parser("one")
    o.add_argument("data")
    o.add_argument("way", choices=WAYS)
    sub.add_parser("table")
    a = ap.parse_args()
    if a.cmd == "one":
        print(json.dumps(fit_one(a.data, a.way)))
    elif a.cmd == "run":
        from run import machine_info

        payload = {"machine": machine_info(), "result": run(a.rounds)}
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "scaling.json").write_text(json.dumps(payload, indent=1))
        print(table())
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
