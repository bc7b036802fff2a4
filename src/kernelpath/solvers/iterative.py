"""Iterative Nyström solvers: NYTRO gradient descent, the ν-method and preconditioned CG.

All three work in the Nyström parametrization alpha = R beta (R R^T = K_mm^+, R^T K_mm R = I,
so ||f||_H = ||beta||) on the normal equations of (1/n) ||W^(1/2) (A beta - y)||^2 + λ ||beta||^2
with A = K_nm R:

    (H0 + λ I) beta = b,     H0 = A^T W A / n,   b = A^T W y / n.

- ``gd`` (NYTRO eq. 17-19): beta_t = beta_{t-1} - (1/L) ((H0 + λ) beta_{t-1} - b), with
  L = λ + the largest eigenvalue of H0 from power iteration (not the conservative
  1 / max k(x, x) of the paper). With λ = 0 the iteration count is the regularization.
- ``nu``: the ν-method acceleration of the same iteration (Engl, Hanke & Neubauer §6.3),
  needing about the square root of the iterations of ``gd`` for the same filter.
- ``cg``: conjugate gradient preconditioned by P = mean(w) diag(s) / m + λ I, where s are the
  eigenvalues of K_mm. Since K_nm^T K_nm ≈ (n / m) K_mm^2 for uniform centers,
  H0 ≈ R^T K_mm^2 R / m = diag(s) / m: this is the FALKON preconditioner, diagonal in these
  coordinates.

Every penalty λ_p and output j is one column of beta; all columns share each operator pass
(``KernelOperator.fused`` with several right-hand sides). Training errors come from the
quadratic form y'Wy - 2 n beta'b + n beta'H0 beta; validation predictions are updated by
K_vm R (beta_t - beta_{t-1}) each iteration. A penalty stops when its validation error stops
improving (``EarlyStopping``) or its iteration has converged (relative ``tol``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._backend import FACTOR_DTYPE
from ..linalg import nu_method_coefficients, top_eigenvalue
from ..operators import KernelOperator
from ..path import Path, lex_argmin
from ..selection import EarlyStopping
from ._common import Validation, as_2d, weights_or_ones
from .nystrom import center_factor

__all__ = ["iterative_path", "ITERATIVE_METHODS"]

ITERATIVE_METHODS = ("gd", "nu", "cg")


def iterative_path(
    op: KernelOperator,
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
) -> Path:
    """Path over iterations (and penalties) of an iterative Nyström solver.

    Parameters
    ----------
    op : KernelOperator
        Training points x centers.
    y : ndarray of shape (n,) or (n, k)
    penalties : float or ndarray of shape (P,)
        λ values, run side by side.
    method : {"gd", "nu", "cg"}
    max_iter : int
    weights : ndarray of shape (n,) or None
    validation : Validation or None
        Validation set; enables early stopping and the choice of the best point.
    n_iter_no_change : int or None
        Window of the early-stopping rule (iterations without improvement); None: never.
    tol : float
        Relative tolerance of the early-stopping rule and of convergence (CG residual, GD step).
    store_coefs : bool
        Keep every iterate's coefficients (t x m x k numbers) instead of recomputing on demand.
    nu : float
        Qualification of the ν-method.

    Returns
    -------
    Path over ("penalty", "n_iter") with shape (P, T); coefficients of shape (m, k).
    """
    if method not in ITERATIVE_METHODS:
        raise ValueError(f"method must be one of {ITERATIVE_METHODS}, got {method!r}")
    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    w = weights_or_ones(weights, n)
    lam = np.atleast_1d(np.asarray(penalties, dtype=FACTOR_DTYPE))
    P, C = len(lam), len(lam) * k
    setup = dict(_setup or {})
    if "R" not in setup:
        setup["R"], setup["s"] = center_factor(op)
    R, s_mm = setup["R"], setup["s"]
    r = R.shape[1]

    def H0(V: np.ndarray) -> np.ndarray:
        out = op.fused((R @ V).astype(op.dtype), weights)
        return R.T @ np.asarray(out, dtype=FACTOR_DTYPE) / n

    if "b" not in setup:
        Aty = op.rmatvec((w[:, None] * Y).astype(op.dtype))
        setup["b"] = R.T @ np.asarray(Aty, dtype=FACTOR_DTYPE) / n
    b = np.tile(setup["b"], (1, P))  # column p * k + j is output j of penalty p
    lam_c = np.repeat(lam, k)
    if method in ("gd", "nu") and "L" not in setup:
        v0 = np.zeros(r)
        v0[0] = 1.0  # top eigenvector of K_mm: close to the top one of H0
        setup["L"] = top_eigenvalue(lambda v: H0(v[:, None])[:, 0], r, v0=v0, rng=random_state)
    L_c = setup.get("L", 0.0) + lam_c
    yw2 = np.tile((w[:, None] * Y * Y).sum(axis=0), P)
    sw = w.sum()

    def train_errors(cols: np.ndarray, beta: np.ndarray, H0beta: np.ndarray) -> np.ndarray:
        """Per-penalty training MSE for the penalties whose columns are ``cols``."""
        e = yw2[cols] - 2 * n * np.einsum("rc,rc->c", beta, b[:, cols])
        e += n * np.einsum("rc,rc->c", beta, H0beta)
        return np.maximum(e.reshape(-1, k).sum(axis=1) / (sw * k), 0.0)

    beta = np.zeros((r, C))
    if method == "cg":
        precond = (w.mean() * s_mm / op.m)[:, None] + lam_c[None, :]
        resid = b.copy()
        z = resid / precond
        p_dir = z.copy()
        rz = np.einsum("rc,rc->c", resid, z)
        H0beta = np.zeros((r, C))
        bnorm = np.linalg.norm(b, axis=0)
    elif method == "nu":
        beta_prev = np.zeros((r, C))

    window = n_iter_no_change if validation is not None else None
    stopper = EarlyStopping(P, window, tol)
    converged = np.zeros(P, dtype=bool)
    train_err = np.full((P, max_iter), np.nan)
    val_err = np.full((P, max_iter), np.nan)  # dropped at the end without validation
    val_loss = np.full((P, max_iter), np.nan)
    best_err, best_loss = np.full(P, np.inf), np.full(P, np.inf)
    best_beta = np.zeros((r, C))
    stored: dict[tuple[int, ...], np.ndarray] = {}
    Fv = np.zeros((len(validation.Y) if validation is not None else 0, C))
    last_iter = np.zeros(P, dtype=int)
    pending = np.zeros(P, dtype=bool)  # gd / nu: train error of the last iterate not known

    for t in range(1, max_iter + 1):
        act_p = stopper.active & ~converged
        if not act_p.any():
            break
        cols = np.flatnonzero(np.repeat(act_p, k))
        if method == "cg":
            pc = p_dir[:, cols]
            H0p = H0(pc)
            Hp = H0p + lam_c[cols] * pc
            pq = np.einsum("rc,rc->c", pc, Hp)
            a = np.where(pq > 0, rz[cols] / np.where(pq > 0, pq, 1.0), 0.0)
            delta = a * pc
            beta[:, cols] += delta
            H0beta[:, cols] += a * H0p
            resid[:, cols] -= a * Hp
            zc = resid[:, cols] / precond[:, cols]
            rz_new = np.einsum("rc,rc->c", resid[:, cols], zc)
            ratio = np.where(rz[cols] > 0, rz_new / np.where(rz[cols] > 0, rz[cols], 1.0), 0.0)
            p_dir[:, cols] = zc + ratio * pc
            rz[cols] = rz_new
            train_err[act_p, t - 1] = train_errors(cols, beta[:, cols], H0beta[:, cols])
            col_conv = np.linalg.norm(resid[:, cols], axis=0) <= tol * bnorm[cols]
            col_conv |= pq <= 0
        else:
            bc = beta[:, cols]
            H0b = H0(bc)
            if t > 1:  # the error of the previous iterate, known now
                train_err[act_p, t - 2] = train_errors(cols, bc, H0b)
            grad = H0b + lam_c[cols] * bc - b[:, cols]
            if method == "gd":
                delta = -grad / L_c[cols]
            else:
                mu, om = nu_method_coefficients(t, nu)
                delta = mu * (bc - beta_prev[:, cols]) - om * grad / L_c[cols]
                beta_prev[:, cols] = bc
            beta[:, cols] = bc + delta
            pending[act_p] = True
            norms = np.linalg.norm(beta[:, cols], axis=0)
            col_conv = np.linalg.norm(delta, axis=0) <= tol * np.where(norms > 0, norms, 1.0)
        last_iter[act_p] = t
        if validation is not None:
            Fv[:, cols] += validation.op.matvec((R @ delta).astype(op.dtype))
            errs, losses = np.full(P, np.nan), np.full(P, np.nan)
            errs[act_p], losses[act_p] = validation.errors(Fv[:, cols], k)
            val_err[:, t - 1] = errs
            val_loss[:, t - 1] = losses
            # stop on the smooth squared loss (a classification error rate is flat for long
            # stretches); keep the best point by (error, loss)
            stopper.update(t, losses)
            improved = (errs < best_err) | ((errs == best_err) & (losses < best_loss))
            best_err[improved], best_loss[improved] = errs[improved], losses[improved]
            for q in np.flatnonzero(improved):
                best_beta[:, q * k : (q + 1) * k] = beta[:, q * k : (q + 1) * k]
        if store_coefs:
            for q in np.flatnonzero(act_p):
                stored[(int(q), t - 1)] = (R @ beta[:, q * k : (q + 1) * k]).astype(op.dtype)
        conv_p = np.zeros(P, dtype=bool)
        conv_p[act_p] = col_conv.reshape(-1, k).all(axis=1)
        converged |= conv_p

    T = int(last_iter.max()) if P else 0
    if method != "cg" and pending.any():
        cols = np.flatnonzero(np.repeat(pending, k))
        H0b = H0(beta[:, cols])
        errs = train_errors(cols, beta[:, cols], H0b)
        train_err[np.flatnonzero(pending), last_iter[pending] - 1] = errs
    op.release()
    if validation is not None:
        validation.op.release()
    train_err, val_err, val_loss = train_err[:, :T], val_err[:, :T], val_loss[:, :T]
    n_iter = np.tile(np.arange(1, T + 1), (P, 1))
    params = {"penalty": np.repeat(lam[:, None], T, axis=1), "n_iter": n_iter}
    if validation is None:
        best_beta = beta
    if validation is not None:
        best_t = np.array([lex_argmin(val_err[p], val_loss[p]) for p in range(P)])
    else:
        best_t = last_iter - 1
    for p in range(P):
        stored.setdefault(
            (p, int(best_t[p])), (R @ best_beta[:, p * k : (p + 1) * k]).astype(op.dtype)
        )

    coef_fn = _IterateRecomputer(op, Y, lam, method, weights, nu, random_state, dict(setup))
    path = Path(
        params,
        train_err,
        val_err if validation is not None else None,
        coef_fn=coef_fn,
        scoring=validation.scoring if validation is not None else "mse",
        stored=stored,
        info={"method": method, "rank": r, "step": 1.0 / setup["L"] if "L" in setup else None},
        val_loss=val_loss if validation is not None else None,
    )
    if validation is None and P == 1:
        path.best_index = (0, T - 1)
    return path


class _IterateRecomputer:
    """Makes the coefficients of iterate t of penalty p by running the solver again
    (deterministic: same factor, same step) with that penalty alone, for t iterations."""

    def __init__(
        self,
        op: KernelOperator,
        Y: np.ndarray,
        lam: np.ndarray,
        method: str,
        weights: np.ndarray | None,
        nu: float,
        random_state: Any,
        setup: dict[str, Any],
    ) -> None:
        self.op, self.Y, self.lam, self.method = op, Y, lam, method
        self.weights, self.nu, self.random_state, self.setup = weights, nu, random_state, setup

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
        )
        return sub.coef()  # its last iterate (t_idx, or earlier if CG converged exactly)
