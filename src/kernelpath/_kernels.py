"""Compiled inner loops (Numba), with NumPy fallbacks when Numba is not importable.

The rank-one Cholesky update and downdate are sequences of Givens rotations: each row
depends on the previous one, so a NumPy version costs k array operations per call (about
4 ms at k = 500 here, 250 updates per second), which the online learners cannot afford.
Compiled, a k = 500 update takes about 0.2 ms. ``HAVE_NUMBA`` tells whether Numba is
installed; it is imported and the loops compiled at the first update.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["HAVE_NUMBA", "givens_update_rows", "givens_downdate_rows"]


def _update_rows_py(R: np.ndarray, x: np.ndarray) -> None:
    """In place: R <- the upper factor of R^T R + x x^T; x is destroyed (row-wise Givens)."""
    k = len(x)
    for i in range(k):
        r_ii, x_i = R[i, i], x[i]
        if x_i == 0.0:
            continue
        rho = np.hypot(r_ii, x_i)
        c, s = r_ii / rho, x_i / rho
        R[i, i] = rho
        if i + 1 < k:
            row = R[i, i + 1 :].copy()
            R[i, i + 1 :] = c * row + s * x[i + 1 :]
            x[i + 1 :] = c * x[i + 1 :] - s * row


def _downdate_rows_py(R: np.ndarray, c: np.ndarray, s: np.ndarray) -> None:
    """In place: apply LINPACK dchdd's rotations (from the last row to the first)."""
    k = len(c)
    xx = np.zeros(k, dtype=R.dtype)
    for i in range(k - 1, -1, -1):
        row = R[i, i:].copy()
        R[i, i:] = c[i] * row - s[i] * xx[i:]
        xx[i:] = c[i] * xx[i:] + s[i] * row


HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@functools.cache
def _compiled() -> tuple[Callable[..., None], Callable[..., None]]:
    """The loops compiled by Numba on first use (importing Numba costs ~0.4 s, which a
    command or an import that never updates a factor should not pay), else NumPy's."""
    try:
        import numba
    except ImportError:  # pragma: no cover - the NumPy loops above
        return _update_rows_py, _downdate_rows_py

    @numba.njit(cache=True)
    def _update_rows_nb(R: Any, x: Any) -> None:
        k = x.shape[0]
        for i in range(k):
            r_ii = R[i, i]
            x_i = x[i]
            if x_i == 0.0:
                continue
            rho = np.hypot(r_ii, x_i)
            c = r_ii / rho
            s = x_i / rho
            R[i, i] = rho
            for j in range(i + 1, k):
                r_ij = R[i, j]
                x_j = x[j]
                R[i, j] = c * r_ij + s * x_j
                x[j] = c * x_j - s * r_ij

    @numba.njit(cache=True)
    def _downdate_rows_nb(R: Any, c: Any, s: Any) -> None:
        k = c.shape[0]
        xx = np.zeros(k, dtype=R.dtype)
        for i in range(k - 1, -1, -1):
            ci = c[i]
            si = s[i]
            for j in range(i, k):
                r_ij = R[i, j]
                x_j = xx[j]
                R[i, j] = ci * r_ij - si * x_j
                xx[j] = ci * x_j + si * r_ij

    return _update_rows_nb, _downdate_rows_nb


def givens_update_rows(R: np.ndarray, x: np.ndarray) -> None:
    """In place: R <- the upper factor of R^T R + x x^T; x is destroyed (compiled loop)."""
    _compiled()[0](R, x)


def givens_downdate_rows(R: np.ndarray, c: np.ndarray, s: np.ndarray) -> None:
    """In place: apply LINPACK dchdd's rotations, last row first (compiled loop)."""
    _compiled()[1](R, c, s)
