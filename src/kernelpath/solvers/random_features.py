"""Random-feature KRLS (RF-KRLS): primal ridge regression on a random feature map.

With D features φ(x) = ψ(x) / sqrt(D), ψ_j(x) = sqrt(2) cos(ω_j^T x + b_j), the model is
f(x) = φ(x)^T w and

    w_λ = (Φ^T W Φ + λ n I)^-1 Φ^T W y                        (thesis ch. 5)

- **λ path at one D**: one eigendecomposition Φ^T W Φ / n = V diag(s) V^T gives every λ,
  w_λ = V diag(1 / (s + λ)) V^T Φ^T W y / n.
- **Path over D**: in the unnormalized coordinates u = w / sqrt(D) the system is
  (Ψ_D^T W Ψ_D + μ I) u = Ψ_D^T W y with μ = λ n D. For a fixed μ, the system of the first
  D features is the leading block of the system of all D_max features, so one Cholesky
  factor per μ (``incremental.incremental_factor`` with K = I: the Cholesky bordering of
  Algorithm 4.1 done blockwise) gives every D, and Ψ^T W Ψ (O(n D_max^2)) is computed once.
  At a fixed μ, fewer features mean a larger λ = μ / (n D): the grid is over (D, μ), and
  every point reports its own λ.

Both return a ``Path`` whose coefficients are the weights w of the normalized map with that
point's number of features.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from ..features import RandomFourierFeatures
from ..inputs import rows_in_memory
from ..linalg import eigh_in_place, spectral_filter, top_eigenvalue
from ..operators import FeatureOperator, Operator, row_blocks
from ..operators.features import BLOCK_BYTES
from ..path import Path
from ..selection import penalty_grid
from ..workspace import Workspace
from ._common import Validation, as_2d, closed_form_path, weights_or_ones
from ._loo import SmootherCV, eigen_smoother_scores
from .incremental import gram_train_errors, prefix_points

__all__ = [
    "FeatureOperator",
    "rff_operator",
    "indexed_features",
    "row_blocks",
    "feature_moments",
    "rf_penalty_path",
    "rf_feature_path",
]


def rff_operator(
    fmap: RandomFourierFeatures,
    X: Any,
    n_features: int,
    workspace: Workspace,
    normalize: bool = True,
) -> Operator:
    """The operator of the first ``n_features`` random features of ``fmap`` (over the
    chunks of a dask array for a dask X), built by ``workspace``."""
    transform = _first_features(fmap, n_features, normalize)
    return workspace.feature_operator(transform, X, n_features)


#: D x D float64 matrices the RF paths hold at their peak (Φ^T W Φ, its eigenvectors and
#: dsyevd's workspace, the coefficients' products; the (D, λ) path: a Cholesky factor per
#: penalty instead), measured with tracemalloc (tests/test_memory.py).
RF_MATRICES = 5


def rf_memory(n_features: int, k: int, n_penalties: int, n_rows: int, loo: bool) -> int:
    """Bytes an RF fit holds beside the data: its D x D matrices (``RF_MATRICES``), a block
    of features in flight and the transform's intermediates (three blocks of
    ``operators.features.BLOCK_BYTES`` at most), and with the closed-form leave-one-out its
    n x P k smoother columns."""
    blocks = 3 * min(BLOCK_BYTES, 8 * n_rows * n_features)
    smoother = 8 * 8 * n_rows * max(n_penalties, 20) * k if loo else 0
    return 8 * RF_MATRICES * n_features * n_features + blocks + smoother


def _first_features(fmap: RandomFourierFeatures, n_features: int, normalize: bool) -> Any:
    """rows -> their first ``n_features`` random features (picklable, for dask tasks)."""
    return functools.partial(fmap.transform_first, n_features=n_features, normalize=normalize)


def indexed_features(
    transform: Callable[[Any], Any], X: Any, n_features: int, budget: float
) -> Callable[[np.ndarray], np.ndarray]:
    """idx -> features of X[idx] as float64 NumPy rows, from a cache of all rows (computed
    on X's device in blocks, kept on the host) when they take at most ``budget`` bytes, else
    computed per call (the stochastic solvers' minibatches)."""
    if X.shape[0] * n_features * 8 <= budget:
        cache = np.empty((X.shape[0], n_features), dtype=FACTOR_DTYPE)
        for s, e in row_blocks(X.shape[0], n_features):
            cache[s:e] = B.to_numpy(transform(X[s:e]), FACTOR_DTYPE)
        return lambda idx: cache[idx]
    return lambda idx: B.to_numpy(transform(rows_in_memory(X, idx)), FACTOR_DTYPE)


def feature_moments(
    fmap: RandomFourierFeatures,
    X: Any,
    n_features: int,
    Y: np.ndarray,
    workspace: Workspace,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(Ψ^T W Ψ, Ψ^T W Y) for the unnormalized features ψ, in float64, in one pass
    (``Workspace.feature_moments``).

    Returns
    -------
    G : ndarray of shape (D, D)
    b : ndarray of shape (D, k)
    """
    transform = _first_features(fmap, n_features, normalize=False)
    return workspace.feature_moments(transform, X, n_features, as_2d(Y), weights)


def rf_penalty_path(
    G: np.ndarray,
    b: np.ndarray,
    Y: np.ndarray,
    penalties: np.ndarray | None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    dtype: Any = np.float64,
    cv: SmootherCV | None = None,
    features: Operator | None = None,
    b1: np.ndarray | None = None,
) -> Path:
    """λ path of RF-KRLS with all D features of G, from one eigendecomposition.

    Parameters
    ----------
    G, b : from ``feature_moments`` (unnormalized features)
    Y : ndarray of shape (n,) or (n, k)
        The training targets (for the training error).
    penalties : ndarray of shape (P,) or None
        λ values; None: 20 values geometric over 9 decades below the top eigenvalue of
        Φ^T W Φ / n.
    weights, validation : as for the other solvers (validation through a
        ``rff_operator`` with the normalized map of D features).
    cv : SmootherCV or None
        Score by exact leave-one-out (one more pass over ``features``, the training points'
        normalized map) or GCV instead of ``validation``; ``b1`` = Ψ^T W 1 (unnormalized)
        when ``cv.center``.

    Returns
    -------
    Path over "penalty"; coefficients w of shape (D, k).
    """
    Y2 = as_2d(Y).astype(FACTOR_DTYPE)
    n, k = Y2.shape
    D = len(G)
    w = weights_or_ones(weights, n)
    H = G / (n * D)  # Φ^T W Φ / n (a copy: G is read again below)
    s, V = eigh_in_place(H)
    s = np.maximum(s, 0.0)
    c = V.T @ (b / (n * np.sqrt(D)))  # V^T Φ^T W y / n
    lam = penalty_grid(s.max()) if penalties is None else np.asarray(penalties, dtype=float)
    filt = spectral_filter("tikhonov", s, lam)  # (P, D): λ = 0 is the pseudo-inverse
    Wts = np.einsum("dj,pj,jk->dpk", V, filt, c)  # (D, P, k) normalized weights
    ywy = (w[:, None] * Y2 * Y2).sum(axis=0)
    train = gram_train_errors(Wts / np.sqrt(D), G, b, ywy, float(w.sum()), k)
    scores = None
    if cv is not None:
        if cv.mode == "loo" and features is None:
            raise ValueError("features: leave-one-out needs the training points' feature map")
        c1 = None if b1 is None else V.T @ (as_2d(b1)[:, 0] / (n * np.sqrt(D)))
        P = len(lam)
        coords = (filt[:, :, None] * c[None]).transpose(1, 0, 2).reshape(D, P * k)
        scores = eigen_smoother_scores(cv, features, V, s, filt, coords, c1, Y2, w, train)
    return closed_form_path(
        "penalty",
        lam,
        Wts,
        train,
        validation,
        dtype,
        {"method": "eigh", "n_features": D},
        scores=scores,
    )


def rf_feature_path(
    G: np.ndarray,
    b: np.ndarray,
    Y: np.ndarray,
    penalties: np.ndarray | None,
    n_features: Any,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    dtype: Any = np.float64,
    method: str = "blocked",
) -> Path:
    """RF-KRLS for every D of a grid and every penalty, from one factor per penalty.

    Parameters
    ----------
    G, b : from ``feature_moments`` with D_max features (unnormalized)
    Y : ndarray of shape (n,) or (n, k)
    penalties : ndarray of shape (P,) or None
        λ values at D_max (μ = λ n D_max is held fixed along D); None: 20 values over 9
        decades below the top eigenvalue of Φ^T W Φ / n at D_max.
    n_features : array-like of int
        The D values, 1 <= D <= D_max.
    validation : Validation or None
        Through an ``rff_operator`` with ``normalize=False`` and D_max features.
    method : {"blocked", "rank-one"}
        Passed to ``incremental_factor``.

    Returns
    -------
    Path over ("n_features", "penalty"), shape (g, P); "penalty" holds each point's own λ;
    the coefficients of point (i, p) are the weights of the normalized map with D_i features.
    """
    Y2 = as_2d(Y).astype(FACTOR_DTYPE)
    n, k = Y2.shape
    Dmax = len(G)
    grid = np.unique(np.asarray(n_features, dtype=np.int64))
    if grid.size == 0 or grid[0] < 1 or grid[-1] > Dmax:
        raise ValueError(f"n_features values must be in [1, {Dmax}], got {n_features!r}")
    w = weights_or_ones(weights, n)
    if penalties is None:
        top = top_eigenvalue(
            lambda v: G @ v / (n * Dmax), Dmax, n_iter=50, rng=np.random.default_rng(0)
        )
        lam = penalty_grid(top)
    else:
        lam = np.asarray(penalties, dtype=float)
    mus = lam * n * Dmax
    P, g = len(mus), len(grid)
    ywy = (w[:, None] * Y2 * Y2).sum(axis=0)
    # U: the unnormalized coefficients u
    U, n_kept, train = prefix_points(G, np.eye(Dmax), b, grid, mus, method, ywy, float(w.sum()))
    val_err = val_loss = None
    if validation is not None:
        F = validation.op.matvec(U.reshape(Dmax, g * P * k).astype(dtype, copy=False))
        e, loss = validation.errors(np.asarray(F, dtype=FACTOR_DTYPE), k)
        val_err, val_loss = np.asarray(e).reshape(g, P), np.asarray(loss).reshape(g, P)
    stored: dict[tuple[int, ...], np.ndarray] = {
        (i, p): (U[: grid[i], i, p, :] * np.sqrt(grid[i])).astype(dtype)
        for i in range(g)
        for p in range(P)
    }
    dd, mm = np.meshgrid(grid, mus, indexing="ij")
    return Path(
        {"n_features": dd, "penalty": mm / (n * dd)},
        train,
        val_err,
        coef_fn=None,
        scoring=validation.scoring if validation is not None else "mse",
        stored=stored,
        val_loss=val_loss,
        info={"method": f"incremental-{method}", "max_features": Dmax, "kept_features": n_kept},
    )
