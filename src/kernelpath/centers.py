"""Center selection for the Nyström estimators.

A strategy is a function ``(X, n_centers, rng) -> indices`` registered in ``STRATEGIES``;
``select_centers`` also accepts an explicit array of points. Only uniform sampling lives here
for now; leverage-score strategies plug into the same registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["select_centers", "uniform_centers", "STRATEGIES"]


def uniform_centers(X: np.ndarray, n_centers: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n_centers`` distinct rows of X drawn uniformly without replacement."""
    return np.sort(rng.choice(len(X), size=n_centers, replace=False))


STRATEGIES: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "uniform": uniform_centers,
}


def select_centers(
    centers: Any, X: np.ndarray, n_centers: int, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    """Choose the centers.

    Parameters
    ----------
    centers : str or array-like of shape (m, d)
        A strategy name from ``STRATEGIES`` (``None`` means "uniform"), or the points.
    X : ndarray of shape (n, d)
        Training inputs.
    n_centers : int
        Number of centers for a strategy (already clipped to n).
    rng : Generator

    Returns
    -------
    points : ndarray of shape (m, d)
    info : dict
        ``{"strategy": name, "indices": indices or None}``.
    """
    if centers is None:
        centers = "uniform"
    if isinstance(centers, str):
        if centers not in STRATEGIES:
            raise ValueError(
                f"centers must be one of {sorted(STRATEGIES)} or an array of points, "
                f"got {centers!r}"
            )
        idx = STRATEGIES[centers](X, n_centers, rng)
        return X[idx], {"strategy": centers, "indices": idx}
    pts = np.asarray(centers)
    if pts.dtype.kind not in "iuf":
        raise TypeError(
            f"centers must be a strategy name or a numeric array, got dtype {pts.dtype}"
        )
    if pts.ndim != 2 or pts.shape[1] != X.shape[1] or len(pts) == 0:
        raise ValueError(f"centers must have shape (m, {X.shape[1]}) with m >= 1, got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("centers contains NaN or infinity")
    return pts.astype(X.dtype), {"strategy": "given", "indices": None}
