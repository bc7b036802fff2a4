"""Nyström kernel regularized least squares in closed form, the whole λ path at once.

With m centers, K_mm = U diag(s) U^T and the rank-revealing factor R = U_r diag(s_r)^(-1/2)
(R R^T = K_mm^+, ``linalg.nystrom_factor``), the Nyström KRLS solution is (NYTRO eq. 13-16)

    alpha_λ = R (A^T W A + λ n I)^-1 A^T W y,      A = K_nm R,

with W = diag(w) the sample weights. One eigendecomposition A^T W A / n = V diag(σ) V^T gives
every λ: beta_λ = V diag(1 / (σ + λ)) V^T A^T W y / n, alpha_λ = R beta_λ. The O(n m^2) cost
of forming K_nm^T W K_nm is paid once; each extra λ costs O(r k).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .._backend import FACTOR_DTYPE
from ..linalg import NystromFactor, nystrom_factor, spectral_filter
from ..operators import KernelOperator
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation, as_2d, closed_form_path, weights_or_ones

__all__ = ["nystrom_direct_path", "center_factor"]


def center_factor(op: KernelOperator) -> NystromFactor:
    """The Nyström factor of the operator's centers (``linalg.nystrom_factor``)."""
    return nystrom_factor(op.center_gram(), dtype_eps=float(np.finfo(op.dtype).eps))


def nystrom_direct_path(
    op: KernelOperator,
    y: np.ndarray,
    penalties: np.ndarray | None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
) -> Path:
    """λ path of Nyström KRLS from one eigendecomposition.

    Parameters
    ----------
    op : KernelOperator
        Training points x centers.
    y : ndarray of shape (n,) or (n, k)
    penalties : ndarray of shape (P,) or None
        λ values; ``None``: 20 values geometric from the top eigenvalue σ_max of A^T W A / n
        down to 1e-9 σ_max.
    weights : ndarray of shape (n,) or None
    validation : Validation or None

    Returns
    -------
    Path over "penalty"; coefficients of shape (m, k) for the centers.
    """
    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    w = weights_or_ones(weights, n)
    fac = center_factor(op)
    R = fac.R
    G = np.asarray(op.gram(weights), dtype=FACTOR_DTYPE)
    b = R.T @ np.asarray(op.rmatvec((w[:, None] * Y).astype(op.dtype)), dtype=FACTOR_DTYPE)
    op.release()
    H = R.T @ G @ R / n
    H = (H + H.T) / 2
    sig, V = scipy.linalg.eigh(H, driver="evd", check_finite=False)
    sig = np.maximum(sig, 0.0)
    c = V.T @ b / n  # (r, k)
    lam = penalty_grid(sig.max()) if penalties is None else np.asarray(penalties, float)
    P = len(lam)
    g = spectral_filter("tikhonov", sig, lam)  # (P, r)
    r = len(sig)
    B = V @ (g[:, :, None] * c[None]).transpose(1, 0, 2).reshape(r, P * k)
    alphas = (R @ B).reshape(op.m, P, k)
    # training error from the spectral coordinates (b = n V c):
    # ||A beta - y||_W^2 = y'Wy - n sum(2 g c^2 - sig g^2 c^2)
    yw2 = float((w[:, None] * Y * Y).sum())
    quad = np.einsum("pi,ik->p", 2 * g - sig[None, :] * g * g, c * c)
    train_err = (yw2 - n * quad) / (w.sum() * k)
    return closed_form_path(
        "penalty",
        lam,
        alphas,
        train_err,
        validation,
        op.dtype,
        {"method": "direct", "rank": r, "factor": fac.method},
    )
