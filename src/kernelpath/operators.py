"""The kernel operator: the only place that evaluates kernel blocks.

``KernelOperator(X, centers, kernel, memory_budget)`` represents ``K_nm = [k(x_i, c_j)]``
(n data points, m centers) without necessarily storing it, and offers the products every
solver needs, each for several right-hand sides at once:

- ``matvec(B)``  = K_nm @ B            (m, k) -> (n, k)
- ``rmatvec(A)`` = K_nm.T @ A          (n, k) -> (m, k)
- ``fused(B, w)`` = K_nm.T diag(w) K_nm B   (m, k) -> (m, k), one pass over the rows
- ``gram(w)``    = K_nm.T diag(w) K_nm (m, m)
- ``center_gram()`` = K_mm             (m, m)
- ``row_sq_norms(T)`` = ||row_i(K_nm T)||^2 = diag(K_nm T T^T K_nm.T)  (m, r) -> (n,)

Memory. If K_nm fits in ``CACHE_FRACTION`` of the budget it is computed once (lazily, at the
first product) and kept; otherwise it is streamed: recomputed in row blocks whose size is set
so that all workers' blocks together stay inside the budget.

Threads. NumPy's ``exp`` runs on one thread, and for low-dimensional data the exponentials,
not the matrix product, dominate kernel evaluation. The rows are therefore split into one
contiguous chunk per core, and each worker thread evaluates and multiplies its own blocks with
BLAS limited to one thread (running multi-threaded BLAS inside the worker threads would
oversubscribe the cores). Partial sums are added at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from ._backend import compute_dtype, get_namespace, n_threads, resolve_memory_budget
from .kernels import Kernel

__all__ = ["KernelOperator", "CACHE_FRACTION"]

#: Fraction of the memory budget a cached K_nm may take (the rest is working memory).
CACHE_FRACTION = 0.6
#: Target size of one kernel block: small enough to stay in the core's cache while the
#: elementwise transform (exp, ...) and the products run over it.
BLOCK_BYTES = 4 * 1024**2
#: Fused products with at most this many columns use one matrix-vector product per column:
#: OpenBLAS packs the block for narrow matrix products, which costs more than re-reading the
#: cache-resident block (measured, cached K_nm of 200,000 x 2000, best of 5: 3 columns
#: 0.29 s as GEMVs against 0.56 s as GEMMs, 6 columns 0.44 s against 0.65 s).
GEMV_MAX_COLUMNS = 6
#: Block sizes of the fused product over a cached K_nm: larger blocks for the GEMV path,
#: smaller ones for wide GEMMs (the same measurements).
CACHED_GEMV_BLOCK_BYTES = 8 * 1024**2
CACHED_GEMM_BLOCK_BYTES = 2 * 1024**2

_controller: ThreadpoolController | None = None
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _blas_controller() -> ThreadpoolController:
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller


def _thread_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers != workers:  # noqa: SLF001
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="kernelpath")
        return _pool


class KernelOperator:
    """Blockwise products with the kernel matrix between data ``X`` and ``centers``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Data points (rows of K_nm).
    centers : ndarray of shape (m, d)
        Centers (columns of K_nm).
    kernel : Kernel
        A resolved kernel (no data-dependent parameter left).
    memory_budget : int, str or None
        Bytes this operator may use for K_nm and its blocks (see ``resolve_memory_budget``).
    cache : {"auto", True, False}, default="auto"
        Keep K_nm in memory: when it fits ("auto"), always (True: error if it does not fit),
        or never (False).
    n_jobs : int or None
        Worker threads for kernel evaluation; ``None`` uses every available core.
    """

    def __init__(
        self,
        X: np.ndarray,
        centers: np.ndarray,
        kernel: Kernel,
        memory_budget: Any = None,
        cache: bool | str = "auto",
        n_jobs: int | None = None,
    ) -> None:
        if X.ndim != 2 or centers.ndim != 2 or X.shape[1] != centers.shape[1]:
            raise ValueError(
                f"X and centers must be 2-D with the same number of columns, got shapes "
                f"{X.shape} and {centers.shape}"
            )
        self.dtype = compute_dtype(X, centers)
        xp = get_namespace(X, centers)
        self.X = xp.ascontiguousarray(X, dtype=self.dtype)
        self.centers = xp.ascontiguousarray(centers, dtype=self.dtype)
        self.kernel = kernel
        self.n, self.m = len(X), len(centers)
        self.budget = resolve_memory_budget(memory_budget)
        self.n_jobs = n_threads() if n_jobs is None else max(1, int(n_jobs))
        itemsize = self.dtype.itemsize
        self.nbytes_full = self.n * self.m * itemsize
        fits = self.nbytes_full <= CACHE_FRACTION * self.budget
        if cache is True and not fits:
            raise ValueError(
                f"K_nm needs {self.nbytes_full / 1e9:.2f} GB, more than the cache share of "
                f"memory_budget={self.budget / 1e9:.2f} GB"
            )
        self.cached = bool(fits) if cache == "auto" else bool(cache)
        self._K: np.ndarray | None = None
        if kernel.needs_norms:
            self._x_sq = self.xp.einsum("ij,ij->i", self.X, self.X)
            self._c_sq = self.xp.einsum("ij,ij->i", self.centers, self.centers)
        else:
            self._x_sq = self._c_sq = None
        self._prepared = kernel.prepare(self.centers, self._c_sq)
        # Rows per block: each worker holds a block plus a product buffer.
        work = (1 - CACHE_FRACTION) * self.budget if self.cached else self.budget
        per_row = max(1, self.m * itemsize * 2)
        target = max(16, BLOCK_BYTES // max(1, self.m * itemsize))
        self.block_rows = int(max(1, min(target, work // (per_row * self.n_jobs))))

    # ------------------------------------------------------------------ blocks
    @property
    def xp(self) -> Any:
        """The array namespace of the data."""
        return get_namespace(self.X)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.m)

    def block(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of K_nm (from the cache when there is one)."""
        if self._K is not None:
            return self._K[start:stop]
        x_sq = None if self._x_sq is None else self._x_sq[start:stop]
        return self.kernel.block(self.X[start:stop], self.centers, x_sq, None, self._prepared)

    def center_gram(self) -> np.ndarray:
        """K_mm = [k(c_i, c_j)], shape (m, m), exactly symmetric."""
        K = self.kernel.block(self.centers, self.centers, self._c_sq, None, self._prepared)
        return (K + K.T) / 2

    def diag(self) -> np.ndarray:
        """k(x_i, x_i) for the data points, shape (n,)."""
        return self.kernel.diag(self.X)

    def dense(self) -> np.ndarray:
        """The whole K_nm (cached afterwards when caching is on). Errors if over budget."""
        if self.nbytes_full > self.budget:
            raise ValueError(
                f"the {self.n} x {self.m} kernel matrix needs {self.nbytes_full / 1e9:.2f} GB, "
                f"more than memory_budget={self.budget / 1e9:.2f} GB"
            )
        self._ensure_cache(force=True)
        assert self._K is not None
        return self._K

    def release(self) -> None:
        """Drop the cached K_nm (it is recomputed, or re-cached, at the next product)."""
        self._K = None

    def _ensure_cache(self, force: bool = False, rhs: np.ndarray | None = None) -> Any:
        """Compute and keep K_nm (when caching is on, or ``force``). With ``rhs`` of shape
        (n, k), also return K_nm.T @ rhs, computed on the way while each block is in cache."""
        if self._K is not None or not (self.cached or force):
            return None
        K = self.xp.empty((self.n, self.m), dtype=self.dtype)

        def fill(start: int, stop: int) -> Any:
            acc = None if rhs is None else self.xp.zeros((self.m, rhs.shape[1]), self.dtype)
            for s in range(start, stop, self.block_rows):
                e = min(stop, s + self.block_rows)
                x_sq = None if self._x_sq is None else self._x_sq[s:e]
                self.kernel.block(self.X[s:e], self.centers, x_sq, None, self._prepared, K[s:e])
                if acc is not None and rhs is not None:
                    acc += K[s:e].T @ rhs[s:e]
            return acc

        parts = self._run_chunks(fill)
        self._K = K
        return None if rhs is None else sum(parts)

    def _chunks(self) -> list[tuple[int, int]]:
        bounds = np.linspace(0, self.n, self.n_jobs + 1).astype(int)
        return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    def _run_chunks(self, fn: Callable[[int, int], Any]) -> list[Any]:
        """Run ``fn(start, stop)`` on one contiguous row chunk per worker, BLAS single-threaded."""
        chunks = self._chunks()
        if len(chunks) <= 1:
            return [fn(a, b) for a, b in chunks]
        pool = _thread_pool(self.n_jobs)
        with _blas_controller().limit(limits=1, user_api="blas"):
            futures = [pool.submit(fn, a, b) for a, b in chunks]
            return [f.result() for f in futures]

    def _rows(self, start: int, stop: int, rows: int) -> list[tuple[int, int]]:
        return [(s, min(stop, s + rows)) for s in range(start, stop, rows)]

    # ---------------------------------------------------------------- products
    def _as_2d(self, B: np.ndarray, rows: int, name: str) -> tuple[np.ndarray, bool]:
        B = self.xp.asarray(B)
        vec = B.ndim == 1
        if vec:
            B = B[:, None]
        if B.ndim != 2 or B.shape[0] != rows:
            raise ValueError(f"{name} must have {rows} rows, got shape {B.shape}")
        return self.xp.ascontiguousarray(B, dtype=self.dtype), vec

    def matvec(self, B: np.ndarray) -> np.ndarray:
        """K_nm @ B for B of shape (m,) or (m, k); returns (n,) or (n, k)."""
        B2, vec = self._as_2d(B, self.m, "B")
        self._ensure_cache()
        if self._K is not None:
            out = self._K @ B2
        else:
            out = self.xp.empty((self.n, B2.shape[1]), dtype=self.dtype)

            def work(start: int, stop: int) -> None:
                for s, e in self._rows(start, stop, self.block_rows):
                    out[s:e] = self.block(s, e) @ B2

            self._run_chunks(work)
        return out[:, 0] if vec else out

    def rmatvec(self, A: np.ndarray) -> np.ndarray:
        """K_nm.T @ A for A of shape (n,) or (n, k); returns (m,) or (m, k)."""
        A2, vec = self._as_2d(A, self.n, "A")
        if self._K is None and self.cached:  # first product: build the cache on the way
            out = self._ensure_cache(rhs=A2)
        elif self._K is not None:
            out = self._K.T @ A2
        else:

            def work(start: int, stop: int) -> np.ndarray:
                acc = self.xp.zeros((self.m, A2.shape[1]), dtype=self.dtype)
                for s, e in self._rows(start, stop, self.block_rows):
                    acc += self.block(s, e).T @ A2[s:e]
                return acc

            out = sum(self._run_chunks(work))
        return out[:, 0] if vec else out

    def fused(
        self, B: np.ndarray, weights: np.ndarray | None = None, return_matvec: bool = False
    ) -> Any:
        """K_nm.T diag(w) (K_nm B) in one pass over the rows.

        Parameters
        ----------
        B : ndarray of shape (m,) or (m, k)
        weights : ndarray of shape (n,) or None
            Per-row weights w (None: all ones).
        return_matvec : bool
            Also return ``K_nm @ B`` (shape (n,) or (n, k)), computed on the way.

        Returns
        -------
        ndarray of shape (m,) or (m, k), and the matvec when asked.
        """
        B2, vec = self._as_2d(B, self.m, "B")
        w = None if weights is None else self.xp.asarray(weights, dtype=self.dtype)
        self._ensure_cache()
        k = B2.shape[1]
        by_column = k <= GEMV_MAX_COLUMNS
        rows = self.block_rows
        if self._K is not None:  # no kernel evaluation: size blocks for the products
            target = CACHED_GEMV_BLOCK_BYTES if by_column else CACHED_GEMM_BLOCK_BYTES
            rows = max(16, target // (self.m * self.dtype.itemsize))
        KB = self.xp.empty((self.n, k), dtype=self.dtype) if return_matvec else None
        Bcols = [self.xp.ascontiguousarray(B2[:, j]) for j in range(k)] if by_column else []

        def work(start: int, stop: int) -> np.ndarray:
            acc = self.xp.zeros((k, self.m) if by_column else (self.m, k), dtype=self.dtype)
            for s, e in self._rows(start, stop, rows):
                Kb = self.block(s, e)
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

        out = sum(self._run_chunks(work))
        if vec:
            out = out[:, 0]
            KB = None if KB is None else KB[:, 0]
        return (out, KB) if return_matvec else out

    def row_sq_norms(self, T: np.ndarray) -> np.ndarray:
        """Squared norms of the rows of K_nm T, shape (n,), for T of shape (m, r).

        The quadratic forms k_i^T T T^T k_i without forming an n x n (or n x r) matrix: one
        pass over the row blocks, O(n m r). Taking a factor T rather than the product T T^T
        avoids the cancellation of a quadratic form with large entries of both signs.
        """
        T = self.xp.ascontiguousarray(T, dtype=self.dtype)
        if T.ndim != 2 or T.shape[0] != self.m:
            raise ValueError(f"T must have shape ({self.m}, r), got {T.shape}")
        self._ensure_cache()
        out = self.xp.empty(self.n, dtype=self.dtype)

        def work(start: int, stop: int) -> None:
            for s, e in self._rows(start, stop, self.block_rows):
                KT = self.block(s, e) @ T
                out[s:e] = self.xp.einsum("ij,ij->i", KT, KT)

        self._run_chunks(work)
        return out

    def gram(self, weights: np.ndarray | None = None) -> np.ndarray:
        """K_nm.T diag(w) K_nm, shape (m, m), exactly symmetric."""
        w = None if weights is None else self.xp.asarray(weights, dtype=self.dtype)
        self._ensure_cache()

        def work(start: int, stop: int) -> np.ndarray:
            acc = self.xp.zeros((self.m, self.m), dtype=self.dtype)
            for s, e in self._rows(start, stop, self.block_rows):
                Kb = self.block(s, e)
                acc += Kb.T @ (Kb if w is None else Kb * w[s:e, None])
            return acc

        G = sum(self._run_chunks(work))
        return (G + G.T) / 2
