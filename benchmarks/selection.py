"""Model selection benchmarks (issue 10), every timed fit in a fresh process, the methods
alternating round after round, the median of 3 rounds reported:

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

``python benchmarks/selection.py [cg|ijcnn1|grid ...]`` writes ``results/selection.json``;
``python benchmarks/selection.py table`` prints its table (Markdown) from that file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path as FsPath
from typing import Any

import numpy as np

HERE = FsPath(__file__).resolve().parent
OUT = HERE / "results" / "selection.json"
ROUNDS = 3
GRID_DATA = ("cpusmall", "kin8nm")
M_GRID = 1000


def _p_data(n: int = 100_000, d: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    return X, np.sin(X @ w) + 0.1 * rng.standard_normal(n)


def _regression(name: str) -> tuple[np.ndarray, ...]:
    from sklearn.preprocessing import StandardScaler

    from kernelpath.datasets import load_shared

    d = load_shared(name)
    X, y = d["X"], d["y"]
    y = y[:, 0] if y.ndim > 1 else y
    perm = np.random.default_rng(0).permutation(len(X))
    cut = int(0.8 * len(X))
    tr, te = perm[:cut], perm[cut:]
    sc = StandardScaler().fit(X[tr])
    return sc.transform(X[tr]), y[tr], sc.transform(X[te]), y[te]


# ----------------------------------------------------------------------------- workers
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


def fresh(spec: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def rounds(specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every spec ROUNDS times in fresh processes, alternating; the median round of each."""
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in specs}
    for _ in range(ROUNDS):
        for name, spec in specs.items():
            runs[name].append(fresh(spec))
            print(name, runs[name][-1], flush=True)
    out = {}
    for name, rs in runs.items():
        times = [r["time"] for r in rs]
        med = rs[int(np.argsort(times)[len(times) // 2])]
        out[name] = {**med, "times": times}
    return out


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
        "worst": max(rel),
        "anchors": path.path_.info["anchor_penalties"],
    }


def table() -> str:
    """The measured rows of ``results/selection.json`` as a Markdown table."""
    r = json.loads(OUT.read_text())
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
            f"| worst +{100 * acc['worst_relative_val_mse_vs_separate']:.2f}% "
            f"(earlier anchor rule: +{100 * acc['old_rule_1000_worst']:.0f}%) | ≤ +0.5% |"
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


def main() -> int:
    if sys.argv[1:] == ["table"]:
        print(table())
        return 0
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        print(json.dumps(work(json.loads(sys.argv[2]))))
        return 0
    which = sys.argv[1:] or ["cg", "ijcnn1", "grid"]
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    if "cg" in which:
        r = rounds({"path": {"kind": "cg", "path": True}, "one": {"kind": "cg", "path": False}})
        r["ratio"] = r["path"]["time"] / r["one"]["time"]
        r["accuracy"] = cg_accuracy()
        results["cg_path"] = r
    if "ijcnn1" in which:
        specs = {
            f"{solver}_{sig}": {"kind": "ijcnn1", "solver": solver, "sigma": sig}
            for solver in ("direct", "cg")
            for sig in ("median", "auto")
        }
        r = rounds(specs)
        for solver in ("direct", "cg"):
            r[f"{solver}_ratio"] = r[f"{solver}_auto"]["time"] / r[f"{solver}_median"]["time"]
        results["ijcnn1"] = r
    if "grid" in which:
        from kernelpath.kernels import median_distance

        res = {}
        for name in GRID_DATA:
            Xtr = _regression(name)[0]
            sigma = float(median_distance(Xtr, 0))
            r = rounds(
                {
                    "auto": {"kind": "auto", "data": name},
                    "auto_direct": {"kind": "auto", "data": name, "kw": {"solver": "direct"}},
                    "gridsearch": {"kind": "gridsearch", "data": name},
                    "loo": {"kind": "loo", "data": name, "sigma": sigma},
                    "ridgecv": {"kind": "ridgecv", "data": name, "sigma": sigma},
                }
            )
            for a in ("auto", "auto_direct"):
                r[f"{a}_rmse_ratio"] = r[a]["rmse"] / r["gridsearch"]["rmse"]
                r[f"{a}_speedup"] = r["gridsearch"]["time"] / r[a]["time"]
            r["loo_rmse_ratio"] = r["loo"]["rmse"] / r["ridgecv"]["rmse"]
            r["loo_rmse_ratio_mean_intercept"] = (
                r["loo"]["rmse"] / r["ridgecv"]["rmse_mean_intercept"]
            )
            res[name] = r
        results["grid"] = res
    OUT.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
