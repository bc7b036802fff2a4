"""Iterative Nyström solvers: NYTRO gradient descent, the ν-method and preconditioned CG.

All three work in the Nyström parametrization alpha = R beta (R R^T = K_mm^+, R^T K_mm R = I,
so ||f||_H = ||beta||) on the normal equations of (1/n) ||W^(1/2) (A beta - y)||^2 + λ ||beta||^2
with A = K_nm R:

    (H0 + λ I) beta = b,     H0 = A^T W A / n,   b = A^T W y / n.

- ``gd`` (NYTRO eq. 17-19): beta_t = beta_{t-1} - γ ((H0 + λ) beta_{t-1} - b), with by
  default (``step="auto"``) γ = 1 / (L + λ), L the largest eigenvalue of H0 from power
  iteration; ``step="reference"``: γ = 1 / L, the reference code's 1 / ||K_nm R^-1||^2 (the
  same at λ = 0); ``step="paper"``: the paper's conservative γ = 1 / κ², κ² = max k(x_i, x_i);
  or γ a number (the paper's update beta_t = beta_{t-1} - (γ/n) R^T K_nm^T (K_nm R beta - y)
  is this one). With λ = 0 the iteration count is the regularization.
- ``nu``: the ν-method acceleration of the same iteration (Engl, Hanke & Neubauer §6.3),
  needing about the square root of the iterations of ``gd`` for the same filter.
  For these two, every penalty λ_p and output j is one column of beta; all columns share
  each operator pass (``KernelOperator.fused`` with several right-hand sides).
- ``cg``: conjugate gradient with the Nyström (FALKON) preconditioner
  P = mean(w) R^T K_mm^2 R / m + λ I: since K_nm^T K_nm ≈ (n/m) K_mm^2 for uniform centers,
  H0 ≈ R^T K_mm^2 R / m. With R from the eigendecomposition of K_mm this is diagonal,
  diag(s) / m; with R = L^-T from a Cholesky factor it is L^T L / m, factored once per
  anchor. The whole λ path shares one Krylov space instead of running one CG per λ: a few
  anchor penalties λ_a (``ANCHOR_RATIO`` apart, from the smallest λ up) each extend their
  own Arnoldi chain in K_t(P_a^-1 (H0 + λ_a I), P_a^-1 b); one operator pass per iteration
  applies H0 to every chain's new vectors, and the orthonormal basis V_t of the union (with
  H0 V_t obtained by the same linear combinations, no extra pass) gives every penalty's
  Galerkin solution beta = V_t y, (V_t^T H0 V_t + λ I) y = V_t^T b, from one small
  eigendecomposition. For an anchor penalty this is at least as good as its preconditioned
  CG iterate (the energy-norm minimizer over a space that contains CG's); for one penalty
  it is exactly preconditioned CG (the "hybrid" Krylov regularization idea, several
  preconditioners).

Training errors come from the quadratic form y'Wy - 2 n beta'b + n beta'H0 beta; validation
predictions are updated incrementally for gd / nu (K_vm R (beta_t - beta_{t-1})); cg keeps
K_vm R V, the validation rows' image of its basis, where that n_val x d matrix fits beside
its layout (``cg_memory(images=True)``): each iteration's validation pass then multiplies
only the new directions (k per anchor) and every active point is K_vm R V y. Where it does
not fit, cg makes K_vm R (V y) afresh for the active penalties (P k columns a pass, and R
applied to as many). The Krylov basis stops growing at ``krylov_cap`` (its memory,
``cg_memory``).
A penalty stops when its validation error stops improving
(``stopping="window"``: ``EarlyStopping``; "paper": NYTRO's 5% rule, "reference": the
reference code's slope rule, ``selection.make_stopper``) or its iteration has converged
(relative ``tol``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._backend import FACTOR_DTYPE
from .._validation import check_choice, check_int
from ..linalg import (
    factor_on_device,
    largest_eigenvalue,
    nu_method_coefficients,
    top_eigenvalue,
)
from ..operators.protocol import KernelProducts
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation, as_2d
from ._iterates import IterativeSetup, Stopping, _Bookkeeping, _Problem
from .compact import compact_factor
from .disk import DISK_DTYPE, disk_factor
from .krylov import (
    CG_LAYOUTS,
    _krylov_path,
    anchor_count,
    cg_layout,
    cg_memory,
    compact_first_for,
    compact_in_reach,
    forced_compact,
)
from .lowrank import LOWRANK_RANK, lowrank_factor
from .nystrom import center_cholesky_factor

__all__ = [
    "iterative_path",
    "IterativeOptions",
    "IterativeSetup",
    "ITERATIVE_METHODS",
    "STEP_RULES",
    "cg_memory",
    "cg_layout",
    "compact_first_for",
    "compact_in_reach",
    "forced_compact",
    "gradient_memory",
]

ITERATIVE_METHODS = ("gd", "nu", "cg")
#: ``step`` of gd / nu by name (or a number γ).
STEP_RULES = ("auto", "reference", "paper")


@dataclass(frozen=True)
class IterativeOptions:
    """How an iterative path runs (the solver's settings, in one object; each step reads
    its own part of them).

    Attributes
    ----------
    method : {"gd", "nu", "cg"}
    max_iter : int
    n_iter_no_change : int or None
        Window of the early-stopping rule (iterations without improvement); None: never.
    tol : float
        Relative tolerance of the early-stopping rule and of convergence (relative residual
        ||(H0 + λ) beta - b|| / ||b|| for cg, relative step for gd / nu).
    store_coefs : bool
        gd / nu: keep every iterate's coefficients (t x m x k numbers) instead of recomputing
        them on demand. cg keeps its Krylov basis (r x t k numbers) and makes any point from it.
    nu : float
        Qualification (order) of the ν-method.
    step : "auto", "reference", "paper" or float
        γ of gd / nu (module docstring).
    stopping : {"window", "paper", "reference"}
        The early-stopping rule (with a validation set).
    stopping_threshold : float or None
        The threshold of "paper" (the fraction, default 0.05) or "reference" (the fall of
        the fitted line over the window, default 0); ``selection.make_stopper``.
    memory_limit : int or None
        Bytes the solver may hold beside its operators (``cg_memory``): cg keeps one
        Cholesky factor per anchor when they fit, else one eigendecomposition serves every
        anchor (``NystromFactor.diagonalized``), and where neither fits, the compact factor
        (``compact.CompactFactor``: buffers in the operator's precision, as many anchors
        as fit; under float64 data where no float64 buffer fits, in float32 with R applied
        in float64 by refinement), and where no m x m matrix fits, the low-rank
        preconditioner (``lowrank.LowRankFactor``, O(m r) bytes). None: no limit. Where the
        full factor or the eigendecomposition is taken but the centers' K_mm is not safely
        positive definite for its Cholesky form, from
        ``krylov.COMPACT_OVER_EIGH_MIN_CENTERS`` centers on the host and with few anchors,
        the compact factor in the operator's precision holds every anchor in place of
        K_mm's eigendecomposition (``krylov.compact_in_reach``).
    factor_layout : {"auto", "cholesky", "eigh", "compact", "lowrank", "disk"}
        cg: the form of the factor (``krylov.cg_layout``); "auto": the first that fits
        ``memory_limit``. "compact" holds every anchor, in float32 under float64 data where
        the float64 buffers do not fit ``memory_limit`` (``krylov.forced_compact``). "disk":
        the compact factor in float32 with one anchor in a temporary file, read by panels
        (``disk.DiskFactor``; never taken by "auto"). gd / nu keep the full factor.
    preconditioner_rank : int
        r, the rank of the low-rank preconditioner's randomized Nyström sketch of K_mm (at
        most m), where cg takes it.
    random_state : int, Generator or None
        gd / nu: the power iteration's start.
    """

    method: str = "cg"
    max_iter: int = 100
    n_iter_no_change: int | None = 10
    tol: float = 1e-4
    store_coefs: bool = False
    nu: float = 1.0
    step: Any = "auto"
    stopping: str = "window"
    stopping_threshold: float | None = None
    memory_limit: int | None = None
    factor_layout: str = "auto"
    preconditioner_rank: int = LOWRANK_RANK
    random_state: Any = None

    def checked(self) -> IterativeOptions:
        """These options, refused by name where one is not valid."""
        if self.method not in ITERATIVE_METHODS:
            raise ValueError(f"method must be one of {ITERATIVE_METHODS}, got {self.method!r}")
        check_choice(self.factor_layout, "factor_layout", ("auto", *CG_LAYOUTS))
        check_int(self.preconditioner_rank, "preconditioner_rank", 1)
        return self

    def stopping_rule(self) -> Stopping:
        return Stopping(self.n_iter_no_change, self.tol, self.stopping, self.stopping_threshold)


def iterative_path(
    op: KernelProducts,
    y: np.ndarray,
    penalties: Any = 0.0,
    options: IterativeOptions | None = None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    prepared: IterativeSetup | None = None,
) -> Path:
    """Path over iterations (and penalties) of an iterative Nyström solver.

    Parameters
    ----------
    op : KernelProducts (a KernelOperator, or its Dask counterpart)
        Training points x centers.
    y : ndarray of shape (n,) or (n, k)
    penalties : float, ndarray of shape (P,) or None
        λ values, run side by side; None: 20 values geometric from s_max(K_mm) / m (the scale
        of the top eigenvalue of K / n) down 9 decades.
    options : IterativeOptions or None
        The solver's settings (None: the defaults, preconditioned CG).
    weights : ndarray of shape (n,) or None
    validation : Validation or None
        Validation set; enables early stopping and the choice of the best point.
    prepared : IterativeSetup or None
        What the caller computed already (the centers' factor); filled in by the path and
        reused by the recomputation of its iterates.

    Returns
    -------
    Path over ("penalty", "n_iter") with shape (P, T); coefficients of shape (m, k).
    """
    opts = (options or IterativeOptions()).checked()
    Y = as_2d(y).astype(FACTOR_DTYPE)
    setup = IterativeSetup() if prepared is None else prepared
    # one pass for the right-hand side, one per iteration (gd / nu: and a few of power
    # iteration); the validation operator makes one product per iteration
    if op.expected_passes is None:
        op.expected_passes = opts.max_iter + (1 if opts.method == "cg" else 6)
    vop = None if validation is None else validation.op
    if isinstance(vop, KernelProducts) and vop.expected_passes is None:
        vop.expected_passes = opts.max_iter
    layout, images = "cholesky", False
    if opts.method == "cg":
        layout, images = _cg_layout(op, Y, penalties, opts, validation, setup)
    prob = _Problem(op, Y, weights, setup, diagonal=layout == "eigh")
    if penalties is None:  # 20 values below the scale of K / n, estimated by s_max(K_mm) / m
        lam = penalty_grid(prob.factor.top()[0] / op.m)
    else:
        lam = np.atleast_1d(np.asarray(penalties, dtype=FACTOR_DTYPE))
    book = _Bookkeeping(len(lam), opts.max_iter, validation, opts.stopping_rule())
    if opts.method == "cg":
        path = _krylov_path(prob, lam, opts.max_iter, book, opts.tol, images)
    else:
        path = _gradient_path(prob, lam, opts, book)
    op.release()
    if validation is not None:
        validation.op.release()
    return path


def _cg_layout(
    op: KernelProducts,
    Y: np.ndarray,
    penalties: Any,
    opts: IterativeOptions,
    validation: Validation | None,
    setup: IterativeSetup,
) -> tuple[str, bool]:
    """CG's layout of the factor (``krylov.cg_layout``, or the one asked for), its factor
    made into ``setup`` where the layout is not the full one, and whether the validation
    rows' image of the basis fits beside it: (layout, images)."""
    n_val = 0 if validation is None else len(validation.Y)
    args = (op.m, Y.shape[1], penalties, opts.max_iter, n_val)
    limit, rank = opts.memory_limit, opts.preconditioner_rank
    itemsize = np.dtype(op.dtype).itemsize
    first = compact_first_for(itemsize)
    layout, slots, fsize = cg_layout(*args, limit, itemsize, first, rank)
    if opts.factor_layout == "compact":  # asked for: every anchor (float32 where it must)
        layout, slots, fsize = forced_compact(*args, limit, itemsize)
    elif opts.factor_layout == "disk":  # asked for: one anchor, float32, in a file
        layout, slots, fsize = "disk", 1, DISK_DTYPE.itemsize
    elif opts.factor_layout != "auto":
        layout, slots = opts.factor_layout, 0
    elif setup.factor is None and compact_in_reach(
        layout, *args, limit, factor_on_device(op.device, op.m)
    ):
        full = center_cholesky_factor(op)
        if full is None:  # K_mm ill-conditioned: the compact factor, not eigh's
            layout, slots, fsize = "compact", anchor_count(penalties), itemsize
        else:  # "eigh": rotated to a diagonal by _Problem
            setup.factor = full
    if setup.factor is None:
        if layout == "compact":
            dt = np.float32 if fsize < itemsize else None
            setup.factor = compact_factor(op, slots=slots, dtype=dt)
        elif layout == "disk":
            setup.factor = disk_factor(op)
        elif layout == "lowrank":
            setup.factor = lowrank_factor(op, rank)
    # the validation rows' image of the basis, where it fits beside the layout
    need = cg_memory(*args, True, layout, fsize, slots or None, rank, True)
    images = validation is not None and (limit is None or need <= limit)
    return layout, images


# --------------------------------------------------------------------------- gd / nu
def _with_holdout(prob: _Problem, validation: Validation | None) -> Any:
    """v -> (A^T W A + A_v^T A_v) v / n, A = K_nm R, A_v = K_vm R: the reference code
    takes its step 1 / ||K_nm R^-1||^2 over every row it is given, the hold-out rows
    included (they are in its K_nm, masked out of the gradient); in this scaling its γ is
    1 / the top eigenvalue of this operator."""
    if validation is None or not isinstance(validation.op, KernelProducts):
        return lambda v: prob.H0(v[:, None])[:, 0]
    fac, vop = prob.factor, validation.op

    def gram(v: np.ndarray) -> np.ndarray:
        V = v[:, None]
        held = vop.fused(fac.apply(V, native=True), None, native=fac.on_device)
        return prob.H0(V)[:, 0] + fac.apply_t(held)[:, 0] / prob.n

    return gram


def _step_bounds(
    prob: _Problem, lam_c: np.ndarray, opts: IterativeOptions, validation: Validation | None
) -> np.ndarray:
    """1 / γ of every column (penalty and output) for gd / nu's ``step``."""
    setup, step, C = prob.setup, opts.step, len(lam_c)
    if isinstance(step, str) and step == "auto":  # power iteration to 1e-3: a safe overestimate
        if setup.top is None:
            v0 = prob.factor.top()[1]  # top eigenvector of K_mm: close to the top one of H0
            H0v = lambda v: prob.H0(v[:, None])[:, 0]  # noqa: E731
            setup.top = top_eigenvalue(H0v, prob.r, 30, 1e-3, v0=v0, rng=opts.random_state)
        return setup.top + lam_c
    if isinstance(step, str) and step == "reference":  # the norm itself (Lanczos to 1e-7)
        if setup.top_exact is None:
            v0 = prob.factor.top()[1]
            setup.top_exact = largest_eigenvalue(_with_holdout(prob, validation), prob.r, v0=v0)
        return np.full(C, setup.top_exact)
    if isinstance(step, str) and step == "paper":
        if setup.kappa2 is None:
            setup.kappa2 = float(np.max(np.asarray(prob.op.diag())))
        return np.full(C, setup.kappa2)
    if isinstance(step, str):
        raise ValueError(f"step must be one of {STEP_RULES} or a positive number, got {step!r}")
    return np.full(C, 1.0 / float(step))  # γ = 1 / L


def _gradient_path(
    prob: _Problem, lam: np.ndarray, opts: IterativeOptions, book: _Bookkeeping
) -> Path:
    P, k, r = len(lam), prob.k, prob.r
    C = P * k
    method, tol = opts.method, opts.tol
    lam_c = np.repeat(lam, k)
    L_c = _step_bounds(prob, lam_c, opts, book.validation)
    b = np.tile(prob.b, (1, P))  # column p * k + j is output j of penalty p
    beta = np.zeros((r, C))
    beta_prev = np.zeros((r, C))
    best_beta = np.zeros((r, C))
    validation = book.validation
    Fv = np.zeros((len(validation.Y) if validation is not None else 0, C))
    stored: dict[tuple[int, ...], np.ndarray] = {}
    pending = np.zeros(P, dtype=bool)  # train error of the last iterate not known yet

    def errors_of(cols: np.ndarray, bc: np.ndarray, H0b: np.ndarray) -> np.ndarray:
        bb = np.einsum("rc,rc->c", bc, b[:, cols]).reshape(-1, k)
        bhb = np.einsum("rc,rc->c", bc, H0b).reshape(-1, k)
        return prob.train_error(bb, bhb)

    for t in range(1, opts.max_iter + 1):
        act = book.active
        if not act.any():
            break
        book.reserve(t)
        cols = np.flatnonzero(np.repeat(act, k))
        bc = beta[:, cols]
        H0b = prob.H0(bc)
        if t > 1:  # the error of the previous iterate, known now
            book.train_err[act, t - 2] = errors_of(cols, bc, H0b)
        grad = H0b + lam_c[cols] * bc - b[:, cols]
        if method == "gd":
            delta = -grad / L_c[cols]
        else:
            mu, om = nu_method_coefficients(t, opts.nu)
            delta = mu * (bc - beta_prev[:, cols]) - om * grad / L_c[cols]
            beta_prev[:, cols] = bc
        beta[:, cols] = bc + delta
        pending[act] = True
        book.last_iter[act] = t
        if validation is not None:
            Fv[:, cols] += validation.op.matvec(prob.factor.apply(delta, native=True))
            improved = book.record_validation(t, act, Fv[:, cols], k)
            for q in np.flatnonzero(improved):
                best_beta[:, q * k : (q + 1) * k] = beta[:, q * k : (q + 1) * k]
        if opts.store_coefs:
            for q in np.flatnonzero(act):
                stored[(int(q), t - 1)] = prob.coef(beta[:, q * k : (q + 1) * k])
        norms = np.linalg.norm(beta[:, cols], axis=0)
        col_conv = np.linalg.norm(delta, axis=0) <= tol * np.where(norms > 0, norms, 1.0)
        book.converged[act] |= col_conv.reshape(-1, k).all(axis=1)
        book.report(method, t)

    if pending.any():  # train error of each penalty's last iterate
        cols = np.flatnonzero(np.repeat(pending, k))
        errs = errors_of(cols, beta[:, cols], prob.H0(beta[:, cols]))
        book.train_err[np.flatnonzero(pending), book.last_iter[pending] - 1] = errs
    if validation is None:
        best_beta = beta
    best_t = book.best_iterations()
    for p in range(P):
        stored.setdefault((p, int(best_t[p])), prob.coef(best_beta[:, p * k : (p + 1) * k]))
    params, train_err, val_err, val_loss, T = book.finish(lam)
    path = Path(
        params,
        train_err,
        val_err,
        coef_fn=_IterateRecomputer(prob.op, prob.Y, lam, opts, prob.weights, prob.setup),
        scoring=validation.scoring if validation is not None else "mse",
        stored=stored,
        info={
            "method": method,
            "factor": prob.factor.method,
            "factor_on_device": prob.factor.on_device,
            "rank": r,
            "step": float(1.0 / L_c[0]) if C else None,
        },
        val_loss=val_loss,
    )
    if validation is None and P == 1:
        path.best_index = (0, T - 1)
    return path


class _IterateRecomputer:
    """Makes the coefficients of iterate t of penalty p by running gradient descent or the
    ν-method again (deterministic: same factor, same step) with that penalty alone."""

    def __init__(
        self,
        op: KernelProducts,
        Y: np.ndarray,
        lam: np.ndarray,
        opts: IterativeOptions,
        weights: np.ndarray | None,
        setup: IterativeSetup,
    ) -> None:
        self.op, self.Y, self.lam, self.opts = op, Y, lam, opts
        self.weights, self.setup = weights, setup

    def __call__(self, idx: tuple[int, ...]) -> np.ndarray:
        p, t_idx = idx
        again = replace(
            self.opts, max_iter=t_idx + 1, n_iter_no_change=None, tol=0.0, store_coefs=False
        )
        sub = iterative_path(
            self.op, self.Y, [self.lam[p]], again, self.weights, None, replace(self.setup)
        )
        return sub.coef()  # its last iterate


def gradient_memory(m: int, k: int, penalties: Any, n_val: int) -> int:
    """Bytes gradient descent and the ν-method hold beside their operators: R and M, the
    copy of M whose top eigenvalue sets the step, the iterates (current, previous, best,
    the right-hand sides and a step's temporaries: r x P k each), the validation
    predictions (n_val x P k) and the chosen points' coefficients."""
    P = 20 if penalties is None else int(np.size(penalties))
    return 8 * int(3 * m * m + 8 * m * P * k + 2 * n_val * P * k)
