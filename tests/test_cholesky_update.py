"""Rank-one Cholesky update and downdate against fresh factorizations."""

import numpy as np
import pytest
import scipy.linalg

from kernelpath.cholesky import cholesky_downdate, cholesky_update


def _spd(rng, k):
    A = rng.standard_normal((k, k))
    return A @ A.T + k * np.eye(k)


@pytest.mark.parametrize("k", [1, 7, 40])
def test_long_random_sequences_match_fresh_factorizations(rng, k):
    A = _spd(rng, k)
    R = scipy.linalg.cholesky(A)
    worst = 0.0
    n_down = 0
    for _ in range(400):
        x = rng.standard_normal(k) * rng.uniform(0.1, 2.0)
        if rng.random() < 0.5:
            R = cholesky_update(R, x)
            A = A + np.outer(x, x)
        else:
            x = x * 0.3
            # only downdates that keep A safely positive definite
            if np.linalg.eigvalsh(A - np.outer(x, x)).min() < 1e-3 * np.linalg.norm(A, 2):
                continue
            R = cholesky_downdate(R, x)
            A = A - np.outer(x, x)
            n_down += 1
        fresh = scipy.linalg.cholesky(A)
        worst = max(worst, np.abs(R - fresh).max() / np.abs(fresh).max())
        assert np.allclose(np.tril(R, -1), 0.0)
    assert n_down > 50
    assert worst < 1e-10


def test_update_of_a_padded_factor(rng):
    # the zero last row/column of a padded factor is filled by the update
    A = _spd(rng, 5)
    R = np.zeros((6, 6))
    R[:5, :5] = scipy.linalg.cholesky(A)
    x = rng.standard_normal(6)
    out = cholesky_update(R, x)
    B = np.zeros((6, 6))
    B[:5, :5] = A
    B += np.outer(x, x)
    np.testing.assert_allclose(out.T @ out, B, rtol=1e-12, atol=1e-12)
    assert np.all(np.diag(out) > 0)


def test_overwrite_and_copy(rng):
    A = _spd(rng, 6)
    R = scipy.linalg.cholesky(A)
    keep = R.copy()
    x = rng.standard_normal(6)
    out = cholesky_update(R, x)
    np.testing.assert_array_equal(R, keep)  # not touched by default
    cholesky_update(R, x, overwrite=True)
    np.testing.assert_array_equal(R, out)
    back = cholesky_downdate(R, x, overwrite=True)
    assert back is R
    np.testing.assert_allclose(R, keep, atol=1e-12)


def test_downdate_that_loses_definiteness_raises(rng):
    A = _spd(rng, 4)
    R = scipy.linalg.cholesky(A)
    # x x^T with x = sqrt(s) v for the top eigenpair (s, v): A - x x^T is singular
    s, V = np.linalg.eigh(A)
    x = np.sqrt(s[-1]) * V[:, -1] * 1.0000001
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        cholesky_downdate(R, x)
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        cholesky_downdate(R, 2 * x)
    with pytest.raises(np.linalg.LinAlgError, match="positive diagonal"):
        cholesky_downdate(np.zeros((3, 3)), np.ones(3))


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="x must have shape"):
        cholesky_update(np.eye(3), np.ones(4))
    with pytest.raises(ValueError, match="R must be a square"):
        cholesky_update(np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        cholesky_downdate(np.eye(2), np.array([np.nan, 0.0]))


def test_independent_columns_skip_dependent_ones(rng):
    from kernelpath.cholesky import independent_columns

    A = rng.standard_normal((120, 30))
    # columns 30.. of A A^T are combinations of the first 30 rows' span: rank 30
    K = A @ A.T
    kept, L = independent_columns(K, rtol=1e-9, block=16)
    assert len(kept) == 30
    np.testing.assert_allclose(L @ L.T, K[np.ix_(kept, kept)], rtol=1e-9, atol=1e-9)
    # a repeated column is skipped, the others kept in order
    B = rng.standard_normal((8, 8))
    K2 = B @ B.T + np.eye(8)
    P = np.r_[0, 1, 2, 1, 3, 4, 5, 6, 0, 7]
    kept2, L2 = independent_columns(K2[np.ix_(P, P)], block=4)
    assert list(kept2) == [0, 1, 2, 4, 5, 6, 7, 9]
    np.testing.assert_allclose(L2 @ L2.T, K2[np.ix_(P[kept2], P[kept2])], rtol=1e-12)


def test_numpy_fallback_loops_match_the_compiled_ones(rng):
    from kernelpath import _kernels

    A = _spd(rng, 12)
    R = scipy.linalg.cholesky(A)
    x = rng.standard_normal(12)
    a, b = R.copy(), R.copy()
    _kernels._update_rows_py(a, x.copy())
    _kernels.givens_update_rows(b, x.copy())
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(a.T @ a, A + np.outer(x, x), rtol=1e-12)
    c, s = np.cos(rng.uniform(0, 1, 12)), np.sin(rng.uniform(0, 1, 12))
    a, b = R.copy(), R.copy()
    _kernels._downdate_rows_py(a, c, s)
    _kernels.givens_downdate_rows(b, c, s)
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
