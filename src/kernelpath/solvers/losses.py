"""The smooth convex classification losses of the Newton solver (``solvers.newton``): their
values, first derivatives and curvature in the scores F, row by row.

A loss sees the scores F of shape (n, k) and the ±1 one-vs-all codes Y of shape (n, k) that
every classifier fits (one column for two classes):

- ``"logistic"``, two classes (k = 1): l(y, f) = log(1 + exp(-y f)); k > 2 classes: the
  multinomial (softmax) loss l = log sum_j exp(f_j) - f_c for the class c of the row.
- ``"squared_hinge"`` (scikit-learn's LinearSVC): l(y, f) = max(0, 1 - y f)^2 per column,
  one-vs-all for k > 2; its second derivative is the generalized one, 2 where 1 - y f > 0.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit, logsumexp, softmax

__all__ = ["LOSSES", "NEWTON_LOSSES", "Loss", "make_loss", "log_loss"]

#: The losses classifiers accept (``loss=``): the square loss and the Newton solver's.
LOSSES = ("square", "logistic", "squared_hinge")
NEWTON_LOSSES = ("logistic", "squared_hinge")


class Loss:
    """One loss on the ±1 codes ``Y`` (n, k).

    ``separable``: the curvature is diagonal per column (each output's Newton system is its
    own); else (the multinomial loss) the rows' k x k Hessians couple the outputs.
    """

    name = "loss"
    separable = True
    #: An upper bound of the second derivative (the preconditioner's curvature at worst).
    curvature_bound = 1.0

    def __init__(self, Y: np.ndarray) -> None:
        self.Y = np.asarray(Y, dtype=np.float64)

    def values(self, F: np.ndarray) -> np.ndarray:
        """The loss of each row, (n,)."""
        raise NotImplementedError

    def gradient(self, F: np.ndarray) -> np.ndarray:
        """dl / dF, (n, k)."""
        raise NotImplementedError

    def curvature(self, F: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """The diagonal of the rows' Hessians, (n, k) (for the multinomial loss the
        diagonal p (1 - p) of diag(p) - p p^T, which ``hessian_product`` completes);
        ``rows``: F holds the scores of these rows only."""
        raise NotImplementedError

    def hessian_product(self, F: np.ndarray, U: np.ndarray) -> np.ndarray:
        """The rows' Hessians times U, (n, k): row i is H_i(F_i) U_i."""
        return self.curvature(F) * U


class Logistic(Loss):
    name = "logistic"
    curvature_bound = 0.25

    def values(self, F: np.ndarray) -> np.ndarray:
        return -log_expit(self.Y * F).sum(axis=1)

    def gradient(self, F: np.ndarray) -> np.ndarray:
        return -self.Y * expit(-self.Y * F)

    def curvature(self, F: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        p = expit(F)
        return p * (1.0 - p)


class Multinomial(Loss):
    name = "logistic"
    separable = False
    curvature_bound = 0.5

    def __init__(self, Y: np.ndarray) -> None:
        super().__init__(Y)
        self.onehot = (self.Y > 0).astype(np.float64)

    def values(self, F: np.ndarray) -> np.ndarray:
        return logsumexp(F, axis=1) - (F * self.onehot).sum(axis=1)

    def gradient(self, F: np.ndarray) -> np.ndarray:
        return softmax(F, axis=1) - self.onehot

    def curvature(self, F: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        P = softmax(F, axis=1)
        return P * (1.0 - P)

    def hessian_product(self, F: np.ndarray, U: np.ndarray) -> np.ndarray:
        P = softmax(F, axis=1)
        PU = P * U
        return PU - P * PU.sum(axis=1, keepdims=True)


class SquaredHinge(Loss):
    name = "squared_hinge"
    curvature_bound = 2.0

    def values(self, F: np.ndarray) -> np.ndarray:
        return (np.maximum(0.0, 1.0 - self.Y * F) ** 2).sum(axis=1)

    def gradient(self, F: np.ndarray) -> np.ndarray:
        return -2.0 * self.Y * np.maximum(0.0, 1.0 - self.Y * F)

    def curvature(self, F: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        Y = self.Y if rows is None else self.Y[rows]
        return 2.0 * (Y * F < 1.0)


def make_loss(name: str, Y: np.ndarray) -> Loss:
    """The loss ``name`` on the ±1 codes ``Y`` (n, k): the logistic loss is binary for one
    column and multinomial for several."""
    Y = np.asarray(Y)
    if name == "logistic":
        return Logistic(Y) if Y.shape[1] == 1 else Multinomial(Y)
    if name == "squared_hinge":
        return SquaredHinge(Y)
    raise ValueError(f"loss must be one of {NEWTON_LOSSES}, got {name!r}")


def log_loss(Y: np.ndarray, F: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Mean (weighted) log-loss of logistic scores per path point: Y (n, k) ±1 codes,
    F (n, P, k) scores (one column: the binary logit; several: multinomial logits)
    -> (P,)."""
    if Y.shape[1] == 1:
        per = -log_expit(Y[:, None, 0] * F[:, :, 0])
    else:
        per = (
            logsumexp(F, axis=2)
            - np.take_along_axis(
                F, Y.argmax(axis=1)[:, None, None].repeat(F.shape[1], axis=1), axis=2
            )[:, :, 0]
        )
    if w is None:
        return per.mean(axis=0)
    return (w @ per) / w.sum()
