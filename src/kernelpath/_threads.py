"""BLAS threads during a fit: one, except in dense algebra large enough to pay for more.

After each threaded call, OpenBLAS's threads keep spinning for about 0.1 s (2^28 cycles,
``OPENBLAS_THREAD_TIMEOUT``, read only when the library loads) before they sleep. A fit
alternates short BLAS calls (preconditioner solves, m x k products) with its own worker
threads (one per core: the kernel blocks) and, with pip's wheels, with the other OpenBLAS
(NumPy and SciPy each bundle one): each switch finds the cores taken by spinning threads.
Measured on this project's 2-core machine (``benchmarks/results/threads.json``, docs/design.md "BLAS
threads during a fit"): adult's default Nyström fit 5.79 s with the libraries' own threads,
3.93 s with BLAS on one thread throughout, 3.62 s with the spinning cut short by the
environment variable, 3.88 s by this module's rule; random features on ijcnn1 8.50, 6.09,
5.73 and 5.65 s.

So ``fit_threads`` holds BLAS to one thread for the whole fit, and ``dense_threads`` gives
the threads back (as many as there were before the fit) around a dense operation of at
least ``DENSE_MIN_FLOPS``: the m x m factorizations and eigendecompositions, where more
threads save more than the spinning after them costs.

On a busy machine those threads are fewer: a threaded OpenBLAS call whose threads wait at
its barriers for one the scheduler gave to another process spins for its time slice (a
1000 x 1000 ``eigh`` took 7 s on two threads beside two CPU-bound processes, 0.15 s on one).
So ``fit_threads`` counts, when the fit starts, the tasks of other processes that are
running or ready to run (``/proc/loadavg``'s running count, less this process's running
threads; the least of ``LOAD_SAMPLES`` readings) and gives the dense operations at most
the cores they leave free, at least one (``free_cores``).

The online learners' updates and predictions (``one_blas_thread``) run BLAS on one thread
without that count: their operations are rank-one updates and triangular solves of D x D
factors, which two threads do not speed up, and a reading of the load (1.4 ms) costs more
than a sample's update.

The libraries' thread counts are settings of the whole process, so the scopes are counted
across threads under one lock: the first scope to start saves every library's count and
sets it to one, the last to end restores the saved counts exactly, whatever the order in
which concurrent scopes end. Fits (and the public functions that do a fit's work) run one
at a time in a process (``FIT_LOCK``): each one already uses every core, and a fit's dense
steps then get the same threads in a thread as they would alone, so that a fit in a thread
gives the serial fit's model bit for bit (OpenBLAS's results change at rounding level with
its thread count, even a GEMM's). Predictions and the online learners do not wait for a
running fit: their workers run beside it on the count the fit has set.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from threadpoolctl import ThreadpoolController

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "DENSE_MIN_FLOPS",
    "FIT_LOCK",
    "blas_controller",
    "fit_threads",
    "dense_threads",
    "free_cores",
    "stream_threads",
    "worker_threads",
    "one_blas_thread",
    "fit_threaded",
]

#: A dense operation of at least this many floating-point operations runs on the threads
#: BLAS had before the fit (an eigendecomposition of m = 800, 0.06 s on one core here; a
#: Cholesky factor of m = 1,960). 1e9 (m = 600) was 10% slower on adult's default fit, whose
#: width screen's 640 x 640 eigendecompositions are followed by the workers
#: (benchmarks/results/threads.json).
DENSE_MIN_FLOPS = 2.5e9

#: Readings of the machine's running tasks at a fit's start, 0.5 ms apart; the least is kept
#: (a competitor that runs throughout is in all of them, a passing task in few).
LOAD_SAMPLES = 3

#: Held by the fit that runs: fits in one process run one at a time (re-entrant: a fit's
#: own steps that are public functions nest in it).
FIT_LOCK = threading.RLock()

_controller: ThreadpoolController | None = None
_controller_lock = threading.Lock()
#: BLAS's threads for this thread's fit's dense work (None: no fit in this thread)
_outer: ContextVar[int | None] = ContextVar("kernelpath_blas_threads", default=None)
#: whether this thread is inside a scope already (nested scopes change nothing)
_inside_scope: ContextVar[bool] = ContextVar("kernelpath_blas_scope", default=False)


class _Counts:
    """The process's scopes: how many run, the libraries' counts saved by the first, the
    dense steps running (all of the fit that holds ``FIT_LOCK``), and torch's the same."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.scopes = 0
        self.saved: list[int] = []  # every BLAS library's threads when the first scope started
        self.dense = 0
        self.torch_scopes = 0
        self.torch_before: int | None = None

    @property
    def before(self) -> int:
        """BLAS's threads when the first scope started (the most of any library)."""
        return max(self.saved, default=1)


_counts = _Counts()


def blas_controller(refresh: bool = False) -> ThreadpoolController:
    """threadpoolctl's controller of the BLAS libraries loaded (made once; again with
    ``refresh``, which finds the libraries loaded since, 1.4 ms)."""
    global _controller
    with _controller_lock:
        if _controller is None or refresh:
            _controller = ThreadpoolController()
        return _controller


def _blas_libraries() -> list[Any]:
    return list(blas_controller().select(user_api="blas").lib_controllers)


def _blas_threads() -> int:
    return max((lib.num_threads for lib in _blas_libraries()), default=1)


def _set_blas(threads: int | list[int]) -> None:
    """Set every BLAS library's threads (one count for all, or one per library), from any
    thread. threadpoolctl 3.8 lets only its "controlling" thread change a process-wide
    OpenBLAS pool and silently ignores the others; here ``_counts.lock`` orders the
    changes, so each call takes that control and gives it back."""
    libs = _blas_libraries()
    counts = threads if isinstance(threads, list) else [threads] * len(libs)
    for lib, n in zip(libs, counts, strict=False):
        release = getattr(lib, "clear_controlling_thread", None)
        if release is not None:
            release(force=True)
        lib.set_num_threads(n)
        if release is not None:
            release(force=True)


def _own_running() -> int:
    """This process's threads that are running or ready to run (state R)."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                # the state follows the command name, which is in parentheses
                count += fh.read().rpartition(")")[2].split()[0] == "R"
        except OSError:  # a thread that ended meanwhile
            continue
    return count


def _others_running() -> int | None:
    """Other processes' tasks running or ready to run now (None where /proc is not)."""
    readings = []
    try:
        for i in range(LOAD_SAMPLES):
            if i:
                time.sleep(0.0005)
            with open("/proc/loadavg") as fh:
                running = int(fh.read().split()[3].split("/")[0])
            readings.append(running - _own_running())
    except (OSError, ValueError, IndexError):
        return None
    return max(0, min(readings))


def free_cores(cores: int) -> int:
    """Of ``cores``, those that other processes leave free now (at least 1; all of them
    where the load cannot be read)."""
    others = _others_running()
    return cores if others is None else max(1, min(cores, cores - others))


@contextmanager
def _counted(refresh: bool = False) -> Iterator[int]:
    """BLAS on one thread while any scope of the process runs: the first scope saves the
    libraries' counts (``refresh``: finding the libraries loaded since the last) and sets
    them to one, the last restores them. Yields BLAS's threads from before the first
    scope."""
    with _counts.lock:
        if _counts.scopes == 0:
            if refresh:
                blas_controller(refresh=True)
            _counts.saved = [lib.num_threads for lib in _blas_libraries()]
            _set_blas(1)
        _counts.scopes += 1
        before = _counts.before
    try:
        yield before
    finally:
        with _counts.lock:
            _counts.scopes -= 1
            if _counts.scopes == 0:
                _counts.dense = 0
                _set_blas(_counts.saved)


@contextmanager
def _scope(outer: Callable[[int], int] | None) -> Iterator[None]:
    """A counted scope for this thread (nested: nothing). ``outer(before)``: the threads
    this thread's dense work may take (a fit's, which holds ``FIT_LOCK``); None: none."""
    if _inside_scope.get():
        yield
        return
    with FIT_LOCK if outer is not None else _no_lock(), _counted(outer is not None) as before:
        inside = _inside_scope.set(True)
        token = _outer.set(None if outer is None else outer(before))
        try:
            yield
        finally:
            _outer.reset(token)
            _inside_scope.reset(inside)


@contextmanager
def _no_lock() -> Iterator[None]:
    yield


def _free_of(before: int) -> int:
    return free_cores(before) if before > 1 else before


def fit_threads() -> AbstractContextManager[None]:
    """BLAS on one thread inside (a fit), ``dense_threads`` excepted, which get at most
    the cores other processes leave free; one fit at a time in the process; nested:
    nothing."""
    return _scope(_free_of)


@contextmanager
def dense_threads(flops: float) -> Iterator[None]:
    """Inside ``fit_threads``: BLAS on its threads from before the fit (at most the cores
    free when the fit started) for an operation of at least ``DENSE_MIN_FLOPS`` (``flops``:
    its floating-point operations); else nothing."""
    outer = _outer.get()
    if outer is None or outer <= 1 or flops < DENSE_MIN_FLOPS:
        yield
        return
    with _counts.lock:
        _counts.dense += 1
        _set_blas(outer)
    try:
        yield
    finally:
        with _counts.lock:
            _counts.dense = max(0, _counts.dense - 1)
            if _counts.dense == 0 and _counts.scopes > 0:
                _set_blas(1)


def stream_threads() -> AbstractContextManager[None]:
    """BLAS on one thread inside (an online learner's update or prediction), without the
    count of busy cores (``dense_threads`` inside does nothing) and without waiting for a
    running fit; nested: nothing."""
    return _scope(None)


@contextmanager
def worker_threads(torch_too: bool) -> Iterator[None]:
    """BLAS (and torch's intra-op pool, with ``torch_too``) on one thread while an
    operator's worker threads run. Inside a dense step of this thread's fit, BLAS is set to
    one thread for the workers and given back after; beside another thread's fit, BLAS is
    left at the count that fit has set."""
    own_dense = _outer.get() is not None and _counts.dense > 0
    with _scope(None), _torch_one_thread(torch_too):
        if own_dense:
            with _counts.lock:
                _set_blas(1)
        try:
            yield
        finally:
            if own_dense:
                outer = _outer.get()
                with _counts.lock:
                    if _counts.dense > 0 and outer is not None:
                        _set_blas(outer)


@contextmanager
def _torch_one_thread(active: bool) -> Iterator[None]:
    """torch's intra-op threads at one, counted as BLAS's are (torch's count is the
    process's too)."""
    torch = sys.modules.get("torch") if active else None
    if torch is None:
        yield
        return
    with _counts.lock:
        if _counts.torch_scopes == 0:
            _counts.torch_before = torch.get_num_threads()
            torch.set_num_threads(1)
        _counts.torch_scopes += 1
    try:
        yield
    finally:
        with _counts.lock:
            _counts.torch_scopes -= 1
            if _counts.torch_scopes == 0 and _counts.torch_before is not None:
                torch.set_num_threads(_counts.torch_before)
                _counts.torch_before = None


def _inside(context: Callable[[], AbstractContextManager[None]], function: F) -> F:
    """``function`` run inside ``context()``, called at each call (so that the context is
    the module's when called: the benchmarks replace it)."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with context():
            return function(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def fit_threaded(function: F) -> F:
    """``function`` run inside ``fit_threads`` (looked up when called): the public entry
    points that do a fit's dense work outside an estimator's ``fit`` (leverage scores, the
    effective dimension, ``learn_widths``, the Nyström feature map and the center
    selections). Inside a fit they nest and change nothing."""
    return _inside(lambda: fit_threads(), function)


def one_blas_thread(method: F) -> F:
    """``method`` run inside ``stream_threads`` (looked up when called)."""
    return _inside(lambda: stream_threads(), method)
