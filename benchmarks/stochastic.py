"""Random features, EigenPro and stochastic gradient: epochs to the optimal error against
plain kernel SGD, random features against Nyström, SGM and SIGM against LinearSVC.

    python benchmarks/run.py stochastic run [--quick]     # eigenpro, rf: results/stochastic.json
    python benchmarks/run.py stochastic sgm [--quick]     # results/sgm.json
    python benchmarks/run.py stochastic table
    python benchmarks/run.py stochastic sgm-table

Each command measures in one fresh process.

eigenpro
    Epochs to reach the optimal classification error, EigenPro against plain kernel SGD with
    the same batch size (EigenPro Table 3's protocol): USPS (7291 / 2007) and scikit-learn's
    digits (1400 / 397), Gaussian, Laplacian and Cauchy kernels (σ = median distance). The
    optimal error is the test error of kernel interpolation (exact KRLS, λ = 1e-10 here:
    numerically λ -> 0); an epoch reaches it when its test error is within two test points
    of it. Both run at most 60 (EigenPro) / 200 (SGD) epochs with the batch size of
    EigenPro 2's rule and each its own rule step. Target: >= 5x fewer epochs.
rf
    Test RMSE against D for RF-KRLS and against m for Nyström KRLS (uniform and approximate
    leverage centers) on cpusmall (thesis Fig. 5.3: Nyström needs fewer centers than random
    features need features), λ chosen on a
    20% hold-out at every size, mean of 3 seeds; and the time of RF-KRLS's (D, λ) path
    against refitting RF-KRLS at each D of its grid.
sgm
    SGM (one pass) and SIGM (up to 20 passes, early stopping on a 20% hold-out) with the
    hinge loss on adult and ijcnn1 (thesis Table 6.2's shape): 1000 random Fourier features
    (Gaussian, σ = median distance), constant (θ = 0) and decaying (θ = 1/2) steps, and SIGM
    over the step-size grid; test hinge loss, test classification error and time, with
    LinearSVC on the same features.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import fresh as h
import numpy as np


def load(name: str, quick: bool) -> tuple[np.ndarray, ...]:
    return h.shared_split(name, 3000 if quick else None)


def _digits() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    p = np.random.default_rng(0).permutation(len(X))
    X, y = X[p], y[p]
    return X[:1400], y[:1400], X[1400:], y[1400:]


def _usps() -> tuple[np.ndarray, ...]:
    from kernelpath.datasets import load_shared

    d = load_shared("usps")
    return d["X_train"], d["y_train"], d["X_test"], d["y_test"]


def _epochs_to(errors: np.ndarray, target: float) -> int | None:
    hit = np.flatnonzero(errors <= target)
    return int(hit[0]) + 1 if hit.size else None


def _run_sgd(
    Xtr: np.ndarray,
    Ytr: np.ndarray,
    Xte: np.ndarray,
    Yte: np.ndarray,
    kernel: Any,
    q: int,
    epochs: int,
    batch: int | None,
) -> dict[str, Any]:
    from kernelpath.operators import KernelOperator
    from kernelpath.solvers._common import Validation
    from kernelpath.solvers.eigenpro import (
        kernel_eigensystem,
        kernel_sgd_steps,
        sgd_path,
        step_rule,
    )
    from kernelpath.workspace import Workspace

    rng = np.random.default_rng(0)
    n = len(Xtr)
    s = min(n, 2000)
    sub = rng.choice(n, size=s, replace=False)
    t0 = time.perf_counter()
    K_s = KernelOperator(Xtr[sub], Xtr[sub], kernel).center_gram()
    es = kernel_eigensystem(np.asarray(K_s), q, 0.95)
    t_eig = time.perf_counter() - t0
    m, eta = step_rule(es, n, 10**6)
    if batch is not None:
        m = batch
        lam = max(es.tail, 1e-12 * es.beta)
        eta = m / (es.beta + (m - 1) * lam)
    pred, step = kernel_sgd_steps(Xtr, kernel, sub, es, Workspace(2**31))
    coef = np.zeros((n, Ytr.shape[1]))
    val = Validation(KernelOperator(Xte, Xtr, kernel), Yte, "error_rate")
    t0 = time.perf_counter()
    path = sgd_path(n, Ytr, pred, step, coef, epochs, m, eta, rng, val, None, 0.0, {})
    t_run = time.perf_counter() - t0
    assert path.val_error is not None
    return {
        "q": es.q,
        "batch_size": m,
        "step_size": eta,
        "eig_s": t_eig,
        "epoch_s": t_run / epochs,
        "test_error": path.val_error.tolist(),
    }


def bench_eigenpro(quick: bool) -> dict[str, Any]:
    from sklearn.preprocessing import LabelBinarizer

    from kernelpath import Cauchy, Gaussian, KRLSClassifier, Laplacian
    from kernelpath.datasets import shared_data_dir
    from kernelpath.kernels import median_distance

    sets = {"digits": _digits}
    if shared_data_dir() is not None and not quick:
        sets["usps"] = _usps
    out: dict[str, Any] = {}
    ep_epochs, sgd_epochs = (10, 20) if quick else (60, 200)
    for name, load in sets.items():
        Xtr, ytr, Xte, yte = load()
        sigma = median_distance(Xtr, 0)
        lb = LabelBinarizer(neg_label=-1).fit(ytr)
        Ytr, Yte = lb.transform(ytr).astype(float), lb.transform(yte).astype(float)
        rows = []
        for kernel in [Gaussian(sigma), Laplacian(sigma), Cauchy(sigma)]:
            t0 = time.perf_counter()
            exact = KRLSClassifier(kernel, penalty=1e-10, validation_fraction=0.0).fit(Xtr, ytr)
            t_exact = time.perf_counter() - t0
            e_star = float(np.mean(exact.predict(Xte) != yte))
            target = e_star + 2.0 / len(yte)
            ep = _run_sgd(Xtr, Ytr, Xte, Yte, kernel, 160, ep_epochs, None)
            sgd = _run_sgd(Xtr, Ytr, Xte, Yte, kernel, 0, sgd_epochs, ep["batch_size"])
            n_ep = _epochs_to(np.array(ep["test_error"]), target)
            n_sgd = _epochs_to(np.array(sgd["test_error"]), target)
            row = {
                "kernel": repr(kernel),
                "optimal_error": e_star,
                "exact_krls_s": t_exact,
                "eigenpro": ep,
                "sgd": sgd,
                "epochs_eigenpro": n_ep,
                "epochs_sgd": n_sgd,
                "epoch_ratio": None
                if n_ep is None
                else ((n_sgd / n_ep) if n_sgd is not None else f">{sgd_epochs / n_ep:.1f}"),
                "time_to_target_eigenpro_s": None
                if n_ep is None
                else ep["eig_s"] + n_ep * ep["epoch_s"],
                "time_to_target_sgd_s": None if n_sgd is None else n_sgd * sgd["epoch_s"],
            }
            print(
                name,
                row["kernel"],
                "e*",
                round(e_star, 4),
                "epochs",
                n_ep,
                n_sgd,
                "ratio",
                row["epoch_ratio"],
                "q",
                ep["q"],
                "batch",
                ep["batch_size"],
            )
            rows.append(row)
        out[name] = {"n_train": len(Xtr), "n_test": len(Xte), "sigma": sigma, "rows": rows}
    return out


def bench_rf(quick: bool) -> dict[str, Any]:
    from kernelpath import Gaussian, NystromRegressor, RandomFeaturesRegressor
    from kernelpath.kernels import median_distance

    Xtr, ytr, Xte, yte = load("cpusmall", quick)
    kernel = Gaussian(median_distance(Xtr, 0))
    sizes = [50, 100, 200, 400, 800, 1600] if not quick else [50, 200]
    rows = []
    seeds = 1 if quick else 3
    for m in sizes:
        row: dict[str, Any] = {"size": m}
        for name in ["nystrom", "nystrom_leverage", "random_features"]:
            secs, errs = [], []
            for seed in range(seeds):  # uniform centers on cpusmall vary a lot by seed
                est = (
                    NystromRegressor(kernel, n_centers=m, solver="direct", random_state=seed)
                    if name == "nystrom"
                    else NystromRegressor(
                        kernel,
                        n_centers=m,
                        solver="direct",
                        centers="approximate-leverage",
                        random_state=seed,
                    )
                    if name == "nystrom_leverage"
                    else RandomFeaturesRegressor(kernel, n_features=m, random_state=seed)
                )
                t0 = time.perf_counter()
                est.fit(Xtr, ytr)
                secs.append(time.perf_counter() - t0)
                errs.append(float(np.sqrt(np.mean((est.predict(Xte) - yte) ** 2))))
            row[f"{name}_s"] = float(np.mean(secs))
            row[f"{name}_rmse"] = float(np.mean(errs))
            row[f"{name}_rmse_seeds"] = errs
        print("rf vs nystrom", row)
        rows.append(row)
    grid = np.unique(np.geomspace(10, sizes[-1], 20).astype(int))
    t0 = time.perf_counter()
    path_est = RandomFeaturesRegressor(kernel, n_features=list(grid), random_state=0).fit(Xtr, ytr)
    t_path = time.perf_counter() - t0
    t0 = time.perf_counter()
    for D in grid:
        RandomFeaturesRegressor(kernel, n_features=int(D), random_state=0).fit(Xtr, ytr)
    t_refits = time.perf_counter() - t0
    t0 = time.perf_counter()
    RandomFeaturesRegressor(kernel, n_features=int(grid[-1]), random_state=0).fit(Xtr, ytr)
    t_one = time.perf_counter() - t0
    best = path_est.best_params_
    rmse = float(np.sqrt(np.mean((path_est.predict(Xte) - yte) ** 2)))
    return {
        "n_train": len(Xtr),
        "rows": rows,
        "d_path": {
            "grid": grid.tolist(),
            "path_s": t_path,
            "refits_s": t_refits,
            "one_fit_at_max_s": t_one,
            "ratio_path_to_one_fit": t_path / t_one,
            "best": best,
            "test_rmse": rmse,
        },
    }


def bench_sgm(quick: bool = False) -> dict[str, Any]:
    from sklearn.svm import LinearSVC

    from kernelpath import Gaussian, SGMClassifier
    from kernelpath.kernels import median_distance

    out: dict[str, Any] = {}
    D = 200 if quick else 1000
    for name in ["adult", "ijcnn1"]:
        Xtr, ytr, Xte, yte = load(name, quick)
        kernel = Gaussian(median_distance(Xtr, 0))
        rows = []
        fmap = None
        configs = [
            (theta, mode, passes, "auto")
            for theta in [0.0, 0.5]
            for mode, passes in [("SGM", 1), ("SIGM", 20)]
        ] + [(0.0, "SIGM, step grid", 20, "grid")]
        for theta, mode, passes, step in configs:
            est = SGMClassifier(
                kernel,
                n_features=D,
                decay=theta,
                n_passes=passes,
                step_size=step,
                random_state=0,
            )
            t0 = time.perf_counter()
            est.fit(Xtr, ytr)
            sec = time.perf_counter() - t0
            f = est.decision_function(Xte)
            codes = np.where(yte == est.classes_[1], 1.0, -1.0)
            rows.append(
                {
                    "method": f"{mode}, θ={theta}",
                    "fit_s": sec,
                    "passes": est.n_passes_,
                    "step_size": est.step_size_,
                    "test_hinge": float(np.mean(np.maximum(0.0, 1.0 - codes * f))),
                    "test_error_pct": float(100 * np.mean(est.predict(Xte) != yte)),
                }
            )
            print(name, rows[-1])
            fmap = est.features_
        assert fmap is not None
        F, Fte = fmap.transform(Xtr), fmap.transform(Xte)
        t0 = time.perf_counter()
        svc = LinearSVC().fit(F, ytr)
        sec = time.perf_counter() - t0
        codes = np.where(yte == svc.classes_[1], 1.0, -1.0)
        rows.append(
            {
                "method": "scikit-learn LinearSVC (same features)",
                "fit_s": sec,
                "test_hinge": float(
                    np.mean(np.maximum(0.0, 1.0 - codes * svc.decision_function(Fte)))
                ),
                "test_error_pct": float(100 * np.mean(svc.predict(Fte) != yte)),
            }
        )
        print(name, rows[-1])
        out[name] = {"n_train": len(Xtr), "n_features": D, "rows": rows}
    return out


def suite(quick: bool = False) -> dict[str, Any]:
    """eigenpro, and rf where ../shared/data is present, in this process."""
    from kernelpath.datasets import shared_data_dir

    res: dict[str, Any] = {"eigenpro": bench_eigenpro(quick)}
    if shared_data_dir() is not None:
        res["rf"] = bench_rf(quick)
    return res


def run(quick: bool = False) -> str:
    """eigenpro and rf in one fresh process (``--quick``: small sizes)."""
    return table(h.suite("stochastic", "stochastic", quick))


def sgm(quick: bool = False) -> str:
    """SGM and SIGM against LinearSVC in one fresh process (needs ../shared/data)."""
    from kernelpath.datasets import shared_data_dir

    if shared_data_dir() is None:
        return "skipped: ../shared/data is absent"
    return sgm_table(h.suite("stochastic", "sgm", quick, "bench_sgm"))


def table(name: str = "stochastic") -> str:
    """Epochs to the optimal error, EigenPro against SGD; random features against Nyström."""
    d = h.load(name)["result"]
    out = [
        "Epochs to reach the optimal (kernel interpolation) test error within two test points, "
        "EigenPro against plain kernel SGD with the same batch size:\n"
    ]
    cells = []
    for data, res in d["eigenpro"].items():
        for r in res["rows"]:
            ep, sgd = r["eigenpro"], r["sgd"]
            budget = len(sgd["test_error"])
            n_sgd = r["epochs_sgd"]
            ratio, t_ep, t_sgd = (
                r["epoch_ratio"],
                r["time_to_target_eigenpro_s"],
                r["time_to_target_sgd_s"],
            )
            cells.append(
                [
                    f"{data} (n = {res['n_train']:,})",
                    r["kernel"].split("(")[0],
                    f"{100 * r['optimal_error']:.2f}%",
                    f"{r['epochs_eigenpro']} ({ep['q']}, {ep['batch_size']})",
                    str(n_sgd) if n_sgd is not None else f"> {budget}",
                    f"{ratio:.1f}" if isinstance(ratio, (int, float)) else str(ratio),
                    ("-" if t_ep is None else f"{t_ep:.1f}")
                    + " / "
                    + (f"{t_sgd:.1f}" if t_sgd is not None else f"> {budget * sgd['epoch_s']:.0f}"),
                ]
            )
    header = ["data set", "kernel", "optimal error", "EigenPro epochs (q, batch)", "SGD epochs"]
    header += ["ratio", "time to target, EigenPro / SGD (s)"]
    out.append(h.markdown(header, cells, "llrrrrr"))
    if "rf" in d:
        rf = d["rf"]
        out.append(
            f"\nRandom features against Nyström on cpusmall (n = {rf['n_train']:,}, λ chosen on "
            "a 20% hold-out, test RMSE, mean of 3 seeds):\n"
        )
        cells = [
            [
                r["size"],
                f"{r['nystrom_rmse']:.3f}",
                "-"
                if r.get("nystrom_leverage_rmse") is None
                else f"{r['nystrom_leverage_rmse']:.3f}",
                f"{r['random_features_rmse']:.3f}",
            ]
            for r in rf["rows"]
        ]
        header = ["D or m", "Nyström, uniform centers", "Nyström, approximate-leverage centers"]
        out.append(h.markdown([*header, "RF-KRLS (D features)"], cells))
        p = rf["d_path"]
        out.append(
            f"\nRF-KRLS path over {len(p['grid'])} values of D up to {p['grid'][-1]} and 20 λ: "
            f"{p['path_s']:.2f} s = {p['ratio_path_to_one_fit']:.2f}× one fit at the largest D "
            f"({p['one_fit_at_max_s']:.2f} s); refitting at every D: {p['refits_s']:.2f} s. "
            f"Chosen D = {p['best']['n_features']}, test RMSE {p['test_rmse']:.3f}."
        )
    return "\n".join(out)


def sgm_table(name: str = "sgm") -> str:
    """SGM / SIGM with the hinge loss against LinearSVC on the same features."""
    cells = [
        [
            f"{data} (n = {res['n_train']:,}, D = {res['n_features']})",
            r["method"],
            r.get("passes", "-"),
            f"{r['fit_s']:.1f}",
            f"{r['test_hinge']:.3f}",
            f"{r['test_error_pct']:.2f}%",
        ]
        for data, res in h.load(name)["result"].items()
        for r in res["rows"]
    ]
    header = ["data set", "method", "passes", "fit (s)", "test hinge loss", "test error"]
    return h.markdown(header, cells, "llrrrr")


if __name__ == "__main__":
    commands = {"run": run, "sgm": sgm, "table": table, "sgm-table": sgm_table}
    sys.exit(h.cli(__doc__, commands))
