"""The kernel operator: the only place that evaluates kernel blocks.

``KernelOperator(X, centers, kernel, memory_budget)`` represents ``K_nm = [k(x_i, c_j)]``
(n data points, m centers) without necessarily storing it, and offers the products every
solver needs, each for several right-hand sides at once:

- ``matvec(B)``  = K_nm @ B            (m, k) -> (n, k)
- ``rmatvec(A)`` = K_nm.T @ A          (n, k) -> (m, k)
- ``fused(B, w)`` = K_nm.T diag(w) K_nm B   (m, k) -> (m, k), one pass over the rows
- ``gram(w)``    = K_nm.T diag(w) K_nm (m, m)
- ``center_gram()`` = K_mm             (m, m)
- ``center_operator()`` = K_mm as a streamed operator (its products in O(m) memory a row)
- ``row_sq_norms(T)`` = ||row_i(K_nm T)||^2 = diag(K_nm T T^T K_nm.T)  (m, r) -> (n,)

Backends. The blocks are computed where X lives: NumPy on the host, or PyTorch on X's
device (CPU or CUDA). Inputs of the products may be NumPy arrays or tensors; results are
NumPy arrays (in the operator's dtype) unless ``native=True`` asks for the operator's own
arrays (tensors on its device), which the device-side solvers and predictions use.

Precision of the products. On the host, a float32 operator given a float64 right-hand side
computes that product in float64 (``product_dtype``): its float32 blocks are widened, as
NumPy's own promotion would, and the sums are float64 (CG's pass over at least
``COMPILED_PASS_MIN_ENTRIES`` entries runs compiled, widening each entry in a register:
``_kernels.fused_rows_float32``); ``gram`` (no right-hand side) sums in
float64 there too (``sum_dtype``). The Nyström solvers' right-hand sides
R v have large entries of both signs that cancel (R R^T = K_mm^-1), and float32 sums of them
lose everything below eps32 * cond(K_mm) of the top of the spectrum: on MNIST that made the
whole CG path noise (``docs/design.md``, "float32 products"). On CUDA the products are
float64 the same way (widened pieces of ``CUDA_WIDE_BLOCK_BYTES``): with float32 sums there,
MNIST's default classifier erred 21.25% on an H200 where float64 erred 2.91%. There the
widened pieces cost their extra memory traffic: problem P (n = 10^7, m = 20,000) fitted in
55.7 s from float32 data against 39.0 s from float64 data (``benchmarks/results/gpu.json``).
No float32 product keeps float64's error (``benchmarks/results/float32_precision.json``).
``gram`` keeps the operator's dtype on CUDA.

Memory. The rows are split into one contiguous chunk per worker; the first rows of every
chunk are cached, as many as the budget holds beside the workers' streamed blocks at their
full size and at least ``CACHE_FRACTION`` of it (``cache_rows``; on CUDA that fraction;
all of K_nm when it fits, a fraction of every chunk otherwise, so that the cheap cached
rows are shared evenly by the workers), and the rest is streamed: recomputed in row blocks
at every product. The cache is filled on the way by the first product (the plan is
``cache.RowCache``). On CUDA the budget is device memory. Inside the library the operator
is built by the call's ``kernelpath.workspace.Workspace``, which gives it its share of the
budget in bytes.

Out of core. X may be a row source (``kernelpath.data``: a memmap, an HDF5 dataset, a zarr
array, a Parquet file): every block reads its rows (and computes their norms) when it is
computed, so only the cache and the blocks in flight are in memory.

Threads (CPU). NumPy's and torch's single-threaded ``exp`` and the narrow distance product
scale with the cores only when each core evaluates its own blocks: one worker thread per
core, BLAS (and, for torch-CPU, torch's intra-op pool) limited to one thread while the
workers run. Partial sums are added at the end. On CUDA one thread drives large blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _backend as B
from .._kernels import fused_rows_float32
from .._validation import check_int
from ..data.sources import RowSource
from ..inputs import as_rows
from ..kernels import Kernel
from .blocks import (
    BLOCK_BYTES,
    CACHED_GEMM_BLOCK_BYTES,
    CACHED_GEMV_BLOCK_BYTES,
    COMPILED_PASS_IMPORT_BYTES,
    CUDA_BLOCK_BYTES,
    CUDA_WIDE_BLOCK_BYTES,
    GEMV_MAX_COLUMNS,
    PRODUCT_MIN_ROWS,
    compiled_pass_fits,
    plan_rows,
    product_dtype,
    sum_dtype,
)
from .cache import CACHE_FRACTION, RowCache

__all__ = ["KernelOperator", "CACHE_FRACTION"]


def _source_maxima(X: RowSource, budget: int) -> tuple[float, np.ndarray]:
    """The largest squared row norm of a source and the largest |x_l| of each feature (one
    pass, kept on the source: bounds for its subsets too), for the clipping decision and
    the width check of rows read from disk (``Kernel.check_data``)."""
    base = getattr(X, "base", X)
    cached = getattr(base, "_maxima", None)
    if cached is None:
        rows = max(1, min(BLOCK_BYTES, budget // 8) // max(1, 8 * base.shape[1]))
        top, top_abs = 0.0, np.zeros(base.shape[1])
        for s in range(0, len(base), rows):
            Xb = base.read(s, s + rows).astype(np.float64, copy=False)
            if Xb.shape[0]:
                top = max(top, float(B.sq_norms(Xb).max()))
                np.maximum(top_abs, np.abs(Xb).max(axis=0), out=top_abs)
        cached = (top, top_abs)
        base._maxima = cached  # type: ignore[union-attr]
    return float(cached[0]), cached[1]


class KernelOperator:
    """Blockwise products with the kernel matrix between data ``X`` and ``centers``.

    Parameters
    ----------
    X : ndarray or tensor of shape (n, d)
        Data points (rows of K_nm); a tensor keeps the computation on its device.
    centers : ndarray or tensor of shape (m, d)
        Centers (columns of K_nm); moved to X's device.
    kernel : Kernel
        A resolved kernel (no data-dependent parameter left).
    memory_budget : int, str or None
        Bytes this operator may use for K_nm and its blocks (see ``resolve_memory_budget``;
        device memory on CUDA).
    cache : {"auto", True, False}, default="auto"
        Keep K_nm in memory: as many rows as fit ("auto"), all of it (True: error if it does
        not fit), or none (False).
    n_jobs : int or None
        Worker threads on the CPU; ``None`` uses every available core for products over at
        least ``PARALLEL_MIN_ENTRIES`` kernel entries, one below (and one on CUDA).
    expected_passes : int or None
        How many products the caller will make (a solver knows: CG makes one per iteration
        and one for its right-hand side). With ``cache="auto"`` each worker then times its
        first cached rows and keeps caching only while the page faults of fresh memory cost
        less than the passes will save (``_fill``); None caches whatever fits.
    """

    def __init__(
        self,
        X: Any,
        centers: Any,
        kernel: Kernel,
        memory_budget: Any = None,
        cache: bool | str = "auto",
        n_jobs: int | None = None,
        expected_passes: int | None = None,
    ) -> None:
        if X.ndim != 2 or centers.ndim != 2 or X.shape[1] != centers.shape[1]:
            raise ValueError(
                f"X and centers must be 2-D with the same number of columns, got shapes "
                f"{tuple(X.shape)} and {tuple(centers.shape)}"
            )
        B.check_real(X, "X")
        B.check_real(centers, "centers")
        rows, center_rows = as_rows(X), as_rows(centers)
        if rows.kind == "dask":
            raise TypeError("X: a dask array is computed by DaskKernelOperator (Workspace)")
        # in memory: NaN makes NaN products (rows on disk are checked as they are read)
        rows.check_finite("X")
        center_rows.check_finite("centers")
        check_int(n_jobs, "n_jobs", 1, allow_none=True)
        self.device = rows.device
        self.dtype = B.compute_dtype(X, centers)
        self.lazy = rows.lazy
        self.rows = as_rows(rows.to(self.device, self.dtype))
        self.X = self.rows.X
        # sparse x dense (or sparse) block products; rows sparse enough to be densified block
        # by block compute as dense rows do (``inputs.SparseRows``)
        self.sparse = not self.rows.dense_blocks
        self.centers = as_rows(center_rows.to(self.device, self.dtype)).for_blocks()
        self.kernel = kernel
        self.n, self.m = int(X.shape[0]), int(centers.shape[0])
        self.budget = B.resolve_memory_budget(memory_budget, self.device)
        itemsize = self.dtype.itemsize
        row_bytes = max(1, self.m * itemsize)
        self.nbytes_full = self.n * row_bytes
        #: float64 products of float32 blocks by the compiled row pass (``fused``): where it
        #: runs, the budget holds Numba's import beside the cache and the blocks
        self._compiled = compiled_pass_fits(
            self.n, self.m, self.dtype, self.budget, self.device.is_torch
        )
        planned_budget = self.budget - (COMPILED_PASS_IMPORT_BYTES if self._compiled else 0)
        plan = plan_rows(
            self.n,
            self.m,
            int(X.shape[1]),
            itemsize,
            planned_budget,
            self.device.is_cuda,
            self.sparse,
            self.rows.read_bytes(),
            n_jobs,
        )
        self.n_jobs = plan.n_jobs
        #: rows of a host worker's widened piece (float64 products over float32 blocks)
        self._piece_rows = plan.piece_rows
        if cache is True and plan.fit_rows < self.n:
            raise ValueError(
                f"K_nm needs {self.nbytes_full / 1e9:.2f} GB, more than the cache share of "
                f"memory_budget={self.budget / 1e9:.2f} GB"
            )
        if cache not in ("auto", True, False):
            raise ValueError(f"cache must be 'auto', True or False, got {cache!r}")
        self.expected_passes = check_int(expected_passes, "expected_passes", 1, allow_none=True)
        if kernel.needs_norms:
            # a source's rows are read (and their norms computed) block by block
            self._x_sq = self.rows.sq_norms(kernel.sq_norms)
            self._c_sq = kernel.sq_norms(self.centers)
        else:
            self._x_sq = self._c_sq = None
        self._prepared = kernel.prepare(self.centers, self._c_sq, self.sparse)
        # the dtype of the augmented left factor: float64 for the kernels of the distance
        # itself (see ``kernels``), else the data's
        self._work_dtype = np.dtype(np.float64) if kernel._uses_distance else self.dtype
        self._clip = _clip_rule(self)
        self._scratch: dict[int, tuple[Any, Any]] = {}
        self._converted: tuple[Any, Any] | None = None
        planned = self.n if cache is True else (min(plan.fit_rows, self.n) if cache else 0)
        self.cache = RowCache(
            self.n,
            self.m,
            itemsize,
            self.device,
            self.n_jobs,
            cache,
            planned,
            self.X,
        )
        self.block_rows = plan.block_rows(planned_budget, self.n_cached, row_bytes)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.m)

    # ------------------------------------------------------------------ blocks
    def _rows(self, s: int, e: int) -> tuple[Any, Any]:
        """Rows ``s:e`` of X and their squared norms (None when the kernel needs none)."""
        if self.lazy:
            Xb = self.rows.read(s, e).astype(self.dtype, copy=False)
            return Xb, (self.kernel.sq_norms(Xb) if self.kernel.needs_norms else None)
        return self.rows.read(s, e), (None if self._x_sq is None else self._x_sq[s:e])

    def _kernel_block(self, s: int, e: int, out: Any, work: Any) -> Any:
        Xb, x_sq = self._rows(s, e)
        return self.kernel.block(
            Xb, self.centers, x_sq, None, self._prepared, out, work, self._clip
        )

    def _buffers(self, worker: int) -> tuple[Any, Any]:
        """The worker's block buffer and augmented-factor buffer, reused block after block."""
        if worker not in self._scratch:
            blk = B.empty((self.block_rows, self.m), self.centers, self.dtype)
            work = (  # sparse rows are multiplied as they are (no augmented dense factor)
                None
                if self.sparse
                else B.empty((self.block_rows, self.X.shape[1] + 2), self.X, self._work_dtype)
            )
            self._scratch[worker] = (blk, work)
        return self._scratch[worker]

    def block(self, start: int, stop: int) -> Any:
        """Rows ``start:stop`` of K_nm (a new array; the operator's backend)."""
        return self._kernel_block(start, stop, None, None)

    # ------------------------------------------------------------------ the rows' plan
    @property
    def block_rows(self) -> int:
        """Rows per streamed block (the workers' buffers hold this many)."""
        return self.cache.block_rows

    @block_rows.setter
    def block_rows(self, rows: int) -> None:
        self.cache.block_rows = int(rows)

    @property
    def cached(self) -> bool:
        """Whether all of K_nm is kept in memory."""
        return self.cache.whole

    @property
    def cached_fraction(self) -> float:
        """Fraction of the rows of K_nm kept in memory."""
        return self.cache.fraction

    @property
    def n_cached(self) -> int:
        """Rows of K_nm kept in memory."""
        return self.cache.n_cached

    @property
    def cache_probe(self) -> dict[int, tuple[float, float, int, bool]]:
        """Per worker: (compute s, fault s, rows) of the cache probe, and whether it cached
        the rest (``RowCache._fill``)."""
        return self.cache.probe

    def _blocks(self, worker: int, cached_rows: int | None = None) -> Any:
        return self.cache.blocks(worker, self._kernel_block, self._buffers, cached_rows)

    def _product_blocks(self, worker: int, dtype: Any, cached_rows: int | None = None) -> Any:
        """``_blocks`` in the product's ``dtype``: a block of another dtype is widened piece
        by piece (``wide_piece_rows``: ``WIDE_BLOCK_BYTES`` each, at least
        ``PRODUCT_MIN_ROWS`` rows; on CUDA ``CUDA_WIDE_BLOCK_BYTES``, within a block's rows)
        into one scratch buffer of the worker, so that the products read the
        widened rows from the core's cache (the whole 8 MB block widened at once made a
        cached float32 pass 1.7x slower, against 1.2x)."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            yield from self._blocks(worker, cached_rows)
            return
        if self.device.is_cuda:  # within the block's rows, as the budget counts them
            rows = max(1, CUDA_WIDE_BLOCK_BYTES // max(1, self.m * dtype.itemsize))
            rows = min(rows, self.block_rows)
        else:  # as ``wide_piece_bytes`` counts them
            rows = self._piece_rows
        buf = B.empty((rows, self.m), self.X, dtype)
        for s, e, Kb in self._blocks(worker, cached_rows):
            for i in range(s, e, rows):
                j = min(e, i + rows)
                wide = buf[: j - i]
                wide[...] = Kb[i - s : j - s]
                yield i, j, wide

    def _run(self, fn: Callable[[int], Any]) -> list[Any]:
        return self.cache.run(fn, self.expected_passes)

    def center_gram(
        self, native: bool = False, out: Any = None, rows: tuple[int, int] | None = None
    ) -> Any:
        """K_mm = [k(c_i, c_j)], exactly symmetric; or written into ``out``.

        Parameters
        ----------
        native : bool, default=False
            Return the backend's array (a tensor on the device) instead of NumPy.
        out : array of shape (m, m) or None
            A C-contiguous array on the operator's backend and device: K_mm is written
            there by bands of rows (no m x m temporary; symmetric up to rounding) and
            ``out`` is returned. Of the operator's dtype, or of a lower one (a float32
            factor of float64 data): each band is then computed in the operator's dtype
            and rounded into ``out``.
        rows : (start, stop) or None
            With ``out``: only K_mm's rows start:stop, written into ``out`` of shape
            (stop - start, m) (the disk factor's bands).

        Returns
        -------
        array of shape (m, m), or (stop - start, m) with ``rows``
        """
        c, c_sq = self.centers, self._c_sq
        if rows is not None and out is None:
            raise ValueError("rows needs out: the rows are written there")
        if out is not None:
            r0, r1 = (0, self.m) if rows is None else rows
            if not 0 <= r0 <= r1 <= self.m:
                raise ValueError(f"rows must satisfy 0 <= start <= stop <= {self.m}, got {rows}")
            if tuple(out.shape) != (r1 - r0, self.m):
                raise ValueError(f"out must have shape {(r1 - r0, self.m)}, got {tuple(out.shape)}")
            size = CUDA_BLOCK_BYTES if self.device.is_cuda else BLOCK_BYTES
            band = max(1, min(self.m, size // max(1, self.m * self.dtype.itemsize)))
            rounded = B.dtype_of(out) != self.dtype
            for i in range(r0, r1, band):
                j = min(r1, i + band)
                xs = None if c_sq is None else c_sq[i:j]
                dst = None if rounded else out[i - r0 : j - r0]
                K = self.kernel.block(c[i:j], c, xs, None, self._prepared, dst, None, self._clip)
                if rounded:
                    out[i - r0 : j - r0] = K
            return out
        K = self.kernel.block(c, c, c_sq, None, self._prepared, clip=self._clip)
        if B.is_tensor(K):  # torch refuses in-place operations between overlapping views
            K = (K + K.T) * 0.5
        else:  # in place, by bands: no m x m temporary
            B.symmetrize(K)
        return self._out(K, native)

    def center_operator(self, memory_budget: int, columns: Any = None) -> KernelOperator:
        """K_mm (or its ``columns``: K_m,S) as an operator over the centers, streamed: its
        products cost O(m) memory a block row, never m x m (the low-rank preconditioner's
        inner product and sketch, ``solvers.lowrank``).

        Parameters
        ----------
        memory_budget : int
            Bytes its blocks may take.
        columns : array of int or None
            Indices of the centers that are its columns (None: every center).

        Returns
        -------
        KernelOperator of shape (m, m) or (m, len(columns)), nothing cached
        """
        if columns is not None:
            columns = np.asarray(columns)
            if (
                columns.ndim != 1
                or not np.issubdtype(columns.dtype, np.integer)
                or (columns.size and (columns.min() < 0 or columns.max() >= self.m))
            ):
                raise ValueError(
                    f"columns must be a 1-D array of center indices in [0, {self.m}), got "
                    f"{columns!r}"
                )
        cols = self.centers if columns is None else self.centers[columns]
        return KernelOperator(
            self.centers, cols, self.kernel, memory_budget, cache=False, n_jobs=self.n_jobs
        )

    def diag(self, native: bool = False) -> Any:
        """k(x_i, x_i) for the data points.

        Parameters
        ----------
        native : bool, default=False
            Return the backend's array (a tensor on the device) instead of NumPy.

        Returns
        -------
        array of shape (n,)
        """
        if self.lazy:
            out = np.empty(self.n, dtype=self.dtype)
            for s in range(0, self.n, self.block_rows):
                e = min(self.n, s + self.block_rows)
                out[s:e] = self.kernel.diag(self._rows(s, e)[0])
            return out
        return self._out(self.kernel.diag(self.X), native)

    def dense(self, native: bool = False) -> Any:
        """The whole K_nm (kept as the cache when all of it is cached).

        Computed straight into one n x m array, by the workers' chunks: the partial cache of
        the products is not filled on the way (it would sit beside the whole matrix, over
        the budget), and no cache-or-stream probe runs (the whole matrix is asked for).

        Parameters
        ----------
        native : bool, default=False
            Return the backend's array (a tensor on the device) instead of NumPy.

        Returns
        -------
        array of shape (n, m)

        Raises
        ------
        ValueError
            When K_nm does not fit the memory budget.
        """
        if self.nbytes_full > self.budget:
            raise ValueError(
                f"the {self.n} x {self.m} kernel matrix needs {self.nbytes_full / 1e9:.2f} GB, "
                f"more than memory_budget={self.budget / 1e9:.2f} GB"
            )
        if self.cached and self.cache.filled:
            return self._out(self.cache.K, native)
        K = B.empty((self.n, self.m), self.X)

        def fill(w: int) -> None:
            a, b = self.cache.chunks[w][:2]
            work = self._buffers(w)[1]
            for s in range(a, b, self.block_rows):
                e = min(b, s + self.block_rows)
                self._kernel_block(s, e, K[s:e], work)

        self.cache.run_workers(fill)
        self.cache.keep(K)
        return self._out(K, native)

    def release(self) -> None:
        """Drop the cached rows (recomputed, or re-cached, at the next product) and buffers."""
        self.cache.release()  # a measured plan is made again at the next product
        self._scratch = {}
        self._converted = None

    # ---------------------------------------------------------------- conversions
    def product_dtype(self, A: Any) -> np.dtype:
        """The precision of a product with right-hand side ``A`` (``product_dtype``)."""
        return product_dtype(self.dtype, A)

    def _in(self, A: Any, rows: int, name: str, dtype: Any = None) -> tuple[Any, bool]:
        """A product's input on the operator's device, 2-D, contiguous, in ``dtype`` (None:
        the product's, ``product_dtype``)."""
        vec = A.ndim == 1 if hasattr(A, "ndim") else np.ndim(A) == 1
        A2 = B.to_device(A, self.device, self.product_dtype(A) if dtype is None else dtype)
        if vec:
            A2 = A2[:, None]
        if A2.ndim != 2 or A2.shape[0] != rows:
            raise ValueError(f"{name} must have {rows} rows, got shape {tuple(A2.shape)}")
        return A2, vec

    def _weights(self, weights: Any, dtype: Any = None) -> Any:
        """Per-row weights on the device in ``dtype`` (None: the operator's); a host array
        the solver passes at every iteration is moved once (the solvers never modify their
        weights)."""
        if weights is None:
            return None
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        if self._converted is not None and self._converted[0] is weights:
            if B.dtype_of(self._converted[1]) == dtype:
                return self._converted[1]
        w = self._in(weights, self.n, "weights", dtype)[0][:, 0]
        if self.device.is_torch and not B.is_tensor(weights):
            self._converted = (weights, w)
        return w

    def _out(self, A: Any, native: bool) -> Any:
        return A if native else B.to_numpy(A)

    # ---------------------------------------------------------------- products
    def matvec(self, B_: Any, native: bool = False) -> Any:
        """K_nm @ B.

        Parameters
        ----------
        B_ : array of shape (m,) or (m, k)
            The right-hand side.
        native : bool, default=False
            Return the backend's array (a tensor on the device) instead of NumPy.

        Returns
        -------
        array of shape (n,) or (n, k)
        """
        B2, vec = self._in(B_, self.m, "B")
        out = B.empty((self.n, B2.shape[1]), self.X, B.dtype_of(B2))
        cached = self._cached_rows(B2.shape[1])

        def work(w: int) -> None:
            for s, e, Kb in self._product_blocks(w, B.dtype_of(B2), cached):
                B.matmul(Kb, B2, out=out[s:e])

        self._run(work)
        return self._out(out[:, 0] if vec else out, native)

    def rmatvec(self, A: Any, native: bool = False) -> Any:
        """K_nm.T @ A.

        Parameters
        ----------
        A : array of shape (n,) or (n, k)
            The right-hand side.
        native : bool, default=False
            Return the backend's array (a tensor on the device) instead of NumPy.

        Returns
        -------
        array of shape (m,) or (m, k)
        """
        A2, vec = self._in(A, self.n, "A")
        cached = self._cached_rows(A2.shape[1])

        def work(w: int) -> Any:
            acc = B.zeros((self.m, A2.shape[1]), self.X, B.dtype_of(A2))
            for s, e, Kb in self._product_blocks(w, B.dtype_of(A2), cached):
                acc += Kb.T @ A2[s:e]
            return acc

        out = sum(self._run(work))
        return self._out(out[:, 0] if vec else out, native)

    def _cached_rows(self, k: int) -> int:
        """Rows per block over cached rows: no kernel evaluation, blocks sized for the
        products (larger for the per-column GEMV path)."""
        if self.device.is_cuda:
            return self.block_rows
        target = CACHED_GEMV_BLOCK_BYTES if k <= GEMV_MAX_COLUMNS else CACHED_GEMM_BLOCK_BYTES
        return int(max(PRODUCT_MIN_ROWS, target // (self.m * self.dtype.itemsize)))

    def fused(
        self,
        B_: Any,
        weights: Any = None,
        return_matvec: bool = False,
        native: bool = False,
    ) -> Any:
        """K_nm.T diag(w) (K_nm B) in one pass over the rows.

        Parameters
        ----------
        B_ : ndarray or tensor of shape (m,) or (m, k)
        weights : ndarray or tensor of shape (n,) or None
            Per-row weights w (None: all ones).
        return_matvec : bool
            Also return ``K_nm @ B`` (shape (n,) or (n, k)), computed on the way.
        native : bool
            Return the operator's own arrays (tensors on its device) instead of NumPy.

        Returns
        -------
        array of shape (m,) or (m, k), and the matvec when asked.
        """
        B2, vec = self._in(B_, self.m, "B")
        dtype = B.dtype_of(B2)
        w = self._weights(weights, dtype)
        k = B2.shape[1]
        # GEMVs on the CPU (see GEMV_MAX_COLUMNS); GPUs have no such penalty
        by_column = k <= GEMV_MAX_COLUMNS and not self.device.is_cuda
        KB = B.empty((self.n, k), self.X, dtype) if return_matvec else None
        Bcols = [B2[:, j].contiguous() if B.is_tensor(B2) else B2[:, j].copy() for j in range(k)]

        def work(wk: int) -> Any:
            acc = B.zeros((k, self.m) if by_column else (self.m, k), self.X, dtype)
            for s, e, Kb in self._product_blocks(wk, dtype, self._cached_rows(k)):
                if by_column:
                    for j in range(k):
                        t = Kb @ Bcols[j]
                        if KB is not None:
                            KB[s:e, j] = t
                        if w is not None:
                            t *= w[s:e]
                        acc[j] += Kb.T @ t
                    continue
                t = Kb @ B2
                if KB is not None:
                    KB[s:e] = t
                if w is not None:
                    t *= w[s:e, None]
                acc += Kb.T @ t
            return acc.T if by_column else acc

        # float64 products of float32 blocks by the compiled row pass where it was planned
        compiled = by_column and self._compiled and dtype == np.float64
        out = sum(self._run(_compiled_worker(self, B2, w, KB) if compiled else work))
        if vec:
            out = out[:, 0]
            KB = None if KB is None else KB[:, 0]
        if return_matvec:
            return self._out(out, native), self._out(KB, native)
        return self._out(out, native)

    def row_sq_norms(self, T: Any, native: bool = False) -> Any:
        """Squared norms of the rows of K_nm T, shape (n,), for T of shape (m, r).

        The quadratic forms k_i^T T T^T k_i without forming an n x n (or n x r) matrix: one
        pass over the row blocks, O(n m r). Taking a factor T rather than the product T T^T
        avoids the cancellation of a quadratic form with large entries of both signs.
        """
        T2 = B.to_device(T, self.device, self.product_dtype(T))
        if T2.ndim != 2 or T2.shape[0] != self.m:
            raise ValueError(f"T must have shape ({self.m}, r), got {tuple(T2.shape)}")
        out = B.empty((self.n,), self.X, B.dtype_of(T2))

        def work(w: int) -> None:
            for s, e, Kb in self._product_blocks(w, B.dtype_of(T2)):
                KT = Kb @ T2
                out[s:e] = B.sq_norms(KT)

        self._run(work)
        return self._out(out, native)

    def projected_rows(self, T: Any, quad: Any, lin: Any) -> tuple[np.ndarray, np.ndarray]:
        """With U = K_nm T (never formed): ``(U * U) @ quad`` and ``U @ lin``, in one pass.

        For T (m, r), quad (r, p) and lin (r, q): shapes (n, p) and (n, q), float64 NumPy.
        The diagonal and the fitted values of a Nyström smoother for every penalty
        (leave-one-out), O(n m r) with r x (p + q) more per row.
        """
        T2 = B.to_device(T, self.device, self.product_dtype(T))
        if T2.ndim != 2 or T2.shape[0] != self.m:
            raise ValueError(f"T must have shape ({self.m}, r), got {tuple(T2.shape)}")
        r = T2.shape[1]
        for name, C in (("quad", quad), ("lin", lin)):
            if np.ndim(C) != 2 or C.shape[0] != r:
                raise ValueError(f"{name} must have shape ({r}, p), got {np.shape(C)}")
        Cq = B.to_device(quad, self.device, np.float64)
        Cl = B.to_device(lin, self.device, np.float64)
        out_q = B.empty((self.n, Cq.shape[1]), self.X, np.float64)
        out_l = B.empty((self.n, Cl.shape[1]), self.X, np.float64)

        def work(w: int) -> None:
            for s, e, Kb in self._product_blocks(w, B.dtype_of(T2)):
                U = B.astype(Kb @ T2, np.float64)
                out_l[s:e] = U @ Cl
                U *= U
                out_q[s:e] = U @ Cq

        self._run(work)
        return B.to_numpy(out_q), B.to_numpy(out_l)

    def gram(self, weights: Any = None, native: bool = False) -> Any:
        """K_nm.T diag(w) K_nm, exactly symmetric.

        Parameters
        ----------
        weights : array of shape (n,) or None, default=None
            The row weights w (None: all 1).
        native : bool, default=False
            Return the backend's array (a tensor on the device) instead of NumPy.

        Returns
        -------
        array of shape (m, m)
        """
        dtype = sum_dtype(self.dtype, self.device.is_cuda)
        w = self._weights(weights, dtype)
        root = None if w is None else w**0.5

        def work(wk: int) -> Any:  # each worker's sum, updated in place
            acc = B.gram_zeros(self.m, self.X, dtype)
            for s, e, Kb in self._product_blocks(wk, dtype):
                acc = B.add_gram(acc, Kb if root is None else Kb * root[s:e, None])
            return acc

        parts = self._run(work)
        G = parts.pop(0)  # the workers' sums added in place: one m x m per worker at most
        while parts:
            G += parts.pop()
        return self._out(B.gram_done(G), native)


def _compiled_worker(op: KernelOperator, B2: Any, w: Any, KB: Any) -> Callable[[int], Any]:
    """A worker of ``KernelOperator.fused`` that runs the compiled row pass
    (``_kernels.fused_rows_float32``) over its float32 blocks, with no widened copy; its sums
    have ``fused``'s by-column layout, transposed back."""
    Bt = np.ascontiguousarray(B2.T)

    def work(wk: int) -> Any:
        acc = np.zeros(Bt.shape)
        for s, e, Kb in op._blocks(wk, op._cached_rows(Bt.shape[0])):
            w_b = None if w is None else w[s:e]
            fused_rows_float32(Kb, Bt, w_b, acc, None if KB is None else KB[s:e])
        return acc.T

    return work


def _clip_rule(op: KernelOperator) -> bool:
    """Whether blocks clip their rounding (``Kernel.clip_needed``), from the largest
    squared norms of the rows and of the centers (taken on the device; for rows read
    from a file, one pass over it, which checks its widths as rows in memory are)."""
    kernel = op.kernel
    if op.lazy and kernel.needs_norms:
        top, top_abs = _source_maxima(op.X, op.budget)
        xmax = top * kernel.max_feature_weight()
        kernel.check_data(top_abs, "X", op.dtype)  # the width rule of rows in memory
    else:
        xmax = float(op._x_sq.max()) if op._x_sq is not None and op.n else 0.0
    cmax = float(op._c_sq.max()) if op._c_sq is not None and op.m else 0.0
    d = int(op.X.shape[1])
    return bool(kernel.clip_needed(max(xmax, cmax), cmax, d, op._work_dtype))
