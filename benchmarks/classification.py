"""Classification losses and probabilities: the logistic loss against the square loss,
scikit-learn and FALKON, the λ path against one solve, and calibration.

    python benchmarks/run.py classification run [--sets ijcnn1,adult,usps] [--seeds 0,1,2]
                                                [--methods ...] [--m 1000] [--falkon PYTHON]
    python benchmarks/run.py classification table

Every fit runs in a fresh process, the methods alternating within a seed. Data: the
official train/test files of ../shared/data; the same m and Gaussian width for every
method (``WIDTHS``: ijcnn1 0.5, adult 6.6 as NYTRO's Table 1, USPS 10, about 0.65 of its
median distance), inputs as on disk (``scale=False``). Methods:

- ``square``, ``logistic``, ``squared_hinge``: ``NystromClassifier(loss=..., n_centers=m)``
  with its defaults (CG, the λ path on the 20% hold-out, probabilities: the logistic's own,
  else calibrated on the hold-out);
- ``logistic-direct``: the same with ``solver="direct"`` (refit on all rows);
- ``logistic-one``: one Newton solve from zero at the penalty ``logistic`` chose (given as a
  one-point path: the same split and centers), to compare the path's time with;
- ``rf-square``, ``nytro``, ``eigenpro``: the other families' probabilities (calibrated);
- ``sklearn``: ``Nystroem(n_components=m, gamma=1 / (2 width^2))`` + ``LogisticRegressionCV``
  (its default 10 Cs, 5 folds), the time of both;
- ``falkon`` (binary sets, with ``--falkon PYTHON``, the venv of
  ../shared/tools/build_falkon_cpu.sh): FALKON's ``LogisticFalkon`` with the same m and width
  on all the training rows, its penalties our ``logistic`` path's down to the λ it chose
  (times 2: FALKON's objective is mean loss + penalty / 2 ||f||^2), 3 CG steps each, then
  3 more steps of 8 at the last (its documentation's rule of thumb); no intercept (FALKON's
  model has none). Its fit runs in FALKON's venv on the data dumped as .npy.

Each fit reports fit seconds, test error, test log-loss and the top-label expected
calibration error (15 equal-width bins, ``kernelpath.calibration.calibration_error``).
Writes ``results/classification.json``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import fresh as h
import numpy as np

WIDTHS = {"ijcnn1": 0.5, "adult": 6.6, "usps": 10.0}
METHODS = (
    "square",
    "logistic",
    "logistic-one",
    "logistic-direct",
    "squared_hinge",
    "rf-square",
    "nytro",
    "eigenpro",
    "sklearn",
    "falkon",
)


def _estimator(method: str, m: int, width: float, seed: int, penalty: Any = None) -> Any:
    import kernelpath as kp

    kern = kp.Gaussian(width)
    common = {"kernel": kern, "scale": False, "random_state": seed}
    if method in ("square", "logistic", "squared_hinge"):
        return kp.NystromClassifier(loss=method, n_centers=m, **common)
    if method == "logistic-direct":
        return kp.NystromClassifier(loss="logistic", solver="direct", n_centers=m, **common)
    if method == "logistic-one":  # a one-point path: the same hold-out split and centers
        return kp.NystromClassifier(loss="logistic", n_centers=m, penalty=[penalty], **common)
    if method == "rf-square":
        return kp.RandomFeaturesClassifier(n_features=m, **common)
    if method == "nytro":
        return kp.NYTROClassifier(n_centers=m, **common)
    if method == "eigenpro":
        return kp.EigenProClassifier(**common)
    raise ValueError(method)


def fit(name: str, method: str, m: int, seed: int, penalty: float | None) -> dict[str, Any]:
    from sklearn.metrics import log_loss

    from kernelpath.calibration import calibration_error
    from kernelpath.datasets import load_shared

    d = load_shared(name)
    Xtr, ytr, Xte, yte = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    width = WIDTHS[name]
    out: dict[str, Any] = {"set": name, "method": method, "seed": seed, "m": m}
    if method == "sklearn":
        import warnings

        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import LogisticRegressionCV
        from sklearn.pipeline import make_pipeline

        est = make_pipeline(
            Nystroem(gamma=1 / (2 * width**2), n_components=m, random_state=seed),
            LogisticRegressionCV(n_jobs=1),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est.fit(Xtr, ytr)
            out["fit_s"] = time.perf_counter() - t0
        classes = est.classes_
    else:
        est = _estimator(method, m, width, seed, penalty)
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        out["fit_s"] = time.perf_counter() - t0
        classes = est.classes_
        out["penalty"] = float(est.penalty_)
        info = est.path_.info
        if "newton_steps" in info:
            out["newton_steps"] = int(np.sum(info["newton_steps"]))
            out["inner_solves"] = int(info["inner_solves"])
        out["calibration"] = est.calibration_.get("method")
        if method == "logistic":  # the penalties down to the chosen one (FALKON's schedule)
            lam = est.path_.params["penalty"]
            out["path"] = [float(v) for v in lam[: est.path_.best_index[0] + 1]]
    P = est.predict_proba(Xte)
    y = np.searchsorted(classes, yte)
    out["error"] = float(np.mean(classes[P.argmax(axis=1)] != yte))
    out["test_error_predict"] = float(np.mean(est.predict(Xte) != yte))
    out["log_loss"] = float(log_loss(y, P, labels=np.arange(len(classes))))
    out["ece"] = calibration_error(P, y)
    return out


DUMP = Path("/tmp/kernelpath-classification-data")


def fit_falkon(name: str, m: int, seed: int, penalties: list[float], out: str) -> dict[str, Any]:
    """LogisticFalkon in FALKON's venv (no kernelpath there): the test scores to ``out``."""
    import falkon
    import torch

    X, y, Xt = (np.load(DUMP / name / f"{k}.npy") for k in ("X_train", "y_train", "X_test"))
    classes = np.unique(y)
    Y = np.where(y == classes[-1], 1.0, -1.0)
    opts = falkon.FalkonOptions(use_cpu=True, keops_active="no", max_cpu_mem=4e9, debug=False)
    kernel = falkon.kernels.GaussianKernel(sigma=WIDTHS[name], opt=opts)
    lams = [2 * p for p in penalties] + [2 * penalties[-1]] * 3
    iters = [3] * len(penalties) + [8] * 3
    model = falkon.LogisticFalkon(
        kernel=kernel,
        penalty_list=lams,
        iter_list=iters,
        loss=falkon.gsc_losses.LogisticLoss(kernel),
        M=m,
        seed=seed,
        options=opts,
    )
    t0 = time.perf_counter()
    model.fit(torch.from_numpy(X), torch.from_numpy(Y[:, None]))
    sec = time.perf_counter() - t0
    np.save(out, model.predict(torch.from_numpy(Xt)).numpy().ravel())
    return {"fit_s": sec, "threads": torch.get_num_threads()}


def falkon_row(name: str, m: int, seed: int, penalties: list[float], python: str) -> dict[str, Any]:
    """Run ``fit_falkon`` in a fresh process of FALKON's venv and score its test scores."""
    from sklearn.metrics import log_loss

    from kernelpath.calibration import calibration_error
    from kernelpath.datasets import load_shared

    d = load_shared(name)
    (DUMP / name).mkdir(parents=True, exist_ok=True)
    for k in ("X_train", "y_train", "X_test"):
        if not (DUMP / name / f"{k}.npy").exists():
            np.save(DUMP / name / f"{k}.npy", np.ascontiguousarray(d[k], dtype=np.float64))
    out = DUMP / f"{name}-falkon-scores.npy"
    res = h.call(
        "classification",
        "fit_falkon",
        fresh={"python": python, "tolerate": True},
        name=name,
        m=m,
        seed=seed,
        penalties=penalties,
        out=str(out),
    )
    row: dict[str, Any] = {"set": name, "method": "falkon", "seed": seed, "m": m, **res}
    if "failed" in res:
        return row
    f = np.load(out)
    classes = np.unique(d["y_train"])
    y = (d["y_test"] == classes[-1]).astype(int)
    p1 = 1 / (1 + np.exp(-f))
    P = np.column_stack([1 - p1, p1])
    row["n_penalties"] = len(penalties)
    row["error"] = float(np.mean(P.argmax(axis=1) != y))
    row["log_loss"] = float(log_loss(y, P, labels=[0, 1]))
    row["ece"] = calibration_error(P, y)
    return row


def run(
    sets: str = "ijcnn1,adult,usps",
    seeds: str = "0,1,2",
    methods: str = ",".join(METHODS),
    m: int = 1000,
    falkon: str | None = None,
) -> str:
    """Each seed and set: the methods in turn, each fit in a fresh process; a fit run again
    replaces its row of results/classification.json."""
    rows: list[dict[str, Any]] = h.load("classification", {"fits": []})["fits"]
    for seed in map(int, h.names(seeds)):
        for name in h.names(sets):
            chosen, path = None, None
            for method in h.names(methods):
                if method == "logistic-one" and chosen is None:
                    continue
                if method == "falkon":
                    if falkon is None or name == "usps" or path is None:
                        continue
                    row = falkon_row(name, m, seed, path, falkon)
                else:
                    one = chosen if method == "logistic-one" else None
                    args = {"name": name, "method": method, "m": m, "seed": seed, "penalty": one}
                    row = h.call("classification", "fit", fresh={"tolerate": True}, **args)
                    row = {"set": name, "method": method, "seed": seed, **row}
                if method == "logistic" and "penalty" in row:
                    chosen, path = row["penalty"], row["path"]
                print(name, method, seed, row.get("fit_s"), row.get("error"), flush=True)
                rows = [
                    r
                    for r in rows
                    if (r["set"], r["method"], r["seed"], r.get("m")) != (name, method, seed, m)
                ]
                rows.append(row)
                h.save("classification", {"fits": rows, "machine": h.machine()})
    return table()


def table() -> str:
    """Per set, method and m: the median fit, and the mean test error, log-loss and ECE."""
    rows = h.load("classification")["fits"]
    keys = sorted({(r["set"], r["method"], r.get("m")) for r in rows if "failed" not in r})
    cells = []
    for s, meth, m in keys:
        rs = [r for r in rows if (r["set"], r["method"], r.get("m")) == (s, meth, m)]
        rs = [r for r in rs if "failed" not in r]
        med = float(np.median([r["fit_s"] for r in rs]))
        err = float(np.mean([r["error"] for r in rs]))
        ll = float(np.mean([r["log_loss"] for r in rs]))
        e = float(np.mean([r["ece"] for r in rs]))
        cells.append(
            [s, meth, m, len(rs), f"{med:.1f}", f"{100 * err:.2f}%", f"{ll:.4f}", f"{e:.4f}"]
        )
    header = ["set", "method", "m", "fits", "fit s (median)", "test error", "log-loss", "ECE"]
    return h.markdown(header, cells, "llrrrrrr")


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table}))
