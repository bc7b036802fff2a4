"""The compact factor in a file (``factor_layout="disk"``): T and FALKON's preconditioner in
one float32 (m + 1) x m buffer on disk, read and written by panels of rows, so that the fit
holds a few panels in memory and leaves the rest to the disk and the system's page cache.

The buffer is ``compact``'s: the upper triangle of its first m rows holds T (T^T T = K_mm +
j I), the lower triangle of its last m rows A (A A^T = scale T T^T + shift I), one anchor.
Every step here reads the triangles by panels of b rows (``block_rows``) and drops the panel's
pages from the process (``madvise(MADV_DONTNEED)``: the data stays in the file and the page
cache), so the fit's resident memory is ``disk_memory`` (three panels) whatever m is:

- K_mm + j I is written band by band (``center_gram(rows=...)``), then T is factored
  left-looking by panels of rows: T[I, i0:] = T[I, I]^-T (K[I, i0:] - sum over K < I of
  T[K, I]^T T[K, i0:]), reading the earlier panels' columns from i0 on (about m^3 / (6 b)
  numbers read in all, for the m^3 / 3 flops of the factor);
- scale T T^T + shift I is formed by panels of rows, (T T^T)[I, K] = T[I, i0:] T[K, i0:]^T for
  K up to I, and A is factored up-looking: A[I, K] = (P[I, K] - A[I, :k0] A[K, :k0]^T)
  A[K, K]^-T for K < I in order, then A[I, I] from the rest of the diagonal block;
- each triangular solve (R = T^-1, R^T, A^-1, A^-T) and each product with T reads its
  triangle once, panel by panel; R is applied in float64 by one step of refinement, as for
  the compact factor in float32 (``CompactFactor._refined``).

The file is an unnamed temporary file in the folder ``TMPDIR`` names (refused, naming
``TMPDIR``, when that is no folder this process can write in: ``tempfile`` would silently
write elsewhere), or the directory given; its room is reserved when it is made
(``posix_fallocate``), so a full disk is an ``OSError`` naming the directory then, never a
fault in the middle of a write. It is gone when the factor is. The jitter rule is the
compact factor's (``compact_factor``).
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
from scipy.linalg import get_lapack_funcs

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from .._threads import dense_threads
from .._validation import check_float, check_int
from ..data.files import scratch_folder
from .compact import JITTER_TRIES, CompactFactor, block_rows

__all__ = ["DiskFactor", "disk_factor", "disk_memory", "DISK_DTYPE", "DISK_PANELS"]

#: Panels of b x m float32 numbers the disk factor's steps hold at once: the panel being
#: factored, an earlier one and their product (a float64 panel for refinement is two).
DISK_PANELS = 3

#: The float32 buffer on disk.
DISK_DTYPE = np.dtype(np.float32)


def disk_memory(m: int, rows: int | None = None) -> int:
    """Bytes the disk factor holds in memory for m centers with panels of ``rows`` rows
    (None: ``block_rows(m)``): ``DISK_PANELS`` panels of rows x m float32 numbers."""
    m = check_int(m, "m", 1)
    rows = block_rows(m) if rows is None else check_int(rows, "rows", 1)
    return DISK_PANELS * rows * m * DISK_DTYPE.itemsize


def disk_bytes(m: int) -> int:
    """Bytes of the factor's file: one (m + 1) x m float32 buffer."""
    return (m + 1) * m * DISK_DTYPE.itemsize


def _potrf(D: np.ndarray, lower: bool) -> np.ndarray:
    """The Cholesky factor of the square float32 block D (its ``lower`` triangle, else the
    upper, is read; the other comes back zero); ``LinAlgError`` where D is not positive
    definite in float32."""
    (potrf,) = get_lapack_funcs(("potrf",), (D,))
    C, info = potrf(D, lower=lower, clean=True, overwrite_a=False)
    if info != 0 or not np.isfinite(C).all():
        raise np.linalg.LinAlgError(f"the matrix is not positive definite (minor {info})")
    return np.asarray(C)


def _in_columns(solve: Callable[[np.ndarray], np.ndarray], V: Any) -> np.ndarray:
    """``solve`` (float32 columns in and out) applied to V of shape (m,) or (m, c), as a
    float64 NumPy array of V's shape."""
    V32 = np.asarray(B.to_numpy(V), dtype=DISK_DTYPE)
    vec = V32.ndim == 1
    out = solve(V32[:, None] if vec else V32)
    return np.asarray(out[:, 0] if vec else out, dtype=FACTOR_DTYPE)


def _zero_below(P: np.ndarray, h: int) -> None:
    """Zero the strict lower triangle of P's first h x h block, in place."""
    for a in range(1, h):
        P[a, :a] = 0.0


def _zero_above(P: np.ndarray, at: int, h: int) -> None:
    """Zero the strict upper triangle of the h x h block of P at column ``at``, in place."""
    for a in range(h - 1):
        P[a, at + a + 1 : at + h] = 0.0


class DiskFactor(CompactFactor):
    """The compact factor's T and one preconditioner in a file, by panels (module
    docstring). CG reaches it as it reaches ``CompactFactor``: ``apply``, ``apply_t``,
    ``preconditioner`` and ``top``, whose refinement, shift rule and power iteration are
    ``CompactFactor``'s; this class replaces the steps that touch the buffer (the float32
    solves and products with T, forming, factoring and solving with A). R is always
    applied in float64 by refinement."""

    method = "cholesky-disk"

    def __init__(self, file: Any, m: int, rows: int, jitter: float = 0.0) -> None:
        self._file = file
        self._map = mmap.mmap(file.fileno(), disk_bytes(m))
        W = np.ndarray((m + 1, m), dtype=DISK_DTYPE, buffer=self._map)
        super().__init__([W], jitter)
        self.block = int(rows)
        size = self.block * m  # float32 numbers a panel
        # the panels in one array of float64 numbers: two float32 panels from the first are
        # one aligned float64 panel (the refinement's widened rows of T)
        self._scratch = np.empty((DISK_PANELS * size + 1) // 2, dtype=np.float64)
        self._flat = self._scratch.view(DISK_DTYPE)

    @property
    def W(self) -> np.ndarray:
        return self.buffers[0]

    # ----------------------------------------------------------------- the file
    def _drop(self, r0: int, r1: int) -> None:
        """Release the pages of W's rows r0:r1 from the process (they stay in the file and
        the page cache): the fit's resident memory stays the panels'."""
        if not hasattr(self._map, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return  # pragma: no cover - a platform without madvise: the system pages it
        row = self.m * DISK_DTYPE.itemsize
        start = (r0 * row) // mmap.PAGESIZE * mmap.PAGESIZE
        end = min(len(self._map), r1 * row)
        if end > start:
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)

    def _panel(self, i: int, h: int, w: int, dtype: Any = DISK_DTYPE) -> np.ndarray:
        """Scratch panel ``i`` as an h x w array; float64: panels 0 and 1 together."""
        if np.dtype(dtype) == DISK_DTYPE:
            start = i * self.block * self.m
            return self._flat[start : start + h * w].reshape(h, w)
        if i != 0:
            raise ValueError("a float64 panel takes the first two")
        return self._scratch[: h * w].reshape(h, w)

    def _read(self, r0: int, r1: int, c0: int, c1: int, out: np.ndarray) -> np.ndarray:
        np.copyto(out, self.W[r0:r1, c0:c1])
        self._drop(r0, r1)
        return out

    def _write(self, r0: int, r1: int, c0: int, c1: int, data: np.ndarray) -> None:
        self.W[r0:r1, c0:c1] = data
        self._drop(r0, r1)

    def _blocks(self, reverse: bool = False) -> list[tuple[int, int]]:
        out = [(i0, min(self.m, i0 + self.block)) for i0 in range(0, self.m, self.block)]
        return out[::-1] if reverse else out

    def _t_rows(self, i0: int, i1: int, slot: int = 0, dtype: Any = DISK_DTYPE) -> np.ndarray:
        """T[I, i0:], the rows of T from its diagonal on (zeros below the diagonal)."""
        P = self._read(i0, i1, i0, self.m, self._panel(slot, i1 - i0, self.m - i0, dtype))
        _zero_below(P, i1 - i0)
        return P

    def _a_rows(self, i0: int, i1: int, slot: int = 0) -> np.ndarray:
        """A[I, :i1], the rows of A up to its diagonal (zeros above it): W's rows shifted
        by one."""
        P = self._read(i0 + 1, i1 + 1, 0, i1, self._panel(slot, i1 - i0, i1))
        _zero_above(P, i0, i1 - i0)
        return P

    def _write_a_rows(self, i0: int, i1: int, R: np.ndarray) -> None:
        """A[I, :i1] <- R's lower part; T's part of the same rows of W is left alone."""
        h = i1 - i0
        if i0:
            self._write(i0 + 1, i1 + 1, 0, i0, R[:, :i0])
        for a in range(h):  # the diagonal block's rows, up to the diagonal
            self.W[i0 + 1 + a, i0 : i0 + a + 1] = R[a, i0 : i0 + a + 1]
        self._drop(i0 + 1, i1 + 1)

    # ----------------------------------------------------------------- T
    def factor(self, op: Any, jitter: float | None = None) -> None:
        """T, the upper Cholesky factor of K_mm + j I, into the file: K_mm written by bands,
        then factored by panels (module docstring). j is ``jitter``, or (None) eps sqrt(m)
        mean(K_ii) (``compact_factor``'s first); ``self.jitter`` says which it was, also
        when the factor fails (``LinAlgError``)."""
        m = self.m
        diagonal = 0.0
        for i0, i1 in self._blocks():  # K_mm's upper triangle, band by band
            band = self._panel(0, i1 - i0, m)
            if op.device.is_torch:
                tdt, where = B._torch_dtype(DISK_DTYPE), op.device.torch_device
                dev = B._torch().empty((i1 - i0, m), dtype=tdt, device=where)
                op.center_gram(out=dev, rows=(i0, i1))
                np.copyto(band, B.to_numpy(dev))
            else:
                op.center_gram(out=band, rows=(i0, i1))
            diagonal += float(np.trace(band[:, i0:i1], dtype=np.float64))
            self._write(i0, i1, i0, m, band[:, i0:])
        if jitter is None:
            mean = diagonal / m
            if not np.isfinite(mean) or mean <= 0:
                raise ValueError("the centers' kernel matrix K_mm has no positive diagonal")
            jitter = float(np.finfo(DISK_DTYPE).eps) * np.sqrt(m) * mean
        self.jitter = float(jitter)
        for i0, i1 in self._blocks():
            h, w = i1 - i0, m - i0
            P = self._read(i0, i1, i0, m, self._panel(0, h, w))
            P[np.arange(h), np.arange(h)] += jitter
            G = self._panel(2, h, w)
            for k0, k1 in self._blocks():
                if k0 >= i0:
                    break
                Q = self._read(k0, k1, i0, m, self._panel(1, k1 - k0, w))
                with dense_threads(2.0 * h * (k1 - k0) * w):
                    np.matmul(Q[:, :h].T, Q, out=G)
                P -= G
            U = _potrf(P[:, :h], lower=False)
            P[:, :h] = U
            if w > h:
                with dense_threads(float(h) * h * (w - h)):
                    P[:, h:] = scipy.linalg.solve_triangular(
                        U, P[:, h:], trans="T", lower=False, check_finite=False
                    )
            self._write(i0, i1, i0, m, P)

    def _t_solve(self, V: np.ndarray, transpose: bool) -> np.ndarray:
        """op(T)^-1 V (``CompactFactor._refined``'s solve, float64 in and out)."""
        return _in_columns(lambda V32: self._solve_t(V32, transpose), V)

    def _solve_t(self, V: np.ndarray, transpose: bool) -> np.ndarray:
        """op(T)^-1 V in float32, reading T once by panels: back substitution for T, forward
        (each panel's part taken off the rows below it) for T^T."""
        X = np.empty_like(V)
        if not transpose:  # x[I] = T[I, I]^-1 (v[I] - T[I, i1:] x[i1:])
            for i0, i1 in self._blocks(reverse=True):
                P, h = self._t_rows(i0, i1), i1 - i0
                rhs = V[i0:i1] - P[:, h:] @ X[i1:] if i1 < self.m else V[i0:i1]
                X[i0:i1] = scipy.linalg.solve_triangular(P[:, :h], rhs, check_finite=False)
            return X
        Wk = V.copy()  # x[I] = T[I, I]^-T w[I]; w[i1:] -= T[I, i1:]^T x[I]
        for i0, i1 in self._blocks():
            P, h = self._t_rows(i0, i1), i1 - i0
            X[i0:i1] = scipy.linalg.solve_triangular(
                P[:, :h], Wk[i0:i1], trans="T", check_finite=False
            )
            if i1 < self.m:
                Wk[i1:] -= P[:, h:].T @ X[i0:i1]
        return X

    def _tri_product(self, v: np.ndarray, transpose: bool, wide: bool = False) -> np.ndarray:
        """T v (or T^T v) for v of shape (m,) or (m, c), a float64 NumPy array, reading T
        once by panels (in float64 with ``wide``, else in float32)."""
        dt = FACTOR_DTYPE if wide else DISK_DTYPE
        vd = np.asarray(B.to_numpy(v), dtype=dt)
        out = np.zeros(vd.shape, dtype=dt)
        with dense_threads(float(self.m) ** 2 * (vd.shape[1] if vd.ndim == 2 else 1)):
            for i0, i1 in self._blocks():
                P = self._t_rows(i0, i1, 0, dt)
                if not transpose:  # (T v)[I] = T[I, i0:] v[i0:]
                    out[i0:i1] = P @ vd[i0:]
                else:  # (T^T v)[i0:] += T[I, i0:]^T v[I]
                    out[i0:] += P.T @ vd[i0:i1]
        return np.asarray(out, dtype=FACTOR_DTYPE)

    # ----------------------------------------------------------------- the preconditioner
    def _form(self, scale: float, shift: float) -> None:
        """scale T T^T + shift I into A's triangle, by panels of rows."""
        for i0, i1 in self._blocks():
            h, w = i1 - i0, self.m - i0
            X = self._t_rows(i0, i1, 0)
            R = self._panel(2, h, i1)
            for k0, k1 in self._blocks():
                if k0 >= i1:
                    break
                Q = X if k0 == i0 else self._read(k0, k1, i0, self.m, self._panel(1, k1 - k0, w))
                with dense_threads(2.0 * h * (k1 - k0) * w):
                    np.matmul(X, Q.T, out=R[:, k0:k1])
            R *= scale
            R[np.arange(h), i0 + np.arange(h)] += shift
            self._write_a_rows(i0, i1, R)

    def _factor_a(self) -> None:
        """A, the lower Cholesky factor of the matrix in A's triangle, in place, up-looking
        by panels of rows."""
        for i0, i1 in self._blocks():
            h = i1 - i0
            R = self._a_rows(i0, i1, 0)
            for k0, k1 in self._blocks():
                if k0 >= i0:
                    break
                Q = self._a_rows(k0, k1, 1)
                with dense_threads(2.0 * h * (k1 - k0) * max(1, k0)):
                    if k0:
                        R[:, k0:k1] -= R[:, :k0] @ Q[:, :k0].T
                    R[:, k0:k1] = scipy.linalg.solve_triangular(
                        Q[:, k0:k1], R[:, k0:k1].T, lower=True, check_finite=False
                    ).T
            D = R[:, i0:i1]
            if i0:
                with dense_threads(2.0 * h * h * i0):
                    D -= R[:, :i0] @ R[:, :i0].T
            R[:, i0:i1] = _potrf(D, lower=True)
            self._write_a_rows(i0, i1, R)

    def _solve_a(self, V: np.ndarray) -> np.ndarray:
        """(A A^T)^-1 V in float32: forward with A, then back with A^T, a read of A each."""
        X = np.empty_like(V)
        for i0, i1 in self._blocks():  # A x = v
            R = self._a_rows(i0, i1)
            rhs = V[i0:i1] - R[:, :i0] @ X[:i0] if i0 else V[i0:i1]
            X[i0:i1] = scipy.linalg.solve_triangular(
                R[:, i0:i1], rhs, lower=True, check_finite=False
            )
        Wk, Z = X, np.empty_like(V)
        for i0, i1 in self._blocks(reverse=True):  # A^T z = x
            R = self._a_rows(i0, i1)
            Z[i0:i1] = scipy.linalg.solve_triangular(
                R[:, i0:i1], Wk[i0:i1], lower=True, trans="T", check_finite=False
            )
            if i0:
                Wk[:i0] -= R[:, :i0].T @ Z[i0:i1]
        return Z

    def _fill_preconditioner(self, slot: int, scale: float, shift: float) -> None:
        """scale T T^T + shift I into A's triangle (``CompactFactor.preconditioner``'s step;
        the file has one slot)."""
        self._form(scale, shift)

    def _cholesky_lower(self, S: Any) -> None:
        """A's Cholesky factor in place: S is the one slot's view, W[1:], whose lower
        triangle is A (``CompactFactor.preconditioner``'s step), factored by panels."""
        self._factor_a()

    def _preconditioner_solve(self, L: Any, V: np.ndarray) -> np.ndarray:
        """(A A^T)^-1 V, A read from the file by panels (L, the slot's view, is A's)."""
        return _in_columns(self._solve_a, V)

    def close(self) -> None:
        """Unmap the buffer and close the file (its room on disk is freed); where views of
        the buffer are still held, they keep it until they are gone."""
        self.buffers = []
        try:
            self._map.close()
        except BufferError:  # a view still exported: the map goes with the last one
            pass
        self._file.close()


def disk_factor(
    op: Any,
    jitter: float | None = None,
    directory: str | os.PathLike[str] | None = None,
    rows: int | None = None,
) -> DiskFactor:
    """The disk factor of the operator's centers: a temporary file of (m + 1) m float32
    numbers in ``directory`` (None: the folder ``TMPDIR`` names, checked:
    ``data.files.scratch_folder``), K_mm + j I factored there by
    panels of ``rows`` rows (None: ``block_rows(m)``), j growing tenfold until the factor
    exists (``compact_factor``'s rule). Raises ``OSError`` naming the directory where the
    file's room cannot be reserved."""
    if jitter is not None:
        check_float(jitter, "jitter", 0.0, np.inf, low_open=True, high_open=True)
    m = int(op.m)
    rows = block_rows(m) if rows is None else check_int(rows, "rows", 1)
    rows = min(rows, m)
    where = scratch_folder(directory, "the disk factor's file")
    size = disk_bytes(m)
    file = tempfile.TemporaryFile(dir=where)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(file.fileno(), 0, size)
        else:  # pragma: no cover - macOS, Windows: a sparse file
            file.truncate(size)
    except OSError as err:
        file.close()
        raise OSError(
            err.errno,
            f"the disk factor's file needs {size / 1e9:.2f} GB in {where!r}, which has "
            f"no room for it ({err.strerror}): give TMPDIR (or the directory) a disk with "
            "room, or fewer centers",
        ) from err
    fac = DiskFactor(file, m, rows)
    cur = jitter
    try:
        for _ in range(JITTER_TRIES):
            try:
                fac.factor(op, cur)
            except np.linalg.LinAlgError:
                cur = fac.jitter * 10.0
                continue
            return fac
    except BaseException:
        fac.close()
        raise
    fac.close()
    raise np.linalg.LinAlgError(
        f"the centers' kernel matrix K_mm has no Cholesky factor in float32 up to jitter "
        f"{fac.jitter:g}: use fewer centers"
    )
