"""The state an iterative Nyström path shares between its iterations: the problem (operator,
targets, the factor of the centers' system) and the bookkeeping of the path's points (their
coefficients, training and validation errors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._backend import FACTOR_DTYPE
from ..operators.protocol import KernelProducts
from ..path import lex_argmin
from ..progress import report
from ..selection import EarlyStopping, make_stopper
from ._common import Validation, weights_or_ones
from .nystrom import center_factor


@dataclass
class IterativeSetup:
    """What an iterative path computes once and the recomputation of its iterates reuses:
    the centers' factor (given by the caller where it has one), the right-hand side
    b = R^T K_nm^T W y / n, and the bounds of gd / nu's step (the top eigenvalue of H0 by
    power iteration, ``top``, or to Lanczos' precision, ``top_exact``; the paper's
    kappa^2 = max k(x, x))."""

    factor: Any = None
    b: np.ndarray | None = None
    top: float | None = None
    top_exact: float | None = None
    kappa2: float | None = None


@dataclass(frozen=True)
class Stopping:
    """When a penalty stops iterating: the early-stopping rule (``selection.make_stopper``,
    with a validation set) and the relative tolerance of convergence."""

    n_iter_no_change: int | None = 10
    tol: float = 1e-4
    rule: str = "window"
    threshold: float | None = None


class _Problem:
    """The projected normal equations shared by the iterative solvers."""

    def __init__(
        self,
        op: KernelProducts,
        Y: np.ndarray,
        weights: np.ndarray | None,
        setup: IterativeSetup,
        diagonal: bool = False,
    ) -> None:
        self.op, self.Y, self.weights = op, Y, weights
        self.n, self.k = Y.shape
        self.w = weights_or_ones(weights, self.n)
        if setup.factor is None:
            setup.factor = center_factor(op)
        if diagonal and setup.b is None:  # M rotated to a diagonal (before b, in R's axes)
            setup.factor = setup.factor.diagonalized()
        self.factor = setup.factor
        self.r = self.factor.rank
        if setup.b is None:
            Aty = op.rmatvec(self.w[:, None] * Y, native=self.factor.on_device)
            setup.b = self.factor.apply_t(Aty) / self.n
        self.b = setup.b  # (r, k)
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
        self, P: int, max_iter: int, validation: Validation | None, stopping: Stopping
    ) -> None:
        self.P = P
        self.max_iter = max_iter
        self.validation = validation
        if validation is None:
            self.stopper: Any = EarlyStopping(P, None, stopping.tol)
        else:
            self.stopper = make_stopper(
                stopping.rule, P, stopping.n_iter_no_change, stopping.tol, stopping.threshold
            )
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
