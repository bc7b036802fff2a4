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
predictions are updated incrementally for gd / nu (K_vm R (beta_t - beta_{t-1})) and made
afresh for cg (K_vm R V y for the active penalties: one validation pass per iteration, as
fast as keeping K_vm R V, measured at n = 100,000, m = 2000, and without its n_val x d
matrix). The Krylov basis stops growing at ``krylov_cap`` (its memory, ``cg_memory``).
A penalty stops when its validation error stops improving
(``stopping="window"``: ``EarlyStopping``; "paper": NYTRO's 5% rule, "reference": the
reference code's slope rule, ``selection.make_stopper``) or its iteration has converged
(relative ``tol``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from .._backend import FACTOR_DTYPE
from ..linalg import (
    NystromFactor,
    largest_eigenvalue,
    nu_method_coefficients,
    spectral_filter,
    top_eigenvalue,
)
from ..operators.protocol import KernelProducts
from ..path import Path, lex_argmin
from ..progress import report
from ..selection import EarlyStopping, make_stopper, penalty_grid
from ._common import Validation, as_2d, weights_or_ones
from .nystrom import center_factor

__all__ = [
    "iterative_path",
    "ITERATIVE_METHODS",
    "STEP_RULES",
    "cg_memory",
    "cg_cholesky",
    "gradient_memory",
]

ITERATIVE_METHODS = ("gd", "nu", "cg")
#: ``step`` of gd / nu by name (or a number γ).
STEP_RULES = ("auto", "reference", "paper")


class _Problem:
    """The projected normal equations shared by the iterative solvers."""

    def __init__(
        self,
        op: KernelProducts,
        Y: np.ndarray,
        weights: np.ndarray | None,
        setup: dict[str, Any],
        diagonal: bool = False,
    ) -> None:
        self.op, self.Y, self.weights = op, Y, weights
        self.n, self.k = Y.shape
        self.w = weights_or_ones(weights, self.n)
        if "factor" not in setup:
            setup["factor"] = center_factor(op)
        if diagonal and "b" not in setup:  # M rotated to a diagonal (before b, in R's axes)
            setup["factor"] = setup["factor"].diagonalized()
        self.factor = setup["factor"]
        self.r = self.factor.rank
        if "b" not in setup:
            Aty = op.rmatvec(self.w[:, None] * Y, native=self.factor.on_device)
            setup["b"] = self.factor.apply_t(Aty) / self.n
        self.b = setup["b"]  # (r, k)
        self.yw2 = (self.w[:, None] * Y * Y).sum(axis=0)  # (k,)
        self.setup = setup

    def H0(self, V: np.ndarray) -> np.ndarray:
        """H0 V = R^T K_nm^T W K_nm R V / n for V of shape (r, c): one pass over the data."""
        fac = self.factor
        out = self.op.fused(fac.apply(V, native=True), self.weights, native=fac.on_device)
        return fac.apply_t(out) / self.n

    def train_error(self, beta_b: np.ndarray, beta_H_beta: np.ndarray) -> np.ndarray:
        """Training MSE per penalty from beta'b and beta'H0 beta, both of shape (P, k)."""
        e = self.yw2[None, :] - 2 * self.n * beta_b + self.n * beta_H_beta
        return np.maximum(e.sum(axis=1) / (self.w.sum() * self.k), 0.0)

    def coef(self, beta: np.ndarray) -> np.ndarray:
        return np.asarray(self.factor.apply(beta), dtype=FACTOR_DTYPE).astype(self.op.dtype)


#: The error columns a path starts with (``_Bookkeeping.reserve`` doubles them).
INITIAL_COLUMNS = 64


class _Bookkeeping:
    """Errors, early stopping and the best iterate of each penalty."""

    def __init__(
        self,
        P: int,
        max_iter: int,
        validation: Validation | None,
        n_iter_no_change: int | None,
        tol: float,
        stopping: str = "window",
        stopping_threshold: float | None = None,
    ) -> None:
        self.P = P
        self.max_iter = max_iter
        self.validation = validation
        if validation is None:
            self.stopper: Any = EarlyStopping(P, None, tol)
        else:
            self.stopper = make_stopper(stopping, P, n_iter_no_change, tol, stopping_threshold)
        self.converged = np.zeros(P, dtype=bool)
        # the error columns grow with the iterations run (doubling), not with max_iter: a
        # max_iter of 10^7 sized them at 5 GB before the first iteration
        cap = min(max_iter, INITIAL_COLUMNS)
        self.train_err = np.full((P, cap), np.nan)
        self.val_err = np.full((P, cap), np.nan)
        self.val_loss = np.full((P, cap), np.nan)
        self.best_err = np.full(P, np.inf)
        self.best_loss = np.full(P, np.inf)
        self.last_iter = np.zeros(P, dtype=int)

    @property
    def active(self) -> np.ndarray:
        return self.stopper.active & ~self.converged

    def reserve(self, t: int) -> None:
        """Room for iteration ``t``'s errors: the columns doubled (at most ``max_iter``)."""
        cap = self.train_err.shape[1]
        if t <= cap:
            return
        grown = min(self.max_iter, max(2 * cap, t))
        pad = np.full((self.P, grown - cap), np.nan)
        self.train_err = np.hstack([self.train_err, pad])
        self.val_err = np.hstack([self.val_err, pad])
        self.val_loss = np.hstack([self.val_loss, pad])

    def report(self, stage: str, t: int) -> None:
        """Tell the progress listeners that iteration ``t`` is done (with the best
        validation error so far and the penalties still iterating)."""
        info: dict[str, float | int] = {"active": int(self.active.sum())}
        if self.validation is not None and np.isfinite(self.val_err[:, :t]).any():
            info["best_val"] = float(np.nanmin(self.val_err[:, :t]))
        report(stage, t, self.max_iter, **info)

    def record_validation(self, t: int, act: np.ndarray, F: np.ndarray, k: int) -> np.ndarray:
        """Score predictions ``F`` (n_val, n_active * k) of iterate t; return the mask of
        penalties whose iterate t is their best so far."""
        assert self.validation is not None
        errs, losses = np.full(self.P, np.nan), np.full(self.P, np.nan)
        errs[act], losses[act] = self.validation.errors(F, k)
        self.val_err[:, t - 1] = errs
        self.val_loss[:, t - 1] = losses
        # stop on the smooth squared loss (a classification error rate is flat for long
        # stretches); keep the best point by (error, loss)
        self.stopper.update(t, losses)
        improved = (errs < self.best_err) | ((errs == self.best_err) & (losses < self.best_loss))
        self.best_err[improved], self.best_loss[improved] = errs[improved], losses[improved]
        return improved

    def finish(self, lam: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, Any, Any, int]:
        T = int(self.last_iter.max()) if self.P else 0
        params = {
            "penalty": np.repeat(lam[:, None], T, axis=1),
            "n_iter": np.tile(np.arange(1, T + 1), (self.P, 1)),
        }
        has_val = self.validation is not None
        val_err = self.val_err[:, :T] if has_val else None
        val_loss = self.val_loss[:, :T] if has_val else None
        return params, self.train_err[:, :T], val_err, val_loss, T

    def best_iterations(self) -> np.ndarray:
        """Index of each penalty's chosen iterate."""
        if self.validation is None:
            return self.last_iter - 1
        return np.array(
            [lex_argmin(self.val_err[p], self.val_loss[p]) for p in range(self.P)], dtype=int
        )


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
        anchor (``NystromFactor.diagonalized``). None: no limit.

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
    cholesky = method != "cg" or cg_cholesky(
        op.m, Y.shape[1], penalties, max_iter, n_val, memory_limit
    )
    prob = _Problem(op, Y, weights, setup, diagonal=not cholesky)
    if penalties is None:  # 20 values below the scale of K / n, estimated by s_max(K_mm) / m
        lam = penalty_grid(prob.factor.top()[0] / op.m)
    else:
        lam = np.atleast_1d(np.asarray(penalties, dtype=FACTOR_DTYPE))
    book = _Bookkeeping(
        len(lam), max_iter, validation, n_iter_no_change, tol, stopping, stopping_threshold
    )
    if method == "cg":
        path = _krylov_path(prob, lam, max_iter, book, tol)
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


def _anchors(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Anchor penalties and, for every penalty, the index of its nearest anchor in log scale.

    The anchors are spread evenly in log scale from the smallest penalty to the largest, as
    few as keep neighbouring anchors at most ``ANCHOR_RATIO`` apart: every penalty is then
    within sqrt(ANCHOR_RATIO) of an anchor (0 is its own anchor). An anchor need not be a
    penalty of the grid (it is the shift of its chain's preconditioned operator)."""
    pos = np.sort(np.unique(lam[lam > 0]))
    anchors: list[float] = [0.0] if (lam == 0).any() else []
    if pos.size:
        span = np.log(pos[-1]) - np.log(pos[0])  # (the ratio overflows: 1e300 / 1e-300)
        count = int(np.ceil(span / np.log(ANCHOR_RATIO) - 1e-9)) + 1 if span > 0 else 1
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


def gradient_memory(m: int, k: int, penalties: Any, n_val: int) -> int:
    """Bytes gradient descent and the ν-method hold beside their operators: R and M, the
    copy of M whose top eigenvalue sets the step, the iterates (current, previous, best,
    the right-hand sides and a step's temporaries: r x P k each), the validation
    predictions (n_val x P k) and the chosen points' coefficients."""
    P = 20 if penalties is None else int(np.size(penalties))
    return 8 * int(3 * m * m + 8 * m * P * k + 2 * n_val * P * k)


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
) -> int:
    """Bytes CG's path holds beside its operators at its peak, for m centers, k outputs, the
    ``penalties`` it is given (None: its own grid), ``max_iter`` and ``n_val`` validation
    rows: the factor R and M; one Cholesky factor per anchor (``cholesky``) or the
    eigendecomposition that rotates M to a diagonal; the Krylov basis V, H0 V and the
    anchors' own bases (r x d each, d = ``krylov_cap``), the projected matrix and its
    eigendecomposition (d x d); the validation predictions of every penalty's point
    (n_val x P k)."""
    lam = penalty_grid(1.0) if penalties is None else np.atleast_1d(np.asarray(penalties, float))
    P, A = len(lam), len(_anchors(lam)[0])
    d = krylov_cap(m, k, A, max_iter)
    basis = 3 * m * d + 3 * d * d + 2 * P * d * k + 6 * m * P * k
    val = 2 * n_val * P * k
    if cholesky:
        peak = (2 + A) * m * m + basis + val
    else:  # R, M and dsyevr's two m x m; then the rotated R alone
        peak = max(4 * m * m, m * m + basis + val)
    return 8 * int(peak)


def cg_cholesky(
    m: int, k: int, penalties: Any, max_iter: int, n_val: int, limit: int | None
) -> bool:
    """Whether CG keeps one Cholesky factor per anchor within ``limit`` bytes
    (``cg_memory``; else one eigendecomposition serves them all, slower to make: m = 2000,
    6 anchors, 0.7 s against 0.5 s here, m = 4000 5.7 s against 3.2 s)."""
    return limit is None or cg_memory(m, k, penalties, max_iter, n_val, True) <= limit


def _extend_basis(
    V: np.ndarray, HV: np.ndarray, Z: np.ndarray, HZ: np.ndarray, rel: float = 1e-8
) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal new directions Q (and H0 Q) spanning the part of Z orthogonal to V.

    Z is orthogonalized against V twice (classical Gram-Schmidt), then factored by a
    pivoted QR, Z P = Q T; columns with |T_ii| below ``rel`` are dropped. Since H0 is linear,
    H0 Q follows from H0 Z and H0 V by the same combination, without another operator pass.
    """
    scale = np.linalg.norm(Z, axis=0).max() if Z.size else 0.0
    if scale == 0.0:
        return Z[:, :0], HZ[:, :0]
    for _ in range(2):
        if V.shape[1]:
            coef = V.T @ Z
            Z = Z - V @ coef
            HZ = HZ - HV @ coef
    _, T, piv = scipy.linalg.qr(Z, mode="economic", pivoting=True)
    keep = int(np.sum(np.abs(np.diag(T)) > rel * scale))
    if keep == 0:
        return Z[:, :0], HZ[:, :0]
    Tk = T[:keep, :keep]
    Q = scipy.linalg.solve_triangular(Tk, Z[:, piv[:keep]].T, trans="T").T
    HQ = scipy.linalg.solve_triangular(Tk, HZ[:, piv[:keep]].T, trans="T").T
    return Q, HQ


def _krylov_path(
    prob: _Problem,
    lam: np.ndarray,
    max_iter: int,
    book: _Bookkeeping,
    tol: float,
) -> Path:
    P, k, r = len(lam), prob.k, prob.r
    anchors, owner = _anchors(lam)
    n_val = len(book.validation.Y) if book.validation is not None else 0
    d_cap = krylov_cap(r, k, len(anchors), max_iter)
    # one FALKON preconditioner per anchor: (mean(w) R^T K_mm^2 R / m + λ_a I)^-1
    precond = [prob.factor.preconditioner(prob.w.mean() / prob.op.m, a) for a in anchors]
    b = prob.b
    bnorm = np.linalg.norm(b, axis=0)
    bnorm = np.where(bnorm > 0, bnorm, 1.0)
    validation = book.validation
    V = np.zeros((r, 0))  # orthonormal basis of the union of the anchors' Krylov spaces
    HV = np.zeros((r, 0))
    G = np.zeros((0, 0))  # V^T H0 V
    c = np.zeros((0, k))  # V^T b
    sizes: list[int] = []  # basis size after each iteration
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
        Vnew, HVnew = _extend_basis(V, HV, U, HU)
        # the anchors' next blocks: their own operator on their own newest vectors
        start = 0
        for a in live:
            width = newest[a].shape[1]
            u, hu = U[:, start : start + width], HU[:, start : start + width]
            own[a] = np.hstack([own[a], u])
            newest[a] = _orthonormalize(precond[a](hu + anchors[a] * u), own[a])
            start += width
        if Vnew.shape[1] > d_cap - V.shape[1]:  # the basis is as large as it may grow
            Vnew, HVnew = Vnew[:, : d_cap - V.shape[1]], HVnew[:, : d_cap - V.shape[1]]
            if Vnew.shape[1] == 0:
                break
        if Vnew.shape[1] == 0:
            continue
        # extend the projected problem
        G = np.block([[G, V.T @ HVnew], [HVnew.T @ V, Vnew.T @ HVnew]])
        G = (G + G.T) / 2
        c = np.vstack([c, Vnew.T @ b])
        V, HV = np.hstack([V, Vnew]), np.hstack([HV, HVnew])
        sizes.append(V.shape[1])
        # every active penalty's Galerkin solution in the current space
        act_idx = np.flatnonzero(act)
        Yl = _galerkin(G, c, lam[act_idx])  # (a, d, k)
        na, d = len(act_idx), V.shape[1]
        Ycols = Yl.transpose(1, 0, 2).reshape(d, na * k)  # column a * k + j
        beta_b = np.einsum("adk,dk->ak", Yl, c)
        beta_H_beta = np.einsum("dak,adk->ak", (G @ Ycols).reshape(d, na, k), Yl)
        book.train_err[act, t - 1] = prob.train_error(beta_b, beta_H_beta)
        book.last_iter[act] = t
        lam_cols = np.repeat(lam[act_idx], k)
        VY = V @ Ycols  # the active points' coordinates beta, (r, na k)
        resid = HV @ Ycols + lam_cols * VY - np.tile(b, (1, na))
        conv = (np.linalg.norm(resid, axis=0) <= tol * np.tile(bnorm, na)).reshape(na, k)
        conv = conv.all(axis=1)
        if validation is not None:  # one validation pass for the active points
            Fv = validation.op.matvec(prob.factor.apply(VY, native=True))
            Fv = np.asarray(Fv, dtype=FACTOR_DTYPE).reshape(n_val, -1)
            book.record_validation(t, act, Fv, k)
        del VY
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
                newest[a] = _orthonormalize(precond[a](resid[:, cols]), V)
        book.report("cg", t)
    best_t = book.best_iterations()
    params, train_err, val_err, val_loss, T = book.finish(lam)
    sizes_arr = np.asarray(sizes + [V.shape[1]] * (T - len(sizes)), dtype=int)
    coefs = _KrylovCoefficients(prob.factor, V, G, c, lam, sizes_arr, prob.op.dtype)
    del V, HV, own, newest, precond
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
            "rank": r,
            "krylov_dim": coefs.RV.shape[1],
            "anchor_penalties": anchors.tolist(),
            "preconditioners": "diagonal" if prob.factor.M.ndim == 1 else "cholesky",
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
    ) -> None:
        self.RV = np.asarray(factor.apply(V), dtype=FACTOR_DTYPE)
        self.G, self.c, self.lam, self.sizes = G, c, lam, sizes
        self.dtype = dtype

    def __call__(self, idx: tuple[int, ...]) -> np.ndarray:
        p, t_idx = idx
        d = int(self.sizes[t_idx])
        if d == 0:
            return np.zeros((self.RV.shape[0], self.c.shape[1]), dtype=self.dtype)
        y = _galerkin(self.G[:d, :d], self.c[:d], self.lam[p : p + 1])[0]
        return np.asarray(self.RV[:, :d] @ y).astype(self.dtype)


def _galerkin(G: np.ndarray, c: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Solutions y_p of (G + λ_p I) y = c for every λ_p, shape (P, d, k), from one
    eigendecomposition of the projected matrix G (the Tikhonov filter, 0 on its null space)."""
    g, Q = np.linalg.eigh(G)
    filt = spectral_filter("tikhonov", np.maximum(g, 0.0), lam)  # (P, d)
    Qc = Q.T @ c
    return np.einsum("de,pe,ek->pdk", Q, filt, Qc)
