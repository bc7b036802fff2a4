"""Accuracy on the shared data sets against scikit-learn's KernelRidge tuned on the same grid
and the same hold-out split (skipped when ../shared/data is absent)."""

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.preprocessing import StandardScaler

from kernelpath import Gaussian, KRLSClassifier, KRLSRegressor, NystromClassifier, NystromRegressor
from kernelpath.datasets import load_shared

from .conftest import requires_shared

GRID = np.geomspace(1e-1, 1e-9, 20)


def kernel_ridge_tuned(X, y, train_idx, val_idx, sigma, classification):
    """KernelRidge with alpha = λ n (our λ convention), λ chosen on the given split over GRID,
    refit on all of (X, y). Targets are centered for regression, as ours are."""
    gamma = 1 / (2 * sigma**2)
    a, b = train_idx, val_idx
    best = None
    for lam in GRID:  # same order as our path: ties go to the most regularized
        mu = 0.0 if classification else y[a].mean()
        kr = KernelRidge(alpha=lam * len(a), kernel="rbf", gamma=gamma).fit(X[a], y[a] - mu)
        pred = kr.predict(X[b]) + mu
        err = np.mean(np.sign(pred) != y[b]) if classification else np.mean((pred - y[b]) ** 2)
        if best is None or err < best[0]:
            best = (err, lam)
    mu = 0.0 if classification else y.mean()
    kr = KernelRidge(alpha=best[1] * len(y), kernel="rbf", gamma=gamma).fit(X, y - mu)
    return lambda Z: kr.predict(Z) + mu


_REFERENCE: dict = {}  # the tuned KernelRidge's test MSE per hold-out split (one per session)


def _check_cpusmall(make_ests):
    d = load_shared("cpusmall")
    X, y = d["X"], d["y"]
    perm = np.random.default_rng(0).permutation(len(X))
    tr, te = perm[:3000], perm[3000:]
    sc = StandardScaler().fit(X[tr])
    Xtr, Xte, ytr, yte = sc.transform(X[tr]), sc.transform(X[te]), y[tr], y[te]
    for est in make_ests(Gaussian(3.0)):
        est.fit(Xtr, ytr)
        key = est.validation_indices_.tobytes()
        if key not in _REFERENCE:
            ref = kernel_ridge_tuned(
                Xtr, ytr, est.train_indices_, est.validation_indices_, 3.0, False
            )
            _REFERENCE[key] = np.mean((ref(Xte) - yte) ** 2)
        ours = np.mean((est.predict(Xte) - yte) ** 2)
        theirs = _REFERENCE[key]
        assert ours <= 1.02 * theirs, (type(est).__name__, getattr(est, "solver", ""), ours, theirs)


@requires_shared
def test_cpusmall_within_2_percent_of_kernel_ridge():
    _check_cpusmall(
        lambda k: [
            KRLSRegressor(k, penalty=GRID, refit=True, random_state=0),
            NystromRegressor(
                k, penalty=GRID, n_centers=2300, solver="direct", refit=True, random_state=0
            ),
        ]
    )


@requires_shared
def test_cpusmall_cg_path_within_2_percent_of_kernel_ridge():
    _check_cpusmall(
        lambda k: [
            NystromRegressor(
                k, penalty=GRID, n_centers=3000, solver="cg", refit=True, random_state=0
            )
        ]
    )


@requires_shared
def test_ijcnn1_cg_path_within_0_2_points_of_the_direct_path():
    d = load_shared("ijcnn1")
    errs = {}
    for solver in ("direct", "cg"):
        # the paths compared on the same rows (refit="auto" would refit the direct one)
        est = NystromClassifier(
            Gaussian(1.0), n_centers=1000, solver=solver, refit=False, random_state=0
        ).fit(d["X_train"], d["y_train"])
        errs[solver] = 1 - est.score(d["X_test"], d["y_test"])
    assert errs["cg"] <= errs["direct"] + 0.002, errs


@requires_shared
def test_breast_cancer_nytro_split_within_2_percent_of_kernel_ridge():
    d = load_shared("breastcancer")
    sc = StandardScaler().fit(d["X_train"])
    Xtr, Xte = sc.transform(d["X_train"]), sc.transform(d["X_test"])
    ytr, yte = np.where(d["y_train"] > 0, 1.0, -1.0), np.where(d["y_test"] > 0, 1.0, -1.0)
    assert Xtr.shape == (400, 30) and Xte.shape == (169, 30)
    k = Gaussian(5.0)
    for est in [
        KRLSClassifier(k, penalty=GRID, refit=True, random_state=0),
        NystromClassifier(
            k, penalty=GRID, n_centers=300, solver="direct", refit=True, random_state=0
        ),
    ]:
        est.fit(Xtr, ytr)
        ref = kernel_ridge_tuned(Xtr, ytr, est.train_indices_, est.validation_indices_, 5.0, True)
        ours = np.mean(est.predict(Xte) != yte)
        theirs = np.mean(np.sign(ref(Xte)) != yte)
        assert ours <= 1.02 * theirs + 1e-12, (type(est).__name__, ours, theirs)
        assert ours < 0.05


@requires_shared
@pytest.mark.parametrize("name", ["pumadyn32nh", "protein", "ijcnn1", "adult", "abalone"])
def test_shared_loaders(name):
    d = load_shared(name)
    if "X" in d:
        assert len(d["X"]) == len(d["y"]) > 1000
        assert np.all(np.isfinite(d["X"]))
    else:
        assert d["X_train"].shape[1] == d["X_test"].shape[1]
        assert set(np.unique(d["y_train"])) == {-1.0, 1.0}


@requires_shared
def test_usps_loader():
    d = load_shared("usps")
    assert d["X_train"].shape == (7291, 256) and d["X_test"].shape == (2007, 256)
    assert set(np.unique(d["y_train"])) == set(range(10))
    assert d["X_train"].min() >= -1.0 and d["X_train"].max() <= 1.0
