"""Helpers shared by the solvers: targets, weights and validation bookkeeping."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..operators import KernelOperator
from ..selection import SCORERS


@dataclass
class Validation:
    """A validation set seen through its own operator (rows: validation points)."""

    op: KernelOperator
    Y: np.ndarray  # (n_val, k) coded targets
    scoring: str = "mse"

    def scorer(self) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        return SCORERS[self.scoring]

    def errors(self, F: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(errors, squared losses) of predictions ``F`` (n_val, P * k) grouped as P points
        of k outputs; for "mse" scoring both are the same."""
        P = F.shape[1] // k
        F3 = F.reshape(len(self.Y), P, k)
        loss = SCORERS["mse"](self.Y, F3)
        err = loss if self.scoring == "mse" else self.scorer()(self.Y, F3)
        return err, loss


def as_2d(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    return y[:, None] if y.ndim == 1 else y


def weights_or_ones(weights: np.ndarray | None, n: int) -> np.ndarray:
    return np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
