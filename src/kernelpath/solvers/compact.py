"""The Nyström factor and FALKON's preconditioner in (m + 1) x m buffers, in the data's
precision: the m x m algebra of CG where the full float64 factors do not fit.

The full factor (``linalg.NystromFactor``) keeps R = L^-T, M = L^T L and a Cholesky factor
per anchor penalty, each a float64 m x m matrix: at m = 50,000 that is 20 GB a matrix. This
factor keeps two triangles in one buffer ``W`` of shape (m + 1, m), as FALKON does (Rudi,
Carratino & Rosasco 2017, Alg. 1; its ``FalkonPreconditioner``), in the operator's dtype
(float32: 4 m (m + 1) bytes, 10 GB at m = 50,000), or in float32 under float64 data where
no float64 buffer fits the budget (``krylov.cg_layout``):

- the upper triangle of ``W[:m]`` holds T, the upper Cholesky factor of K_mm + j I
  (T^T T = K_mm + j I). R = T^-1 (R R^T = (K_mm + j I)^-1), applied by triangular solves;
- the lower triangle of ``W[1:]`` (rows shifted by one, so the two triangles share no
  element) holds A, the lower Cholesky factor of the preconditioner
  P = scale T T^T + shift I (A A^T = P). In the coordinates beta of alpha = R beta,
  T T^T = R^T K_mm^2 R up to j, so P is ``NystromFactor.preconditioner``'s matrix.

Each further buffer holds two more preconditioners (the lower triangle of its last m rows
and the upper triangle of its first m rows): CG runs as many anchor penalties as the buffers
hold (``krylov.cg_layout`` sizes them to the budget). The anchors differ only in their
shift, so scale T T^T is formed once, in the last slot, and copied for the others.

The jitter j is the stated rule of the float32 factor: j = eps sqrt(m) mean(K_ii), the size
of the rounding in K_mm's eigenvalues (the cut-off of ``linalg.nystrom_factor``; eps of the
dtype), multiplied by 10 until the Cholesky factor exists (at most ``JITTER_TRIES`` times,
K_mm computed again each time). FALKON adds 1e-5 m in float32 (1.0 at m = 100,000); in the
form eps m (2.4e-4 at m = 2,000) it lost 2.7% of test RMSE on a 20,000 x 10 problem at
sigma = 3 where eps sqrt(m) (5e-6) lost none. The jitter changes the model's norm from alpha^T K_mm
alpha to alpha^T (K_mm + j I) alpha (``jitter`` reports it); what that costs against the
full factor's cut is measured in docs/design.md ("The compact factor"). A preconditioner's
shift grows the same way when its factor fails in this precision: that changes the
iteration's speed, not its solution. The Krylov basis, its projected problem and every
solution are float64 (``krylov``).

On the host (NumPy, or a CPU tensor through its NumPy view) the Cholesky factors are
LAPACK's ?potrf in place; on a GPU a left-looking blocked Cholesky written with torch
(``blocked_cholesky_``), in place, with O(m b) scratch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from .._kernels import LAPACK_IN_THREAD_MIN, cholesky_in_triangle, interruptible, potrf_scratch
from .._threads import dense_threads
from .._validation import check_float, check_int

__all__ = [
    "CompactFactor",
    "buffers_for",
    "compact_factor",
    "compact_memory",
    "blocked_cholesky_",
    "block_rows",
    "JITTER_TRIES",
]

#: Tries of the Cholesky factor of K_mm + j I (j times 10 each time) before giving up.
JITTER_TRIES = 6
#: Rows of a block of the blocked algorithms (and of K_mm's bands).
BLOCK = 2048


def block_rows(m: int) -> int:
    """Rows of a block of the blocked steps for m centers: ``BLOCK``, or an eighth of m for
    fewer (so that the scratch stays a quarter of the buffer)."""
    return int(max(min(m, 256), min(BLOCK, m // 8)))


def buffers_for(slots: int) -> int:
    """Buffers of a compact factor with ``slots`` preconditioners: the first holds T and
    one; every further buffer two."""
    return 1 + max(1, slots) // 2


def compact_memory(m: int, itemsize: int, slots: int = 1) -> int:
    """Bytes of the compact factor with ``slots`` preconditioners: its (m + 1) x m buffers
    and the scratch of its blocked steps, the larger of a block row of T with its product
    (b x m each; the refinement's float64 block in its place between them) and the
    host's blocked Cholesky factor's (``_kernels.potrf_scratch``: it was 17 MB over the
    block rows at m = 6,000, where b is m / 8)."""
    scratch = max(2 * block_rows(m) * m, potrf_scratch(m))
    return itemsize * ((m + 1) * m * buffers_for(slots) + scratch)


def _solve(S: Any, lower: bool, transpose: bool, V: Any) -> Any:
    """op(S)^-1 V for the ``lower`` (else upper) triangle of a C- or Fortran-ordered square
    view S, op the transpose or not, V of shape (m,) or (m, c) in S's dtype; nothing of S is
    copied."""
    if B.is_tensor(S):
        torch = B._torch()
        V2 = V[:, None] if V.ndim == 1 else V
        out = torch.linalg.solve_triangular(S.mT if transpose else S, V2, upper=lower == transpose)
        return out[:, 0] if V.ndim == 1 else out
    if not S.flags.f_contiguous:  # a C-ordered S is A^T for a Fortran-ordered A
        S, lower, transpose = S.T, not lower, not transpose
    with dense_threads(_product_flops(S, V)):
        return scipy.linalg.solve_triangular(
            S, V, lower=lower, trans="T" if transpose else "N", check_finite=False
        )


def _product_flops(S: Any, V: Any) -> float:
    """Flops of a triangle of the square S times (or solved against) V: m^2 per column."""
    return float(S.shape[0]) ** 2 * (V.shape[1] if V.ndim == 2 else 1)


def _transposed(S: Any) -> Any:
    return S.mT if B.is_tensor(S) else S.T


def _add_diagonal_(D: Any, value: float) -> None:
    """D += value I, in place (a NumPy array or a tensor)."""
    if B.is_tensor(D):
        D.diagonal().add_(value)
    else:
        D[np.diag_indices_from(D)] += value


def _set_lower_(blk: Any, D: Any) -> None:
    """blk's lower triangle (with the diagonal) <- D's, in place; blk's strict upper
    triangle, another factor's, is left alone."""
    if B.is_tensor(blk):
        torch = B._torch()
        mask = torch.ones_like(D, dtype=torch.bool).tril()
        blk.copy_(torch.where(mask, D, blk))
    else:
        low = np.tril_indices(len(D))
        blk[low] = D[low]


class CompactFactor:
    """R = T^-1 and the preconditioners' factors in (m + 1) x m buffers (module docstring).

    ``buffers[0]`` holds T in the upper triangle of its first m rows and preconditioner 0 in
    the lower triangle of its last m rows; every further buffer holds two preconditioners,
    in the same lower triangle and in the upper triangle of its first m rows (the lower
    triangle of their transpose). The solvers reach it through the methods of
    ``NystromFactor`` that CG uses: ``apply``, ``apply_t``, ``preconditioner`` and ``top``;
    vectors go in and out as float64 NumPy arrays (``native=True``: the buffer's own).
    """

    method = "cholesky-compact"

    def __init__(self, buffers: list[Any], jitter: float) -> None:
        self.buffers = buffers
        self.jitter = jitter
        self.m = int(buffers[0].shape[1])
        self.block = block_rows(self.m)
        self.shifts_used: list[float] = []
        self._wide: np.ndarray | None = None  # the refinement's float64 scratch (_widened)
        self._kept: float | None = None  # the scale of scale T T^T kept in the last slot

    @property
    def slots(self) -> int:
        """How many preconditioners the buffers hold."""
        return 2 * len(self.buffers) - 1

    @property
    def rank(self) -> int:
        return self.m

    @property
    def on_device(self) -> bool:
        return B.is_tensor(self.buffers[0])

    @property
    def dtype(self) -> np.dtype:
        return B.dtype_of(self.buffers[0])

    @property
    def T(self) -> Any:
        """The view whose upper triangle is T."""
        return self.buffers[0][: self.m]

    def _slot(self, i: int) -> Any:
        """The view whose lower triangle holds preconditioner ``i``."""
        W = self.buffers[(i + 1) // 2]
        return W[1:] if i % 2 == 0 else _transposed(W[: self.m])

    # ----------------------------------------------------------------- products
    def _cast(self, V: Any) -> Any:
        if self.on_device:
            return B.to_device(V, B.array_device(self.buffers[0]), self.dtype)
        return np.asarray(B.to_numpy(V), dtype=self.dtype)

    def apply(self, V: Any, native: bool = False) -> Any:
        """R @ V = T^-1 V for V of shape (m, c) (or (m,)): coefficients of coordinates."""
        if self._refines():
            return self._refined(V, False)
        out = _solve(self.T, False, False, self._cast(V))
        return out if native else B.to_numpy(out, FACTOR_DTYPE)

    def apply_t(self, U: Any) -> np.ndarray:
        """R^T @ U = T^-T U for U of shape (m, c), as a float64 NumPy array."""
        if self._refines():
            return self._refined(U, True)
        return B.to_numpy(_solve(self.T, False, True, self._cast(U)), FACTOR_DTYPE)

    def _refines(self) -> bool:
        """Whether R is applied in float64 by refinement: a factor below float64, whose
        products the operator sums in float64 (``operators.blocks.product_dtype``); on a
        GPU as on the host (there, without it, P at n = 10^7 with m = 50,000 erred 0.1180
        against m = 20,000's 0.1105 on an H200)."""
        return self.dtype != np.float64

    def _refined(self, V: Any, transpose: bool) -> np.ndarray:
        """op(T)^-1 V in float64 from the float32 triangle: a solve in its precision, then
        one step of iterative refinement with the residual V - op(T) x summed in float64
        (x is then the float64 solution of the stored triangle, to about (eps cond(T))^2).
        A float32 solve alone gave R v relative errors eps cond(T), which the products'
        cancellation made noise (docs/design.md, "float32 products")."""
        V64 = np.asarray(B.to_numpy(V), dtype=FACTOR_DTYPE)
        x = self._t_solve(V64, transpose)
        return x + self._t_solve(V64 - self._tri_product(x, transpose, wide=True), transpose)

    def _t_solve(self, V: np.ndarray, transpose: bool) -> np.ndarray:
        """op(T)^-1 V in the factor's precision, for float64 V of shape (m,) or (m, c):
        ``_refined``'s solve, as a float64 NumPy array."""
        return B.to_numpy(_solve(self.T, False, transpose, self._cast(V)), FACTOR_DTYPE)

    def _diagonal_block(self, i0: int, i1: int) -> Any:
        """T[i0:i1, i0:i1] as a new array (zeros below its diagonal)."""
        D = self.T[i0:i1, i0:i1]
        return D.triu() if self.on_device else np.triu(D)

    def _tri_product(self, v: np.ndarray, transpose: bool, wide: bool = False) -> np.ndarray:
        """T v (or T^T v) for v of shape (m,) or (m, c), by blocks of rows, reading T's
        triangle once: in the factor's precision, or (``wide``) in float64, each block of T
        widened as it is read (on the GPU where T lives there). A float64 NumPy array."""
        m, b, T = self.m, self.block, self.T
        if wide and self._blocked():  # widened on the device, block by block
            vd = B.to_device(v, B.array_device(T), FACTOR_DTYPE)
            rows = lambda S, at=0: B.astype(S, FACTOR_DTYPE)  # noqa: E731
        elif wide:
            vd = np.asarray(B.to_numpy(v), dtype=FACTOR_DTYPE)
            rows = self._widened
        else:
            vd = self._cast(v)
            rows = lambda S, at=0: S  # noqa: E731
        parts = []
        with dense_threads(_product_flops(T, vd)):
            for i0 in range(0, m, b):
                i1 = min(m, i0 + b)
                D = rows(self._diagonal_block(i0, i1))
                if not transpose:  # (T v)[I] = T[I, I] v[I] + T[I, i1:] v[i1:]
                    part = D @ vd[i0:i1] + rows(T[i0:i1, i1:], D.size) @ vd[i1:]
                else:  # (T^T v)[I] = T[I, I]^T v[I] + T[:i0, I]^T v[:i0]
                    part = D.T @ vd[i0:i1] + rows(T[:i0, i0:i1], D.size).T @ vd[:i0]
                parts.append(B.to_numpy(part, FACTOR_DTYPE))
        return np.concatenate(parts)

    def _widened(self, S: Any, at: int = 0) -> np.ndarray:
        """A block of the host's triangle in float64, copied into the factor's scratch from
        element ``at`` on (a diagonal block at 0, the rectangle beside it after it: together
        at most b x m elements, the scratch ``compact_memory`` counts). The scratch is kept
        between products (fresh 300 MB arrays at m = 20,000 were faulted in at every one)
        and dropped while a preconditioner is formed."""
        if self._wide is None:
            self._wide = np.empty(self.block * self.m, dtype=FACTOR_DTYPE)
        S = np.asarray(S)
        out = self._wide[at : at + S.size].reshape(S.shape)
        np.copyto(out, S)
        return out

    def top(self) -> tuple[float, np.ndarray]:
        """The largest eigenvalue of K_mm + j I and its direction in R's coordinates (the
        top eigenvector of T T^T, whose eigenvalues are those of T^T T), by power iteration
        to a relative change of 1e-4 (two reads of the triangle a step)."""
        v = np.random.default_rng(0).standard_normal(self.m)
        v /= np.linalg.norm(v)
        val = 0.0
        for _ in range(100):
            w = self._tri_product(self._tri_product(v, True), False)
            new = float(v @ w)
            nw = float(np.linalg.norm(w))
            if nw == 0:
                break
            v = w / nw
            done = abs(new - val) <= 1e-4 * abs(new)
            val = new
            if done:
                break
        return val, v

    # ----------------------------------------------------------------- preconditioners
    def _form_preconditioner(self, Lw: Any, scale: float, shift: float) -> None:
        """P = scale T T^T + shift I into the lower triangle of the view Lw, by blocks of
        rows: row block I of T T^T is T[I, i0:] T[:i1, i0:]^T (T's rows are zero left of
        their diagonal)."""
        m, b, T = self.m, self.block, self.T
        self._wide = None  # the refinement's scratch: this step's blocks take its place
        with dense_threads(m**3 / 3):
            for i0 in range(0, m, b):
                i1 = min(m, i0 + b)
                X = T[i0:i1, i0:].clone() if self.on_device else T[i0:i1, i0:].copy()
                X[:, : i1 - i0] = self._diagonal_block(i0, i1)
                if i0 and self.on_device:
                    Lw[i0:i1, :i0] = (X @ T[:i0, i0:].T) * scale
                elif i0:  # straight into the triangle: no b x i0 temporaries on the host
                    part = Lw[i0:i1, :i0]
                    np.matmul(X, T[:i0, i0:].T, out=part)
                    part *= scale
                D = X @ X.T
                del X
                D *= scale
                _add_diagonal_(D, shift)
                _set_lower_(Lw[i0:i1, i0:i1], D)

    def _copy_preconditioner(self, src: Any, dst: Any, shift: float) -> None:
        """dst's lower triangle <- src's + shift I, by blocks of rows (each view's other
        triangle, another factor's, is left alone)."""
        m, b = self.m, self.block
        for i0 in range(0, m, b):
            i1 = min(m, i0 + b)
            if i0:
                dst[i0:i1, :i0] = src[i0:i1, :i0]
            D = src[i0:i1, i0:i1].clone() if self.on_device else src[i0:i1, i0:i1].copy()
            _add_diagonal_(D, shift)
            _set_lower_(dst[i0:i1, i0:i1], D)

    def _fill_preconditioner(self, slot: int, scale: float, shift: float) -> None:
        """P = scale T T^T + shift I into the lower triangle of ``slot``. CG asks for its
        anchors' preconditioners in slot order, with one scale: scale T T^T (m^3 / 3
        flops) is formed once, into the last slot while it is free, and each slot before
        it copies it (m^2 / 2 elements); the last slot then adds its shift in place.
        A retry of the last slot (its factor failed) forms the product again."""
        last = self.slots - 1
        kept = self._slot(last)
        if slot < last:
            if self._kept != scale:
                self._form_preconditioner(kept, scale, 0.0)
                self._kept = scale
            self._copy_preconditioner(kept, self._slot(slot), shift)
        elif self._kept == scale:
            _add_diagonal_(kept, shift)
        else:
            self._form_preconditioner(kept, scale, shift)
        if slot == last:
            self._kept = None  # factored in place next: the kept product is gone

    def preconditioner(self, scale: float, shift: float) -> Callable[[np.ndarray], np.ndarray]:
        """V -> (scale T T^T + shift I)^-1 V, NumPy in and out (float64), in the next free
        slot of the buffers (``_fill_preconditioner``: the product T T^T is formed once for
        all the slots). Where the factor fails in this precision the shift is multiplied
        by 10 (``shifts_used``): the preconditioner changes, not the solution."""
        slot = len(self.shifts_used)
        if slot >= self.slots:
            raise RuntimeError(f"the compact factor holds {self.slots} preconditioners")
        L = self._slot(slot)
        base = shift if shift > 0 else scale * self.jitter
        for attempt in range(JITTER_TRIES):
            cur = base * 10.0**attempt
            self._fill_preconditioner(slot, scale, cur)
            try:
                self._cholesky_lower(L)
            except np.linalg.LinAlgError:
                continue
            break
        else:
            raise np.linalg.LinAlgError(
                f"the preconditioner's Cholesky factor failed in {self.dtype} up to shift {cur:g}"
            )
        self.shifts_used.append(float(cur))
        return lambda V: self._preconditioner_solve(L, V)

    def _preconditioner_solve(self, L: Any, V: np.ndarray) -> np.ndarray:
        """(L L^T)^-1 V for the factor in the lower triangle of the slot view L, float64
        NumPy in and out."""
        out = _solve(L, True, True, _solve(L, True, False, self._cast(V)))
        return B.to_numpy(out, FACTOR_DTYPE)

    # ----------------------------------------------------------------- factorization
    def _blocked(self) -> bool:
        """Whether the Cholesky factors are ``blocked_cholesky_`` (a tensor off the host)
        rather than LAPACK in place."""
        return self.on_device and self.buffers[0].device.type != "cpu"

    def _cholesky_lower(self, S: Any) -> None:
        """The Cholesky factor of the matrix in the lower triangle of the view S, in place."""
        if self._blocked():
            blocked_cholesky_(S, self.block)
            return
        host = S.numpy() if self.on_device else S  # a CPU tensor's memory, through NumPy
        with dense_threads(self.m**3 / 3):
            if self.m >= LAPACK_IN_THREAD_MIN:
                interruptible(cholesky_in_triangle, host, "lower")
            else:
                cholesky_in_triangle(host, "lower")


def blocked_cholesky_(A: Any, block: int = BLOCK) -> None:
    """In place, the lower Cholesky factor L (L L^T = A) of the symmetric positive definite
    matrix in the lower triangle of the tensor A (any strides), left-looking by column
    blocks: A[j:, J] -= L[j:, :j] L[J, :j]^T, the diagonal block's factor, then the
    triangular solve of the panel below it. Reads and writes the lower triangle only;
    scratch O(m block). Raises ``numpy.linalg.LinAlgError`` when A is not positive
    definite (in its precision)."""
    torch = B._torch()
    block = check_int(block, "block", 1)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {tuple(A.shape)}")
    m = int(A.shape[0])
    for j0 in range(0, m, block):
        j1 = min(m, j0 + block)
        D = A[j0:j1, j0:j1].tril()
        if j0:  # the diagonal block's update stays in its copy: its upper part is not ours
            U = A[j0:, :j0] @ A[j0:j1, :j0].mT
            D -= U[: j1 - j0].tril()
            A[j1:, j0:j1] -= U[j1 - j0 :]
            del U
        L, info = torch.linalg.cholesky_ex(D)
        if int(info) != 0 or not bool(torch.isfinite(L).all()):
            raise np.linalg.LinAlgError(
                f"the matrix is not positive definite (leading minor {j0 + max(int(info), 1)})"
            )
        _set_lower_(A[j0:j1, j0:j1], L)
        if j1 < m:
            panel = A[j1:, j0:j1]
            A[j1:, j0:j1] = torch.linalg.solve_triangular(L.mT, panel, upper=True, left=False)


def compact_factor(
    op: Any, jitter: float | None = None, slots: int = 1, dtype: Any = None
) -> CompactFactor:
    """The compact factor of the operator's centers: K_mm written into the buffer by bands
    (``op.center_gram(out=...)``), j I added, and T factored in place; j grows tenfold
    until the factor exists (module docstring).

    Parameters
    ----------
    op : KernelProducts
        Its centers, kernel, dtype and device.
    jitter : float or None
        The first j (default eps sqrt(m) mean(K_ii)).
    slots : int
        How many preconditioners (CG's anchors) the buffers hold: (slots + 2) // 2
        buffers.
    dtype : float32, float64 or None
        The buffers' precision (None: the operator's). float32 under float64 data is the
        layout rule's step where no float64 buffer fits (``krylov.cg_layout``): K_mm is
        computed in float64 and rounded into the buffer, the jitter is float32's, and R is
        applied in float64 by refinement (``CompactFactor._refined``) like float32 data's.

    Returns
    -------
    CompactFactor
    """
    slots = check_int(slots, "slots", 1)
    if jitter is not None:
        check_float(jitter, "jitter", 0.0, np.inf, low_open=True, high_open=True)
    m = int(op.m)
    dt = np.dtype(op.dtype if dtype is None else dtype)
    if dt.itemsize > np.dtype(op.dtype).itemsize or dt.kind != "f":
        raise ValueError(f"dtype must be the operator's ({op.dtype}) or below, got {dt}")
    dev = op.device
    count = buffers_for(slots)
    if dev.is_torch:
        torch = B._torch()
        tdt = B._torch_dtype(dt)
        bufs = [torch.empty((m + 1, m), dtype=tdt, device=dev.torch_device) for _ in range(count)]
    else:
        bufs = [np.empty((m + 1, m), dtype=dt) for _ in range(count)]
    fac = CompactFactor(bufs, 0.0)
    eps = float(np.finfo(dt).eps)
    first = jitter
    cur = 0.0
    for attempt in range(JITTER_TRIES):
        K = fac.T
        op.center_gram(out=K)
        if attempt == 0:
            diag = K.diagonal()
            mean = float(diag.double().mean()) if dev.is_torch else float(diag.mean())
            if not np.isfinite(mean) or mean <= 0:
                raise ValueError("the centers' kernel matrix K_mm has no positive diagonal")
            cur = eps * np.sqrt(m) * mean if first is None else float(first)
        else:
            cur *= 10.0
        _add_diagonal_(K, cur)
        try:  # T = L^T in K's upper triangle: the lower triangle of K's transpose
            fac._cholesky_lower(_transposed(K))
        except np.linalg.LinAlgError:
            continue
        fac.jitter = cur
        return fac
    raise np.linalg.LinAlgError(
        f"the centers' kernel matrix K_mm has no Cholesky factor in {dt} up to jitter "
        f"{cur:g}: use float64 or fewer centers"
    )
