"""Randomly pivoted Cholesky centers: the factor's residual against an
independent Nyström computation, and the pivots against uniform draws where the data
have small distant clusters."""

import numpy as np
import pytest

import kernelpath as kp
from kernelpath import Gaussian
from kernelpath.centers import RPCholeskyCenters, UniformCenters


def _clustered(seed=0):
    """1,000 points in one cluster and 5 small clusters of 4 points far from it."""
    rng = np.random.default_rng(seed)
    big = rng.standard_normal((1000, 3))
    far = np.vstack([10 * (i + 1) + 0.1 * rng.standard_normal((4, 3)) for i in range(5)])
    return np.vstack([big, far])


def _residual_trace(K, S):
    """tr(K - K_nS K_SS^+ K_Sn): the trace of what the Nyström approximation on the points
    S leaves out, computed from the kernel matrix itself."""
    C = K[:, S]
    approx = C @ np.linalg.pinv(K[np.ix_(S, S)], rcond=1e-12) @ C.T
    return float(np.trace(K - approx))


def test_the_factor_is_the_nystrom_approximation_of_its_pivots():
    X = _clustered()
    kern = Gaussian(1.0)
    sel = RPCholeskyCenters().select(X, 60, np.random.default_rng(1), kern)
    idx = sel.indices
    assert len(idx) == 60 and len(np.unique(idx)) == 60
    np.testing.assert_array_equal(sel.points, X[idx])
    want = _residual_trace(kern(X, X), idx)
    assert sel.info["residual_trace"] == pytest.approx(want, rel=1e-6, abs=1e-8)


def test_pivots_find_the_small_distant_clusters_that_uniform_draws_miss():
    """Each small cluster's 4 points are 0.4% of the data: uniform draws of 30 centers miss
    most of them; at a width where a few pivots explain the big cluster, RPCholesky draws
    a pivot in each (its residual there stays the whole diagonal), and its residual trace
    is a tenth of uniform's (measured: 1.5 against 20.1)."""
    X = _clustered()
    kern, K = Gaussian(3.0), Gaussian(3.0)(X, X)
    far = np.arange(1000, 1020).reshape(5, 4)
    rp, un = [], []
    for seed in range(5):
        r = RPCholeskyCenters().select(X, 30, np.random.default_rng(seed), kern).indices
        u = UniformCenters().select(X, 30, np.random.default_rng(seed), kern).indices
        assert all(np.isin(c, r).any() for c in far)
        rp.append(_residual_trace(K, r))
        un.append(_residual_trace(K, u))
    assert np.mean(rp) < 0.2 * np.mean(un)


def test_the_estimators_take_rpcholesky_centers_and_its_budget_is_checked():
    X = _clustered()
    y = np.sin(X[:, 0])
    est = kp.NystromRegressor(n_centers=40, centers="rpcholesky", random_state=0).fit(X, y)
    assert est.center_strategy_ == "rpcholesky" and est.centers_.shape == (40, 3)
    assert np.isfinite(est.predict(X[:5])).all()
    with pytest.raises(ValueError, match="n_centers"):
        RPCholeskyCenters().select(X, 0, np.random.default_rng(0), Gaussian(1.0))
    with pytest.raises(ValueError, match="rpcholesky.*Cholesky factor"):
        RPCholeskyCenters().select(X, 500, np.random.default_rng(0), Gaussian(1.0), None, 2**20)
