"""Helpers shared by the solvers: targets, weights and validation bookkeeping."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._backend import FACTOR_DTYPE
from ..operators.protocol import KernelProducts, Operator
from ..path import Path
from ..selection import SCORERS


@dataclass
class Validation:
    """A validation set seen through its own operator (rows: validation points)."""

    op: Operator
    Y: np.ndarray  # (n_val, k) coded targets
    scoring: str = "mse"
    #: the validation rows' weights (sample and class weights), or None
    weights: np.ndarray | None = None

    def scorer(self) -> Callable[..., np.ndarray]:
        return SCORERS[self.scoring]

    def errors(self, F: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(errors, squared losses) of predictions ``F`` (n_val, P * k) grouped as P points
        of k outputs, weighted by the rows' weights; for "mse" scoring both are the same."""
        P = F.shape[1] // k
        F3 = F.reshape(len(self.Y), P, k)
        loss = SCORERS["mse"](self.Y, F3, self.weights)
        err = loss if self.scoring == "mse" else self.scorer()(self.Y, F3, self.weights)
        return err, loss


def as_2d(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    return y[:, None] if y.ndim == 1 else y


def weights_or_ones(weights: np.ndarray | None, n: int) -> np.ndarray:
    return np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)


def closed_form_path(
    name: str,
    params: np.ndarray,
    alphas: np.ndarray,
    train_err: np.ndarray,
    validation: Validation | None,
    dtype: Any,
    info: dict[str, Any] | None = None,
    scores: tuple[np.ndarray, np.ndarray, str] | None = None,
) -> Path:
    """A 1-D path whose coefficients are all at hand: ``alphas`` of shape (m, P, k).

    Scores every point on the validation set with one product for all the coefficients (or
    takes ``scores`` = (errors, losses, scoring) computed without one: leave-one-out, GCV)
    and keeps the coefficients (in the data's dtype) as the path's stored points.
    """
    m, P, k = alphas.shape
    val_err = val_loss = None
    scoring = validation.scoring if validation is not None else "mse"
    if scores is not None:
        val_err, val_loss, scoring = scores
    elif validation is not None:
        if isinstance(validation.op, KernelProducts) and validation.op.expected_passes is None:
            validation.op.expected_passes = 1
        F = validation.op.matvec(alphas.reshape(m, P * k).astype(dtype, copy=False))
        F = np.asarray(F, dtype=FACTOR_DTYPE).reshape(-1, P * k)
        val_err, val_loss = validation.errors(F, k)
        validation.op.release()
    stored: dict[tuple[int, ...], np.ndarray] = {
        (p,): alphas[:, p, :].astype(dtype) for p in range(P)
    }
    return Path(
        {name: params},
        np.maximum(train_err, 0.0),
        val_err,
        coef_fn=None,
        scoring=scoring,
        stored=stored,
        val_loss=val_loss,
        info=info,
    )
