"""Two lines of the random-features guide's departures table (thesis ch. 5), measured.

    python benchmarks/paper/thesis_ch5.py run     # results/thesis_ch5.json, and prints it

- The intercept: eq. 5.7 has none (the features fit the constant); the library centers the
  targets. Both on the same maps (the default fit's ``features_``, seeds 0-2), λ chosen on
  the same 20% hold-out from the same 20-value grid, refit on all the training rows, scored
  on the test rows (test RMSE, mean of the seeds).
- Appendix C's two rank-one Cholesky updates per feature against the bordered blocks that
  ``rf_feature_path`` uses by default: the same (D, λ) path (largest coefficient difference)
  and its time, D_max = 1000 on cpusmall's features, one λ, median of 3.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from _common import run_command

import kernelpath as kp
from kernelpath.solvers.random_features import feature_moments, rf_feature_path
from kernelpath.workspace import Workspace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from defaults import load  # noqa: E402

OUT = HERE / "results" / "thesis_ch5.json"


def _holdout_fit(P, y, Pt, yt, intercept, rng):
    idx = rng.permutation(len(P))
    va, tr = idx[: len(idx) // 5], idx[len(idx) // 5 :]

    def solve(rows, lam_grid):
        c = y[rows].mean() if intercept else 0.0
        G = P[rows].T @ P[rows] / len(rows)
        s, V = np.linalg.eigh(G)
        s = np.maximum(s, 0.0)
        cb = V.T @ (P[rows].T @ (y[rows] - c) / len(rows))
        grid = np.geomspace(s.max(), s.max() * 1e-9, 20) if lam_grid is None else lam_grid
        return c, s, V, cb, grid

    c, s, V, cb, grid = solve(tr, None)
    errs = [np.mean((P[va] @ (V @ (cb / (s + lam))) + c - y[va]) ** 2) for lam in grid]
    lam = grid[int(np.argmin(errs))]
    c = y.mean() if intercept else 0.0
    w = np.linalg.solve(P.T @ P / len(P) + lam * np.eye(P.shape[1]), P.T @ (y - c) / len(P))
    return float(np.sqrt(np.mean((Pt @ w + c - yt) ** 2)))


def intercept_rows() -> dict:
    out = {}
    for name in ("cpusmall", "concrete", "yacht"):
        res: dict[str, list[float]] = {"with": [], "without": []}
        for seed in range(3):
            Xtr, ytr, Xte, yte = load(name, seed)[:4]
            fmap = kp.RandomFeaturesRegressor(random_state=seed).fit(Xtr, ytr).features_
            P, Pt = fmap.transform(Xtr), fmap.transform(Xte)
            for key, icpt in (("with", True), ("without", False)):
                rng = np.random.default_rng(seed)
                res[key].append(_holdout_fit(P, ytr, Pt, yte, icpt, rng))
        out[name] = {k: float(np.mean(v)) for k, v in res.items()} | {"runs": res}
    return out


def update_rows() -> dict:
    Xtr, ytr = load("cpusmall", 0)[:2]
    Xtr = (Xtr - Xtr.mean(0)) / Xtr.std(0)
    Dmax = 1000
    fmap = kp.RandomFourierFeatures(kp.Gaussian(3.0), n_features=Dmax, random_state=0).fit(Xtr)
    G, b = feature_moments(fmap, Xtr, Dmax, ytr - ytr.mean(), Workspace(2**31))
    grid = np.unique(np.geomspace(1, Dmax, 20).round().astype(int))
    lam = np.array([1e-6])
    times: dict[str, list[float]] = {"blocked": [], "rank-one": []}
    paths = {}
    for _ in range(3):
        for method in times:
            t = time.perf_counter()
            paths[method] = rf_feature_path(G, b, ytr, lam, grid, method=method)
            times[method].append(time.perf_counter() - t)
    diff = max(
        float(np.abs(paths["blocked"].coef((i, 0)) - paths["rank-one"].coef((i, 0))).max())
        for i in range(len(grid))
    )
    scale = max(float(np.abs(paths["blocked"].coef((i, 0))).max()) for i in range(len(grid)))
    return {
        "D_max": Dmax,
        "grid": grid.tolist(),
        "seconds": {k: float(np.median(v)) for k, v in times.items()},
        "largest_difference": diff,
        "largest_coefficient": scale,
    }


def main() -> None:
    res = run_command(
        __doc__, OUT, lambda: {"intercept": intercept_rows(), "updates": update_rows()}
    )
    for name, r in res["intercept"].items():
        print(f"{name}: test RMSE with intercept {r['with']:.4g}, without {r['without']:.4g}")
    u = res["updates"]
    print(
        f"D path, D_max = {u['D_max']}: blocked {u['seconds']['blocked']:.3f} s, rank-one "
        f"{u['seconds']['rank-one']:.3f} s, largest difference {u['largest_difference']:.2e} "
        f"(largest coefficient {u['largest_coefficient']:.2e})"
    )


if __name__ == "__main__":
    main()
