"""The operators over the row chunks of a dask array, on a Dask cluster (the Dask side of
the operator layer: ``kernelpath.workspace`` builds it for a dask array).

``DaskKernelOperator`` offers the products of ``operators.KernelOperator`` (``matvec``,
``rmatvec``, ``fused``, ``gram``, ``center_gram``, ``diag``, ``row_sq_norms``,
``projected_rows``) for X a dask array chunked by rows. Each product is one task per chunk
that evaluates the chunk's kernel block with a ``KernelOperator`` where the chunk is, built
by the fit's workspace with the task's share of the budget (the operator stays the only code
that computes kernel blocks), then a tree sum of the m-vectors
or m x m matrices (``SPLIT_EVERY`` at a time), or the chunks' n-vectors gathered in order.

What travels where:

- the centers (m x d), scattered once per operator to one worker, from which the tasks'
  workers fetch them (not ``broadcast=True``: its replication loops forever when a worker
  dies during it, dask/distributed#5704; measured here, a fit hung for 9 minutes after one
  worker of two was killed; and the active memory manager drops the replicas anyway);
- per product, the small state: an m x k block of coefficients, embedded in the tasks;
  n-sized inputs (targets, weights) are cut into the chunks' pieces, the weights persisted
  on the workers once and reused by every product;
- back to the client: m x k sums, or (``matvec``, ``diag``) n-sized results; never X.

Memory. ``memory_budget`` is per worker, shared by its threads (each running task gets
its share). When K_nm fits in ``CACHE_FRACTION`` of the budgets
of all the workers (and half their memory limits), each chunk's block is computed once and
kept on its worker (persisted); otherwise every product recomputes the blocks from the
chunks (read again from their source). A lost worker's chunks are recomputed from the graph;
a product whose graph names data the cluster lost for good (the scattered centers, when
the workers that held them are gone) is cancelled by the scheduler, and the operator then
scatters the centers again and builds the product anew (``LOST_DATA_RETRIES`` times). A
scatter that meets the connections of workers still going down (``OSError``, dask's
``CommClosedError``) waits and is tried again (``SCATTER_RETRIES`` times).

No ``distributed.Client``: dask's local scheduler (threads of this process) runs the tasks.
"""

from __future__ import annotations

import copy
import operator
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any

import numpy as np
import scipy.sparse
from threadpoolctl import threadpool_limits

from . import _backend as B
from ._validation import check_dask_rows, check_int
from ._version import __version__
from .inputs import is_sparse
from .kernels import Kernel
from .operators.blocks import product_dtype
from .operators.cache import CACHE_FRACTION
from .operators.features import feature_moments
from .operators.protocol import KernelProducts, OperatorBuilder

__all__ = ["DaskKernelOperator", "dask_feature_moments", "DaskFeatureOperator", "dask_predict"]

#: Partial sums added per task of the tree reduction.
SPLIT_EVERY = 8

#: Times a product is built again from the centers and the chunks after the cluster lost
#: data its graph named (every worker holding the scattered centers gone, say).
LOST_DATA_RETRIES = 2

#: Times a scatter of the centers is tried again after a closed connection (the cluster
#: replacing lost workers), waiting ``SCATTER_WAIT_S`` seconds, doubled at each try.
SCATTER_RETRIES = 4
SCATTER_WAIT_S = 0.5

_checked_clients: set[str] = set()
_check_lock = threading.Lock()


def _dask() -> Any:
    try:
        import dask
    except ImportError as exc:  # pragma: no cover - dask is what gave us the array
        raise ImportError('dask arrays need dask: pip install "kernelpath[dask]"') from exc
    return dask


def active_client() -> Any:
    """The active ``distributed.Client``, or None (dask's local scheduler)."""
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:
        return None


def _threads_here() -> int:
    """Tasks that can run at once where this task runs: the threads of its Dask worker, or
    (dask's local scheduler) the threads ``_compute`` gives it."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError):
        return B.n_threads()


def _task_budget(budget: int) -> int:
    """A task's share of the per-worker ``memory_budget``: the worker's threads run one
    task each, and their blocks together stay inside the budget."""
    return max(budget // _threads_here(), 2**20)


def _worker_version() -> str:
    """Run on every worker: the version of kernelpath it imports."""
    return __version__


def check_workers(client: Any) -> None:
    """Check once per scheduler that every worker imports this version of kernelpath.

    Raises
    ------
    RuntimeError
        Naming the workers that cannot import it, or that have another version.
    """
    address = str(getattr(client, "scheduler", None) and client.scheduler.address)
    with _check_lock:
        if address in _checked_clients:
            return
    try:
        versions = client.run(_worker_version, on_error="return")
    except Exception as exc:  # noqa: BLE001 - any failure here means unusable workers
        raise RuntimeError(
            f"the workers of {client} cannot run kernelpath ({type(exc).__name__}: {exc}); "
            "install kernelpath on every worker (the image or environment the cluster starts)"
        ) from exc
    bad = {w: v for w, v in versions.items() if isinstance(v, BaseException)}
    if bad:
        w, err = next(iter(bad.items()))
        raise RuntimeError(
            f"{len(bad)} of the {len(versions)} workers of the Dask client cannot import "
            f"kernelpath (worker {w}: {type(err).__name__}: {err}); install kernelpath "
            f"{__version__} on every worker (the image or environment the cluster starts)"
        )
    other = {w: v for w, v in versions.items() if v != __version__}
    if other:
        w, v = next(iter(other.items()))
        raise RuntimeError(
            f"the workers run kernelpath {v} (worker {w}), the client {__version__}: install "
            "the same version everywhere"
        )
    if not versions:
        raise RuntimeError("the Dask client has no workers: start some (cluster.scale(n))")
    with _check_lock:
        _checked_clients.add(address)


def _sum(*parts: Any) -> Any:
    """The sum of arrays, or of tuples of arrays (elementwise)."""
    if isinstance(parts[0], tuple):
        return tuple(_sum(*group) for group in zip(*parts, strict=True))
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def _tree_sum(parts: list[Any]) -> Any:
    """The sum of delayed parts, ``SPLIT_EVERY`` per task."""
    delayed = _dask().delayed
    while len(parts) > 1:
        parts = [
            delayed(_sum, pure=True)(*parts[i : i + SPLIT_EVERY])
            for i in range(0, len(parts), SPLIT_EVERY)
        ]
    return parts[0]


def _chunk_rows(xb: Any, dtype: Any = None) -> Any:
    """A chunk's rows as the in-process operators take them: a contiguous array, or CSR for
    a scipy.sparse chunk (a dask array of sparse chunks stays sparse on the workers)."""
    if is_sparse(xb):
        return scipy.sparse.csr_matrix(xb, dtype=dtype or xb.dtype)
    return np.ascontiguousarray(xb, dtype=dtype)


class _Persisted:
    """A chunk's operator whose block was computed on its worker and is kept there."""

    def __init__(self, op: KernelProducts) -> None:
        self.op = op


def _chunk_operator(
    xb: np.ndarray, centers: np.ndarray, kernel: Kernel, builder: OperatorBuilder, persist: bool
) -> Any:
    """The operator of one chunk (on its worker), built by the fit's workspace with the
    task's share of its budget, on one thread; with ``persist`` its block is computed now
    and kept (the operator's cache)."""
    xb = _chunk_rows(xb, centers.dtype)
    if not np.isfinite(xb.data if is_sparse(xb) else xb).all():
        raise ValueError("X contains NaN or infinity")
    task = builder.share(_task_budget(builder.budget)).threads(1)
    if persist:
        need = int(xb.shape[0] * centers.shape[0] * centers.dtype.itemsize / CACHE_FRACTION) + 2**21
        op = task.share(max(task.budget, need)).operator(xb, centers, kernel, cache=True)
        op.dense()
        return _Persisted(op)
    return task.operator(xb, centers, kernel, cache=False)


def _apply(
    src: Any,
    centers: np.ndarray,
    kernel: Kernel,
    builder: OperatorBuilder,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """``method`` of a chunk's operator (persisted, or built here from the chunk's rows)."""
    op = (
        src.op
        if isinstance(src, _Persisted)
        else _chunk_operator(src, centers, kernel, builder, False)
    )
    return getattr(op, method)(*args, **kwargs)


class _Chunks:
    """The row chunks of a dask array as delayed objects, and their row ranges."""

    def __init__(self, X: Any) -> None:
        self.parts = list(X.to_delayed().ravel())
        self.bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.parts)

    def pieces(self, A: np.ndarray | None) -> list[Any]:
        """The rows of an n-sized array that go with each chunk."""
        if A is None:
            return [None] * len(self.parts)
        return [A[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]


def _compute(*objs: Any) -> Any:
    """Compute on the active client, else on the local scheduler with BLAS on one thread
    per task (the tasks are the parallelism)."""
    dask = _dask()
    if active_client() is not None:
        return dask.compute(*objs)
    with threadpool_limits(limits=1, user_api="blas"):
        return dask.compute(*objs, scheduler="threads", num_workers=B.n_threads())


class DaskKernelOperator:
    """``KernelOperator``'s products for X a dask array chunked by rows.

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
        Chunked along rows only (one chunk of columns).
    centers : ndarray of shape (m, d)
    kernel : Kernel
    builder : OperatorBuilder
        The fit's workspace (``kernelpath.workspace.Workspace``): its budget is per worker,
        and it builds the operators of the chunks on the workers.
    cache : {"auto", True, False}, default="auto"
        Keep K_nm's chunks on the workers: when they fit ("auto"), always (True) or never.
    expected_passes : int or None
        Products the caller will make: "auto" keeps the blocks only for more than two.
    """

    def __init__(
        self,
        X: Any,
        centers: Any,
        kernel: Kernel,
        builder: OperatorBuilder,
        cache: bool | str = "auto",
        expected_passes: int | None = None,
    ) -> None:
        dask = _dask()
        X = check_dask_rows(X)
        if cache not in ("auto", True, False):
            raise ValueError(f"cache must be 'auto', True or False, got {cache!r}")
        self.dtype = B.compute_dtype(X, centers)
        self.X = X.astype(self.dtype) if X.dtype != self.dtype else X
        self.centers = (  # CSR centers (very sparse rows) stay CSR
            _chunk_rows(centers, self.dtype)
            if is_sparse(centers)
            else np.ascontiguousarray(B.to_numpy(centers), dtype=self.dtype)
        )
        if self.centers.ndim != 2 or self.centers.shape[1] != X.shape[1]:
            raise ValueError(
                f"X and centers must be 2-D with the same number of columns, got shapes "
                f"{tuple(X.shape)} and {self.centers.shape}"
            )
        self.kernel = kernel
        self.device = B.NUMPY
        self.lazy = True
        self.n, self.m = int(X.shape[0]), int(self.centers.shape[0])
        self.builder = builder
        self.budget = builder.budget
        self.cache_mode = cache
        self.expected_passes = check_int(expected_passes, "expected_passes", 1, allow_none=True)
        self.nbytes_full = self.n * self.m * self.dtype.itemsize
        self.chunks = _Chunks(self.X)
        self.client = active_client()
        if self.client is not None:
            check_workers(self.client)
            self._centers_ref: Any = self._scattered()
        else:
            self._centers_ref = dask.delayed(self.centers, pure=True)
        self._ops: list[Any] | None = None
        self._persist: bool | None = None
        self._weights_key: Any = None
        self._weights_pieces: list[Any] = []

    # ------------------------------------------------------------------ the plan
    def _workers_memory(self) -> tuple[int, int]:
        """(number of workers, the smallest memory limit among them; 0: none)."""
        if self.client is None:
            return 1, 0
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        limits = [int(w.get("memory_limit") or 0) for w in info.values()]
        return max(1, len(info)), min(limits) if limits else 0

    def _decide_persist(self) -> bool:
        if self._persist is None:
            if self.cache_mode is False:
                self._persist = False
            elif self.cache_mode is True:
                self._persist = True
            else:
                workers, limit = self._workers_memory()
                room = CACHE_FRACTION * self.budget * workers
                if limit:
                    room = min(room, 0.5 * limit * workers)
                passes = self.expected_passes
                self._persist = bool(self.nbytes_full <= room and (passes is None or passes > 2))
        return self._persist

    @property
    def cached(self) -> bool:
        return bool(self._ops is not None)

    @property
    def cached_fraction(self) -> float:
        return 1.0 if self.cached else 0.0

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.m)

    def _sources(self) -> list[Any]:
        """Per chunk: its persisted operator, or its rows (the block is built in the task)."""
        if self._decide_persist() and self._ops is None:
            dask = _dask()
            built = [
                dask.delayed(_chunk_operator, pure=True)(
                    xb, self._centers_ref, self.kernel, self.builder, True
                )
                for xb in self.chunks.parts
            ]
            if self.client is not None:
                self._ops = list(dask.persist(*built))
            else:
                self._ops = list(
                    dask.persist(*built, scheduler="threads", num_workers=B.n_threads())
                )
        return self._ops if self._ops is not None else self.chunks.parts

    def _tasks(self, method: str, per_chunk: list[tuple[Any, ...]], **kwargs: Any) -> list[Any]:
        delayed = _dask().delayed
        return [
            delayed(_apply, pure=True)(
                src, self._centers_ref, self.kernel, self.builder, method, args, kwargs
            )
            for src, args in zip(self._sources(), per_chunk, strict=True)
        ]

    def _computed(self, build: Callable[[], list[Any]]) -> Any:
        """Compute the objects ``build`` makes; on a cluster that cancels them for lost data,
        scatter the centers again and build them anew."""
        for attempt in range(LOST_DATA_RETRIES + 1):
            try:
                return _compute(*build())
            except CancelledError:
                if self.client is None or attempt == LOST_DATA_RETRIES:
                    raise
                self._centers_ref = self._scattered()
                self._ops = None
        raise AssertionError("unreachable")  # pragma: no cover

    def _scattered(self) -> Any:
        """The centers scattered to the workers, tried again while the connections of lost
        workers close (the scheduler may still list a killed worker and send it a part)."""
        for attempt in range(SCATTER_RETRIES + 1):
            try:
                return self.client.scatter(self.centers, hash=False)
            except OSError:
                if attempt == SCATTER_RETRIES:
                    raise
                time.sleep(SCATTER_WAIT_S * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _summed(self, method: str, per_chunk: list[tuple[Any, ...]], **kwargs: Any) -> Any:
        return self._computed(lambda: [_tree_sum(self._tasks(method, per_chunk, **kwargs))])[0]

    def _stacked(self, method: str, per_chunk: list[tuple[Any, ...]], **kwargs: Any) -> Any:
        parts = self._computed(lambda: self._tasks(method, per_chunk, **kwargs))
        return np.concatenate(parts, axis=0)

    def product_dtype(self, A: Any) -> np.dtype:
        """The precision of a product with right-hand side ``A`` (the chunks' operators
        follow ``operators.blocks.product_dtype``)."""
        return product_dtype(self.dtype, A)

    def _host(self, A: Any, rows: int, name: str) -> tuple[np.ndarray, bool]:
        A2 = np.asarray(B.to_numpy(A), dtype=self.product_dtype(A))
        vec = A2.ndim == 1
        A2 = A2[:, None] if vec else A2
        if A2.ndim != 2 or A2.shape[0] != rows:
            raise ValueError(f"{name} must have {rows} rows, got shape {A2.shape}")
        return np.ascontiguousarray(A2), vec

    def _weight_pieces(self, weights: Any) -> list[Any]:
        """The weights' chunk pieces, scattered once (the solvers pass the same array at
        every iteration)."""
        if weights is None:
            return [None] * len(self.chunks)
        if self._weights_key is not weights:
            w = self._host(weights, self.n, "weights")[0][:, 0]
            dask = _dask()
            pieces = [dask.delayed(p, pure=True) for p in self.chunks.pieces(w)]
            if self.client is not None:  # kept on the workers, recomputable if one is lost
                pieces = list(dask.persist(*pieces))
            self._weights_key, self._weights_pieces = weights, list(pieces)
        return self._weights_pieces

    # ------------------------------------------------------------------ products
    def matvec(self, B_: Any, native: bool = False) -> np.ndarray:
        """K_nm @ B, gathered: shape (n,) or (n, k)."""
        B2, vec = self._host(B_, self.m, "B")
        out = self._stacked("matvec", [(B2,)] * len(self.chunks))
        return out[:, 0] if vec else out

    def rmatvec(self, A: Any, native: bool = False) -> np.ndarray:
        """K_nm.T @ A for A of shape (n,) or (n, k): shape (m,) or (m, k)."""
        A2, vec = self._host(A, self.n, "A")
        out = self._summed("rmatvec", [(p,) for p in self.chunks.pieces(A2)])
        return out[:, 0] if vec else out

    def fused(
        self, B_: Any, weights: Any = None, return_matvec: bool = False, native: bool = False
    ) -> Any:
        """K_nm.T diag(w) K_nm B (and K_nm B when asked), one task per chunk."""
        B2, vec = self._host(B_, self.m, "B")
        wp = self._weight_pieces(weights)
        per_chunk = [(B2, w) for w in wp]
        if not return_matvec:
            out = self._summed("fused", per_chunk)
            return out[:, 0] if vec else out
        delayed = _dask().delayed

        def build() -> list[Any]:
            tasks = self._tasks("fused", per_chunk, return_matvec=True)
            acc = _tree_sum([delayed(operator.getitem, pure=True)(t, 0) for t in tasks])
            return [acc] + [delayed(operator.getitem, pure=True)(t, 1) for t in tasks]

        res = self._computed(build)
        out, KB = res[0], np.concatenate(res[1:], axis=0)
        return (out[:, 0], KB[:, 0]) if vec else (out, KB)

    def gram(self, weights: Any = None, native: bool = False) -> np.ndarray:
        """K_nm.T diag(w) K_nm, shape (m, m)."""
        G = self._summed("gram", [(w,) for w in self._weight_pieces(weights)])
        return (G + G.T) / 2

    def center_gram(
        self, native: bool = False, out: Any = None, rows: tuple[int, int] | None = None
    ) -> np.ndarray:
        """K_mm (computed here: the centers are here), or written into ``out`` (its
        ``rows`` only, given them)."""
        op = self.builder.operator(self.centers, self.centers, self.kernel)
        return op.center_gram(out=out, rows=rows)

    def center_operator(self, memory_budget: int, columns: Any = None) -> Any:
        """K_mm (or K_m,S) as a streamed operator here (the centers are here)."""
        op = self.builder.operator(self.centers, self.centers, self.kernel)
        return op.center_operator(memory_budget, columns)

    def diag(self, native: bool = False) -> np.ndarray:
        return self._stacked("diag", [()] * len(self.chunks))

    def row_sq_norms(self, T: Any, native: bool = False) -> np.ndarray:
        T2 = np.ascontiguousarray(B.to_numpy(T), dtype=self.product_dtype(T))
        return self._stacked("row_sq_norms", [(T2,)] * len(self.chunks))

    def projected_rows(self, T: Any, quad: Any, lin: Any) -> tuple[np.ndarray, np.ndarray]:
        T2 = np.ascontiguousarray(B.to_numpy(T), dtype=self.product_dtype(T))
        per_chunk = [(T2, quad, lin)] * len(self.chunks)
        parts = self._computed(lambda: self._tasks("projected_rows", per_chunk))
        return (
            np.concatenate([p[0] for p in parts], axis=0),
            np.concatenate([p[1] for p in parts], axis=0),
        )

    def dense(self, native: bool = False) -> np.ndarray:
        raise ValueError(
            "the whole kernel matrix of a dask array is not gathered on the client: this "
            "method needs X in memory"
        )

    def release(self) -> None:
        """Drop the persisted blocks (recomputed at the next product if the plan keeps them)."""
        self._ops = None
        self._persist = None
        self._weights_key, self._weights_pieces = None, []


# ------------------------------------------------------------------ random features
def _chunk_moments(
    xb: np.ndarray, transform: Any, D: int, Y: np.ndarray, w: Any
) -> tuple[Any, Any]:
    return feature_moments(transform, _chunk_rows(xb), D, Y, w)


def dask_feature_moments(
    transform: Any, X: Any, n_features: int, Y: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``features.feature_moments`` over the chunks of a dask array: (F^T W F, F^T W Y)
    summed over the chunks (D x D and D x k per chunk)."""
    dask = _dask()
    chunks = _Chunks(X)
    Y2 = np.asarray(Y)
    Y2 = Y2[:, None] if Y2.ndim == 1 else Y2
    ys, ws = chunks.pieces(Y2), chunks.pieces(weights)
    parts = [
        dask.delayed(_chunk_moments, pure=True)(xb, transform, n_features, yp, wp)
        for xb, yp, wp in zip(chunks.parts, ys, ws, strict=True)
    ]
    G, b = _compute(_tree_sum(parts))[0]
    return (G + G.T) / 2, b


def _chunk_features_apply(
    xb: np.ndarray,
    transform: Any,
    n_features: int,
    builder: OperatorBuilder,
    method: str,
    *args: Any,
) -> Any:
    op = builder.feature_operator(transform, _chunk_rows(xb), n_features)
    return getattr(op, method)(*args)


class DaskFeatureOperator:
    """``FeatureOperator`` (F @ M, the projected rows) for X a dask array chunked by rows:
    one task per chunk, the n-sized results gathered in order."""

    def __init__(self, transform: Any, X: Any, n_features: int, builder: OperatorBuilder) -> None:
        self.transform, self.X, self.n_features = transform, check_dask_rows(X), n_features
        self.builder = builder
        self.dtype = B.dtype_of(self.X)
        self.device = B.NUMPY
        self.chunks = _Chunks(self.X)

    def _run(self, method: str, *args: Any) -> list[Any]:
        d = _dask().delayed
        return list(
            _compute(
                *[
                    d(_chunk_features_apply, pure=True)(
                        xb, self.transform, self.n_features, self.builder, method, *args
                    )
                    for xb in self.chunks.parts
                ]
            )
        )

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.X.shape[0]), self.n_features)

    def matvec(self, M: Any, native: bool = False) -> np.ndarray:
        return np.concatenate(self._run("matvec", np.asarray(B.to_numpy(M))), axis=0)

    def projected_rows(self, T: Any, quad: Any, lin: Any) -> tuple[np.ndarray, np.ndarray]:
        parts = self._run("projected_rows", B.to_numpy(T), quad, lin)
        return (
            np.concatenate([p[0] for p in parts], axis=0),
            np.concatenate([p[1] for p in parts], axis=0),
        )

    def release(self) -> None:
        """Nothing is kept."""


# ------------------------------------------------------------------ predictions
def _predict_chunk(xb: np.ndarray, model: Any, method: str) -> np.ndarray:
    return np.asarray(getattr(model, method)(_chunk_rows(xb)))


def _predictor(model: Any) -> Any:
    """A shallow copy of a fitted estimator without its path (which may hold the fit's
    operators, and is not needed to predict): what the workers receive."""

    pred = copy.copy(model)
    for name in ("path_", "_center_info", "_fmap"):
        pred.__dict__.pop(name, None)
    return pred


def dask_predict(model: Any, X: Any, method: str, n_outputs: int | None) -> Any:
    """``model.<method>`` of every chunk of X, lazily: a dask array of shape (n,) or
    (n, n_outputs) chunked like X's rows (the model is sent once per worker, as one node
    of the graph)."""
    import dask.array as da

    X = check_dask_rows(X)
    dask = _dask()
    ref = dask.delayed(_predictor(model), pure=True, traverse=False)
    probe = _predict_chunk(np.zeros((1, X.shape[1]), dtype=X.dtype), model, method)
    if probe.ndim == 1:
        return da.map_blocks(
            _predict_chunk, X, ref, method, drop_axis=1, dtype=probe.dtype, meta=probe[:0]
        )
    return da.map_blocks(
        _predict_chunk,
        X,
        ref,
        method,
        chunks=(X.chunks[0], (probe.shape[1],)),
        dtype=probe.dtype,
        meta=probe[:0],
    )
