"""Compiled inner loops (Numba, with NumPy fallbacks) and LAPACK calls that release Python's
lock.

The rank-one Cholesky update and downdate are sequences of Givens rotations: each row
depends on the previous one, so a NumPy version costs k array operations per call (about
4 ms at k = 500 here, 250 updates per second), which the online learners cannot afford.
Compiled, a k = 500 update takes about 0.2 ms. ``HAVE_NUMBA`` tells whether Numba is
installed; it is imported and the loops compiled at the first update.

``fused_rows_float32`` is the CG pass of a float32 kernel block with a float64 right-hand
side, t = K_b b and then K_bᵀ (w t), computed row by row: each float32 entry is widened in a
register, the sums are float64, and each row is read from memory once (the second sweep
finds it in the core's cache). Without it the operator widens the block into a float64
buffer and makes two matrix-vector products (``KernelOperator.fused``).

The dense symmetric eigendecomposition and Cholesky factor of large matrices
(``eigh_lower``, ``cholesky_lower``) call SciPy's LAPACK in place through ctypes without
holding Python's lock (SciPy's wrappers hold it for the whole call: measured, a 2,500 x 2,500
``scipy.linalg.eigh`` let another thread run 12 times in 4.3 s), and ``interruptible`` runs
them in a helper thread while the calling thread waits in short steps, so that Ctrl-C stops
a fit within a fraction of a second instead of after the factorization (187 s for an exact
KRLS fit that held the lock). The helper finishes its LAPACK call in the
background; its matrix is released then, and the interpreter's exit waits for it.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

__all__ = [
    "HAVE_NUMBA",
    "fused_rows_float32",
    "givens_update_rows",
    "givens_downdate_rows",
    "eigh_lower",
    "cholesky_lower",
    "cholesky_in_triangle",
    "interruptible",
    "helpers_running",
    "LAPACK_IN_THREAD_MIN",
    "potrf_scratch",
]

#: Matrices from this order on are factored through Numba in a helper thread (below it a
#: factorization takes under ~0.1 s, less than importing Numba and loading the compiled code).
LAPACK_IN_THREAD_MIN = 1000


def _update_rows_py(R: np.ndarray, x: np.ndarray) -> None:
    """In place: R <- the upper factor of R^T R + x x^T; x is destroyed (row-wise Givens)."""
    k = len(x)
    for i in range(k):
        r_ii, x_i = R[i, i], x[i]
        if x_i == 0.0:
            continue
        rho = np.hypot(r_ii, x_i)
        c, s = r_ii / rho, x_i / rho
        R[i, i] = rho
        if i + 1 < k:
            row = R[i, i + 1 :].copy()
            R[i, i + 1 :] = c * row + s * x[i + 1 :]
            x[i + 1 :] = c * x[i + 1 :] - s * row


def _downdate_rows_py(R: np.ndarray, c: np.ndarray, s: np.ndarray) -> None:
    """In place: apply LINPACK dchdd's rotations (from the last row to the first)."""
    k = len(c)
    xx = np.zeros(k, dtype=R.dtype)
    for i in range(k - 1, -1, -1):
        row = R[i, i:].copy()
        R[i, i:] = c[i] * row - s[i] * xx[i:]
        xx[i:] = c[i] * xx[i:] + s[i] * row


HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@functools.cache
def _compiled() -> tuple[Callable[..., None], Callable[..., None]]:
    """The loops compiled by Numba on first use (importing Numba costs ~0.4 s, which a
    command or an import that never updates a factor should not pay), else NumPy's."""
    try:
        import numba
    except ImportError:  # pragma: no cover - the NumPy loops above
        return _update_rows_py, _downdate_rows_py

    @numba.njit(cache=True)
    def _update_rows_nb(R: Any, x: Any) -> None:
        k = x.shape[0]
        for i in range(k):
            r_ii = R[i, i]
            x_i = x[i]
            if x_i == 0.0:
                continue
            rho = np.hypot(r_ii, x_i)
            c = r_ii / rho
            s = x_i / rho
            R[i, i] = rho
            for j in range(i + 1, k):
                r_ij = R[i, j]
                x_j = x[j]
                R[i, j] = c * r_ij + s * x_j
                x[j] = c * x_j - s * r_ij

    @numba.njit(cache=True)
    def _downdate_rows_nb(R: Any, c: Any, s: Any) -> None:
        k = c.shape[0]
        xx = np.zeros(k, dtype=R.dtype)
        for i in range(k - 1, -1, -1):
            ci = c[i]
            si = s[i]
            for j in range(i, k):
                r_ij = R[i, j]
                x_j = xx[j]
                R[i, j] = ci * r_ij - si * x_j
                xx[j] = ci * x_j + si * r_ij

    return _update_rows_nb, _downdate_rows_nb


def givens_update_rows(R: np.ndarray, x: np.ndarray) -> None:
    """In place: R <- the upper factor of R^T R + x x^T; x is destroyed (compiled loop)."""
    _compiled()[0](R, x)


def givens_downdate_rows(R: np.ndarray, c: np.ndarray, s: np.ndarray) -> None:
    """In place: apply LINPACK dchdd's rotations, last row first (compiled loop)."""
    _compiled()[1](R, c, s)


@functools.cache
def _fused_rows() -> Callable[..., None]:
    """The compiled row pass (Numba is imported at the first call: about 0.4 s and 98 MB a
    process with its compiled code cached, so the operator calls it only for large passes).
    Reassociation lets LLVM vectorize the float64 sums; nogil lets the operator's worker
    threads run it side by side."""
    import numba

    @numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def fused_rows(Kb: Any, Bt: Any, w: Any, acc: Any, KB: Any) -> None:  # pragma: no cover
        n, m = Kb.shape
        for i in range(n):
            row = Kb[i]
            for j in range(Bt.shape[0]):
                b = Bt[j]
                t = 0.0
                for c in range(m):
                    t += np.float64(row[c]) * b[c]
                if KB.shape[0] > 0:
                    KB[i, j] = t
                if w.shape[0] > 0:
                    t *= w[i]
                a = acc[j]
                for c in range(m):
                    a[c] += np.float64(row[c]) * t

    return fused_rows


def fused_rows_float32(
    Kb: np.ndarray, Bt: np.ndarray, w: np.ndarray | None, acc: np.ndarray, KB: np.ndarray | None
) -> None:
    """In place: ``acc[j] += Kb.T @ (w * (Kb @ Bt[j]))`` for every column j, in float64.

    Parameters
    ----------
    Kb : float32 ndarray of shape (b, m)
        A block of kernel rows, C-ordered.
    Bt : float64 ndarray of shape (k, m)
        The right-hand side's columns, one per row, C-ordered.
    w : float64 ndarray of shape (b,) or None
        Weights of the block's rows (None: ones).
    acc : float64 ndarray of shape (k, m)
        The sums, added to.
    KB : float64 ndarray of shape (b, k) or None
        Where to write ``Kb @ Bt.T`` (None: not kept).
    """
    _fused_rows()(
        np.ascontiguousarray(Kb),
        Bt,
        np.empty(0) if w is None else w,
        acc,
        np.empty((0, 0)) if KB is None else KB,
    )


_INT_MAX = 2**31 - 1


@functools.cache
def _lapack() -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]] | None:
    """(dsyevd, dpotrf, spotrf) of SciPy's own LAPACK (``scipy.linalg.cython_lapack``), called
    through ctypes, which releases Python's lock for a foreign call; None where SciPy does
    not export them (then SciPy's wrappers compute, holding the lock). No Numba here: its
    import and compiled code cost 107 MB and 0.9 s a process (measured)."""
    try:
        import ctypes

        import scipy.linalg.cython_lapack as cython_lapack

        api = cython_lapack.__pyx_capi__
        name_of = ctypes.pythonapi.PyCapsule_GetName
        name_of.restype, name_of.argtypes = ctypes.c_char_p, [ctypes.py_object]
        pointer = ctypes.pythonapi.PyCapsule_GetPointer
        pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]

        def function(name: str, n_args: int) -> Callable[..., None]:
            capsule = api[name]
            address = pointer(capsule, name_of(capsule))
            return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n_args))(address)

        return function("dsyevd", 11), function("dpotrf", 5), function("spotrf", 5)
    except Exception:  # noqa: BLE001 - a SciPy without these exports: its wrappers
        return None


def _fortran_view(H: np.ndarray, dtypes: tuple[Any, ...] = (np.float64,)) -> np.ndarray:
    """A square matrix as a Fortran-ordered view (a C-ordered H is seen as its transpose),
    for LAPACK to work on in place."""
    if H.dtype not in dtypes or H.ndim != 2 or H.shape[0] != H.shape[1]:
        names = " or ".join(np.dtype(d).name for d in dtypes)
        raise ValueError(f"a square {names} matrix is needed, got {H.dtype} {H.shape}")
    if H.flags.f_contiguous:
        return H
    if H.flags.c_contiguous:
        return H.T
    raise ValueError("the matrix must be contiguous")


def eigh_lower(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues ascending, eigenvectors) of a symmetric float64 matrix by LAPACK's
    divide and conquer (dsyevd) on its lower triangle, the vectors written over H (which
    is not usable afterwards), without holding Python's lock. Where SciPy's LAPACK is not
    reachable, or dsyevd's workspace (2 n^2 + 6 n + 1) exceeds its 32-bit sizes (n above
    32,766), SciPy's ``eigh`` computes (dsyevd, or dsyevr for the largest)."""
    import ctypes

    A = _fortran_view(H)
    n = len(A)
    compiled = _lapack()
    if compiled is None or n < 2 or 2 * n * n + 6 * n + 1 > _INT_MAX:
        driver = "evd" if 2 * n * n + 6 * n + 1 <= _INT_MAX else "evr"
        return scipy.linalg.eigh(A, driver=driver, overwrite_a=True, check_finite=False)
    ref = ctypes.byref
    jobz, uplo = ctypes.c_char(b"V"), ctypes.c_char(b"L")
    size, info = ctypes.c_int(n), ctypes.c_int(0)
    lwork, liwork = ctypes.c_int(-1), ctypes.c_int(-1)
    work_q, iwork_q = ctypes.c_double(0.0), ctypes.c_int(0)
    w = np.empty(n)
    args = (ref(jobz), ref(uplo), ref(size), A.ctypes.data, ref(size), w.ctypes.data)
    compiled[0](*args, ref(work_q), ref(lwork), ref(iwork_q), ref(liwork), ref(info))
    work = np.empty(max(1, int(work_q.value)))
    iwork = np.empty(max(1, int(iwork_q.value)), dtype=np.intc)
    lwork.value, liwork.value = len(work), len(iwork)
    compiled[0](*args, work.ctypes.data, ref(lwork), iwork.ctypes.data, ref(liwork), ref(info))
    if info.value != 0:
        raise np.linalg.LinAlgError(
            f"the eigendecomposition did not converge (dsyevd info {info.value})"
        )
    return w, A


def cholesky_lower(K: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor L of a symmetric positive definite float64 matrix, written
    over K without holding Python's lock (a Fortran-ordered view of it is returned; its
    upper triangle is left as it was). Raises ``numpy.linalg.LinAlgError`` when K is not
    positive definite."""
    return _potrf(_fortran_view(K), True)


def cholesky_in_triangle(K: np.ndarray, triangle: str) -> None:
    """The Cholesky factor of a symmetric positive definite float64 or float32 matrix
    stored in one ``triangle`` of a contiguous K, written over that triangle without holding
    Python's lock: "lower" leaves L with L L^T = K there, "upper" U with U^T U = K; the other
    triangle is neither read nor written. Raises ``numpy.linalg.LinAlgError`` when K is not
    positive definite."""
    A = _fortran_view(K, (np.float64, np.float32))
    # a C-ordered K is seen as A = K^T, whose lower triangle is K's upper one
    _potrf(A, (triangle == "lower") == (A is K))


#: From this order on ``_potrf`` factors by blocks of ``POTRF_BLOCK`` columns itself:
#: OpenBLAS's threaded ?potrf (SciPy's 0.3.30, two threads) crashed this machine's process
#: (SIGSEGV in dpotrf) on a 20,000 x 20,000 kernel matrix once torch or Numba was imported,
#: a known class of OpenBLAS faults (its bug reports 352, 1413, 2562); the blocked form calls
#: ?potrf on 1,024-row blocks only and runs the rest as threaded GEMM and triangular
#: solves, in the same time (29 s against 26-38 s there).
POTRF_BLOCKED_MIN = 4096
POTRF_BLOCK = 1024


def potrf_scratch(n: int) -> int:
    """Elements of scratch ``cholesky_in_triangle`` takes beside an n x n matrix: none
    below ``POTRF_BLOCKED_MIN`` (?potrf in place), else the blocked form's (a block
    column's GEMM update, then the rows below it copied for the triangular solve and its
    result: two n x ``POTRF_BLOCK`` arrays, with the diagonal block and its factor)."""
    if n < POTRF_BLOCKED_MIN:
        return 0
    return 2 * n * POTRF_BLOCK + 2 * POTRF_BLOCK * POTRF_BLOCK


def _potrf(A: np.ndarray, lower: bool) -> np.ndarray:
    """LAPACK's ?potrf on the ``lower`` (else upper) triangle of a Fortran-ordered A, in
    place (by blocks from ``POTRF_BLOCKED_MIN`` rows on); A is returned."""
    if len(A) >= POTRF_BLOCKED_MIN:
        _blocked_potrf(A if lower else A.T)
        return A
    import ctypes

    compiled = _lapack()
    if compiled is None:
        potrf = scipy.linalg.lapack.get_lapack_funcs("potrf", (A,))
        _, code = potrf(A, lower=lower, overwrite_a=True, clean=False)
    else:
        uplo = ctypes.c_char(b"L" if lower else b"U")
        size, info = ctypes.c_int(len(A)), ctypes.c_int(0)
        ref = ctypes.byref
        fn = compiled[1] if A.dtype == np.float64 else compiled[2]
        fn(ref(uplo), ref(size), A.ctypes.data, ref(size), ref(info))
        code = info.value
    if code != 0:
        raise np.linalg.LinAlgError(
            f"the matrix is not positive definite (leading minor {code})"
            if code > 0
            else f"potrf: argument {-code} is invalid"
        )
    return A


def _blocked_potrf(X: np.ndarray) -> None:
    """The lower Cholesky factor of the lower triangle of X (a square view with unit stride
    along one axis: BLAS reads its blocks in place), written there, left-looking by blocks
    of ``POTRF_BLOCK`` columns: each block column is updated by one GEMM with the columns
    before it, its diagonal block factored by ``_potrf`` (a copy), and the rows below it
    solved against that factor. The upper triangle is neither read nor written."""
    n = len(X)
    for j in range(0, n, POTRF_BLOCK):
        e = min(n, j + POTRF_BLOCK)
        D = np.array(X[j:e, j:e], order="F")
        if j:
            D -= X[j:e, :j] @ X[j:e, :j].T
            if e < n:
                X[e:, j:e] -= X[e:, :j] @ X[j:e, :j].T
        L = _potrf(D, True)
        low = np.tril_indices(e - j)
        X[j:e, j:e][low] = L[low]
        if e < n:
            rows = scipy.linalg.solve_triangular(L, X[e:, j:e].T, lower=True, check_finite=False)
            X[e:, j:e] = rows.T


#: helper threads still running a call that ``interruptible`` left after an interrupt
_helpers: set[threading.Thread] = set()


def helpers_running() -> int:
    """How many helper threads of ``interruptible`` are still inside their call (after an
    interrupt: the caller has moved on, the LAPACK call has not finished)."""
    return sum(1 for t in list(_helpers) if t.is_alive())


def interruptible(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a helper thread while this one waits in 50 ms steps, so that a
    KeyboardInterrupt (Ctrl-C, SIGINT) reaches the caller at once when ``fn`` releases
    Python's lock (the compiled LAPACK calls above do). Off the main thread, where no
    signal arrives, ``fn`` runs in place.

    An interrupted call finishes in its helper, which is not a daemon: the interpreter
    waits for it before it exits, because OpenBLAS's own shutdown at exit deadlocks against
    a call still running (measured: 12 of 20 processes interrupted during a 3,000 x 3,000
    eigendecomposition with a daemon helper never exited). The command line, which owns its
    process, exits at once instead (``helpers_running``)."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc
        finally:
            _helpers.discard(threading.current_thread())
            done.set()

    helper = threading.Thread(target=run, name="kernelpath-lapack")
    _helpers.add(helper)
    helper.start()
    # an Event, not helper.join(timeout): a KeyboardInterrupt inside Thread.join marks a
    # running thread finished (CPython 3.11's handling of bpo-45274 releases the lock the
    # thread holds), so the interpreter's exit does not wait for it and tears OpenBLAS down
    # under the running call, and hangs (measured: 4 of 10 interrupted processes)
    while not done.wait(0.05):
        pass
    error = box.pop("error", None)
    if error is not None:
        try:  # without the cycle error -> traceback -> this frame -> error, which kept the
            raise error  # failed factor's blocks (m x 1,024 and more) alive until a GC pass
        finally:
            error = None
    return box["value"]
