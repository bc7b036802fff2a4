"""Fused kernel blocks on the GPU: the augmented distance product, its clip and the
exponential in one Triton kernel, so that a block is written once instead of three times.

A Gaussian block on CUDA is ``exp2(clip(Xa @ P.T))`` with Xa = [X, ||x||^2, 1] (n_b x k) and P
the prepared right factor (m x k, the width folded in; ``kernels._RadialKernel``). With k = d +
2 small the product is bound by writing the n_b x m block, and the clip and the exponential
each read and write it again: measured on an NVIDIA H200 at n = 10^7, m = 20,000, d = 20
(float32), one pass K_nm^T (K_nm v) took 1.64 s, of which the product 0.42 s, the clip
0.38 s and the exponential 0.38 s (``benchmarks/results/gpu.json``). Here each program
computes a tile of the product in registers, clips and exponentiates it there, and stores it.

The tile product runs in full precision (``input_precision="ieee"``: the distances of the
Gram trick need the whole float32 mantissa; TF32 would lose ~1e-3 of them). Used for float32
and float64 tensors on CUDA when Triton imports and k is at most ``MAX_K`` (beyond that the
product is bound by arithmetic, where cuBLAS is the better matrix multiply); anywhere else the
caller computes the block with the library's matrix product. ``KERNELPATH_TRITON=0`` turns
the fused path off (for comparisons); with Triton's own ``TRITON_INTERPRET=1`` it runs on
CPU tensors through Triton's interpreter (how the tests check it without a GPU).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Any

__all__ = ["MAX_K", "enabled", "exp_block"]

#: Largest inner dimension (features + 2) computed by the fused kernel.
MAX_K = 64
#: Tiles (rows, columns, inner step, warps) by precision: {float32?: tiles}. A float32 tile
#: of 128 x 128 holds 64 accumulators per thread with 8 warps; float64 tiles are halved.
TILES = {True: (128, 128, 32, 8), False: (64, 64, 16, 4)}

_lock = threading.Lock()
_interpreter_lock = threading.Lock()
_kernel: Any = None
#: dtypes whose compilation failed on this machine (the caller falls back, once per dtype)
_failed: set[Any] = set()


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def enabled() -> bool:
    """Whether the fused path may be used at all (not switched off, Triton importable)."""
    if os.environ.get("KERNELPATH_TRITON", "1") == "0":
        return False
    return _get_kernel() is not None


def _get_kernel() -> Any:
    """The jitted Triton kernel (built on first use, None without Triton)."""
    global _kernel
    if _kernel is not None:
        return _kernel if _kernel is not False else None
    with _lock:
        if _kernel is None:
            _kernel = _build() or False
    return _kernel if _kernel is not False else None


def _build() -> Any:
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - a missing or broken Triton: the caller's path
        return None

    @triton.jit
    def exp_block_kernel(
        A,
        P,
        OUT,
        n,
        m,
        k,
        stride_a,
        stride_p,
        stride_o,
        CLIP: tl.constexpr,
        BASE2: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        # OUT[i, j] = exp(clip(sum_l A[i, l] P[j, l])), a BLOCK_N x BLOCK_M tile per program
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
        inner = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=OUT.dtype.element_ty)
        for start in range(0, k, BLOCK_K):
            ks = start + inner
            a = tl.load(
                A + rows[:, None] * stride_a + ks[None, :],
                mask=(rows[:, None] < n) & (ks[None, :] < k),
                other=0.0,
            )
            p = tl.load(
                P + cols[None, :] * stride_p + ks[:, None],
                mask=(cols[None, :] < m) & (ks[:, None] < k),
                other=0.0,
            )
            acc += tl.dot(a, p, input_precision="ieee")
        # a scaled squared distance s ||x - z||^2 with s < 0 is never positive (tl.where, a
        # core operation: it also runs in Triton's interpreter after a plain import)
        if CLIP < 0:
            acc = tl.where(acc < 0.0, acc, 0.0)
        if CLIP > 0:
            acc = tl.where(acc > 0.0, acc, 0.0)
        if BASE2:
            acc = tl.exp2(acc)
        else:
            acc = tl.exp(acc)
        tl.store(
            OUT + rows[:, None] * stride_o + cols[None, :],
            acc,
            mask=(rows[:, None] < n) & (cols[None, :] < m),
        )

    return exp_block_kernel


def _usable(A: Any, P: Any) -> bool:
    import torch

    if A.dtype not in (torch.float32, torch.float64) or P.dtype != A.dtype:
        return False
    if A.dtype in _failed or A.shape[1] > MAX_K or A.shape[1] != P.shape[1]:
        return False
    if not (A.is_cuda or _interpreting()):
        return False
    return A.stride(1) == 1 and P.stride(1) == 1


def exp_block(A: Any, P: Any, clip: int, base2: bool, out: Any = None) -> Any:
    """``exp(clip(A @ P.T))`` (``exp2`` with ``base2``) in one fused kernel, or None when the
    fused path does not apply (then the caller computes it).

    Parameters
    ----------
    A : tensor of shape (n, k)
        The augmented left factor of a block (rows contiguous).
    P : tensor of shape (m, k)
        The prepared right factor, same dtype and device.
    clip : {-1, 0, 1}
        Clip the product to at most 0 (-1), at least 0 (1), or not at all (0).
    base2 : bool
        Exponentials in base 2 (the scale folded into P for it).
    out : tensor of shape (n, m) or None
        Written in place when given (its rows may be strided; its columns contiguous).

    Returns
    -------
    tensor of shape (n, m) or None
    """
    if not enabled() or not _usable(A, P):
        return None
    import torch

    n, k = int(A.shape[0]), int(A.shape[1])
    m = int(P.shape[0])
    if out is None:
        out = torch.empty((n, m), dtype=A.dtype, device=A.device)
    elif out.shape != (n, m) or out.dtype != A.dtype or out.stride(1) != 1:
        return None
    if n == 0 or m == 0:
        return out
    tiles = TILES[A.dtype == torch.float32]
    grid = ((n + tiles[0] - 1) // tiles[0], (m + tiles[1] - 1) // tiles[1])
    kernel = _get_kernel()
    try:
        # the interpreter patches Triton's language module while a kernel runs: one at a time
        with _interpreter_lock if _interpreting() else contextlib.nullcontext():
            kernel[grid](
                A,
                P,
                out,
                n,
                m,
                k,
                A.stride(0),
                P.stride(0),
                out.stride(0),
                CLIP=int(clip),
                BASE2=bool(base2),
                BLOCK_N=tiles[0],
                BLOCK_M=tiles[1],
                BLOCK_K=tiles[2],
                num_warps=tiles[3],
            )
    except Exception as exc:  # noqa: BLE001 - a compiler that refuses this dtype: fall back
        _failed.add(A.dtype)
        warnings.warn(
            f"the fused Triton kernel failed for {A.dtype} ({type(exc).__name__}: {exc}); "
            "kernel blocks are computed by the matrix product instead",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return out
