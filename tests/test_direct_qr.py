"""The Nyström direct path's QR route: the spectrum of AᵀWA from a QR of W^½ A
and an SVD of its triangle, against the normal equations and a least-squares solve."""

import numpy as np
import pytest
import scipy.linalg

from kernelpath import Gaussian, KernelOperator
from kernelpath.solvers import nystrom_direct_path
from kernelpath.solvers._common import Validation
from kernelpath.solvers._loo import SmootherCV
from kernelpath.solvers.nystrom import center_factor


def _problem(n=600, m=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    C = X[rng.choice(n, m, replace=False)]
    Y = np.column_stack([np.sin(6 * X[:, 0]) + X[:, 1] ** 2, np.cos(4 * X.sum(axis=1))])
    return X, C, Y + 0.05 * rng.standard_normal(Y.shape)


def _least_squares(K, R, Y, lam, w):
    """min ||W^½ (K R β - Y)||² + λ n ||β||² (the Nyström problem in the basis of the factor
    R, R Rᵀ = K_mm⁺) by a complete orthogonal factorization of the stacked system, no
    normal equations; returns α = R β."""
    n, r = K.shape[0], R.shape[1]
    root = np.sqrt(w)[:, None]
    A = np.vstack([root * (K @ R), np.sqrt(lam * n) * np.eye(r)])
    B = np.vstack([root * Y, np.zeros((r, Y.shape[1]))])
    return R @ scipy.linalg.lstsq(A, B, lapack_driver="gelsy")[0]


def test_the_qr_route_is_the_least_squares_path_and_the_normal_one_where_that_is_accurate():
    """Weights, two outputs, a hold-out and the exact leave-one-out: the QR route's
    predictions are the least-squares solution's at every penalty (1e-9 of their scale);
    the normal equations' lose digits as λ falls (measured: 1e-10 at 1e-2, 4e-5 at 1e-6),
    and the two routes' errors and scores agree where the normal equations are accurate."""
    X, C, Y = _problem()
    kern = Gaussian(0.3)
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    lams = np.array([1e-2, 1e-4, 1e-6])
    Xv, Yv = X[:100] + 0.01, Y[:100]
    paths = {}
    for method in ("normal", "qr"):
        val = Validation(KernelOperator(Xv, C, kern), Yv)
        cv = SmootherCV("loo", True, "mse")
        op = KernelOperator(X, C, kern)
        paths[method] = nystrom_direct_path(op, Y, lams, w, val, cv, method=method)
    a, b = paths["normal"], paths["qr"]
    assert b.info["spectrum"] == "qr" and a.info["spectrum"] == "normal"
    K = kern(X, C)
    R = center_factor(KernelOperator(X, C, kern), preconditioned=False).R
    for i, lam in enumerate(lams):
        want = K @ _least_squares(K, R, Y, lam, w)
        scale = np.abs(want).max()
        assert np.abs(K @ b.coef(i) - want).max() <= 1e-9 * scale
    assert np.abs(K @ a.coef(0) - K @ b.coef(0)).max() <= 1e-8 * scale
    np.testing.assert_allclose(b.train_error[0], a.train_error[0], rtol=1e-8)
    np.testing.assert_allclose(b.val_error[0], a.val_error[0], rtol=1e-6)


def test_the_qr_route_is_the_least_squares_solution_where_the_normal_equations_fail():
    """At λ = 1e-13 on centers whose kernel matrix is numerically singular (the factor keeps
    394 of 500 directions), the normal equations' predictions are rounding, hundreds of
    times the targets' spread away from the least-squares solution of the same problem; the
    QR route's agree with it."""
    X, C, Y = _problem(n=700, m=500, seed=2)
    kern, lam = Gaussian(0.5), 1e-13
    op = KernelOperator(X, C, kern)
    R = center_factor(op, preconditioned=False).R
    Xt = np.random.default_rng(3).random((200, 3))
    Kt = kern(Xt, C)
    want = Kt @ _least_squares(kern(X, C), R, Y, lam, np.ones(len(X)))
    got = {}
    for method in ("normal", "qr"):
        path = nystrom_direct_path(KernelOperator(X, C, kern), Y, np.array([lam]), method=method)
        got[method] = Kt @ path.coef()
    scale = np.abs(want).max()
    assert np.abs(got["qr"] - want).max() <= 1e-4 * scale
    assert np.abs(got["normal"] - want).max() > scale  # the failure the route fixes


def test_auto_takes_the_qr_route_where_the_normal_equations_round():
    X, C, Y = _problem(n=700, m=500, seed=2)
    kern = Gaussian(0.5)
    low = nystrom_direct_path(KernelOperator(X, C, kern), Y, np.array([1e-13]))
    assert low.info["spectrum"] == "qr" and low.info["rounding_share"].max() < 0.5
    high = nystrom_direct_path(KernelOperator(X, C, kern), Y, np.array([1e-3]))
    assert high.info["spectrum"] == "normal"
    # without the memory for the QR (the solver's share and the operator's, which it
    # releases) the normal equations' path is kept (and says so)
    kept = nystrom_direct_path(
        KernelOperator(X, C, kern, "4MB"), Y, np.array([1e-13]), memory_limit=2**20
    )
    assert kept.info["spectrum"] == "normal" and kept.info["rounding_share"].max() > 0.5


def test_the_qr_route_needs_rows_on_the_host():
    X, C, Y = _problem(n=50, m=10)
    with pytest.raises(ValueError, match="method must be one of"):
        nystrom_direct_path(KernelOperator(X, C, Gaussian(0.3)), Y, None, method="svd")
