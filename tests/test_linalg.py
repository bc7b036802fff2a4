"""Dense linear algebra: the Nyström factor and the spectral filters against direct formulas."""

import numpy as np
import pytest

from kernelpath import Gaussian
from kernelpath.linalg import (
    nu_method_coefficients,
    nystrom_factor,
    spectral_filter,
    top_eigenvalue,
)


def test_nystrom_factor_rank_deficient(rng):
    C = rng.standard_normal((30, 3))
    C = np.vstack([C, C[:10]])  # duplicate centers: K_mm is singular
    K = Gaussian(1.0)(C, C)
    fac = nystrom_factor(K)
    R = fac.R
    assert fac.method == "eigh" and R.shape[1] == 30
    np.testing.assert_allclose(R.T @ K @ R, np.eye(R.shape[1]), atol=1e-7)
    np.testing.assert_allclose(
        R @ R.T, np.linalg.pinv(K, rcond=1e-12, hermitian=True), rtol=1e-5, atol=1e-5
    )


def test_nystrom_factor_tiny_sigma(rng):
    C = rng.standard_normal((20, 2))
    K = Gaussian(1e-6)(C, C)  # numerically the identity
    fac = nystrom_factor(K)
    R = fac.R
    assert fac.method == "cholesky" and R.shape == (20, 20)
    np.testing.assert_allclose(R @ R.T, np.linalg.inv(K), atol=1e-10)
    np.testing.assert_allclose(K, np.eye(20), atol=1e-3)


def test_nystrom_factor_rejects_zero_matrix():
    with pytest.raises(ValueError, match="no positive eigenvalue"):
        nystrom_factor(np.zeros((3, 3)))


def _dense_problem(rng, n=40):
    A = rng.standard_normal((n, n))
    H = A @ A.T / n
    s, V = np.linalg.eigh(H)
    return H, np.maximum(s, 0), V


def test_tikhonov_and_tsvd_filters(rng):
    H, s, V = _dense_problem(rng)
    b = rng.standard_normal(40)
    for lam in [1e-3, 0.1, 1.0]:
        g = spectral_filter("tikhonov", s, np.array([lam]))[0]
        np.testing.assert_allclose(
            V @ (g * (V.T @ b)), np.linalg.solve(H + lam * np.eye(40), b), rtol=1e-8
        )
        g = spectral_filter("tsvd", s, np.array([lam]))[0]
        keep = s >= lam
        ref = V[:, keep] @ ((V[:, keep].T @ b) / s[keep])
        np.testing.assert_allclose(V @ (g * (V.T @ b)), ref, rtol=1e-8)
    g = spectral_filter("kols", s, np.zeros(1))[0]
    np.testing.assert_allclose(
        V @ (g * (V.T @ b)), np.linalg.pinv(H, hermitian=True) @ b, rtol=1e-6
    )


def test_landweber_filter_is_the_iteration(rng):
    H, s, V = _dense_problem(rng)
    b = rng.standard_normal(40)
    eta = 1 / s.max()
    g = spectral_filter("landweber", s, np.arange(1, 31))
    x = np.zeros(40)
    for t in range(30):
        x = x + eta * (b - H @ x)
        np.testing.assert_allclose(V @ (g[t] * (V.T @ b)), x, rtol=1e-9, atol=1e-12)


def test_nu_filter_is_the_iteration(rng):
    H, s, V = _dense_problem(rng)
    b = rng.standard_normal(40)
    L = s.max()
    g = spectral_filter("nu", s, np.arange(1, 41), nu=1.0)
    prev = np.zeros(40)
    x = np.zeros(40)
    for k in range(1, 41):
        mu, om = nu_method_coefficients(k, 1.0)
        new = x + mu * (x - prev) + om / L * (b - H @ x)
        prev, x = x, new
        np.testing.assert_allclose(V @ (g[k - 1] * (V.T @ b)), x, rtol=1e-8, atol=1e-10)
    # accelerated: after 40 steps it is closer to the solution than Landweber after 40
    sol = np.linalg.pinv(H, hermitian=True) @ b
    gl = spectral_filter("landweber", s, np.array([40]))[0]
    assert np.linalg.norm(x - sol) < np.linalg.norm(V @ (gl * (V.T @ b)) - sol)


def test_top_eigenvalue(rng):
    H, s, _ = _dense_problem(rng, 60)
    est = top_eigenvalue(lambda v: H @ v, 60, n_iter=500, tol=1e-10, rng=0)
    assert abs(est - s.max()) <= 1e-6 * s.max()


def test_unknown_filter():
    with pytest.raises(ValueError, match="filter"):
        spectral_filter("ridge", np.ones(3), np.ones(1))


def test_cholesky_and_eigen_factors_agree(rng):
    """Both routes give R with R^T K R = I, the same R R^T = K^-1 and the same
    preconditioner (they differ by an orthogonal change of coordinates)."""
    C = rng.standard_normal((40, 3))
    K = Gaussian(0.7)(C, C)
    chol = nystrom_factor(K)
    eig = nystrom_factor(K, rcond=1e-15)  # giving a cut-off forces the eigendecomposition
    assert chol.method == "cholesky" and eig.method == "eigh" and eig.rank == 40
    for f in (chol, eig):
        np.testing.assert_allclose(f.R.T @ K @ f.R, np.eye(40), atol=1e-8)
        np.testing.assert_allclose(f.R @ f.R.T, np.linalg.inv(K), rtol=1e-6, atol=1e-6)
    # M = R^T K^2 R; preconditioned directions map back to the same alpha = R P^-1 R^T v
    v = rng.standard_normal(40)
    a = chol.R @ chol.preconditioner(0.1, 1e-3)(chol.R.T @ v)
    b = eig.R @ eig.preconditioner(0.1, 1e-3)(eig.R.T @ v)
    np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    assert chol.top()[0] == pytest.approx(np.linalg.eigvalsh(K).max(), rel=1e-10)
    assert eig.top()[0] == pytest.approx(np.linalg.eigvalsh(K).max(), rel=1e-10)


@pytest.mark.parametrize("order", ["F", "C"])
def test_top_eigenpair_by_lanczos_is_the_dense_one(rng, order):
    """Above ``DENSE_TOP_RANK`` the host factor's ``top`` is Lanczos on M's lower triangle
    (M in Fortran order as the factor makes it, or C order: then its lower triangle is the
    transpose's upper one); the eigenpair is the dense solver's to rounding, whatever lies
    above M's diagonal (the Cholesky factor's M holds only its lower triangle)."""
    from kernelpath.linalg import DENSE_TOP_RANK, NystromFactor

    C = rng.standard_normal((300, 4))
    K = Gaussian(1.5)(C, C) + 1e-6 * np.eye(300)
    f = nystrom_factor(K)
    assert f.method == "cholesky" and f.rank > DENSE_TOP_RANK
    M = np.tril(f.M) + np.triu(rng.standard_normal((300, 300)), 1)  # garbage above
    M = np.asfortranarray(M) if order == "F" else np.ascontiguousarray(M)
    g = NystromFactor(f.R, M, "cholesky")
    val, vec = g.top()
    w, V = np.linalg.eigh(np.tril(f.M) + np.tril(f.M, -1).T)
    assert val == pytest.approx(w[-1], rel=1e-12)
    assert val == pytest.approx(np.linalg.eigvalsh(K).max(), rel=1e-8)
    assert abs(abs(vec @ V[:, -1]) - 1) < 1e-10


@pytest.mark.parametrize("m", [1, 2, 7])
def test_eigh_in_place_matches_numpy(m):
    """Every size, one row included (SciPy < 1.13's dsyevd refuses a 1 x 1 matrix)."""
    from kernelpath.linalg import eigh_in_place

    rng = np.random.default_rng(m)
    A = rng.standard_normal((m, m))
    A = A @ A.T + np.eye(m)
    s, V = eigh_in_place(A.copy())
    np.testing.assert_allclose(s, np.linalg.eigvalsh(A), rtol=1e-12)
    np.testing.assert_allclose(V @ np.diag(s) @ V.T, A, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocked_cholesky_is_lapacks_and_leaves_the_other_triangle(rng, monkeypatch, dtype):
    """From ``POTRF_BLOCKED_MIN`` rows on ``_potrf`` factors by blocks (OpenBLAS's threaded
    dpotrf crashed at m = 20,000): here with blocks of 16 from 64 rows on, both triangles of
    one buffer, against NumPy's Cholesky; the other triangle keeps its numbers."""
    from kernelpath import _kernels
    from kernelpath._kernels import cholesky_in_triangle

    monkeypatch.setattr(_kernels, "POTRF_BLOCKED_MIN", 64)
    monkeypatch.setattr(_kernels, "POTRF_BLOCK", 16)
    calls = []
    blocked = _kernels._blocked_potrf
    monkeypatch.setattr(_kernels, "_blocked_potrf", lambda X: calls.append(1) or blocked(X))
    X = rng.standard_normal((150, 5))
    K = np.exp(-((X[:, None, :] - X[None]) ** 2).sum(-1) / 8) + 0.1 * np.eye(150)
    L = np.linalg.cholesky(K)
    tol = 1e-10 if dtype == np.float64 else 2e-4
    for triangle in ("lower", "upper"):
        for order in ("C", "F"):
            # the other triangle holds numbers that are not K's
            ones = np.ones_like(K)
            junk = np.triu(ones, 1) if triangle == "lower" else np.tril(ones, -1)
            A = np.array(K + 7.0 * junk, dtype=dtype, order=order)
            other = np.triu(A, 1) if triangle == "lower" else np.tril(A, -1)
            cholesky_in_triangle(A, triangle)
            got = np.tril(A) if triangle == "lower" else np.triu(A).T
            np.testing.assert_allclose(got, L, atol=tol)
            kept = np.triu(A, 1) if triangle == "lower" else np.tril(A, -1)
            np.testing.assert_array_equal(kept, other)
    assert len(calls) == 4  # every factor above went by blocks
    bad = K.copy()
    bad[100, 100] = -1.0
    with pytest.raises(np.linalg.LinAlgError):
        cholesky_in_triangle(bad, "lower")


def test_zero_strict_upper_and_largest_eigenpair_refuse_bad_input():
    from kernelpath.linalg import largest_eigenpair, zero_strict_upper

    L = np.ones((3, 3))
    np.testing.assert_array_equal(zero_strict_upper(L), np.tril(np.ones((3, 3))))
    with pytest.raises(ValueError, match="L must be a square"):
        zero_strict_upper(np.ones((3, 2)))
    with pytest.raises(ValueError, match="dim"):
        largest_eigenpair(lambda v: v, 1)


def test_cholesky_nystrom_factor_is_the_inverse_or_none_and_refuses_bad_input():
    """R R^T = K^-1 (NumPy's inverse) and R^T K R = I where K is well conditioned; None
    (not an eigendecomposition) where it is not; bad K_mm refused by name."""
    from kernelpath.linalg import cholesky_nystrom_factor

    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 40))
    K = A @ A.T + 40 * np.eye(40)
    fac = cholesky_nystrom_factor(K)
    assert fac is not None and fac.method == "cholesky"
    np.testing.assert_allclose(fac.R @ fac.R.T, np.linalg.inv(K), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(fac.R.T @ K @ fac.R, np.eye(40), atol=1e-10)
    x = rng.standard_normal((30, 1))
    near_singular = np.exp(-((x - x.T) ** 2) / 50)  # cond ~ 1e17 and beyond
    assert cholesky_nystrom_factor(near_singular) is None
    for bad in (np.ones((3, 4)), np.ones(3), np.zeros((0, 0))):
        with pytest.raises(ValueError, match="K_mm must be a non-empty square"):
            cholesky_nystrom_factor(bad)
    with pytest.raises(ValueError, match="K_mm has NaN"):
        cholesky_nystrom_factor(np.full((3, 3), np.nan))
