"""The rows of an operator's matrix as worker chunks: which rows are cached, whether caching
pays, and the threads that run a product over the chunks (``KernelOperator``'s plan).

The rows are split into one contiguous chunk per worker; the first rows of every chunk are
cached (as many as the plan allows; all of them when the whole matrix fits) and the rest
streamed: recomputed in blocks at every product by the operator's ``compute``. The first
product fills the cache, measuring on the way whether the page faults of fresh memory cost
less than the passes to come will save (``RowCache._fill``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .. import _backend as B
from .._threads import worker_threads

__all__ = ["RowCache", "CACHE_FRACTION"]

#: Fraction of the memory budget a cached K_nm (or its cached rows) may take; the rest is
#: working memory.
CACHE_FRACTION = 0.6
#: Read bandwidth of one worker over cached rows, for the cache-or-stream decision
#: (measured here: 17.8 GB/s for one thread, about 9-10 GB/s each when both cores read).
CACHED_READ_BYTES_PER_S = 8e9
#: Blocks the first product of a worker computes and copies into fresh cache memory to time
#: its page faults before deciding whether to cache the rest.
PROBE_BLOCKS = 2
#: While the cache fills, the faults of this many consecutive blocks are weighed against
#: what they save (the fill stops when they cost more).
FILL_WINDOW = 8
#: Caching must save this many times what its faults cost: near break-even the estimates
#: (read bandwidth, the compute time of a row under load) decide, and streaming is never
#: much slower while it keeps the memory free (measured: a fill that went on near
#: break-even cost a 200,000-point fit 12.3 s against 9.2 s streaming).
CACHE_MARGIN = 2.0

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

#: ``compute(start, stop, out, work)``: rows start:stop of the matrix, into ``out`` (None: a
#: new array) with the worker's scratch ``work``.
Compute = Callable[[int, int, Any, Any], Any]
#: ``buffers(worker)``: the worker's (block, scratch) buffers, reused block after block.
Buffers = Callable[[int], tuple[Any, Any]]


def _thread_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers != workers:  # noqa: SLF001
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="kernelpath")
        return _pool


class RowCache:
    """The worker chunks of an n x m matrix's rows and their cached prefixes.

    Parameters
    ----------
    n, m : int
        The matrix's shape.
    itemsize : int
        Bytes of one entry.
    device : Device
        Where the rows are computed (CUDA: no probe, one worker).
    n_jobs : int
        Worker threads (one chunk each).
    mode : {"auto", True, False}
        The operator's ``cache``.
    planned_rows : int
        Rows to cache (spread evenly over the chunks).
    like : array
        An array of the operator's backend and device, for the cache's allocation.
    """

    def __init__(
        self,
        n: int,
        m: int,
        itemsize: int,
        device: B.Device,
        n_jobs: int,
        mode: bool | str,
        planned_rows: int,
        like: Any,
    ) -> None:
        self.n, self.m, self.itemsize = n, m, itemsize
        self.device, self.n_jobs, self.mode = device, n_jobs, mode
        self.planned_rows = planned_rows
        self.like = like
        #: rows per block, set by the operator once the cache's share is known
        self.block_rows = 1
        #: per worker: (compute s, fault s, rows) of the probe, and whether it cached the rest
        self.probe: dict[int, tuple[float, float, int, bool]] = {}
        self.K: Any = None  # the cached rows (every chunk's cached prefix, in order)
        self.filled = False
        self._barrier: threading.Barrier | None = None
        self._stop = False
        self._passes: int | None = None
        self.plan(planned_rows)

    # ------------------------------------------------------------------ the plan
    def plan(self, n_cached: int) -> None:
        """Worker chunks and their cached prefixes: chunk w covers rows [a_w, b_w); rows
        [a_w, c_w) are cached at rows [o_w, o_w + c_w - a_w) of the cache."""
        bounds = np.linspace(0, self.n, self.n_jobs + 1).astype(int)
        self.chunks: list[tuple[int, int, int, int]] = []
        offset = 0
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if b <= a:
                continue
            size = (b - a) if n_cached >= self.n else (n_cached * (b - a)) // max(self.n, 1)
            self.chunks.append((int(a), int(b), int(a + size), offset))
            offset += size
        self.n_cached = offset

    @property
    def whole(self) -> bool:
        """Whether every row is cached."""
        return self.n_cached == self.n and self.n > 0

    @property
    def fraction(self) -> float:
        """Fraction of the rows cached."""
        return self.n_cached / self.n if self.n else 0.0

    def keep(self, K: Any) -> None:
        """``K``, the whole matrix computed at once, becomes the cache when it is planned."""
        if self.whole:
            self.K, self.filled = K, True

    def release(self) -> None:
        """Drop the cached rows; a measured plan is made again at the next product."""
        self.K = None
        self.filled = False
        if self.probe:
            self.plan(self.planned_rows)
            self.probe = {}

    # ------------------------------------------------------------------ blocks
    def blocks(
        self, worker: int, compute: Compute, buffers: Buffers, cached_rows: int | None = None
    ) -> Iterator[Any]:
        """Yield (start, stop, block) over the worker's chunk: its cached prefix (filled on
        the way by the first product, in blocks of ``cached_rows`` rows once filled) and its
        streamed rows, computed by ``compute`` into the worker's buffer (``buffers``). The
        operator passes its own methods at each product: the cache keeps no reference to
        it (an operator dropped by its caller is freed at once, with its buffers)."""
        a, b, c, o = self.chunks[worker]
        if c > a and self.K is None:
            self._allocate()
        if c > a:
            if self.filled:
                step = cached_rows or self.block_rows
                for s in range(a, c, step):
                    e = min(c, s + step)
                    yield s, e, self.K[o + s - a : o + e - a]
            else:
                yield from self._fill(worker, compute, buffers)
        a, b, c, o = self.chunks[worker]  # _fill may have shortened the cached prefix
        if c < b:
            blk, work = buffers(worker)
            for s in range(c, b, self.block_rows):
                e = min(b, s + self.block_rows)
                yield s, e, compute(s, e, blk[: e - s], work)

    def _fill(self, worker: int, compute: Compute, buffers: Buffers) -> Iterator[Any]:
        """The first product over the worker's cached prefix: compute its blocks into the
        cache, measuring whether that pays (with ``expected_passes`` and ``cache="auto"``).

        The first blocks are computed into the worker's buffer and then copied into the
        cache, timing the kernel work and the page faults of fresh memory apart; the workers
        decide together (``_decision``) whether the faults cost less than what the remaining
        passes save by reading rows instead of recomputing them. While caching goes on every
        block's fill time is watched: when the faults of the last ``FILL_WINDOW`` blocks
        (their fill time less the probe's compute time) cost more than they save, every
        worker stops caching and streams the rest. First-touch memory costs 0.05-0.2 s/GB
        on most machines, 1.4-3 s/GB here for memory freed seconds before, and not evenly:
        a small probe can land on memory that is still cheap (measured, docs/design.md)."""
        a, b, c, o = self.chunks[worker]
        s = a
        passes = self._passes
        adaptive = self.mode == "auto" and passes is not None and not self.device.is_cuda
        compute_row = saving_row = 0.0
        if adaptive and passes is not None:
            blk, work = buffers(worker)
            spent = fault = 0.0
            rows = 0
            # block 0 warms the buffers (their own first touch) and the libraries up; the
            # next PROBE_BLOCKS are timed
            for i in range(PROBE_BLOCKS + 1):
                if s >= c:
                    break
                e = min(c, s + self.block_rows)
                t0 = time.perf_counter()
                Kb = compute(s, e, blk[: e - s], work)
                t1 = time.perf_counter()
                self.K[o + s - a : o + e - a] = Kb
                t2 = time.perf_counter()
                if i:
                    spent, fault, rows = spent + (t1 - t0), fault + (t2 - t1), rows + e - s
                yield s, e, self.K[o + s - a : o + e - a]
                s = e
            worth, compute_row, saving_row = self._decision(worker, spent, fault, rows, passes)
            if not worth:
                self._stop = True
        recent: list[float] = []
        for t in range(s, c, self.block_rows):
            if adaptive and self._stop:
                self.chunks[worker] = (a, b, t, o)  # the rest of the prefix is streamed
                return
            e = min(c, t + self.block_rows)
            out = self.K[o + t - a : o + e - a]
            t0 = time.perf_counter()
            Kb = compute(t, e, out, buffers(worker)[1])
            if adaptive:
                recent.append((time.perf_counter() - t0) / (e - t) - compute_row)
                if len(recent) >= FILL_WINDOW and sum(recent[-FILL_WINDOW:]) > (
                    FILL_WINDOW * saving_row / CACHE_MARGIN
                ):
                    self._stop = True
            yield t, e, Kb

    def _decision(
        self, worker: int, compute: float, fault: float, rows: int, passes: int
    ) -> tuple[bool, float, float]:
        """(cache?, compute seconds per row, seconds a cached row saves): one decision for
        all workers (a worker that streams while the others read the cache would hold every
        pass up). They meet at a barrier with their probe timings; the cost per row of
        computing is the least disturbed worker's (the others' faults slow it down), that of
        faulting the mean."""
        self.probe[worker] = (compute, fault, rows, True)
        if self._barrier is not None:
            try:
                self._barrier.wait(timeout=60)
            except threading.BrokenBarrierError:  # a worker failed: decide alone
                pass
        probes = [p for p in self.probe.values() if p[2] > 0]
        if not probes:
            return True, 0.0, float("inf")
        per_row_compute = min(p[0] / p[2] for p in probes)
        per_row_fault = sum(p[1] for p in probes) / sum(p[2] for p in probes)
        per_row_read = self.m * self.itemsize / CACHED_READ_BYTES_PER_S
        saving = max(passes - 1, 0) * (per_row_compute - per_row_read)
        worth = per_row_fault * CACHE_MARGIN < saving
        self.probe[worker] = (compute, fault, rows, bool(worth))
        return bool(worth), per_row_compute, saving

    def _allocate(self) -> None:
        with _pool_lock:
            if self.K is None:
                self.K = B.empty((self.n_cached, self.m), self.like)
                self.filled = False

    # ------------------------------------------------------------------ threads
    def run_workers(self, fn: Callable[[int], Any]) -> list[Any]:
        """Run ``fn(worker)`` for every worker chunk, the libraries single-threaded."""
        workers = range(len(self.chunks))
        if len(self.chunks) <= 1:  # one chunk: the libraries use their own threads
            return [fn(w) for w in workers]
        pool = _thread_pool(self.n_jobs)
        with worker_threads(self.device.is_torch):
            futures = [pool.submit(fn, w) for w in workers]
            return [f.result() for f in futures]

    def run(self, fn: Callable[[int], Any], expected_passes: int | None) -> list[Any]:
        """A product: ``fn(worker)`` over ``blocks`` for every worker chunk. The first one
        fills the cache (the workers meet at a barrier to decide whether it pays, given the
        ``expected_passes`` of the caller)."""
        filling = self.n_cached > 0 and not self.filled
        if filling:
            self._stop = False
            self._passes = expected_passes
            parties = sum(1 for a, _, c, _ in self.chunks if c > a)
            probing = expected_passes is not None
            self._barrier = threading.Barrier(parties) if probing and parties > 1 else None
        barrier = self._barrier

        def guarded(worker: int) -> Any:
            try:
                return fn(worker)
            except BaseException:
                if barrier is not None:  # the others stop waiting for this worker
                    barrier.abort()
                raise

        try:
            out = self.run_workers(guarded)
        finally:
            self._barrier = None  # a lock: not kept (an operator's path may be pickled)
        if filling:
            self.filled = True
            self.n_cached = sum(c - a for a, _, c, _ in self.chunks)
        return out
