"""Conjugate gradient on the whole λ path at once: one Krylov basis of the preconditioned
Nyström system shared by every penalty (Galerkin solutions at anchor penalties), its
memory and its Cholesky factor."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg

from .._backend import FACTOR_DTYPE
from ..linalg import (
    EIGH_FLOPS,
    NystromFactor,
    spectral_filter,
)
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation
from ._iterates import _Bookkeeping, _Problem
from .compact import CompactFactor, compact_memory
from .disk import disk_memory
from .lowrank import LOWRANK_NEW_SHARE, LOWRANK_RANK, lowrank_memory

#: CG's projected matrix V^T H0 V is positive semi-definite; an eigenvalue below -this share
#: of its largest means its products are rounding noise there (float32 sums on ill-conditioned
#: centers: -0.9 to -1 on MNIST; float64 sums stay at their rounding). ``_krylov_path``
#: records the worst share in ``path.info["indefinite"]`` and, for data or a factor below
#: float64, warns (a float32 factor that loses accuracy says so, by this rule).
#: float64 data with a float64 factor reaches it too, where K_mm's condition nears 1 / eps
#: (scikit-learn's estimator checks: a few dozen uniform points, as many centers): recorded,
#: not warned.
INDEFINITE_SHARE = 1e-5


# --------------------------------------------------------------------------- cg
def _orthonormalize(Z: np.ndarray, V: np.ndarray, rel: float = 1e-10) -> np.ndarray:
    """Orthonormal basis of the part of Z orthogonal to the columns of V (classical
    Gram-Schmidt twice, then a rank-revealing QR); columns below ``rel`` are dropped."""
    scale = np.linalg.norm(Z, axis=0).max() if Z.size else 0.0
    if scale == 0.0:
        return Z[:, :0]
    for _ in range(2):
        if V.shape[1]:
            Z = Z - V @ (V.T @ Z)
    Q, Rf, _ = scipy.linalg.qr(Z, mode="economic", pivoting=True)
    keep = np.abs(np.diag(Rf)) > rel * scale
    return np.ascontiguousarray(Q[:, keep])


#: Neighbouring anchor penalties of the multi-preconditioned Krylov space are at most this
#: ratio apart, spread evenly in log scale over the grid (both ends are anchors). Each anchor
#: adds a column to every pass over the data; a penalty far from its anchor converges more
#: slowly. Measured on P (n = 100,000, m = 2000, 20 iterations, 20 penalties over six
#: decades) against a separate preconditioned CG per penalty: 100 (4 anchors) worst
#: validation MSE +0.45%, 1.41x one fit; 30 (6 anchors) +0.09%, 1.76x; anchors 1000x apart
#: from the smallest penalty up (the earlier rule: 2 anchors, the top 700x from its anchor)
#: +286%, 1.13x.
ANCHOR_RATIO = 100.0


def _anchors(lam: np.ndarray, most: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Anchor penalties and, for every penalty, the index of its nearest anchor in log scale.

    The anchors are spread evenly in log scale from the smallest penalty to the largest, as
    few as keep neighbouring anchors at most ``ANCHOR_RATIO`` apart: every penalty is then
    within sqrt(ANCHOR_RATIO) of an anchor (0 is its own anchor). An anchor need not be a
    penalty of the grid (it is the shift of its chain's preconditioned operator). ``most``:
    at most this many anchors (the compact factor's slots), spread the same way; with one,
    the smallest penalty (the hardest system) is the anchor of all."""
    pos = np.sort(np.unique(lam[lam > 0]))
    anchors: list[float] = [0.0] if (lam == 0).any() else []
    if most is not None and most <= len(anchors):
        anchors, pos = anchors[:1], pos[:0]
    if pos.size:
        span = np.log(pos[-1]) - np.log(pos[0])  # (the ratio overflows: 1e300 / 1e-300)
        count = int(np.ceil(span / np.log(ANCHOR_RATIO) - 1e-9)) + 1 if span > 0 else 1
        if most is not None:
            count = max(1, min(count, most - len(anchors)))
        targets = np.geomspace(pos[0], pos[-1], count) if count > 1 else pos[:1]
        anchors.extend(float(t) for t in targets)
    a = np.asarray(sorted(anchors))
    apos = a > 0
    owner = np.empty(len(lam), dtype=int)
    for i, v in enumerate(lam):
        if v == 0 or not apos.any():
            owner[i] = int(np.argmin(np.abs(a - v)))
        else:
            d = np.where(apos, np.abs(np.log(np.where(apos, a, 1.0)) - np.log(v)), np.inf)
            owner[i] = int(np.argmin(d))
    return a, owner


def _penalty_array(penalties: Any) -> np.ndarray:
    """The penalties a path runs (None: its own grid, whose span the unit grid has)."""
    return penalty_grid(1.0) if penalties is None else np.atleast_1d(np.asarray(penalties, float))


def anchor_count(penalties: Any) -> int:
    """How many anchors the full factor's CG runs for ``penalties`` (None: its own grid)."""
    return len(_anchors(_penalty_array(penalties))[0])


def _preconditioner_kind(factor: Any) -> str:
    if isinstance(factor, CompactFactor):  # in memory or in a file (``disk.DiskFactor``)
        return "compact"
    if factor.method == "lowrank":
        return "lowrank"
    return "diagonal" if factor.M.ndim == 1 else "cholesky"


def krylov_cap(r: int, k: int, n_anchors: int, max_iter: int) -> int:
    """The largest dimension of CG's Krylov basis: k new vectors per anchor and iteration,
    at most the rank r (the basis stops growing there)."""
    return int(min(r, max(1, n_anchors) * k * max_iter))


def cg_memory(
    m: int,
    k: int,
    penalties: Any,
    max_iter: int,
    n_val: int,
    cholesky: bool = True,
    layout: str | None = None,
    itemsize: int = 8,
    slots: int | None = None,
    rank: int = LOWRANK_RANK,
    images: bool = False,
) -> int:
    """Bytes CG's path holds beside its operators at its peak, for m centers, k outputs, the
    ``penalties`` it is given (None: its own grid), ``max_iter`` and ``n_val`` validation
    rows: the factor of the centers' system in one of the ``CG_LAYOUTS`` (``layout``; None:
    "cholesky" or "eigh" as ``cholesky`` says): R and M with one Cholesky factor per anchor
    ("cholesky"), or the eigendecomposition that rotates M to a diagonal ("eigh"), or the
    compact factor's buffers in the operator's precision (``itemsize``) with ``slots``
    anchors (None: every anchor; "compact"), or its panels in memory with one anchor, its
    buffer in a file ("disk", ``solvers.disk``); then the Krylov basis V, H0 V and the anchors'
    own bases (r x d each, d = ``krylov_cap``), the projected matrix and its
    eigendecomposition (d x d); the validation predictions of every penalty's point
    (n_val x P k), and with ``images`` the validation rows' image of the basis, K_vm R V
    (n_val x d: ``_krylov_path``). "lowrank": the low-rank factor of rank ``rank``
    (``lowrank_memory``) and K_mm V beside the basis."""
    layout = layout or ("cholesky" if cholesky else "eigh")
    lam = _penalty_array(penalties)
    P = len(lam)
    if layout == "disk":  # one anchor: the file holds T and one preconditioner
        slots = 1
    A = len(_anchors(lam, slots if layout in ("compact", "disk") else None)[0])
    d = krylov_cap(m, k, A, max_iter)
    basis = 3 * m * d + 3 * d * d + 2 * P * d * k + 6 * m * P * k
    val = 2 * n_val * P * k + (n_val * d if images else 0)
    if layout == "compact":
        return compact_memory(m, itemsize, A) + 8 * int(basis + val)
    if layout == "disk":  # its panels in memory, its buffer in a file
        return disk_memory(m) + 8 * int(basis + val)
    if layout == "lowrank":  # R K_mm R V beside the basis, and its new block's copies
        return lowrank_memory(m, rank) + 8 * int(basis + 2 * m * d + val)
    if layout == "cholesky":
        peak = (2 + A) * m * m + basis + val
    else:  # R, M and dsyevr's two m x m; then the rotated R alone
        peak = max(4 * m * m, m * m + basis + val)
    return 8 * int(peak)


#: The forms of CG's factor, fastest first (``cg_layout``); "disk" (the compact factor in a
#: file, ``solvers.disk``) only where asked for by name: "auto" writes nothing to disk.
CG_LAYOUTS = ("cholesky", "eigh", "compact", "lowrank", "disk")


#: The itemsize of the compact factor's lowest precision (float32): under float64 data it
#: is the step between the float64 buffer and the low-rank preconditioner (``cg_layout``).
LOWEST_FACTOR_ITEMSIZE = 4


class Layout(NamedTuple):
    """CG's factor as ``cg_layout`` chooses it: one of ``CG_LAYOUTS``, the compact factor's
    slots (0 for the others) and the itemsize of its buffers (8 for the others: the full
    factors and the low-rank sketch are float64)."""

    name: str
    slots: int
    itemsize: int = 8


def compact_slots(
    m: int,
    k: int,
    penalties: Any,
    max_iter: int,
    n_val: int,
    limit: int | None,
    itemsize: int,
) -> int:
    """The most anchors (at least one) whose compact factor in ``itemsize`` fits ``limit``
    (None: every anchor); 1 also where even one does not fit."""
    slots = anchor_count(penalties)
    while slots > 1:
        need = cg_memory(m, k, penalties, max_iter, n_val, True, "compact", itemsize, slots)
        if limit is None or need <= limit:
            break
        slots -= 1
    return slots


def forced_compact(
    m: int,
    k: int,
    penalties: Any,
    max_iter: int,
    n_val: int,
    limit: int | None,
    itemsize: int,
) -> Layout:
    """The compact factor asked for by name (``factor_layout="compact"``): every anchor, in
    the data's precision (``itemsize``) where that fits ``limit`` (None: no limit; the
    estimators give what the budget leaves the solver, so the data's precision is kept
    wherever the budget admits it), else in float32 (the caller refuses where that does
    not fit either)."""
    slots = anchor_count(penalties)
    need = cg_memory(m, k, penalties, max_iter, n_val, True, "compact", itemsize, slots)
    if limit is None or need <= limit or itemsize <= LOWEST_FACTOR_ITEMSIZE:
        return Layout("compact", slots, itemsize)
    return Layout("compact", slots, LOWEST_FACTOR_ITEMSIZE)


def cg_layout(
    m: int,
    k: int,
    penalties: Any,
    max_iter: int,
    n_val: int,
    limit: int | None,
    itemsize: int = 8,
    compact_first: bool = False,
    rank: int = LOWRANK_RANK,
    room: int | None = None,
) -> Layout:
    """The first of ``CG_LAYOUTS`` whose memory (``cg_memory``) fits ``limit`` bytes: one
    float64 Cholesky factor per anchor; else one eigendecomposition serving every anchor
    (slower to make: m = 2000, 6 anchors, 0.7 s against 0.5 s here, m = 4000 5.7 s against
    3.2 s); else the compact factor in the operator's precision (``itemsize``) with as many
    anchors as fit, at least one (in float32 a buffer holding T and one preconditioner is a
    twelfth of the first's three float64 matrices); where even one buffer does not fit and
    the data is float64, the compact factor in float32 with as many anchors as fit (R
    applied in float64 by refinement, as for float32 data); where no m x m buffer fits, the
    low-rank preconditioner (``lowrank``: O(m r) bytes, slower to converge: docs/design.md)
    if it fits, else the compact factor's need in the data's precision (the caller
    refuses). None: no limit. ``compact_first``: the compact factor whatever fits (float32
    data, ``compact_first_for``). ``rank``: the low-rank preconditioner's. ``room``: bytes
    beyond ``limit`` the solver may take before the low-rank preconditioner (what the
    budget leaves beside the operators' streamed blocks): where no compact buffer fits
    ``limit`` but one float32 buffer with one anchor fits ``room``, that is taken in place
    of the low-rank preconditioner, which at the same iterations tested 6% to 210% worse
    where its rank did not cover the spectrum (docs/design.md, "The compact factor beyond the
    solver's share")."""
    for layout in () if compact_first else CG_LAYOUTS[:2]:
        if limit is None or cg_memory(m, k, penalties, max_iter, n_val, layout=layout) <= limit:
            return Layout(layout, 0)
    args = (m, k, penalties, max_iter, n_val)
    slots = compact_slots(*args, limit, itemsize)
    if limit is not None and slots == 1:
        if cg_memory(*args, True, "compact", itemsize, 1) > limit:
            low32 = LOWEST_FACTOR_ITEMSIZE
            if itemsize > low32 and cg_memory(*args, True, "compact", low32, 1) <= limit:
                return Layout("compact", compact_slots(*args, limit, low32), low32)
            if room is not None and cg_memory(*args, True, "compact", low32, 1) <= room:
                return Layout("compact", 1, low32)  # beyond the share, the least buffer
            if cg_memory(*args, layout="lowrank", rank=rank) <= limit:  # no m x m matrix fits
                return Layout("lowrank", 0)
    return Layout("compact", slots, itemsize)


#: The centers from which CG's full factor gives way to the compact factor (in float64 on
#: float64 data) where K_mm fails the Cholesky form's test (``compact_over_eigh``). Below it
#: the eigendecomposition costs seconds (m = 4,000: 5.7 s here) and keeps its exact cut of
#: K_mm's rounding directions; at m = 20,000 (P, n = 50,000) the fit reached the end of its
#: tenth iteration after 754 s with it and after 186 s with the compact factor (the failed
#: Cholesky form included), at the same test RMSE (0.03640), 11.0 GB at the peak
#: against 12.8 (docs/design.md, "The compact factor in place of the eigendecomposition").
COMPACT_OVER_EIGH_MIN_CENTERS = 8_000


#: The most anchors for which the compact factor takes the place of the "eigh" layout: its
#: (A + 2) // 2 buffers of m (m + 1) are then at most that layout's four m x m matrices.
EIGH_LAYOUT_MAX_ANCHORS = 7


def compact_over_eigh(m: int, penalties: Any, on_device: bool, layout: str = "cholesky") -> bool:
    """Whether CG, where the centers' K_mm is not safely positive definite for a Cholesky
    factor, takes the compact factor holding every anchor in place of K_mm's
    eigendecomposition: on the host, from ``COMPACT_OVER_EIGH_MIN_CENTERS`` centers, and

    - ``layout="cholesky"`` (a Cholesky factor per anchor fits): where the compact factor's
      Cholesky factors cost fewer flops (T, then per anchor T T^T and its factor:
      (1 + 2 A) m^3 / 3 for A anchors) than the eigendecomposition (``linalg.EIGH_FLOPS``
      m^3: up to 6 anchors). Its memory is at most the full factor's (``cg_memory``:
      (A + 2) // 2 buffers of m (m + 1) against R, M and A factors).
    - ``layout="eigh"`` (M rotated to a diagonal, where a factor per anchor does not fit):
      up to ``EIGH_LAYOUT_MAX_ANCHORS``. That layout would cost K_mm's eigendecomposition
      and M's (2 ``EIGH_FLOPS`` m^3) and R Q (2 m^3), against at most 5 m^3 for 7 anchors;
      its buffers are at most the layout's four m x m matrices, but the basis beside them
      can tip them over the budget (``compact_in_reach`` checks it)."""
    anchors = anchor_count(penalties)
    if layout == "eigh":
        cheaper = anchors <= EIGH_LAYOUT_MAX_ANCHORS
    else:
        cheaper = (1 + 2 * anchors) / 3 < EIGH_FLOPS
    return not on_device and m >= COMPACT_OVER_EIGH_MIN_CENTERS and cheaper


def compact_in_reach(
    layout: str,
    m: int,
    k: int,
    penalties: Any,
    max_iter: int,
    n_val: int,
    limit: int | None,
    on_device: bool,
) -> bool:
    """Whether CG, having taken ``layout`` ("cholesky" or "eigh": ``cg_layout``), takes the
    float64 compact factor holding every anchor where K_mm fails its Cholesky test
    (``compact_over_eigh``, and for "eigh" its memory within ``limit``)."""
    if layout not in ("cholesky", "eigh") or not compact_over_eigh(m, penalties, on_device, layout):
        return False
    if layout == "cholesky" or limit is None:
        return True
    A = anchor_count(penalties)
    return cg_memory(m, k, penalties, max_iter, n_val, True, "compact", 8, A) <= limit


def compact_first_for(itemsize: int) -> bool:
    """Whether CG takes the compact factor before the full ones: for data below float64,
    on every device. Its R is applied in float64 (``CompactFactor._refined``) and it beat
    the full factor, whose float64 factor of the float32 K_mm drops the directions below
    that matrix's rounding, in accuracy and time on the host
    (``benchmarks/results/compact_float32.json``: test RMSE +1.9% at worst against the cut's +18% to
    +76% on three of six problems, and 28.7 s against 89.9 s at m = 8,000). CUDA kept the
    full factor first while its compact solves and products summed in float32 (P at
    n = 10⁷, m = 20,000 lost 4.8% with them on an H100); since both are float64 there too,
    the rule is the host's (not yet measured on a device)."""
    return itemsize < 8


def _extend_basis(
    V: np.ndarray,
    HV: np.ndarray,
    Z: np.ndarray,
    HZ: np.ndarray,
    rel: float = 1e-8,
    KV: np.ndarray | None = None,
    KZ: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Orthonormal new directions Q (and H0 Q) spanning the part of Z orthogonal to V.

    Z is orthogonalized against V twice (classical Gram-Schmidt), then factored by a
    pivoted QR, Z P = Q T; columns with |T_ii| below ``rel`` are dropped. Since H0 is linear,
    H0 Q follows from H0 Z and H0 V by the same combination, without another operator pass
    (and K Q from K Z and K V, given them: the low-rank factor's inner product).
    """
    scale = np.linalg.norm(Z, axis=0).max() if Z.size else 0.0
    if scale == 0.0:
        return Z[:, :0], HZ[:, :0], None if KZ is None else KZ[:, :0]
    for _ in range(2):
        if V.shape[1]:
            coef = V.T @ Z
            Z = Z - V @ coef
            HZ = HZ - HV @ coef
            if KZ is not None and KV is not None:
                KZ = KZ - KV @ coef
    _, T, piv = scipy.linalg.qr(Z, mode="economic", pivoting=True)
    keep = int(np.sum(np.abs(np.diag(T)) > rel * scale))
    if keep == 0:
        return Z[:, :0], HZ[:, :0], None if KZ is None else KZ[:, :0]
    Tk = T[:keep, :keep]

    def combine(A: np.ndarray) -> np.ndarray:
        return scipy.linalg.solve_triangular(Tk, A[:, piv[:keep]].T, trans="T").T

    return combine(Z), combine(HZ), None if KZ is None else combine(KZ)


def _whitening(B: np.ndarray, floor: float) -> np.ndarray:
    """W with W^T B W = I on B's eigenvectors whose eigenvalue exceeds ``floor`` (B = V^T K V:
    directions of span V whose squared K-norm is K's rounding are left out, the full
    factor's cut-off), shape (d, d')."""
    s, E = np.linalg.eigh((B + B.T) / 2)
    keep = s > floor
    return E[:, keep] / np.sqrt(s[keep])


class _Basis:
    """The orthonormal basis V of the union of the anchors' Krylov spaces with what the
    Galerkin problems need of it: H0 V, K V (the low-rank factor's inner product; V
    itself otherwise), B = V^T K V, G = V^T H0 V, c = V^T b, and K_vm R V (the validation
    rows' image, ``images``)."""

    def __init__(self, r: int, k: int, low_rank: bool, image_rows: int, cap: int) -> None:
        self.V = np.zeros((r, 0))
        self.HV = np.zeros((r, 0))
        self.low_rank = low_rank
        self.KV = np.zeros((r, 0)) if low_rank else self.V
        self.Bk = np.zeros((0, 0))
        self.G = np.zeros((0, 0))
        self.c = np.zeros((0, k))
        # filled column block by column block (its pages are touched as it grows)
        self.VW = np.empty((image_rows, cap)) if image_rows else None

    @property
    def size(self) -> int:
        return int(self.V.shape[1])

    def add(
        self,
        Vnew: np.ndarray,
        HVnew: np.ndarray,
        KVnew: np.ndarray | None,
        b: np.ndarray,
        prob: _Problem,
        validation: Validation | None,
    ) -> None:
        """Extend the basis and the projected problem by the new directions (one
        validation pass over them where the image is kept)."""
        V = self.V
        if KVnew is not None:  # V^T KV
            self.Bk = np.block([[self.Bk, self.KV.T @ Vnew], [KVnew.T @ V, KVnew.T @ Vnew]])
        G = np.block([[self.G, V.T @ HVnew], [HVnew.T @ V, Vnew.T @ HVnew]])
        self.G = (G + G.T) / 2
        self.c = np.vstack([self.c, Vnew.T @ b])
        if self.VW is not None and validation is not None:
            Wn = validation.op.matvec(prob.factor.apply(Vnew, native=True))
            d0, n_val = V.shape[1], self.VW.shape[0]
            self.VW[:, d0 : d0 + Vnew.shape[1]] = np.asarray(Wn, dtype=FACTOR_DTYPE).reshape(
                n_val, -1
            )
        self.V, self.HV = np.hstack([V, Vnew]), np.hstack([self.HV, HVnew])
        self.KV = self.V if KVnew is None else np.hstack([self.KV, KVnew])

    def gram(self, prob: _Problem) -> tuple[np.ndarray, float] | None:
        """(V^T K V, the factor's floor) where the basis' Gram matrix is not I."""
        return (self.Bk, prob.factor.floor) if self.low_rank else None


def _score_active(
    prob: _Problem,
    basis: _Basis,
    lam: np.ndarray,
    book: _Bookkeeping,
    t: int,
    tol: float,
    bnorm: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Every active penalty's Galerkin solution in the current space: its training error,
    validation scores and convergence (relative residual ``tol``). Returns (the active
    penalties, which converged, their residuals (r, active k), G's negative share)."""
    k, b, validation = prob.k, prob.b, book.validation
    act = book.active
    act_idx = np.flatnonzero(act)
    spectrum: list[float] = []
    G, c = basis.G, basis.c
    Yl = _galerkin(G, c, lam[act_idx], spectrum, basis.gram(prob))  # (a, d, k)
    negative = 0.0
    if spectrum and spectrum[0] < -INDEFINITE_SHARE * spectrum[1]:
        negative = -spectrum[0] / spectrum[1]
    na, d = len(act_idx), basis.size
    Ycols = Yl.transpose(1, 0, 2).reshape(d, na * k)  # column a * k + j
    beta_b = np.einsum("adk,dk->ak", Yl, c)
    beta_H_beta = np.einsum("dak,adk->ak", (G @ Ycols).reshape(d, na, k), Yl)
    book.train_err[act, t - 1] = prob.train_error(beta_b, beta_H_beta)
    book.last_iter[act] = t
    lam_cols = np.repeat(lam[act_idx], k)
    VY = basis.V @ Ycols  # the active points' coordinates beta, (r, na k)
    KVY = VY if not basis.low_rank else basis.KV @ Ycols
    resid = basis.HV @ Ycols + lam_cols * KVY - np.tile(b, (1, na))
    del KVY
    conv = (np.linalg.norm(resid, axis=0) <= tol * np.tile(bnorm, na)).reshape(na, k)
    if basis.VW is not None:  # the active points' predictions from the kept image
        book.record_validation(t, act, basis.VW[:, :d] @ Ycols, k)
    elif validation is not None:  # one validation pass for the active points
        Fv = validation.op.matvec(prob.factor.apply(VY, native=True))
        Fv = np.asarray(Fv, dtype=FACTOR_DTYPE).reshape(len(validation.Y), -1)
        book.record_validation(t, act, Fv, k)
    return act_idx, conv.all(axis=1), resid, negative


def _krylov_path(
    prob: _Problem,
    lam: np.ndarray,
    max_iter: int,
    book: _Bookkeeping,
    tol: float,
    images: bool = False,
) -> Path:
    """CG's path (module docstring). ``images``: keep K_vm R V, the validation rows' image of
    the basis (n_val x d, ``cg_memory(images=True)``), and score every iteration's points as
    K_vm R V y from it; else each iteration makes K_vm R (V y) afresh for every active
    penalty (its product has P k columns and R is applied to as many)."""
    k, r = prob.k, prob.r
    # the low-rank factor's coordinates beta (alpha = R beta) have the Gram matrix R K_mm R,
    # not I: the Galerkin problems then see V^T R K_mm R V (Bk) in place of I (``_galerkin``)
    inner = getattr(prob.factor, "inner", None)
    # the compact factor holds as many preconditioners as it has slots
    anchors, owner = _anchors(lam, getattr(prob.factor, "slots", None))
    validation = book.validation
    n_val = len(validation.Y) if validation is not None else 0
    d_cap = krylov_cap(r, k, len(anchors), max_iter)
    # one FALKON preconditioner per anchor: (mean(w) R^T K_mm^2 R / m + λ_a I)^-1
    precond = [prob.factor.preconditioner(prob.w.mean() / prob.op.m, a) for a in anchors]
    b = prob.b
    bnorm = np.linalg.norm(b, axis=0)
    bnorm = np.where(bnorm > 0, bnorm, 1.0)
    basis = _Basis(r, k, inner is not None, n_val if images else 0, d_cap)
    sizes: list[int] = []  # basis size after each iteration
    indefinite = 0.0  # the largest |negative eigenvalue| of G over its largest, where seen
    # each anchor's own Arnoldi basis of K_t(P_a^-1 (H0 + λ_a I), P_a^-1 b) and newest block
    own = [np.zeros((r, 0)) for _ in anchors]
    newest = [_orthonormalize(precond[a](b), own[a]) for a in range(len(anchors))]
    for t in range(1, max_iter + 1):
        book.reserve(t)
        act = book.active
        live = [a for a in range(len(anchors)) if act[owner == a].any() and newest[a].size]
        if t == 1 and not live:  # b = 0: the solution is 0 for every penalty
            _record_zero_solution(prob, book)
            sizes.append(0)
            break
        if not act.any() or not live:
            break
        U = np.hstack([newest[a] for a in live])
        HU = prob.H0(U)  # the one pass over the data of this iteration
        KU = U if inner is None else inner(U)  # (the low-rank factor: R K_mm R U)
        Vnew, HVnew, KVnew = _extend_basis(
            basis.V,
            basis.HV,
            U,
            HU,
            1e-8 if inner is None else LOWRANK_NEW_SHARE,
            basis.KV,
            None if inner is None else KU,
        )
        # the anchors' next blocks: their own operator on their own newest vectors
        start = 0
        for a in live:
            width = newest[a].shape[1]
            u, hu = U[:, start : start + width], HU[:, start : start + width]
            ku = KU[:, start : start + width]
            own[a] = np.hstack([own[a], u])
            newest[a] = _orthonormalize(precond[a](hu + anchors[a] * ku), own[a])
            start += width
        if Vnew.shape[1] > d_cap - basis.size:  # the basis is as large as it may grow
            room = d_cap - basis.size
            Vnew, HVnew = Vnew[:, :room], HVnew[:, :room]
            KVnew = None if KVnew is None else KVnew[:, :room]
            if Vnew.shape[1] == 0:
                break
        if Vnew.shape[1] == 0:
            continue
        basis.add(Vnew, HVnew, KVnew, b, prob, validation)
        sizes.append(basis.size)
        act_idx, conv, resid, negative = _score_active(prob, basis, lam, book, t, tol, bnorm)
        indefinite = max(indefinite, negative)
        book.converged[act_idx[conv]] = True
        # an anchor whose chain is exhausted (its Krylov space is invariant, e.g. when its
        # preconditioner is exact) but whose penalties have not converged restarts from
        # their preconditioned residuals, so that every penalty keeps making progress
        for a in range(len(anchors)):
            if newest[a].size:
                continue
            mine = np.flatnonzero((owner[act_idx] == a) & ~conv)
            if mine.size:
                cols = (mine[:, None] * k + np.arange(k)[None, :]).ravel()
                newest[a] = _orthonormalize(precond[a](resid[:, cols]), basis.V)
        book.report("cg", t)
    del own, newest, precond
    return _cg_path(prob, basis, book, lam, anchors, sizes, indefinite)


def _cg_path(
    prob: _Problem,
    basis: _Basis,
    book: _Bookkeeping,
    lam: np.ndarray,
    anchors: np.ndarray,
    sizes: list[int],
    indefinite: float,
) -> Path:
    """CG's path from its basis: every point's coefficients on demand, the chosen ones
    kept, and a warning where float32 products made the projected system indefinite."""
    P, validation = len(lam), book.validation
    factor_dtype = np.dtype(getattr(prob.factor, "dtype", FACTOR_DTYPE))
    if indefinite and min(np.dtype(prob.op.dtype).itemsize, factor_dtype.itemsize) < 8:
        warnings.warn(
            f"CG's projected system has an eigenvalue of -{indefinite:.2g} of its largest (it "
            f"must be >= 0): its products are rounding noise below that share of the "
            f"spectrum (factor {prob.factor.method!r} in {factor_dtype.name}, data "
            f"{np.dtype(prob.op.dtype).name}); "
            "points of the path at smaller penalties are unreliable: give float64 data, or "
            "larger penalties",
            RuntimeWarning,
            stacklevel=4,
        )
    best_t = book.best_iterations()
    params, train_err, val_err, val_loss, T = book.finish(lam)
    sizes_arr = np.asarray(sizes + [basis.size] * (T - len(sizes)), dtype=int)
    coefs = _KrylovCoefficients(
        prob.factor, basis.V, basis.G, basis.c, lam, sizes_arr, prob.op.dtype, basis.gram(prob)
    )
    kept_images = basis.VW is not None
    basis.V = basis.HV = basis.KV = np.zeros((0, 0))
    basis.VW = None
    stored: dict[tuple[int, ...], np.ndarray] = {
        (p, int(best_t[p])): coefs((p, int(best_t[p]))) for p in range(P) if T
    }
    path = Path(
        params,
        train_err,
        val_err,
        coef_fn=coefs,
        scoring=validation.scoring if validation is not None else "mse",
        stored=stored,
        info={
            "method": "cg",
            "converged": book.converged.tolist(),
            "factor": prob.factor.method,
            "factor_on_device": prob.factor.on_device,
            "rank": prob.r,
            "krylov_dim": coefs.RV.shape[1],
            "anchor_penalties": anchors.tolist(),
            "preconditioners": _preconditioner_kind(prob.factor),
            "factor_dtype": factor_dtype.name,
            "jitter": getattr(prob.factor, "jitter", None),
            "precondition_shifts": getattr(prob.factor, "shifts_used", None),
            "indefinite": indefinite,
            "preconditioner_rank": getattr(prob.factor, "preconditioner_rank", None),
            "validation_images": kept_images,
        },
        val_loss=val_loss,
    )
    if validation is None and P == 1:
        path.best_index = (0, T - 1)
    return path


def _record_zero_solution(prob: _Problem, book: _Bookkeeping) -> None:
    """Iteration 1 of a problem with b = 0 (e.g. constant targets): beta = 0 everywhere."""
    P, k = book.P, prob.k
    act = np.ones(P, dtype=bool)
    book.train_err[:, 0] = prob.train_error(np.zeros((P, k)), np.zeros((P, k)))
    book.last_iter[:] = 1
    book.converged[:] = True
    if book.validation is not None:
        book.record_validation(1, act, np.zeros((len(book.validation.Y), P * k)), k)


class _KrylovCoefficients:
    """Coefficients of any (penalty, iteration) point from the stored Krylov basis, kept as
    R V (m x d: the factor itself is not kept with the path)."""

    def __init__(
        self,
        factor: NystromFactor,
        V: np.ndarray,
        G: np.ndarray,
        c: np.ndarray,
        lam: np.ndarray,
        sizes: np.ndarray,
        dtype: Any,
        whiten: tuple[np.ndarray, float] | None = None,
    ) -> None:
        self.RV = np.asarray(factor.apply(V), dtype=FACTOR_DTYPE)
        self.G, self.c, self.lam, self.sizes = G, c, lam, sizes
        self.dtype = dtype
        self.whiten = whiten  # (V^T KV, floor): the low-rank factor's Gram matrix

    def __call__(self, idx: tuple[int, ...]) -> np.ndarray:
        p, t_idx = idx
        d = int(self.sizes[t_idx])
        if d == 0:
            return np.zeros((self.RV.shape[0], self.c.shape[1]), dtype=self.dtype)
        gram = None if self.whiten is None else (self.whiten[0][:d, :d], self.whiten[1])
        y = _galerkin(self.G[:d, :d], self.c[:d], self.lam[p : p + 1], gram=gram)[0]
        return np.asarray(self.RV[:, :d] @ y).astype(self.dtype)


def _galerkin(
    G: np.ndarray,
    c: np.ndarray,
    lam: np.ndarray,
    spectrum: list[float] | None = None,
    gram: tuple[np.ndarray, float] | None = None,
) -> np.ndarray:
    """Solutions y_p of (G + λ_p I) y = c for every λ_p, shape (P, d, k), from one
    eigendecomposition of the projected matrix G (the Tikhonov filter, 0 on its null space).
    ``spectrum``: a list that receives G's smallest and largest eigenvalues. ``gram``:
    (B, floor), the basis' Gram matrix where it is not I (the low-rank factor's): then
    (G + λ_p B) y = c, solved in B's whitened coordinates (``_whitening``; ``spectrum`` is
    theirs)."""
    if gram is not None:
        W = _whitening(*gram)
        return np.einsum("de,pek->pdk", W, _galerkin(W.T @ G @ W, W.T @ c, lam, spectrum))
    g, Q = np.linalg.eigh(G)
    if spectrum is not None and g.size:
        spectrum[:] = [float(g[0]), float(g[-1])]
    filt = spectral_filter("tikhonov", np.maximum(g, 0.0), lam)  # (P, d)
    Qc = Q.T @ c
    return np.einsum("de,pe,ek->pdk", Q, filt, Qc)
