"""The kernel operator against dense products, cached and streamed, one and two threads."""

import numpy as np
import pytest

from kernelpath import Gaussian, KernelOperator, Laplacian, Polynomial


@pytest.fixture
def data(rng):
    X = rng.standard_normal((1003, 5))
    C = rng.standard_normal((61, 5))
    return X, C


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("kernel", [Gaussian(1.5), Laplacian(2.0), Polynomial(2)])
def test_products_match_dense(data, rng, cache, n_jobs, kernel):
    X, C = data
    Kd = kernel(X, C)
    # a tiny budget forces many small blocks when streaming
    op = KernelOperator(
        X, C, kernel, memory_budget=2**20 if not cache else "64MB", cache=cache, n_jobs=n_jobs
    )
    assert op.cached == cache
    op.block_rows = 97  # many uneven blocks per worker
    B = rng.standard_normal((61, 3))
    A = rng.standard_normal((1003, 3))
    w = rng.random(1003)
    np.testing.assert_allclose(op.matvec(B), Kd @ B, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.matvec(B[:, 0]), Kd @ B[:, 0], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.rmatvec(A), Kd.T @ A, rtol=1e-11, atol=1e-10)
    np.testing.assert_allclose(op.fused(B), Kd.T @ (Kd @ B), rtol=1e-11, atol=1e-9)
    out, KB = op.fused(B, weights=w, return_matvec=True)
    np.testing.assert_allclose(out, Kd.T @ (w[:, None] * (Kd @ B)), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(KB, Kd @ B, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.gram(), Kd.T @ Kd, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(op.gram(w), Kd.T @ (w[:, None] * Kd), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(op.center_gram(), kernel(C, C), rtol=1e-12, atol=1e-12)


def test_float32_operator(data, rng):
    X, C = data
    op = KernelOperator(X.astype(np.float32), C.astype(np.float32), Gaussian(1.5))
    B = rng.standard_normal((61, 2)).astype(np.float32)
    out = op.fused(B)
    assert out.dtype == np.float32
    Kd = Gaussian(1.5)(X, C)
    np.testing.assert_allclose(out, Kd.T @ (Kd @ B), rtol=1e-4, atol=1e-3)


def test_cache_respects_budget(data, rng):
    X, _ = data
    C = rng.standard_normal((200, 5))
    big = KernelOperator(X, C, Gaussian(1.0), memory_budget="1GB")
    assert big.cached
    small = KernelOperator(X, C, Gaussian(1.0), memory_budget=2**20)  # K_nm is 1.6 MB
    assert not small.cached
    with pytest.raises(ValueError, match="memory_budget"):
        KernelOperator(X, C, Gaussian(1.0), memory_budget=2**20, cache=True)
    # the streamed blocks of both workers stay inside the budget
    assert small.block_rows * small.m * 8 * 2 * small.n_jobs <= small.budget


def test_release_and_recompute(data, rng):
    X, C = data
    op = KernelOperator(X, C, Gaussian(1.0), memory_budget="1GB")
    B = rng.standard_normal(61)
    first = op.matvec(B)
    assert op._K is not None
    op.release()
    assert op._K is None
    np.testing.assert_allclose(op.matvec(B), first)


def test_operator_shape_errors(data):
    X, C = data
    with pytest.raises(ValueError, match="same number of columns"):
        KernelOperator(X, C[:, :3], Gaussian(1.0))
    op = KernelOperator(X, C, Gaussian(1.0))
    with pytest.raises(ValueError, match="B must have 61 rows"):
        op.matvec(np.ones(60))
    with pytest.raises(ValueError, match="A must have 1003 rows"):
        op.rmatvec(np.ones(3))
