"""Incremental Nyström KRLS: the path over the number of centers m and the penalty λ.

With M centers in a fixed order (the order they were drawn), G = K_nM^T W K_nM, K = K_MM and
b = K_nM^T W y, the Nyström KRLS solution on the first m centers at penalty λ is

    α~_m(λ) = H_m(λ)^-1 b_m,      H(λ) = G + λ n K,

where H_m and b_m are the leading m x m block of H and the first m entries of b (thesis
"Less is more", Algorithm 4.1 and Appendix D). Adding center m + 1 borders H_m with
c = G_{1:m, m+1} + λ n K_{1:m, m+1} and g = G_{m+1, m+1} + λ n K_{m+1, m+1}; Algorithm 4.1 pads
the upper Cholesky factor R_m with a zero row and column and applies a rank-one update with
u = [c / (1 + sqrt(1 + g)); sqrt(1 + g)] and a rank-one downdate with
v = [c / (1 + sqrt(1 + g)); -1] (u u^T - v v^T is exactly the border), giving R_{m+1}.

Two facts make the whole (m, λ) grid cheap:

1. The expensive part, the kernel columns and G (O(n M^2)), does not depend on λ: it is
   computed once and shared by every λ. Only the M x M factor work is repeated per λ (the
   MATLAB reference rebuilds everything per λ).
2. R_m is the leading m x m block of R_M: the Cholesky factor of a leading principal block
   is the leading block of the factor. So the M rank-one steps of Algorithm 4.1 produce the
   same factors as one LAPACK Cholesky of H_M(λ) (``method="blocked"``, the default: M^3/3
   flops in BLAS-3), and the forward solve is shared as well: z = R_M^-T b gives
   R_m^-T b_m = z_{1:m}. Each m then costs one back substitution, α~_m = R_m^-1 z_{1:m},
   done for all the m of the grid in one triangular solve with a masked right-hand side.

``method="rank-one"`` runs Algorithm 4.1 literally with ``cholesky.cholesky_update`` /
``cholesky_downdate`` (O(M^2) NumPy calls per λ: slow, a reference and a test of the blocked
form). A center numerically dependent on the centers drawn before it (a repeated point,
or a center whose pivot in H(λ) is lost in rounding) adds nothing the arithmetic can
resolve: the factorization skips it (``cholesky.independent_columns`` for the blocked form,
a failed downdate or a tiny pivot for the rank-one form) and its coefficient is 0. The skip
set depends on λ; the factors of the kept centers keep the prefix property.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from .._backend import FACTOR_DTYPE
from ..cholesky import cholesky_downdate, cholesky_update, independent_columns
from ..linalg import cholesky_in_place, nystrom_factor, top_eigenvalue, zero_strict_upper
from ..operators.protocol import KernelProducts
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation, as_2d, weights_or_ones

__all__ = [
    "incremental_nystrom_path",
    "incremental_factor",
    "incremental_memory",
    "prefix_solutions",
    "METHODS",
]

METHODS = ("blocked", "rank-one")
#: A new center whose Cholesky pivot satisfies R_jj^2 <= PIVOT_RTOL * ||H||_1 is skipped.
#: The normal equations in the coefficients α square the conditioning of K_nm: a center kept
#: with a pivot near the rounding level gets coefficients of 1e7 that cancel in the
#: predictions, and a threshold too high skips centers that matter. Measured (docs/design.md)
#: on the 1-D leverage benchmark (n = 2000, Gaussian σ = 0.03, 200-600 uniform centers) and
#: on cpusmall (M = 2000, 20 λ): 4e-13 gave a risk 3.8x the batch solver's on the first,
#: 1e-12 within 1.32x and a best validation RMSE of 3.236 on cpusmall (batch eigen-solver:
#: 3.198), 1e-10 lost more centers on cpusmall (3.326), thresholds relative to H_jj instead
#: of ||H|| skipped up to 70% of the centers there.
PIVOT_RTOL = 1e-12


def incremental_memory(M: int, k: int, penalties: Any, n_grid: int, n_val: int) -> int:
    """Bytes the (m, λ) path holds beside its operators for M centers: G and K_MM, the
    factor that sets its own λ grid (R, M and a copy), one λ's H and its factor, the
    coefficients of every point (twice: the path and its stored copies) and one m's
    validation predictions (n_val x P k)."""
    P = 20 if penalties is None else int(np.size(penalties))
    return 8 * int(5 * M * M + 3 * M * n_grid * P * k + 2 * n_val * P * k)


def incremental_factor(
    G: np.ndarray, K: np.ndarray, shift: float, method: str = "blocked"
) -> tuple[np.ndarray, np.ndarray]:
    """Upper Cholesky factor of H = G + shift K built center by center, skipping centers
    numerically dependent on the ones before them.

    A center is skipped when its pivot R_jj^2 (the part of its column not explained by the
    centers kept so far) is at most ``PIVOT_RTOL * ||H||_1``: a repeated point, or a center
    whose contribution is lost in rounding. Its coefficient is 0 at every m.

    Parameters
    ----------
    G, K : ndarray of shape (M, M)
    shift : float
        λ n.
    method : {"blocked", "rank-one"}

    Returns
    -------
    kept : ndarray of int, shape (r,)
        Indices of the kept centers, increasing.
    R : ndarray of shape (r, r)
        Upper triangular, R^T R = H[kept][:, kept]. The factor of the first q kept centers is
        its leading q x q block.
    """
    H = G + shift * K
    H = (H + H.T) / 2
    # pivots are compared with the scale of H (its 1-norm, within sqrt(M) of its 2-norm), as
    # the eigenvalue cut-off of the batch solver's factor is compared with the top eigenvalue
    atol = PIVOT_RTOL * float(np.abs(H).sum(axis=0).max())
    if method == "blocked":
        # one LAPACK factorization when no center is dependent (the common case), else the
        # factorization that skips them
        try:  # R = L^T (by blocks from 4,096 rows on: ``linalg.cholesky_in_place``)
            R = zero_strict_upper(cholesky_in_place(np.array(H, order="F"))).T
        except np.linalg.LinAlgError:
            R = None
        if R is not None and np.all(np.diag(R) ** 2 > atol):
            return np.arange(len(H)), R
        kept, L = independent_columns(H, 0.0, atol=atol)
        return kept, np.ascontiguousarray(L.T)
    if method != "rank-one":
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return _rank_one_factor(H, atol)


def _rank_one_factor(H: np.ndarray, atol: float) -> tuple[np.ndarray, np.ndarray]:
    """Thesis Algorithm 4.1: for each new center, pad the factor with a zero row and column,
    rank-one update with u, rank-one downdate with v; skip the center when the downdate fails
    or its pivot is lost in rounding."""
    M = len(H)
    R = np.zeros((M, M))
    kept: list[int] = []
    for j in range(M):
        r = len(kept)
        c = H[kept, j]
        g = H[j, j]
        if not g > 0:
            continue
        root = np.sqrt(1.0 + g)
        u = np.concatenate([c / (1.0 + root), [root]])
        v = np.concatenate([c / (1.0 + root), [-1.0]])
        step = cholesky_update(R[: r + 1, : r + 1], u)  # row and column r are still zero
        try:
            cholesky_downdate(step, v, overwrite=True)
        except np.linalg.LinAlgError:
            continue
        if not step[r, r] ** 2 > atol:
            continue
        R[: r + 1, : r + 1] = step
        kept.append(j)
    r = len(kept)
    return np.asarray(kept, dtype=np.int64), R[:r, :r]


def gram_train_errors(
    U: np.ndarray, G: np.ndarray, b: np.ndarray, ywy: np.ndarray, wsum: float, k: int
) -> np.ndarray:
    """||y - Ψ u||_W^2 / (sum w k) = (y'Wy - 2 u'b + u'Gu) / (sum w k) for columns of U
    grouped as (D, points, k)."""
    D = len(G)
    flat = U.reshape(D, -1)
    ub = np.einsum("dpk,dk->pk", U, b)
    ugu = np.einsum("dc,dc->c", G @ flat, flat).reshape(U.shape[1], k)
    return np.maximum((ywy[None, :] - 2 * ub + ugu).sum(axis=1) / (wsum * k), 0.0)


def prefix_points(
    G: np.ndarray,
    K: np.ndarray,
    b: np.ndarray,
    grid: np.ndarray,
    shifts: np.ndarray,
    method: str,
    ywy: np.ndarray,
    wsum: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``prefix_solutions`` at every shift of ``shifts``: the solutions (M, g, P, k), the
    columns each shift's factor kept (P,), and the training errors (g, P) from G, b, the
    targets' y'Wy per output (``ywy``) and the weights' sum (``gram_train_errors``)."""
    M, k = b.shape
    g, P = len(grid), len(shifts)
    X = np.zeros((M, g, P, k))
    n_kept = np.zeros(P, dtype=np.int64)
    for p, shift in enumerate(shifts):
        X[:, :, p, :], n_kept[p] = prefix_solutions(G, K, b, grid, shift, method)
    train = gram_train_errors(X.reshape(M, g * P, k), G, b, ywy, wsum, k).reshape(g, P)
    return X, n_kept, train


def prefix_solutions(
    G: np.ndarray, K: np.ndarray, b: np.ndarray, grid: np.ndarray, shift: float, method: str
) -> tuple[np.ndarray, int]:
    """Solutions of (G + shift K)_m x = b_m on the first m columns for every m of ``grid``,
    from one factor (``incremental_factor``): one forward solve shared by every m, then one
    back substitution with a masked right-hand side.

    Returns
    -------
    X : ndarray of shape (M, g, k)
        Column i holds the solution for m = grid[i] (zero below row m and at skipped rows).
    kept : int
        Number of columns the factor kept.
    """
    M, k = b.shape
    out = np.zeros((M, len(grid), k))
    kept, R = incremental_factor(G, K, shift, method)
    used = np.searchsorted(kept, grid)  # kept columns among the first m, per m
    v = int(used[-1])
    if v == 0:
        return out, len(kept)
    Rv, kv = R[:v, :v], kept[:v]
    z = scipy.linalg.solve_triangular(Rv, b[kv], trans="T", check_finite=False)  # (v, k)
    mask = (np.arange(v)[:, None] < used[None, :]).astype(float)  # (v, g)
    Z = mask[:, :, None] * z[:, None, :]
    # back substitution for every m at once: rows >= used[i] stay 0
    A = scipy.linalg.solve_triangular(Rv, Z.reshape(v, -1), check_finite=False)
    out[kv] = A.reshape(v, len(grid), k)
    return out, len(kept)


def incremental_nystrom_path(
    op: KernelProducts,
    y: np.ndarray,
    penalties: np.ndarray | None,
    n_centers: Any,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    method: str = "blocked",
) -> Path:
    """Nyström KRLS on the first m centers for every m of a grid and every λ.

    Parameters
    ----------
    op : KernelProducts (a KernelOperator, or its Dask counterpart)
        Training points x all M centers, in draw order.
    y : ndarray of shape (n,) or (n, k)
    penalties : ndarray of shape (P,) or None
        λ values; None: 20 values geometric from the top eigenvalue of the M-center problem
        (K_MM^-1/2 G K_MM^-1/2 / n) down 9 decades.
    n_centers : array-like of int, shape (g,)
        The m values, 1 <= m <= M (sorted and deduplicated).
    weights : ndarray of shape (n,) or None
    validation : Validation or None
        Validation set seen through an operator over the same M centers.
    method : {"blocked", "rank-one"}
        Same factors either way (see the module docstring).

    Returns
    -------
    Path over ("n_centers", "penalty"), shape (g, P). The coefficients of point (i, p) have
    shape (m_i, k): the first m_i centers.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    M = op.m
    grid = np.unique(np.asarray(n_centers, dtype=np.int64))
    if grid.size == 0 or grid[0] < 1 or grid[-1] > M:
        raise ValueError(f"n_centers values must be in [1, {M}], got {n_centers!r}")
    w = weights_or_ones(weights, n)
    if op.expected_passes is None:
        op.expected_passes = 2  # the Gram matrix and the right-hand side
    G = np.asarray(op.gram(weights), dtype=FACTOR_DTYPE)
    b = np.asarray(op.rmatvec((w[:, None] * Y).astype(op.dtype)), dtype=FACTOR_DTYPE)
    op.release()
    K = np.asarray(op.center_gram(), dtype=FACTOR_DTYPE)
    if penalties is None:
        fac = nystrom_factor(K, dtype_eps=float(np.finfo(op.dtype).eps))
        R0 = fac.R
        top = top_eigenvalue(  # a fixed start: the same data give the same grid
            lambda v: R0.T @ (G @ (R0 @ v)) / n, fac.rank, n_iter=50, rng=np.random.default_rng(0)
        )
        lam = penalty_grid(top)
    else:
        lam = np.asarray(penalties, dtype=float)
    P, g = len(lam), len(grid)
    ywy = (w[:, None] * Y * Y).sum(axis=0)  # (k,)
    # training error from G and b: ||y - K_nm α||_W^2 = y'Wy - 2 α'b + α'Gα
    alphas, n_kept, train = prefix_points(G, K, b, grid, lam * n, method, ywy, float(w.sum()))
    val_err = val_loss = None
    if validation is not None:  # one m of the grid at a time: n_val x P k predictions
        val_err, val_loss = np.empty((g, P)), np.empty((g, P))
        for i in range(g):
            cols = alphas[:, i].reshape(M, P * k).astype(validation.op.dtype)
            F = np.asarray(validation.op.matvec(cols), dtype=FACTOR_DTYPE)
            val_err[i], val_loss[i] = validation.errors(F.reshape(-1, P * k), k)
        validation.op.release()
    stored: dict[tuple[int, ...], np.ndarray] = {
        (i, p): alphas[: grid[i], i, p, :].astype(op.dtype) for i in range(g) for p in range(P)
    }
    mm, ll = np.meshgrid(grid, lam, indexing="ij")
    return Path(
        {"n_centers": mm, "penalty": ll},
        train,
        val_err,
        coef_fn=None,
        scoring=validation.scoring if validation is not None else "mse",
        stored=stored,
        val_loss=val_loss,
        info={
            "method": f"incremental-{method}",
            "max_centers": M,
            "kept_centers": n_kept,
        },
    )
