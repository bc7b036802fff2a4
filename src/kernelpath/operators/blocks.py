"""How an operator works through its rows: the measured sizes of its blocks, the rows of
K_nm a budget caches beside the workers' streamed blocks, and the precision of its
products (``RowPlan``, made by ``plan_rows`` for each ``KernelOperator``; the memory
model of the fit counts the same bytes, ``stream_bytes``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _backend as B
from .._kernels import HAVE_NUMBA
from .._validation import check_int
from .cache import CACHE_FRACTION

__all__ = [
    "RowPlan",
    "plan_rows",
    "block_plan",
    "streamed_block_rows",
    "stream_bytes",
    "cache_rows",
    "wide_piece_rows",
    "wide_piece_bytes",
    "sum_dtype",
    "product_dtype",
    "BLOCK_BYTES",
    "PRODUCT_MIN_ROWS",
    "COMPILED_PASS_MIN_ENTRIES",
    "COMPILED_PASS_IMPORT_BYTES",
    "compiled_pass_fits",
    "PARALLEL_MIN_ENTRIES",
]

#: Target size of one kernel block on the CPU: small enough to stay in the core's cache
#: while the elementwise transform (exp, ...) and the products run over it (measured per
#: element on one core, m = 2000: the same cost from 128 to 512 rows, 15% more at 64).
BLOCK_BYTES = 4 * 1024**2
#: ...but at least this many rows (up to ``NARROW_BLOCK_MAX_BYTES``): past m = 4,096 in
#: float64, 4 MB are fewer rows than OpenBLAS's GEMM of the distances needs to run well
#: (``streamed_block_rows``; measured: one fused pass, two workers, Gelem/s at 16/26, 64,
#: 128 and 256 rows: d = 20, m = 20,000: 0.43, 0.52, 0.56, 0.54; m = 50,000: 0.40, 0.51,
#: 0.45, 0.41; d = 100, m = 20,000: 0.21, 0.24, 0.26, 0.26).
MIN_BLOCK_ROWS = 128
#: The most bytes that the minimum of rows may take for narrow data: past it the exp and
#: the two products over a block of few features leave the cache (the d = 20, m = 50,000
#: row above: 64 rows best).
NARROW_BLOCK_MAX_BYTES = 24 * 1024**2
#: Data with at least this many features computes its blocks by GEMMs that dominate the
#: pass, and which run better the more rows they have: ``WIDE_BLOCK_ROWS`` whatever m
#: (measured, d = 784, Gelem/s at 16/26, 64, 128 and 256 rows: m = 20,000: 0.033, 0.053,
#: 0.060, 0.064; m = 50,000: 0.023, 0.047, 0.053, 0.060).
WIDE_DATA_FEATURES = 256
WIDE_BLOCK_ROWS = 256
#: Target size of one kernel block on CUDA (large blocks keep the GPU busy).
CUDA_BLOCK_BYTES = 512 * 1024**2
#: Fused products with at most this many columns use one matrix-vector product per column:
#: OpenBLAS packs the block for narrow matrix products, which costs more than re-reading the
#: cache-resident block (measured, cached K_nm of 200,000 x 2000, best of 5: 3 columns
#: 0.29 s as GEMVs against 0.56 s as GEMMs, 6 columns 0.44 s against 0.65 s).
GEMV_MAX_COLUMNS = 6
#: Block sizes of the fused product over cached rows: larger blocks for the GEMV path,
#: smaller ones for wide GEMMs (the same measurements).
CACHED_GEMV_BLOCK_BYTES = 8 * 1024**2
CACHED_GEMM_BLOCK_BYTES = 2 * 1024**2
#: Bytes of one widened piece of a block (``KernelOperator._product_blocks``): a piece and
#: the product's vectors stay in a core's L2 cache, where m is small.
WIDE_BLOCK_BYTES = 1024**2
#: The fewest rows of a widened piece and of a block over cached rows in a product (at most
#: the block's): at large m the byte targets above gave a few rows (1 MB is 6 float64 rows
#: at m = 20,000), and each piece's product then re-read all of the product's m x c right
#: side (4.8 MB at c = 30) for those rows: memory-bound. Measured on a 2-core AMD EPYC
#: host (float32 K_nm of 12,000 rows cached, two workers, best of 3, float64
#: right sides; ``benchmarks/results/product_pieces.json`` has the grid): m =
#: 20,000, c = 30: one fused product 1.56 s at 6 rows, 0.51 s at 32, 0.46 s at 64; c = 3
#: 0.27 s, 0.13 s, 0.12 s (0.14 s at 128); m = 40,000 (6,000 rows), c = 30: 2.84 s at 3
#: rows, 0.49 s at 64; m = 5,000, c = 10: 0.073 s at 26 rows, 0.043 s at 64; float64 K_nm
#: cached at m = 20,000, c = 30: 0.63 s at 16 rows, 0.44 s at 64.
PRODUCT_MIN_ROWS = 64
#: From this many entries of K_nm (n m) a float32 operator's CG pass with a float64 right-hand
#: side (``KernelOperator.fused``, up to ``GEMV_MAX_COLUMNS`` columns) runs the compiled row
#: pass of ``_kernels.fused_rows_float32`` in place of widened pieces: CG's path 1.16x faster
#: at 5e7 entries, 1.46x at 1e8, and 0.87x at 2.5e7, where Numba's import (about 0.4 s) costs
#: more than the pass saves (``benchmarks/results/float32_pass.json``).
COMPILED_PASS_MIN_ENTRIES = 5 * 10**7
#: Memory that importing Numba and loading the compiled pass adds to a process (98 MB
#: measured, with a margin); an operator that runs the pass holds it in its budget.
COMPILED_PASS_IMPORT_BYTES = 128 * 2**20
#: On CUDA, a widened piece is at most a quarter of a widened 512 MB float32 block (each
#: piece is a copy and the products' launches; not measured on a device), and at most a
#: block's rows, which the budget counts with a widened row each.
CUDA_WIDE_BLOCK_BYTES = CUDA_BLOCK_BYTES // 2
#: Products over fewer kernel entries (n m) run on one worker: handing the blocks to the pool
#: and back costs about 0.3 ms a product, more than a second core saves below this size
#: (measured here, a fused product, 1 worker against 2: n m = 24,000 0.12 against 0.40 ms;
#: 100,000 0.23 against 0.51 ms; 400,000 1.18 against 1.14 ms; 1.5 million 4.2 against 3.6 ms).
#: Iterative fits on small data make hundreds of products (NYTRO: 884 on 300 points).
PARALLEL_MIN_ENTRIES = 400_000


@dataclass(frozen=True)
class RowPlan:
    """An operator's plan of its rows.

    Attributes
    ----------
    n_jobs : int
        Worker threads (one chunk of rows each).
    target : int
        Rows per streamed block before the budget's bound.
    per_row : int
        Bytes a worker holds per row of its block (with what reading a row allocates).
    piece_rows : int
        Rows of a host worker's widened piece (float64 products over float32 blocks).
    pieces : int
        Bytes of a host worker's widened piece (0 on CUDA and for float64 operators).
    fit_rows : int
        Rows of K_nm the budget may cache (``cache_rows``).
    """

    n_jobs: int
    target: int
    per_row: int
    piece_rows: int
    pieces: int
    fit_rows: int

    def block_rows(self, budget: int, n_cached: int, row_bytes: int) -> int:
        """Rows per streamed block inside what the cached rows leave of ``budget``, each
        worker's widened piece counted before its blocks."""
        work = max(budget - n_cached * row_bytes - self.n_jobs * self.pieces, 2**20)
        return int(max(1, min(self.target, work // (self.per_row * self.n_jobs))))


def plan_rows(
    n: int,
    m: int,
    n_features: int,
    itemsize: int,
    budget: int,
    on_cuda: bool,
    sparse: bool,
    read_bytes: int,
    n_jobs: int | None,
) -> RowPlan:
    """The row plan of an operator of ``n`` rows and ``m`` centers within ``budget``
    bytes: one worker on CUDA and for products of fewer than ``PARALLEL_MIN_ENTRIES``
    entries (threads cost more than they save), every usable core otherwise (``n_jobs``
    where given); each worker holds a block, the augmented left factor and a product
    buffer (and on the host a widened piece), inside what the cache leaves."""
    if on_cuda:
        jobs = 1
    elif n_jobs is None:
        jobs = B.n_threads() if n * m >= PARALLEL_MIN_ENTRIES else 1
    else:
        jobs = max(1, int(n_jobs))
    target, per_row = block_plan(m, n_features, itemsize, on_cuda, sparse)
    pieces = 0 if on_cuda else wide_piece_bytes(m, itemsize, target)
    streams = stream_bytes(m, n_features, itemsize, jobs, on_cuda, sparse, read_bytes)
    return RowPlan(
        n_jobs=jobs,
        target=target,
        per_row=per_row + read_bytes,
        piece_rows=wide_piece_rows(m, target),
        pieces=pieces,
        fit_rows=cache_rows(budget, max(1, m * itemsize), streams, on_cuda),
    )


def streamed_block_rows(row_bytes: int, n_features: int) -> int:
    """Rows per streamed block of dense rows on the CPU, before the budget's bound:
    ``BLOCK_BYTES`` of kernel entries, at least ``MIN_BLOCK_ROWS`` (within
    ``NARROW_BLOCK_MAX_BYTES``), and ``WIDE_BLOCK_ROWS`` for data of at least
    ``WIDE_DATA_FEATURES`` features; never fewer than 16.

    Parameters
    ----------
    row_bytes : int
        Bytes of one row of K_nm (m times the item size).
    n_features : int
        Columns of the data.
    """
    rows = BLOCK_BYTES // row_bytes
    if n_features >= WIDE_DATA_FEATURES:
        return max(16, rows, WIDE_BLOCK_ROWS)
    return max(16, rows, min(MIN_BLOCK_ROWS, NARROW_BLOCK_MAX_BYTES // row_bytes))


def block_plan(
    m: int, n_features: int, itemsize: int, on_cuda: bool = False, sparse: bool = False
) -> tuple[int, int]:
    """Rows per streamed block an operator aims at before the budget's bound, and the bytes
    a worker holds per row of its block, besides what reading the rows allocates (a block
    of K_nm, the augmented left factor and the product's buffer; on CUDA a float64 row for
    a float32 block's widened piece).

    Parameters
    ----------
    m : int
        Centers (columns of K_nm).
    n_features : int
        Columns of the data.
    itemsize : int
        Bytes of one kernel entry (the operator's dtype).
    on_cuda, sparse : bool
        A CUDA operator; sparse rows (products as they are, no augmented dense factor).

    Returns
    -------
    (rows, per_row) : the target rows (at least 16) and the bytes per row.
    """
    check_int(m, "m", 0)
    check_int(n_features, "n_features", 0)
    check_int(itemsize, "itemsize", 1)
    row_bytes = max(1, m * itemsize)
    if on_cuda:
        target = CUDA_BLOCK_BYTES // row_bytes
    elif sparse:  # sparse products: not measured, 4 MB as before
        target = BLOCK_BYTES // row_bytes
    else:
        target = streamed_block_rows(row_bytes, n_features)
    per_row = row_bytes * 2 + (n_features + 2) * 8
    if sparse:  # the product's result and its sum (no augmented dense factor)
        per_row = row_bytes * 3 + 16
    if on_cuda and itemsize < 8:  # a widened row (float64 products)
        per_row += m * 8
    return int(max(16, target)), int(per_row)


def stream_bytes(
    m: int,
    n_features: int,
    itemsize: int,
    n_jobs: int,
    on_cuda: bool = False,
    sparse: bool = False,
    read_bytes: int = 0,
) -> int:
    """Bytes the workers' streamed blocks of an operator take at their full size
    (``block_plan``, with the widened pieces on the host): what a budget must leave the
    operators for their passes to run at full speed where none of K_nm is cached (CUDA:
    one worker; ``n_jobs`` workers on the host, at least 1). ``read_bytes``: what reading
    one row of X allocates (a row source's ``Rows.read_bytes``; 0 for rows in memory)."""
    check_int(n_jobs, "n_jobs", 1)
    check_int(read_bytes, "read_bytes", 0)
    rows, per_row = block_plan(m, n_features, itemsize, on_cuda, sparse)
    pieces = 0 if on_cuda else wide_piece_bytes(m, itemsize, rows)
    return (1 if on_cuda else n_jobs) * (rows * (per_row + read_bytes) + pieces)


def cache_rows(budget: int, row_bytes: int, streams: int, on_cuda: bool = False) -> int:
    """Rows of K_nm an operator with ``budget`` bytes caches (``row_bytes`` each): on the
    host, what the budget holds beside its workers' streamed blocks at full size
    (``streams``), and at least ``CACHE_FRACTION`` of the budget; on CUDA that fraction
    (the device runs were measured with it; the rest of device memory is not measured).
    The fraction alone left 40% of a large host budget to blocks of a few MB: MNIST's
    operator with 30,000 centers cached 53% of K_nm and computed the rest again at every
    pass (docs/design.md, "The cache beside the streamed blocks")."""
    check_int(budget, "budget", 0)
    check_int(row_bytes, "row_bytes", 1)
    check_int(streams, "streams", 0)
    usable = int(CACHE_FRACTION * budget)
    if not on_cuda:
        usable = max(usable, budget - streams)
    return int(usable // max(1, row_bytes))


def wide_piece_rows(m: int, block_rows: int) -> int:
    """Rows of a widened piece on the host (``KernelOperator._product_blocks``):
    ``WIDE_BLOCK_BYTES`` of float64 entries, at least ``PRODUCT_MIN_ROWS``, at most a
    block's rows."""
    return int(max(1, min(block_rows, max(PRODUCT_MIN_ROWS, WIDE_BLOCK_BYTES // (8 * m)))))


def wide_piece_bytes(m: int, itemsize: int, block_rows: int) -> int:
    """Bytes of a host worker's widened piece (float64 products over blocks of a lower
    precision: ``product_dtype``); 0 for float64 operators, whose blocks are not widened."""
    return 0 if itemsize >= 8 else wide_piece_rows(m, block_rows) * m * 8


def compiled_pass_fits(n: int, m: int, dtype: Any, budget: int, on_torch: bool) -> bool:
    """Whether an operator's float64 products over float32 blocks run the compiled row pass:
    Numba installed, NumPy blocks (not ``on_torch``), at least ``COMPILED_PASS_MIN_ENTRIES``
    entries, and a budget of at least four times ``COMPILED_PASS_IMPORT_BYTES``, which the
    operator then holds."""
    return (
        HAVE_NUMBA
        and not on_torch
        and np.dtype(dtype) == np.float32
        and n * m >= COMPILED_PASS_MIN_ENTRIES
        and budget >= 4 * COMPILED_PASS_IMPORT_BYTES
    )


def sum_dtype(dtype: Any, on_cuda: bool = False) -> np.dtype:
    """The precision of the Gram matrix's sums (``KernelOperator.gram``) of an operator of
    ``dtype``: float64 for float32 on the host, else ``dtype`` (the module docstring's
    "Precision of the products")."""
    if np.dtype(dtype) == np.float32 and not on_cuda:
        return np.dtype(np.float64)
    return np.dtype(dtype)


def product_dtype(dtype: Any, A: Any) -> np.dtype:
    """The precision of an operator's product with right-hand side ``A``, on every device:
    float64 for a float64 ``A`` (a float32 operator's blocks widened), else the operator's
    ``dtype``."""
    given = getattr(A, "dtype", None)
    if given is not None and B.numpy_dtype(given) == np.float64:
        return np.dtype(np.float64) if np.dtype(dtype) == np.float32 else np.dtype(dtype)
    return np.dtype(dtype)
