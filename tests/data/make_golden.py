"""Writes the golden model files of tests/test_golden_files.py: one fitted model of every
estimator and online learner, saved with the library as it was when the files were made
(main at 46b8d85, before the estimators' redesign), and its predictions beside it.

Run from the repository root: ``python tests/data/make_golden.py``. The files are kept in
the repository; rerunning this script with a later library overwrites them, so do it only
on purpose (a new model-file format), never to make the test pass.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import kernelpath as kp
from kernelpath.datasets import make_arm_dynamics

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
#: A fixed budget, so that block sizes do not depend on the memory free at the time.
BUDGET = "64MB"


def data(n: int = 240, d: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    labels = np.where(y > 0.3, "a", np.where(y < -0.3, "b", "c"))
    Y2 = np.column_stack([y, np.cos(X[:, 1])])
    return X, y, labels, Y2


def models():
    """(name, unfitted model, target name) of every estimator and variant."""
    b = {"memory_budget": BUDGET, "random_state": 0}
    return [
        ("krls", kp.KRLSRegressor(**b), "y"),
        ("krls-landweber", kp.KRLSRegressor(filter="landweber", max_iter=50, **b), "y"),
        ("krls-loo", kp.KRLSRegressor(cv="loo", **b), "y"),
        ("krls-classifier", kp.KRLSClassifier(**b), "labels"),
        ("nystrom-cg", kp.NystromRegressor(n_centers=30, **b), "y"),
        ("nystrom-cg-refit", kp.NystromRegressor(n_centers=30, refit=True, **b), "y"),
        ("nystrom-direct", kp.NystromRegressor(n_centers=30, solver="direct", **b), "y"),
        ("nystrom-two-outputs", kp.NystromRegressor(n_centers=30, solver="direct", **b), "Y2"),
        (
            "nystrom-m-path",
            kp.NystromRegressor(n_centers=[10, 30], solver="direct", refit=True, **b),
            "y",
        ),
        (
            "nystrom-leverage",
            kp.NystromRegressor(n_centers=30, centers="approximate-leverage", **b),
            "y",
        ),
        ("nystrom-auto-width", kp.NystromRegressor(kp.Gaussian("auto"), n_centers=30, **b), "y"),
        ("nystrom-classifier", kp.NystromClassifier(n_centers=30, **b), "labels"),
        ("nytro", kp.NYTRORegressor(n_centers=30, **b), "y"),
        ("nytro-classifier", kp.NYTROClassifier(n_centers=30, refit=True, **b), "labels"),
        ("rf", kp.RandomFeaturesRegressor(n_features=30, **b), "y"),
        ("rf-d-path", kp.RandomFeaturesRegressor(n_features="auto", refit=True, **b), "y"),
        ("rf-classifier", kp.RandomFeaturesClassifier(n_features=30, **b), "labels"),
        ("sgm", kp.SGMRegressor(n_features=50, n_passes=3, **b), "y"),
        (
            "sgm-nystrom-refit",
            kp.SGMRegressor(features="nystrom", n_features=30, refit=True, **b),
            "y",
        ),
        ("sgm-classifier", kp.SGMClassifier(n_features=50, n_passes=3, **b), "labels"),
        ("eigenpro", kp.EigenProRegressor(n_epochs=5, **b), "y"),
        ("eigenpro-rf", kp.EigenProRegressor(n_epochs=5, n_features=40, refit=True, **b), "y"),
        ("eigenpro-classifier", kp.EigenProClassifier(n_epochs=5, **b), "labels"),
    ]


def online():
    """(name, model, how to feed it) of the online learners."""
    rff = kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=40, random_state=0)
    return [
        ("recursive-rls", kp.RecursiveRLS(1e-2), "y"),
        ("recursive-rls-features", kp.RecursiveRLS(1e-2, features=rff), "y"),
        ("incremental-rlsc", kp.IncrementalRLSClassifier(selection="thesis"), "labels"),
        ("rebalanced-rlsc", kp.RebalancedRLSClassifier(1e-2, features=rff), "labels"),
    ]


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    X, y, labels, Y2 = data()
    Xt = data(80, seed=1)[0]
    targets = {"y": y, "labels": labels, "Y2": Y2}
    outputs: dict[str, np.ndarray] = {}
    for name, est, target in models():
        est.fit(X, targets[target])
        kp.save(est, os.path.join(HERE, f"{name}.kp"))
        outputs[f"{name}/predict"] = np.asarray(est.predict(Xt))
        if hasattr(est, "decision_function"):
            outputs[f"{name}/decision_function"] = np.asarray(est.decision_function(Xt))
    for name, est, target in online():
        t = targets[target]
        for s in range(0, 240, 80):
            est.partial_fit(X[s : s + 80], t[s : s + 80])
        kp.save(est, os.path.join(HERE, f"{name}.kp"))
        outputs[f"{name}/predict"] = np.asarray(est.predict(Xt))
        if hasattr(est, "decision_function"):
            outputs[f"{name}/decision_function"] = np.asarray(est.decision_function(Xt))
    Xa, tau, reg, _ = make_arm_dynamics(200, random_state=0)
    sp = kp.SemiparametricRegressor(reg, n_features=50, random_state=0).fit(Xa[:150], tau[:150])
    kp.save(sp, os.path.join(HERE, "semiparametric.kp"))
    outputs["semiparametric/predict"] = np.asarray(sp.predict(Xa[150:]))
    np.savez(os.path.join(HERE, "predictions.npz"), **outputs)
    print(f"wrote {len(outputs)} predictions to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
