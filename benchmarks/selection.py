"""Model selection: the λ path against one fit, the default width screen against the median
width, and the estimators' paths on real data against scikit-learn's grid searches; every
timed fit in a fresh process.

    python benchmarks/run.py selection run [--parts cg,ijcnn1,grid] [--rounds 3]
    python benchmarks/run.py selection real [--sets cpusmall,...] [--quick]
    python benchmarks/run.py selection table          # results/selection.json
    python benchmarks/run.py selection real-table     # results/real.json

``run`` (the methods alternating round after round, the median round kept):

- ``cg``: the CG λ path on problem P (n = 100,000, m = 2000, σ = 4.5, 20 iterations, no early
  stopping, 20 penalties ``np.logspace(-9, -3, 20)``) against one fit at λ = 1e-6 with the
  same iterations and the same hold-out; and every penalty's validation MSE against a
  separate preconditioned CG at that penalty (accuracy, one process).
- ``ijcnn1``: ``NystromClassifier(kernel=Gaussian(sigma="auto"), n_centers=2000)`` against the
  median-heuristic fit (test error, time), for the default CG solver and the direct one.
- ``grid``: regression data sets: the default fit with ``sigma="auto"`` against
  scikit-learn's ``GridSearchCV`` over 6 x 6 (γ, α) of ``Nystroem + Ridge`` (3-fold, the same
  m), and ``cv="loo"`` (direct, fixed width and centers) against ``RidgeCV`` on the same
  Nyström features.

``real``: cpusmall, pumadyn32nh, protein (80/20 random split), ijcnn1 and adult (their own
splits), inputs standardized (adult's indicators as they are), the Gaussian of the median
distance of the training inputs, m = 2000: exact KRLS (n <= 10,000), Nyström direct, NYTRO
(ν-method) and Nyström CG, each choosing λ (and t) on a 20% hold-out from the same grid of
20 values and refitting, against ``KernelRidge`` (n <= 10,000) and ``Nystroem + Ridge`` /
``RidgeClassifier`` with ``GridSearchCV`` over the same grid and the same hold-out split.
Each data set runs in a fresh process, its methods one after the other there (time and
peak resident memory of each ``fit``).
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

import fresh as h
import numpy as np

GRID_DATA = ("cpusmall", "kin8nm")
M_GRID = 1000
#: the real suite's sets and their tasks
REAL = {
    "cpusmall": "regression",
    "pumadyn32nh": "regression",
    "protein": "regression",
    "ijcnn1": "classification",
    "adult": "classification",
}
#: the real suite's λ grid
GRID = np.geomspace(1e-1, 1e-9, 20)


def _p_data(n: int = 100_000, d: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    return X, np.sin(X @ w) + 0.1 * rng.standard_normal(n)


def _regression(name: str) -> tuple[np.ndarray, ...]:
    Xtr, ytr, Xte, yte = h.shared_split(name)
    return Xtr, (ytr[:, 0] if ytr.ndim > 1 else ytr), Xte, (yte[:, 0] if yte.ndim > 1 else yte)


def work(spec: dict[str, Any]) -> dict[str, Any]:
    """One fit, timed from the call to its return; returns time and error."""
    from kernelpath import Gaussian, NystromClassifier, NystromRegressor

    kind = spec["kind"]
    if kind == "cg":
        X, y = _p_data()
        pen = np.logspace(-9, -3, 20) if spec["path"] else 1e-6
        est = NystromRegressor(
            Gaussian(4.5),
            penalty=pen,
            n_centers=2000,
            solver="cg",
            max_iter=20,
            n_iter_no_change=None,
            tol=0.0,
            random_state=0,
        )
        t = time.perf_counter()
        est.fit(X, y)
        return {"time": time.perf_counter() - t}
    if kind == "ijcnn1":
        from kernelpath.datasets import load_shared

        d = load_shared("ijcnn1")
        sig = spec["sigma"]
        est = NystromClassifier(
            kernel=Gaussian(sigma=sig), n_centers=2000, solver=spec["solver"], random_state=0
        )
        t = time.perf_counter()
        est.fit(d["X_train"], d["y_train"])
        sec = time.perf_counter() - t
        return {
            "time": sec,
            "test_error": float(1 - est.score(d["X_test"], d["y_test"])),
            "sigma": float(est.kernel_.sigma),
            "penalty": est.penalty_,
        }
    Xtr, ytr, Xte, yte = _regression(spec["data"])
    if kind == "auto":
        est = NystromRegressor(
            kernel=Gaussian(sigma="auto"), n_centers=M_GRID, random_state=0, **spec.get("kw", {})
        )
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        sec = time.perf_counter() - t
        pred = est.predict(Xte)
        extra = {"sigma": float(est.kernel_.sigma), "penalty": est.penalty_}
    elif kind == "gridsearch":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.model_selection import GridSearchCV
        from sklearn.pipeline import make_pipeline

        from kernelpath.kernels import median_distance

        med = median_distance(Xtr, 0)
        gammas = 1 / (2 * (med * np.geomspace(0.25, 4, 6)) ** 2)
        pipe = make_pipeline(Nystroem(n_components=M_GRID, random_state=0), Ridge())
        est = GridSearchCV(
            pipe,
            {"nystroem__gamma": gammas, "ridge__alpha": np.logspace(-6, 1, 6)},
            cv=3,
            scoring="neg_mean_squared_error",
        )
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        sec = time.perf_counter() - t
        pred = est.predict(Xte)
        extra = {"best": {k: float(v) for k, v in est.best_params_.items()}}
    else:  # loo / ridgecv on the same Nyström features
        from sklearn.linear_model import RidgeCV

        sigma = spec["sigma"]
        centers = Xtr[np.random.default_rng(1).choice(len(Xtr), M_GRID, replace=False)]
        lams = np.geomspace(1e-1, 1e-9, 20)
        if kind == "loo":
            est = NystromRegressor(
                Gaussian(sigma), penalty=lams, centers=centers, solver="direct", cv="loo"
            )
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            sec = time.perf_counter() - t
            pred = est.predict(Xte)
            extra = {"penalty": est.penalty_}
        else:
            import scipy.linalg

            g = Gaussian(sigma)
            t = time.perf_counter()
            s, U = scipy.linalg.eigh(g(centers, centers))
            keep = s > 1e-12 * s.max()
            T = U[:, keep] / np.sqrt(s[keep])
            F = g(Xtr, centers) @ T  # features with F F^T = K_nm K_mm^+ K_mn
            # RidgeCV's own intercept (fit jointly, unpenalized), and ours (the mean of y)
            rcv = RidgeCV(alphas=lams * len(Xtr)).fit(F, ytr)
            sec = time.perf_counter() - t
            Fte = g(Xte, centers) @ T
            pred = rcv.predict(Fte)
            mu = ytr.mean()
            rc0 = RidgeCV(alphas=lams * len(Xtr), fit_intercept=False).fit(F, ytr - mu)
            rmse0 = float(np.sqrt(np.mean((rc0.predict(Fte) + mu - yte) ** 2)))
            extra = {
                "penalty": float(rcv.alpha_ / len(Xtr)),
                "rmse_mean_intercept": rmse0,
                "penalty_mean_intercept": float(rc0.alpha_ / len(Xtr)),
            }
    rmse = float(np.sqrt(np.mean((pred - yte) ** 2)))
    return {"time": sec, "rmse": rmse, **extra}


def _rounds(specs: dict[str, dict[str, Any]], runs: int) -> dict[str, Any]:
    """Every spec in fresh processes, alternating, ``runs`` rounds; the median round."""
    jobs = {
        name: (lambda _, spec=spec: h.call("selection", "work", spec=spec))
        for name, spec in specs.items()
    }
    return {name: h.median_round(rs, "time") for name, rs in h.rounds(jobs, runs).items()}


def run(parts: str = "cg,ijcnn1,grid", rounds: int = 3) -> str:
    """The parts' comparisons; each part replaces its entry of results/selection.json."""
    results = h.load("selection", {})
    which = h.names(parts)
    if "cg" in which:
        r = _rounds(
            {"path": {"kind": "cg", "path": True}, "one": {"kind": "cg", "path": False}}, rounds
        )
        r["ratio"] = r["path"]["time"] / r["one"]["time"]
        r["accuracy"] = cg_accuracy()
        results["cg_path"] = r
    if "ijcnn1" in which:
        specs = {
            f"{solver}_{sig}": {"kind": "ijcnn1", "solver": solver, "sigma": sig}
            for solver in ("direct", "cg")
            for sig in ("median", "auto")
        }
        r = _rounds(specs, rounds)
        for solver in ("direct", "cg"):
            r[f"{solver}_ratio"] = r[f"{solver}_auto"]["time"] / r[f"{solver}_median"]["time"]
        results["ijcnn1"] = r
    if "grid" in which:
        results["grid"] = {name: _grid(name, rounds) for name in GRID_DATA}
    results.update(rounds=rounds, machine=h.machine())
    h.save("selection", results)
    return table()


def _grid(name: str, rounds: int) -> dict[str, Any]:
    from kernelpath.kernels import median_distance

    sigma = float(median_distance(_regression(name)[0], 0))
    specs = {
        "auto": {"kind": "auto", "data": name},
        "auto_direct": {"kind": "auto", "data": name, "kw": {"solver": "direct"}},
        "gridsearch": {"kind": "gridsearch", "data": name},
        "loo": {"kind": "loo", "data": name, "sigma": sigma},
        "ridgecv": {"kind": "ridgecv", "data": name, "sigma": sigma},
    }
    r = _rounds(specs, rounds)
    for a in ("auto", "auto_direct"):
        r[f"{a}_rmse_ratio"] = r[a]["rmse"] / r["gridsearch"]["rmse"]
        r[f"{a}_speedup"] = r["gridsearch"]["time"] / r[a]["time"]
    r["loo_rmse_ratio"] = r["loo"]["rmse"] / r["ridgecv"]["rmse"]
    r["loo_rmse_ratio_mean_intercept"] = r["loo"]["rmse"] / r["ridgecv"]["rmse_mean_intercept"]
    return r


def cg_accuracy() -> dict[str, Any]:
    """Every penalty of the path against a separate CG at that penalty (same iterations,
    same split, same centers), validation MSE."""
    from kernelpath import Gaussian, NystromRegressor

    X, y = _p_data()
    kw = dict(
        n_centers=2000, solver="cg", max_iter=20, n_iter_no_change=None, tol=0.0, random_state=0
    )
    path = NystromRegressor(Gaussian(4.5), penalty=np.logspace(-9, -3, 20), **kw).fit(X, y)
    lams = path.path_.params["penalty"][:, 0]
    rel = []
    for p, lam in enumerate(lams):
        sep = NystromRegressor(Gaussian(4.5), penalty=float(lam), **kw).fit(X, y)
        rel.append(float(path.path_.val_error[p, -1] / sep.path_.val_error[0, -1] - 1))
    return {
        "penalties": lams.tolist(),
        "relative_val_mse_vs_separate": rel,
        "worst_relative_val_mse_vs_separate": max(rel),
        "anchors": path.path_.info["anchor_penalties"],
    }


def real(sets: str = ",".join(REAL), quick: bool = False) -> str:
    """Each set in a fresh process (``--quick``: 3,000 training rows, results/real-quick.json)."""
    from kernelpath.datasets import shared_data_dir

    if shared_data_dir() is None:
        return "skipped: ../shared/data is absent"
    bad = [s for s in h.names(sets) if s not in REAL]
    if bad:
        raise SystemExit(f"unknown sets {bad}; choose from {sorted(REAL)}")
    res = {name: h.call("selection", "real_one", name=name, quick=quick) for name in h.names(sets)}
    name = "real-quick" if quick else "real"
    doc = h.load(name, {"result": {}})
    h.save(name, {"machine": h.machine(), "result": {**doc["result"], **res}})
    return real_table(name)


def real_one(name: str, quick: bool = False) -> dict[str, Any]:
    """Every method on one data set, with the same kernel, λ grid and hold-out split."""
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.kernel_approximation import Nystroem
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.model_selection import GridSearchCV, PredefinedSplit
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    import kernelpath as kp
    from kernelpath.selection import holdout_split

    Xtr, ytr, Xte, yte = h.shared_split(name, 3000 if quick else None)
    clf = REAL[name] == "classification"
    n, m = len(Xtr), min(2000, len(Xtr) // 2)
    kernel = kp.Gaussian("median").resolve(Xtr, 0)
    gamma = 1 / (2 * kernel.sigma**2)
    tr, va = holdout_split(n, 0.2, np.random.default_rng(0), ytr if clf else None)
    fold = np.full(n, -1)
    fold[va] = 0
    metric = "test_error_pct" if clf else "test_rmse"
    rows: list[dict[str, Any]] = []

    def measure(label: str, make: Any) -> None:
        est, sec, mb = h.timed(make)
        pred = est.predict(Xte)
        err = float(100 * np.mean(pred != yte)) if clf else h.rmse(pred, yte)
        row: dict[str, Any] = {"method": label, "fit_s": sec, metric: err, "peak_mb": mb}
        if hasattr(est, "best_params_"):
            row["best_params"] = dict(est.best_params_)  # JSON by the worker's encoder
        rows.append(row)
        print(f"  {name:12s} {label:45s} {sec:8.2f} s  {metric}={err:.4f}", flush=True)
        del est
        gc.collect()

    common = {"penalty": GRID, "refit": True, "random_state": 0}
    Nys = kp.NystromClassifier if clf else kp.NystromRegressor
    if n <= 10_000:
        Exact = kp.KRLSClassifier if clf else kp.KRLSRegressor
        measure("kernelpath exact KRLS", lambda: Exact(kernel, **common).fit(Xtr, ytr))
    measure(
        "kernelpath Nyström direct",
        lambda: Nys(kernel, n_centers=m, solver="direct", **common).fit(Xtr, ytr),
    )
    Nytro = kp.NYTROClassifier if clf else kp.NYTRORegressor
    nytro = {"solver": "nu", "n_iter_no_change": 30, "refit": True, "random_state": 0}
    measure(
        "kernelpath NYTRO (ν-method)", lambda: Nytro(kernel, n_centers=m, **nytro).fit(Xtr, ytr)
    )
    measure("kernelpath Nyström-CG", lambda: Nys(kernel, n_centers=m, **common).fit(Xtr, ytr))
    alphas = list(GRID * len(tr))
    split = PredefinedSplit(fold)
    if n <= 10_000 and not clf:  # KernelRidge has no intercept: centered targets, as ours
        centered = TransformedTargetRegressor(
            KernelRidge(kernel="rbf", gamma=gamma), transformer=StandardScaler(with_std=False)
        )
        grid = {"regressor__alpha": alphas}
        kr = GridSearchCV(centered, grid, cv=split, scoring="neg_mean_squared_error")
        measure("scikit-learn KernelRidge + GridSearchCV", lambda: kr.fit(Xtr, ytr))
    nys = Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0)
    pipe = Pipeline([("nys", nys), ("lin", RidgeClassifier() if clf else Ridge())])
    scoring = "accuracy" if clf else "neg_mean_squared_error"
    gs = GridSearchCV(pipe, {"lin__alpha": alphas}, cv=split, scoring=scoring)
    measure("scikit-learn Nystroem + Ridge + GridSearchCV", lambda: gs.fit(Xtr, ytr))
    return {
        "n_train": n,
        "n_test": len(Xte),
        "d": Xtr.shape[1],
        "n_centers": m,
        "sigma": kernel.sigma,
        "task": REAL[name],
        "metric": metric,
        "rows": rows,
    }


def real_table(name: str = "real") -> str:
    """Every method's fit time, test error and peak memory on each real set."""
    cells = []
    for data, res in h.load(name)["result"].items():
        unit = "%" if res["metric"] == "test_error_pct" else " RMSE"
        for r in res["rows"]:
            err = f"{r[res['metric']]:.3f}{unit}"
            cells.append(
                [
                    f"{data} (n={res['n_train']:,})",
                    r["method"],
                    f"{r['fit_s']:.1f}",
                    err,
                    f"{r['peak_mb']:.0f}",
                ]
            )
    header = ["data set", "method", "fit (s)", "test error", "peak memory (MB)"]
    return h.markdown(header, cells, "llrrr")


def table() -> str:
    """The measured rows of ``results/selection.json`` as a Markdown table."""
    r = h.load("selection")
    rows = ["| measurement | result | target |", "|---|---|---|"]
    cg = r.get("cg_path")
    if cg:
        rows.append(
            "| CG λ path, P at n = 100,000, m = 2000, 20 iterations, `logspace(-9, -3, 20)` "
            f"| {cg['path']['time']:.2f} s = {cg['ratio']:.2f}× one fit ({cg['one']['time']:.2f} s)"
            " | ≤ 1.5× |"
        )
        acc = cg["accuracy"]
        rows.append(
            "| every λ of that path vs a separate PCG at that λ (validation MSE) "
            f"| worst +{100 * acc['worst_relative_val_mse_vs_separate']:.2f}% | ≤ +0.5% |"
        )
    ij = r.get("ijcnn1")
    if ij:
        for solver, what, target in (
            ("cg", '`NystromClassifier(Gaussian("auto"), n_centers=2000)` (CG)', "≤ 2.0%, ≤ 4×"),
            ("direct", 'the same with `solver="direct"`', ""),
        ):
            a, m = ij[f"{solver}_auto"], ij[f"{solver}_median"]
            rows.append(
                f"| ijcnn1, {what} | {100 * a['test_error']:.2f}% (σ = {a['sigma']:.2f}), "
                f"{a['time']:.1f} s = {ij[f'{solver}_ratio']:.1f}× the median-width fit "
                f"({100 * m['test_error']:.2f}%, {m['time']:.1f} s) | {target} |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    commands = {"run": run, "real": real, "table": table, "real-table": real_table}
    sys.exit(h.cli(__doc__, commands))
