"""Center selection and the incremental (m, λ) path: leverage scores against uniform draws,
the effective dimension, the path's cost, and the center strategies per number of centers.

    python benchmarks/run.py centers run [--quick]    # leverage, deff, mpath: results/centers.json
    python benchmarks/run.py centers strategies [--sets mnist,ijcnn1,protein] [--sizes 500,2000]
        [--seeds 0,1,2] [--centers uniform,approximate-leverage,rpcholesky]
    python benchmarks/run.py centers table              # the tables, from the results
    python benchmarks/run.py centers strategies-table

``run`` measures the three parts below in one fresh process; ``strategies`` fits every
configuration in its own fresh process.

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
strategies
    Each set's default estimator with ``n_centers=m``, one ``centers`` strategy (uniform,
    El Alaoui & Mahoney's two-pass approximate leverage scores, randomly pivoted Cholesky)
    and ``random_state`` = the seed (it draws the centers, the width screen's rows and the
    hold-out), the strategies alternating within each seed's round: MNIST with
    ``NystromClassifier(scale=False)`` on its official split, ijcnn1 with
    ``NystromClassifier()`` on its official split, protein with ``NystromRegressor()`` on a
    fixed 80/20 split. Results accumulate in ``results/rpcholesky.json``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import fresh as h
import numpy as np

#: the strategies per number of centers, in the table's column order
STRATEGIES = ("uniform", "approximate-leverage", "rpcholesky")


def load(name: str, quick: bool) -> tuple[np.ndarray, ...]:
    return h.shared_split(name, 3000 if quick else None)


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


def bench_leverage(quick: bool) -> dict[str, Any]:
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
        fig.savefig(h.RESULTS / "leverage_scores.png", dpi=110)
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
def bench_deff(quick: bool) -> dict[str, Any]:
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
def bench_mpath(quick: bool) -> dict[str, Any]:
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
        fig.savefig(h.RESULTS / "m_lambda_path.png", dpi=110)
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


def suite(quick: bool = False) -> dict[str, Any]:
    """The three parts in this process (deff and mpath need ../shared/data)."""
    from kernelpath.datasets import shared_data_dir

    res: dict[str, Any] = {"leverage": bench_leverage(quick)}
    if shared_data_dir() is not None:
        res["mpath"] = bench_mpath(quick)
        res["deff"] = bench_deff(quick)
    return res


def run(quick: bool = False) -> str:
    """leverage, deff and mpath in one fresh process (``--quick``: small sizes)."""
    return table(h.suite("centers", "centers", quick))


def table(name: str = "centers") -> str:
    """Centers needed within 10% of the exact risk, d_eff against d_max, and the path's cost."""
    d = h.load(name)["result"]
    lev, out = d["leverage"], []
    p = lev["problem"]
    out.append(
        f"Centers needed to come within 10% of the exact KRLS risk (the 1-D design of El Alaoui "
        f"& Mahoney, n = {p['n']}, d_eff = {lev['d_eff']:.0f}, d_max = {lev['d_max']:.0f}, mean "
        f"of {p['seeds']} seeds):\n"
    )
    cells = []
    for strategy, c in lev["curves"].items():
        ratio = lev["m_ratio_to_uniform"][strategy]
        cells.append([strategy, c["m_within_10pct"], "—" if ratio is None else f"{ratio:.2f}"])
    out.append(h.markdown(["strategy", "m within 10%", "ratio to uniform"], cells))
    if "deff" in d:
        out.append("\nEffective dimension against maximal degrees of freedom (exact):\n")
        cells = [
            [
                f"{data} (n = {res['n']:,})",
                f"{r['penalty']:.0e}",
                f"{r['d_eff']:.0f}",
                f"{r['d_max']:.0f}",
                f"{r['d_eff_approx']:.0f}",
                f"{100 * r['approx_within_2x']:.0f}%",
            ]
            for data, res in d["deff"].items()
            for r in res["rows"]
        ]
        header = ["data set", "λ", "d_eff", "d_max", "d_eff approx.", "approx. within 2×"]
        out.append(h.markdown(header, cells))
    if "mpath" in d:
        m, q = d["mpath"], d["mpath"]["problem"]
        out.append(
            f"\n(m, λ) path on cpusmall (n = {q['n_train']:,}, M = {q['max_centers']}, "
            f"{q['n_penalties']} λ × {q['n_m_values']} m): the whole path {m['path_s']:.2f} s = "
            f"{m['ratio_path_to_batch']:.2f}× one batch Nyström fit at M ({m['batch_at_M_s']:.2f} "
            f"s, every λ); refitting batch Nyström at 20 values of m: {m['refit_20_m_s']:.2f} s. "
            f"Chosen m = {m['best']['n_centers']}, test RMSE {m['best']['test_rmse']:.3f} (batch "
            f"at M: {m['batch_at_M_best']['test_rmse']:.3f})."
        )
    return "\n".join(out)


def strategy_fit(name: str, centers: str, m: int, seed: int) -> dict[str, Any]:
    """One default fit with ``n_centers=m`` and ``centers``: its test score and seconds."""
    import kernelpath as kp
    from kernelpath.datasets import load_shared

    d = load_shared(name)
    if "X_train" not in d:  # one table: 80% to fit, 20% to test, the same split each run
        perm = np.random.default_rng(0).permutation(len(d["y"]))
        tr, te = np.split(perm, [int(0.8 * len(perm))])
        d = {
            "X_train": d["X"][tr],
            "y_train": d["y"][tr],
            "X_test": d["X"][te],
            "y_test": d["y"][te],
        }
    classify = name in ("ijcnn1", "mnist")
    kw: dict[str, Any] = {"scale": False} if name == "mnist" else {}
    Est = kp.NystromClassifier if classify else kp.NystromRegressor
    est = Est(n_centers=m, centers=centers, random_state=seed, **kw)
    t = time.perf_counter()
    est.fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - t
    pred = est.predict(d["X_test"])
    score = float(100 * np.mean(pred != d["y_test"])) if classify else h.rmse(pred, d["y_test"])
    return {"score": score, "fit_s": seconds, "measure": "error %" if classify else "RMSE"}


def strategies(
    sets: str = "mnist,ijcnn1,protein",
    sizes: str = "500,2000",
    seeds: str = "0,1,2",
    centers: str = ",".join(STRATEGIES),
) -> str:
    """Every (set, m, strategy, seed) in a fresh process; a cell run again replaces its seeds."""
    chosen = h.names(centers)
    bad = [c for c in chosen if c not in STRATEGIES]
    if bad:
        raise SystemExit(f"unknown strategies {bad}; known: {list(STRATEGIES)}")
    res = h.load("rpcholesky", {"sets": {}})
    for name in h.names(sets):
        for m in map(int, h.names(sizes)):
            cells = {c: {"seeds": [], "scores": [], "fit_s": []} for c in chosen}
            for seed in map(int, h.names(seeds)):  # the strategies alternate within a seed
                for c in chosen:
                    r = h.call("centers", "strategy_fit", name=name, centers=c, m=m, seed=seed)
                    cell = cells[c]
                    cell["seeds"].append(seed)
                    cell["scores"].append(r["score"])
                    cell["fit_s"].append(r["fit_s"])
                    cell["measure"] = r["measure"]
                    res["sets"].setdefault(name, {}).setdefault(str(m), {})[c] = cell
                    res["date"] = time.strftime("%Y-%m-%d %H:%M")
                    res["machine"] = h.machine()
                    h.save("rpcholesky", res)
    return strategies_table()


def _cell(c: dict[str, Any] | None) -> tuple[str, str]:
    if c is None:
        return "—", "—"
    s = np.asarray(c["scores"])
    spread = f" ({s.min():.4g}–{s.max():.4g})" if len(s) > 1 else ""
    return f"{s.mean():.4g}{spread}", f"{np.median(c['fit_s']):.1f}"


def strategies_table() -> str:
    """Mean test score over the seeds (range) per strategy, and the median fit times."""
    res = h.load("rpcholesky")
    rows = []
    for name, by_m in res["sets"].items():
        for m, r in sorted(by_m.items(), key=lambda kv: int(kv[0])):
            cells = [_cell(r.get(s)) for s in STRATEGIES]
            measure = next(iter(r.values()))["measure"]
            times = " / ".join(c[1] for c in cells)
            rows.append([f"{name} ({measure})", f"{int(m):,}", *(c[0] for c in cells), times])
    header = ["set", "m", "uniform", "leverage (approximate)", "rpcholesky"]
    header.append("fit s: uniform / leverage / rpcholesky")
    seeds = sorted(
        {
            len(c["seeds"])
            for by_m in res["sets"].values()
            for r in by_m.values()
            for c in r.values()
        }
    )
    count = "/".join(map(str, seeds))
    note = f"Mean over {count} seeds a cell (range), and the median fit in seconds."
    return note + "\n\n" + h.markdown(header, rows, "lrrrrl")


if __name__ == "__main__":
    commands = {"run": run, "table": table, "strategies": strategies}
    commands["strategies-table"] = strategies_table
    sys.exit(h.cli(__doc__, commands))
