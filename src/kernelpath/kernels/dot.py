"""The kernels of the inner product: Polynomial and Linear."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _backend as B
from ..inputs import product, row_sq_norms
from .base import Kernel

MAX_DEGREE = 100


class Polynomial(Kernel):
    """Polynomial kernel ``k(x, z) = (gamma <x, z> + coef0) ** degree``.

    Parameters
    ----------
    degree : int, default=3
    gamma : float or None, default=None
        ``None`` means ``1 / n_features``.
    coef0 : float, default=1.0
    """

    def __init__(self, degree: int = 3, gamma: float | None = None, coef0: float = 1.0) -> None:
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self._check()

    def _check(self) -> None:
        if isinstance(self.degree, bool) or not isinstance(self.degree, (int, np.integer)):
            raise TypeError(f"degree must be a positive integer, got {self.degree!r}")
        if not 1 <= self.degree <= MAX_DEGREE:
            raise ValueError(
                f"degree must be an integer in [1, {MAX_DEGREE}] (a larger power overflows "
                f"float64 for any base above {10 ** (308 / MAX_DEGREE):.3g}), got {self.degree!r}"
            )
        if isinstance(self.gamma, str):
            raise ValueError(
                f"gamma must be a positive number or None, got {self.gamma!r} ('auto', a grid "
                "of widths, and 'ard', one width per feature, are for the radial kernels' "
                "sigma; give a sequence of kernels for a path over gamma)"
            )
        if self.gamma is not None and not (np.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"gamma must be positive or None, got {self.gamma!r}")
        if not np.isfinite(self.coef0) or self.coef0 < 0:
            raise ValueError(f"coef0 must be a non-negative finite number, got {self.coef0!r}")

    def _gamma(self, X: np.ndarray) -> float:
        return 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)

    def block(self, X, Z, x_sq=None, z_sq=None, prepared=None, out=None, work=None, clip=None):
        K = _product(X, Z, out)
        K *= self._gamma(X)
        K += self.coef0
        return B.pow_(K, self.degree)

    def _diag(self, X: Any) -> Any:
        return (self._gamma(X) * row_sq_norms(X) + self.coef0) ** self.degree


class Linear(Kernel):
    """Linear kernel ``k(x, z) = <x, z>``."""

    def __init__(self) -> None:
        pass

    def block(self, X, Z, x_sq=None, z_sq=None, prepared=None, out=None, work=None, clip=None):
        return _product(X, Z, out)

    def _diag(self, X: Any) -> Any:
        return row_sq_norms(X)


def _product(X: Any, Z: Any, out: Any = None) -> Any:
    """X Z^T into ``out`` (when given): dense arrays or tensors, or sparse rows X and/or
    sparse centers Z (the result is dense)."""
    return product(X, Z.T, out)
