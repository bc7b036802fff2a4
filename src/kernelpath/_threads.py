"""BLAS threads during a fit: one, except in dense algebra large enough to pay for more.

After each threaded call, OpenBLAS's threads keep spinning for about 0.1 s (2^28 cycles,
``OPENBLAS_THREAD_TIMEOUT``, read only when the library loads) before they sleep. A fit
alternates short BLAS calls (preconditioner solves, m x k products) with its own worker
threads (one per core: the kernel blocks) and, with pip's wheels, with the other OpenBLAS
(NumPy and SciPy each bundle one): each switch finds the cores taken by spinning threads.
Measured on this project's 2-core machine (``benchmarks/threads.py``, docs/design.md "BLAS
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
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from threadpoolctl import ThreadpoolController

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "DENSE_MIN_FLOPS",
    "blas_controller",
    "fit_threads",
    "dense_threads",
    "free_cores",
    "stream_threads",
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

_controller: ThreadpoolController | None = None
#: BLAS's threads before the fit that holds them to one (None: no such fit running)
_outer: ContextVar[int | None] = ContextVar("kernelpath_blas_threads", default=None)


def blas_controller() -> ThreadpoolController:
    """threadpoolctl's controller of the BLAS libraries loaded (made once)."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller


def _blas_threads() -> int:
    libs = blas_controller().select(user_api="blas").lib_controllers
    return max((lib.num_threads for lib in libs), default=1)


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
def _one_thread_inside(outer: Callable[[], int]) -> Iterator[None]:
    """BLAS on one thread inside, ``outer()`` (called only here) the threads that
    ``dense_threads`` may take; nested: nothing."""
    if _outer.get() is not None:
        yield
        return
    token = _outer.set(outer())
    try:
        with blas_controller().limit(limits=1, user_api="blas"):
            yield
    finally:
        _outer.reset(token)


def _free_of_before() -> int:
    before = _blas_threads()
    return free_cores(before) if before > 1 else before


def fit_threads() -> AbstractContextManager[None]:
    """BLAS on one thread inside (a fit), ``dense_threads`` excepted, which get at most
    the cores other processes leave free; nested: nothing."""
    return _one_thread_inside(_free_of_before)


@contextmanager
def dense_threads(flops: float) -> Iterator[None]:
    """Inside ``fit_threads``: BLAS on its threads from before the fit (at most the cores
    free when the fit started) for an operation of at least ``DENSE_MIN_FLOPS`` (``flops``:
    its floating-point operations); else nothing."""
    outer = _outer.get()
    if outer is None or outer <= 1 or flops < DENSE_MIN_FLOPS:
        yield
        return
    with blas_controller().limit(limits=outer, user_api="blas"):
        yield


def stream_threads() -> AbstractContextManager[None]:
    """BLAS on one thread inside (an online learner's update or prediction), without the
    count of busy cores (``dense_threads`` inside does nothing); nested: nothing."""
    return _one_thread_inside(lambda: 1)


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
