"""Checks of the fused Gaussian block (``kernelpath._fused``) through Triton's interpreter, on
CPU tensors against NumPy. Run by ``tests/test_fused.py`` in a fresh process with
TRITON_INTERPRET=1 set before Triton is imported (its interpreter needs that: the kernels of
Triton's own standard library are built at import); not collected on their own."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import kernelpath._fused as F  # noqa: E402
from kernelpath import Gaussian, KernelOperator, NystromRegressor  # noqa: E402

assert os.environ.get("TRITON_INTERPRET") == "1", "run through tests/test_fused.py"


@pytest.fixture
def interpreted(monkeypatch):
    """The fused kernel built for Triton's interpreter (CPU tensors), rebuilt afterwards."""
    monkeypatch.delenv("KERNELPATH_TRITON", raising=False)
    monkeypatch.setattr(F, "_kernel", None)
    monkeypatch.setattr(F, "_failed", set())
    yield
    F._kernel = None


def _reference(A, P, clip, base2):
    D = A.astype(np.float64) @ P.astype(np.float64).T
    if clip < 0:
        D = np.minimum(D, 0.0)
    elif clip > 0:
        D = np.maximum(D, 0.0)
    return np.exp2(D) if base2 else np.exp(D)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("clip", [-1, 0, 1])
def test_exp_block_matches_the_product(interpreted, dtype, clip):
    rng = np.random.default_rng(int(clip) + 3)
    # tiles that do not divide the shape; k = 40 takes two (float32) or three (float64)
    # steps of the inner loop; the left factor is a column slice of a wider buffer (strided
    # rows, as the operator's work buffer) and the output a row-strided view
    n, m, k = 150, 70, 40
    work = rng.standard_normal((n, k + 5)).astype(dtype) * 0.3
    A = torch.from_numpy(work)[:, :k]
    P = torch.from_numpy(rng.standard_normal((m, k)).astype(dtype) * 0.3)
    big = torch.full((n, m + 9), float("nan"), dtype=A.dtype)
    out = big[:, :m]
    for base2 in (True, False):
        got = F.exp_block(A, P, clip, base2, out=out)
        assert got is not None and got.data_ptr() == out.data_ptr()
        want = _reference(A.numpy(), P.numpy(), clip, base2)
        tol = 1e-5 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(out.numpy(), want, rtol=tol, atol=tol)
        assert torch.isnan(big[:, m:]).all()  # nothing written beyond the block
    assert F.exp_block(A[:0], P, clip, True).shape == (0, m)


def test_exp_block_declines_what_it_does_not_compute(interpreted, monkeypatch):
    rng = np.random.default_rng(0)
    A = torch.from_numpy(rng.standard_normal((10, F.MAX_K + 1)))
    assert F.exp_block(A, A, -1, True) is None  # k beyond MAX_K: cuBLAS's job
    assert F.exp_block(A[:, :4].float(), A[:, :4], -1, True) is None  # mixed dtypes
    assert F.exp_block(A[:, :4].half(), A[:, :4].half(), -1, True) is None
    monkeypatch.setenv("KERNELPATH_TRITON", "0")
    assert F.exp_block(A[:, :4], A[:, :4], -1, True) is None
    monkeypatch.delenv("KERNELPATH_TRITON")
    monkeypatch.delenv("TRITON_INTERPRET")  # CPU tensors without the interpreter
    assert F.exp_block(A[:, :4], A[:, :4], -1, True) is None


def test_a_failing_compilation_falls_back_with_a_warning(interpreted, monkeypatch):
    class Broken:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise RuntimeError("no code for this target")

            return launch

    monkeypatch.setattr(F, "_kernel", Broken())
    X = torch.from_numpy(np.random.default_rng(1).standard_normal((30, 3)))
    with pytest.warns(RuntimeWarning, match="fused Triton kernel failed"):
        K = Gaussian(1.5)(X, X[:7])
    np.testing.assert_allclose(K.numpy(), Gaussian(1.5)(X.numpy(), X[:7].numpy()), rtol=1e-12)
    assert torch.float64 in F._failed
    assert F.exp_block(X, X, -1, True) is None  # not tried again for that dtype


@pytest.mark.parametrize(
    "kernel",
    [Gaussian(2.0), Gaussian(np.array([0.5, 1.0, 2.0, 4.0])), Gaussian(1.0, metric=None)],
    ids=["one width", "per feature", "plain"],
)
def test_gaussian_blocks_through_the_fused_kernel(interpreted, calls, kernel):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((90, 4)) * [1.0, 10.0, 0.1, 3.0]
    Z = X[::7] + 0.01
    want = kernel(X, Z)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 2e-5)):
        got = kernel(torch.from_numpy(X).to(dtype), torch.from_numpy(Z).to(dtype))
        np.testing.assert_allclose(got.double().numpy(), want, rtol=tol, atol=tol)
    assert calls["fused"] == 2


def test_a_learned_metric_uses_the_fused_kernel(interpreted, calls):
    rng = np.random.default_rng(3)
    L = rng.standard_normal((5, 2))
    k = Gaussian(1.3, metric=L)
    X = rng.standard_normal((60, 5))
    got = k(torch.from_numpy(X), torch.from_numpy(X[:9]))
    np.testing.assert_allclose(got.numpy(), k(X, X[:9]), rtol=1e-12, atol=1e-14)
    assert calls["fused"] == 1


def test_the_operator_and_a_fit_agree_with_numpy(interpreted, calls):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3000, 6))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(3000)
    C = X[:50]
    # a small budget: a cached prefix of K_nm (1.2 MB) and streamed blocks
    op = KernelOperator(torch.from_numpy(X), torch.from_numpy(C), Gaussian(2.0), 1_100_000)
    assert 0 < op.n_cached < op.n
    ref = KernelOperator(X, C, Gaussian(2.0))
    v = rng.standard_normal((50, 2))
    for _ in range(2):  # the pass that fills the cache, then one that reads it
        np.testing.assert_allclose(op.fused(v), ref.fused(v), rtol=1e-11)
    assert calls["fused"] >= 2
    kw = dict(kernel=Gaussian(2.0), n_centers=50, penalty=1e-4, random_state=0)
    kw.update(validation_fraction=0.0, max_iter=15, tol=0.0)
    a = NystromRegressor(device="cpu", **kw).fit(X, y).predict(X[:20])
    b = NystromRegressor(**kw).fit(X, y).predict(X[:20])
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
