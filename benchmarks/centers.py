"""Benchmarks of center selection and of the (m, λ) path (``run.py --suite centers``).

leverage
    The leverage-score experiment of El Alaoui & Mahoney: 1-D regression on [0, 1] with 95%
    of the n = 2000 points in [0, 0.2] and [0.8, 1] and 5% in the sparse middle,
    f*(x) = sin(8x) + 0.5 cos(20x), noise 0.3, Gaussian σ = 0.03. λ is the exact KRLS oracle
    (smallest in-sample risk (1/n) sum (f(x_i) - f*(x_i))^2 on a grid). For each strategy
    (uniform, exact leverage, approximate leverage, SQUEAK) and 5 seeds, M centers are drawn
    once and the incremental path gives the risk at every m of a grid; reported: the risk
    curves, the smallest m within 10% of the exact KRLS risk, and a plot of the scores
    against x. Target: leverage-based strategies need at most half the centers uniform needs.
deff
    d_eff(λ) and d_max(λ) on pumadyn32nh and cpusmall (standardized, Gaussian σ = median
    distance), exact and estimated (approximate, SQUEAK), for λ = 1e-2 ... 1e-6.
mpath
    The (m, λ) path on cpusmall (80% split, standardized, Gaussian σ = median distance,
    20% hold-out of the training part): M = 2000 uniform centers, 20 λ values, the
    validation error at 40 values of m, against (a) one batch Nyström fit at M (the direct
    solver: K_nm, G, one eigendecomposition for all λ) and (b) refitting batch Nyström at 20
    values of m. Target: the whole path costs at most 2x the single batch fit at M. Plot: the
    validation error over the grid (thesis Fig. 4.1).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:  # pragma: no cover
        return None


# ---------------------------------------------------------------- leverage experiment
def _am_design(n: int, rng: np.random.Generator) -> np.ndarray:
    mid = n // 20
    side = (n - mid) // 2
    x = np.concatenate(
        [
            rng.uniform(0.0, 0.2, side),
            rng.uniform(0.8, 1.0, n - mid - side),
            rng.uniform(0.2, 0.8, mid),
        ]
    )
    return np.sort(x)[:, None]


def _am_target(X: np.ndarray) -> np.ndarray:
    return np.sin(8 * X[:, 0]) + 0.5 * np.cos(20 * X[:, 0])


def bench_leverage(quick: bool, results_dir: Any) -> dict[str, Any]:
    from kernelpath import Gaussian, leverage_scores
    from kernelpath.centers import select_centers
    from kernelpath.operators import KernelOperator
    from kernelpath.solvers import exact_path, incremental_nystrom_path

    n = 800 if quick else 2000
    seeds = 2 if quick else 5
    rng = np.random.default_rng(0)
    X = _am_design(n, rng)
    fx = _am_target(X)
    y = fx + 0.3 * rng.standard_normal(n)
    kernel = Gaussian(0.03)
    ym = y.mean()
    lams = np.geomspace(1e-2, 1e-8, 25)
    op = KernelOperator(X, X, kernel)
    t = time.perf_counter()
    path = exact_path(op, y - ym, "tikhonov", lams)
    t_exact = time.perf_counter() - t
    risks = [
        float(np.mean((op.matvec(path.coef((i,)))[:, 0] + ym - fx) ** 2)) for i in range(len(lams))
    ]
    best = int(np.argmin(risks))
    lam, r0 = float(lams[best]), risks[best]
    op.release()
    tau = leverage_scores(X, kernel, lam)
    approx = leverage_scores(X, kernel, lam, "approximate", random_state=0)
    sq = leverage_scores(X, kernel, lam, "squeak", random_state=0)
    M = 300 if quick else 600
    grid = np.unique(np.geomspace(5, M, 30).astype(int))
    curves: dict[str, Any] = {}
    for strat in ["uniform", "leverage", "approximate-leverage", "squeak"]:
        rows, secs = [], []
        for s in range(seeds):
            t = time.perf_counter()
            sel = select_centers(strat, X, M, np.random.default_rng(s), kernel, lam)
            g = grid[grid <= len(sel.points)]
            o = KernelOperator(X, sel.points, kernel)
            p = incremental_nystrom_path(o, y - ym, np.array([lam]), g)
            secs.append(time.perf_counter() - t)
            r = []
            for j, m in enumerate(g):
                a = np.zeros((len(sel.points), 1))
                a[:m] = p.coef((j, 0))
                r.append(float(np.mean((o.matvec(a)[:, 0] + ym - fx) ** 2)))
            rows.append(r + [np.nan] * (len(grid) - len(g)))
        mean = np.nanmean(np.array(rows, dtype=float), axis=0)
        ok = np.flatnonzero(mean <= 1.1 * r0)
        curves[strat] = {
            "risk_mean": mean.tolist(),
            "m_within_10pct": int(grid[ok[0]]) if ok.size else None,
            "select_and_path_s_mean": float(np.mean(secs)),
        }
        print(strat, curves[strat]["m_within_10pct"], np.round(mean[::5] / r0, 2))
    m_u = curves["uniform"]["m_within_10pct"]
    summary = {
        name: (None if c["m_within_10pct"] is None or m_u is None else c["m_within_10pct"] / m_u)
        for name, c in curves.items()
    }
    plt = _plt()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        order = np.argsort(X[:, 0])
        axes[0].plot(X[order, 0], tau[order], label="exact")
        axes[0].plot(X[order, 0], approx[order], label="approximate", alpha=0.7)
        axes[0].plot(X[order, 0], sq[order], label="SQUEAK", alpha=0.7)
        axes[0].set_yscale("log")
        axes[0].set_xlabel("x")
        axes[0].set_ylabel(f"ridge leverage score (λ={lam:.1e})")
        axes[0].legend()
        for name, c in curves.items():
            axes[1].plot(grid, np.array(c["risk_mean"]) / r0, label=name)
        axes[1].axhline(1.1, color="gray", linestyle=":")
        axes[1].set_xscale("log")
        axes[1].set_yscale("log")
        axes[1].set_xlabel("number of centers m")
        axes[1].set_ylabel("risk / exact KRLS risk")
        axes[1].legend()
        fig.tight_layout()
        fig.savefig(results_dir / "leverage_scores.png", dpi=110)
        plt.close(fig)
    return {
        "problem": {"n": n, "sigma": 0.03, "penalty": lam, "seeds": seeds, "max_centers": M},
        "exact_krls": {"risk": r0, "path_s": t_exact},
        "d_eff": float(tau.sum()),
        "d_max": float(n * tau.max()),
        "grid": grid.tolist(),
        "curves": curves,
        "m_ratio_to_uniform": summary,
        "score_ratio_approx_over_exact": [float(np.min(approx / tau)), float(np.max(approx / tau))],
        "score_ratio_squeak_over_exact": [float(np.min(sq / tau)), float(np.max(sq / tau))],
    }


# ---------------------------------------------------------------- d_eff table
def bench_deff(quick: bool, load: Any) -> dict[str, Any]:
    from kernelpath import Gaussian, leverage_scores
    from kernelpath.kernels import median_distance

    out: dict[str, Any] = {}
    for name in ["cpusmall", "pumadyn32nh"]:
        Xtr, _, _, _ = load(name, quick)
        if quick:
            Xtr = Xtr[:1500]
        sigma = median_distance(Xtr, 0)
        kernel = Gaussian(sigma)
        rows = []
        for lam in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]:
            row: dict[str, Any] = {"penalty": lam}
            t = time.perf_counter()
            tau = leverage_scores(Xtr, kernel, lam)
            row["exact_s"] = time.perf_counter() - t
            row["d_eff"], row["d_max"] = float(tau.sum()), float(len(tau) * tau.max())
            t = time.perf_counter()
            ap = leverage_scores(Xtr, kernel, lam, "approximate", random_state=0)
            row["approx_s"] = time.perf_counter() - t
            row["d_eff_approx"], row["d_max_approx"] = float(ap.sum()), float(len(ap) * ap.max())
            ratio = ap / np.maximum(tau, 1e-300)
            row["approx_within_2x"] = float(np.mean((ratio >= 0.5) & (ratio <= 2)))
            if lam >= 1e-4:  # SQUEAK's dictionary grows like q̄ d_eff: skip where it is ~ n
                t = time.perf_counter()
                sq = leverage_scores(Xtr, kernel, lam, "squeak", random_state=0)
                row["squeak_s"] = time.perf_counter() - t
                row["d_eff_squeak"] = float(sq.sum())
                ratio = sq / np.maximum(tau, 1e-300)
                row["squeak_within_2x"] = float(np.mean((ratio >= 0.5) & (ratio <= 2)))
            rows.append(row)
            print(name, row)
        out[name] = {"n": len(Xtr), "sigma": sigma, "rows": rows}
    return out


# ---------------------------------------------------------------- (m, λ) path
def bench_mpath(quick: bool, load: Any, results_dir: Any) -> dict[str, Any]:
    from kernelpath import Gaussian
    from kernelpath.centers import select_centers
    from kernelpath.kernels import median_distance
    from kernelpath.operators import KernelOperator
    from kernelpath.selection import holdout_split, penalty_grid
    from kernelpath.solvers import incremental_nystrom_path, nystrom_direct_path
    from kernelpath.solvers._common import Validation

    Xtr, ytr, Xte, yte = load("cpusmall", quick)
    M = 500 if quick else 2000
    rng = np.random.default_rng(0)
    tr, va = holdout_split(len(Xtr), 0.2, rng)
    kernel = Gaussian(median_distance(Xtr, 0))
    sel = select_centers("uniform", Xtr[tr], M, rng, kernel)
    yc = ytr[tr] - ytr[tr].mean()
    yv = (ytr[va] - ytr[tr].mean())[:, None]
    lams = penalty_grid(1.0)  # 20 values, 1 .. 1e-9 (K / n has top eigenvalue <= 1)
    grid = np.unique(np.geomspace(10, M, 40).astype(int))
    refit_ms = np.unique(np.geomspace(10, M, 20).astype(int))

    def run_path() -> Any:
        op = KernelOperator(Xtr[tr], sel.points, kernel)
        vop = KernelOperator(Xtr[va], sel.points, kernel)
        return incremental_nystrom_path(op, yc, lams, grid, None, Validation(vop, yv))

    def run_batch(m: int) -> Any:
        op = KernelOperator(Xtr[tr], sel.points[:m], kernel)
        vop = KernelOperator(Xtr[va], sel.points[:m], kernel)
        return nystrom_direct_path(op, yc, lams, None, Validation(vop, yv))

    def best_of(fn: Any, repeats: int) -> tuple[Any, float]:
        best, out = np.inf, None
        for _ in range(repeats):
            t = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t)
        return out, best

    repeats = 1 if quick else 3
    path, t_path = best_of(run_path, repeats)
    batch, t_batch = best_of(lambda: run_batch(M), repeats)
    t = time.perf_counter()
    refits = [run_batch(int(m)) for m in refit_ms]
    t_refits = time.perf_counter() - t
    # agreement with the batch fits at the refit m values: best validation error over λ
    # (at the smallest λ the batch solver itself blows up, so pointwise ratios mean little)
    diffs = []
    for m, b in zip(refit_ms, refits, strict=True):
        i = int(np.searchsorted(grid, m))
        if i < len(grid) and grid[i] == m:
            best_b = float(np.nanmin(b.val_error))
            diffs.append((float(np.nanmin(path.val_error[i])) - best_b) / best_b)
    bi = path.best_index
    m_best, lam_best = int(path.params["n_centers"][bi]), float(path.params["penalty"][bi])
    coef = path.coef(bi)
    pred = KernelOperator(Xte, sel.points[:m_best], kernel).matvec(coef)[:, 0] + ytr[tr].mean()
    rmse = float(np.sqrt(np.mean((pred - yte) ** 2)))
    bb = batch.best_index
    pred_b = KernelOperator(Xte, sel.points, kernel).matvec(batch.coef(bb))[:, 0]
    rmse_b = float(np.sqrt(np.mean((pred_b + ytr[tr].mean() - yte) ** 2)))
    plt = _plt()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        V = np.log10(np.sqrt(path.val_error))
        im = ax.pcolormesh(np.log10(lams[::-1]), grid, V[:, ::-1], shading="nearest")
        ax.plot(np.log10(lam_best), m_best, "w*", markersize=12)
        ax.set_xlabel("log10 λ")
        ax.set_ylabel("number of centers m")
        ax.set_title("cpusmall: validation RMSE (log10) over (m, λ)")
        fig.colorbar(im, ax=ax)
        fig.tight_layout()
        fig.savefig(results_dir / "m_lambda_path.png", dpi=110)
        plt.close(fig)
    return {
        "problem": {
            "n_train": len(tr),
            "n_val": len(va),
            "max_centers": M,
            "n_penalties": len(lams),
            "n_m_values": len(grid),
        },
        "path_s": t_path,
        "batch_at_M_s": t_batch,
        "ratio_path_to_batch": t_path / t_batch,
        "refit_20_m_s": t_refits,
        "ratio_refits_to_path": t_refits / t_path,
        "best_val_mse_rel_diff_vs_batch": diffs,
        "kept_centers_per_penalty": [int(c) for c in path.info["kept_centers"]],
        "best": {"n_centers": m_best, "penalty": lam_best, "test_rmse": rmse},
        "batch_at_M_best": {"penalty": float(batch.params["penalty"][bb]), "test_rmse": rmse_b},
    }


def suite_centers(quick: bool, load: Any, results_dir: Any) -> dict[str, Any]:
    from kernelpath.datasets import shared_data_dir

    res: dict[str, Any] = {"leverage": bench_leverage(quick, results_dir)}
    if shared_data_dir() is not None:
        res["mpath"] = bench_mpath(quick, load, results_dir)
        print("mpath", {k: v for k, v in res["mpath"].items() if k != "problem"})
        res["deff"] = bench_deff(quick, load)
    else:
        print("deff and mpath skipped: ../shared/data is absent")
    return res
