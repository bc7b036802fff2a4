"""Issue 47: the second hostile audit's defects, each pinned by a test that failed before
its fix (numbered as in the issue)."""

from __future__ import annotations

import numpy as np
import pytest

import kernelpath as kp


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("cv", [3, "splitter"])
def test_1_random_features_k_fold_refits_at_the_chosen_penalty(cv):
    """k-fold random features raised IndexError at the refit (the fold-averaged path keeps
    no coefficients); the model is now the closed form on its feature map at the chosen λ."""
    from sklearn.model_selection import KFold

    X, y = _data()
    est = kp.RandomFeaturesRegressor(
        n_features=40, cv=KFold(4) if cv == "splitter" else cv, random_state=0
    ).fit(X, y)
    F = est.features_.transform(X)
    n = len(X)
    ref = np.linalg.solve(F.T @ F + est.penalty_ * n * np.eye(40), F.T @ (y - y.mean()))
    np.testing.assert_allclose(est.coef_, ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max())
    labels = (y > 0).astype(int)
    clf = kp.RandomFeaturesClassifier(n_features=40, cv=3, random_state=0).fit(X, labels)
    assert clf.score(X, labels) > 0.9


@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.RandomFeaturesRegressor(n_features=20, random_state=0),
        lambda: kp.NystromRegressor(random_state=0),
        lambda: kp.KRLSRegressor(),
        lambda: kp.EigenProRegressor(random_state=0),
    ],
    ids=["rf", "nystrom", "krls", "eigenpro"],
)
def test_2_a_missing_target_is_refused_naming_y(make):
    """A None in an object column became NaN past scikit-learn's check: random features
    predicted NaN, the others blamed the penalty or the step."""
    X, y = _data(60)
    yo = y.astype(object)
    yo[5] = None
    with pytest.raises(ValueError, match="y must be finite: it has 1 NaN"):
        make().fit(X, yo)
    with pytest.raises(ValueError, match="y contains infinity"):  # scikit-learn's check
        make().fit(X, np.where(np.arange(60) == 3, np.inf, y))


@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.NystromRegressor(n_centers=10, max_iter=10**6, memory_budget="200MB"),
        lambda: kp.NYTRORegressor(n_centers=10, max_iter=10**6, memory_budget="200MB"),
    ],
    ids=["cg", "nytro"],
)
def test_3_max_iter_does_not_size_the_path_arrays(make):
    """The error columns were allocated for max_iter iterations before the first (5.1 GB at
    10^7); they grow with the iterations run now."""
    import tracemalloc

    X, y = _data(120)
    tracemalloc.start()
    est = make().set_params(random_state=0).fit(X, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20, peak
    assert est.path_.shape[-1] < 10**4


def test_3_an_exact_path_over_too_many_iterations_is_refused_naming_max_iter():
    X, y = _data(120)
    with pytest.raises(ValueError, match=r"max_iter=100000000: .* give max_iter <= \d+"):
        kp.KRLSRegressor(filter="landweber", max_iter=10**8, memory_budget="200MB").fit(X, y)


def test_12_logistic_newton_cg_stops_when_the_residual_vanishes():
    """Inner CG divided by a preconditioned residual that had underflowed to 0
    (ZeroDivisionError on 11 of 12 seeds of three 30-point blobs)."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=30, random_state=0, n_features=2)
    for seed in range(12):
        est = kp.RandomFeaturesClassifier(n_features=50, loss="logistic", random_state=seed)
        P = est.fit(X, y).predict_proba(X)
        assert np.all(np.isfinite(P)) and np.allclose(P.sum(axis=1), 1.0)
        assert est.score(X, y) >= 0.9
