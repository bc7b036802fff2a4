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
from ._iterates import _Bookkeeping, _Problem
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


def iterative_path(
    op: KernelProducts,
    y: np.ndarray,
    penalties: Any = 0.0,
    method: str = "cg",
    max_iter: int = 100,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    n_iter_no_change: int | None = 10,
    tol: float = 1e-4,
    store_coefs: bool = False,
    nu: float = 1.0,
    random_state: Any = None,
    _setup: dict[str, Any] | None = None,
    step: Any = "auto",
    stopping: str = "window",
    memory_limit: int | None = None,
    stopping_threshold: float | None = None,
    factor_layout: str = "auto",
    preconditioner_rank: int = LOWRANK_RANK,
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
    method : {"gd", "nu", "cg"}
    max_iter : int
    weights : ndarray of shape (n,) or None
    validation : Validation or None
        Validation set; enables early stopping and the choice of the best point.
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
        preconditioner
        (``lowrank.LowRankFactor``, O(m r) bytes). None: no limit. Where the full factor
        or the eigendecomposition is taken but the centers' K_mm is not safely positive
        definite for its Cholesky form, from ``krylov.COMPACT_OVER_EIGH_MIN_CENTERS``
        centers on the host and with few anchors, the compact factor in the operator's
        precision holds every anchor in place of K_mm's eigendecomposition
        (``krylov.compact_in_reach``; for the eigendecomposition's layout, where it fits).
    factor_layout : {"auto", "cholesky", "eigh", "compact", "lowrank", "disk"}
        cg: the form of the factor (``krylov.cg_layout``); "auto": the first that fits
        ``memory_limit``. "compact" holds every anchor, in float32 under float64 data where
        the float64 buffers do not fit ``memory_limit`` (``krylov.forced_compact``). "disk":
        the compact factor in float32 with one anchor in a temporary file, read by panels
        (``disk.DiskFactor``; never taken by "auto"). gd / nu keep the full factor.
    preconditioner_rank : int
        r, the rank of the low-rank preconditioner's randomized Nyström sketch of K_mm (at
        most m), where cg takes it.

    Returns
    -------
    Path over ("penalty", "n_iter") with shape (P, T); coefficients of shape (m, k).
    """
    if method not in ITERATIVE_METHODS:
        raise ValueError(f"method must be one of {ITERATIVE_METHODS}, got {method!r}")
    Y = as_2d(y).astype(FACTOR_DTYPE)
    setup = dict(_setup or {})
    # one pass for the right-hand side, one per iteration (gd / nu: and a few of power
    # iteration); the validation operator makes one product per iteration
    if op.expected_passes is None:
        op.expected_passes = max_iter + (1 if method == "cg" else 6)
    vop = None if validation is None else validation.op
    if isinstance(vop, KernelProducts) and vop.expected_passes is None:
        vop.expected_passes = max_iter
    n_val = 0 if validation is None else len(validation.Y)
    check_choice(factor_layout, "factor_layout", ("auto", *CG_LAYOUTS))
    check_int(preconditioner_rank, "preconditioner_rank", 1)
    layout, slots, images = "cholesky", 0, False
    if method == "cg":
        args = (op.m, Y.shape[1], penalties, max_iter, n_val)
        itemsize = np.dtype(op.dtype).itemsize
        first = compact_first_for(itemsize)
        on_device = factor_on_device(op.device, op.m)
        layout, slots, fsize = cg_layout(*args, memory_limit, itemsize, first, preconditioner_rank)
        if factor_layout == "compact":  # asked for: every anchor (float32 where it must)
            layout, slots, fsize = forced_compact(*args, memory_limit, itemsize)
        elif factor_layout == "disk":  # asked for: one anchor, float32, in a file
            layout, slots, fsize = "disk", 1, DISK_DTYPE.itemsize
        elif factor_layout != "auto":
            layout, slots = factor_layout, 0
        elif "factor" not in setup and compact_in_reach(layout, *args, memory_limit, on_device):
            full = center_cholesky_factor(op)
            if full is None:  # K_mm ill-conditioned: the compact factor, not eigh's
                layout, slots, fsize = "compact", anchor_count(penalties), itemsize
            else:  # "eigh": rotated to a diagonal by _Problem
                setup["factor"] = full
        if layout == "compact" and "factor" not in setup:
            dt = np.float32 if fsize < itemsize else None
            setup["factor"] = compact_factor(op, slots=slots, dtype=dt)
        if layout == "disk" and "factor" not in setup:
            setup["factor"] = disk_factor(op)
        if layout == "lowrank" and "factor" not in setup:
            setup["factor"] = lowrank_factor(op, preconditioner_rank)
        # the validation rows' image of the basis, where it fits beside the layout
        need = cg_memory(*args, True, layout, fsize, slots or None, preconditioner_rank, True)
        images = validation is not None and (memory_limit is None or need <= memory_limit)
    prob = _Problem(op, Y, weights, setup, diagonal=layout == "eigh")
    if penalties is None:  # 20 values below the scale of K / n, estimated by s_max(K_mm) / m
        lam = penalty_grid(prob.factor.top()[0] / op.m)
    else:
        lam = np.atleast_1d(np.asarray(penalties, dtype=FACTOR_DTYPE))
    book = _Bookkeeping(
        len(lam), max_iter, validation, n_iter_no_change, tol, stopping, stopping_threshold
    )
    if method == "cg":
        path = _krylov_path(prob, lam, max_iter, book, tol, images)
    else:
        path = _gradient_path(
            prob, lam, method, max_iter, book, tol, store_coefs, nu, random_state, step
        )
    op.release()
    if validation is not None:
        validation.op.release()
    return path


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


def _gradient_path(
    prob: _Problem,
    lam: np.ndarray,
    method: str,
    max_iter: int,
    book: _Bookkeeping,
    tol: float,
    store_coefs: bool,
    nu: float,
    random_state: Any,
    step: Any = "auto",
) -> Path:
    P, k, r = len(lam), prob.k, prob.r
    C = P * k
    setup = prob.setup
    lam_c = np.repeat(lam, k)
    if isinstance(step, str) and step in ("auto", "reference"):
        # "reference": the norm itself (Lanczos to 1e-7), as the reference code computes
        # it; "auto": 1e-3 is enough (power iteration, and a safe overestimate)
        key = "L" if step == "auto" else "L_exact"
        if key not in setup:
            v0 = prob.factor.top()[1]  # top eigenvector of K_mm: close to the top one of H0
            if step == "auto":
                H0v = lambda v: prob.H0(v[:, None])[:, 0]  # noqa: E731
                setup[key] = top_eigenvalue(H0v, r, 30, 1e-3, v0=v0, rng=random_state)
            else:
                setup[key] = largest_eigenvalue(_with_holdout(prob, book.validation), r, v0=v0)
        L_c = setup[key] + (lam_c if step == "auto" else np.zeros(C))
    elif isinstance(step, str) and step == "paper":
        if "kappa2" not in setup:
            setup["kappa2"] = float(np.max(np.asarray(prob.op.diag())))
        L_c = np.full(C, setup["kappa2"])
    elif isinstance(step, str):
        raise ValueError(f"step must be one of {STEP_RULES} or a positive number, got {step!r}")
    else:
        L_c = np.full(C, 1.0 / float(step))  # γ = 1 / L
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

    for t in range(1, max_iter + 1):
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
            mu, om = nu_method_coefficients(t, nu)
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
        if store_coefs:
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
        coef_fn=_IterateRecomputer(
            prob.op, prob.Y, lam, method, prob.weights, nu, random_state, dict(setup), step
        ),
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
        method: str,
        weights: np.ndarray | None,
        nu: float,
        random_state: Any,
        setup: dict[str, Any],
        step: Any = "auto",
    ) -> None:
        self.op, self.Y, self.lam, self.method = op, Y, lam, method
        self.weights, self.nu, self.random_state, self.setup = weights, nu, random_state, setup
        self.step = step

    def __call__(self, idx: tuple[int, ...]) -> np.ndarray:
        p, t_idx = idx
        sub = iterative_path(
            self.op,
            self.Y,
            [self.lam[p]],
            self.method,
            t_idx + 1,
            self.weights,
            None,
            None,
            0.0,
            False,
            self.nu,
            self.random_state,
            _setup=self.setup,
            step=self.step,
        )
        return sub.coef()  # its last iterate


def gradient_memory(m: int, k: int, penalties: Any, n_val: int) -> int:
    """Bytes gradient descent and the ν-method hold beside their operators: R and M, the
    copy of M whose top eigenvalue sets the step, the iterates (current, previous, best,
    the right-hand sides and a step's temporaries: r x P k each), the validation
    predictions (n_val x P k) and the chosen points' coefficients."""
    P = 20 if penalties is None else int(np.size(penalties))
    return 8 * int(3 * m * m + 8 * m * P * k + 2 * n_val * P * k)
