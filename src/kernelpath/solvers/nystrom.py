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

from .. import linalg
from .._backend import FACTOR_DTYPE, array_device, to_device, to_numpy
from ..linalg import NystromFactor, spectral_filter
from ..operators.protocol import KernelProducts
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation, as_2d, closed_form_path, weights_or_ones
from ._loo import SmootherCV, eigen_smoother_scores

__all__ = ["nystrom_direct_path", "center_factor", "direct_memory", "DIRECT_MATRICES"]


def _torch():
    import torch

    return torch


#: m x m float64 matrices the direct path holds at its peak on the host: the factor R, the
#: projected matrix H (overwritten by its eigenvectors) and dsyevd's workspace (two,
#: ``linalg.eigh_in_place``), or R, the workers' sums of the Gram matrix (one per worker)
#: and the projection's two (measured with tracemalloc, tests/test_memory.py).
DIRECT_MATRICES = 4


def direct_memory(m: int, k: int, n_penalties: int, n_jobs: int) -> int:
    """Bytes the direct path holds beside its operators, for m centers, k outputs and
    ``n_penalties`` λ values: its m x m matrices (``DIRECT_MATRICES``, or the Gram matrix's
    per-worker sums when there are more workers) and the coefficients of the path."""
    matrices = max(DIRECT_MATRICES, 1 + n_jobs)
    return 8 * (matrices * m * m + 3 * m * max(n_penalties, 20) * (k + 1))


def center_factor(op: KernelProducts, preconditioned: bool = True) -> NystromFactor:
    """The Nyström factor of the operator's centers (``linalg.nystrom_factor``): on the
    operator's device when ``linalg.factor_on_device`` says so (CUDA, many centers), else
    on the host. ``preconditioned=False``: without M (a solver that has no preconditioner)."""
    eps = float(np.finfo(op.dtype).eps)
    if linalg.factor_on_device(op.device, op.m):
        return linalg.nystrom_factor_device(op.center_gram(native=True), dtype_eps=eps)
    return linalg.nystrom_factor(op.center_gram(), dtype_eps=eps, preconditioned=preconditioned)


def nystrom_direct_path(
    op: KernelProducts,
    y: np.ndarray,
    penalties: np.ndarray | None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    cv: SmootherCV | None = None,
    factor: NystromFactor | None = None,
) -> Path:
    """λ path of Nyström KRLS from one eigendecomposition.

    Parameters
    ----------
    op : KernelProducts (a KernelOperator, or its Dask counterpart)
        Training points x centers.
    y : ndarray of shape (n,) or (n, k)
    penalties : ndarray of shape (P,) or None
        λ values; ``None``: 20 values geometric from the top eigenvalue σ_max of A^T W A / n
        down to 1e-9 σ_max.
    weights : ndarray of shape (n,) or None
    validation : Validation or None
    cv : SmootherCV or None
        Score the path by exact leave-one-out (one more pass over the data) or GCV (none)
        with the centers held fixed, instead of ``validation`` (``_loo``).
    factor : NystromFactor or None
        R of A = K_nm R; None: ``center_factor(op)`` (R R^T = K_mm^+). SQUEAK's
        γ-regularized Nyström passes ``linalg.regularized_factor``.

    Returns
    -------
    Path over "penalty"; coefficients of shape (m, k) for the centers.
    """
    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    w = weights_or_ones(weights, n)
    if op.expected_passes is None:  # the Gram matrix and the right-hand side (and the LOO)
        op.expected_passes = 3 if cv is not None and cv.mode == "loo" else 2
    fac = center_factor(op, preconditioned=False) if factor is None else factor
    dev = fac.on_device
    # with the intercept scored too: A^T W 1 beside A^T W y
    rhs = np.hstack([Y, np.ones((n, 1))]) if cv is not None and cv.center else Y
    b = fac.apply_t(op.rmatvec(w[:, None] * rhs, native=dev))
    G = op.gram(weights, native=dev)
    if cv is None or cv.mode != "loo":
        op.release()
    H = fac.project(G, native=dev)
    del G
    H /= n
    if dev:  # the m x m eigendecomposition where the factor lives (torch.linalg, float64)
        sig_d, V_d = _torch().linalg.eigh(H)
        sig = to_numpy(sig_d)
        c = to_numpy(V_d.T @ to_device(b, array_device(V_d))) / n
    else:  # dsyevd writing V over H: two m x m of workspace beside it
        sig, V = linalg.eigh_in_place(H)
        del H
        c = V.T @ b / n  # (r, k)
    # H is PSD: a negative computed eigenvalue is rounding, and its size is the noise level
    # of the small eigenvalues (penalties below it fit rounding, REPORT.md sec. 3b)
    floor = max(0.0, -float(sig.min()))
    sig = np.maximum(sig, 0.0)
    c1 = None
    if c.shape[1] > k:  # the ones column
        c, c1 = c[:, :k], c[:, k]
    lam = penalty_grid(sig.max()) if penalties is None else np.asarray(penalties, float)
    P = len(lam)
    g = spectral_filter("tikhonov", sig, lam)  # (P, r)
    r = len(sig)
    gc = g[:, :, None] * c[None]  # (P, r, k): each penalty's solution beta in V's axes
    # the share of each penalty's ||beta|| (its RKHS norm) in the directions whose
    # eigenvalue is below the rounding level: where it dominates, the solution is rounding
    sq = np.einsum("prk,prk->pr", gc, gc)
    total = sq.sum(axis=1)
    share = np.sqrt(sq[:, sig <= floor].sum(axis=1) / np.where(total > 0, total, 1.0))
    coords = gc.transpose(1, 0, 2).reshape(r, P * k)
    if dev:
        B = V_d @ to_device(coords, array_device(V_d))
        alphas = to_numpy(fac.apply(B, native=True)).reshape(op.m, P, k)
    else:
        alphas = fac.apply(V @ coords).reshape(op.m, P, k)
    # training error from the spectral coordinates (b = n V c):
    # ||A beta - y||_W^2 = y'Wy - n sum(2 g c^2 - sig g^2 c^2)
    yw2 = float((w[:, None] * Y * Y).sum())
    quad = np.einsum("pi,ik->p", 2 * g - sig[None, :] * g * g, c * c)
    train_err = (yw2 - n * quad) / (w.sum() * k)
    scores = None
    if cv is not None:
        T = to_numpy(fac.apply(V_d if dev else V)) if cv.mode == "loo" else None  # R V
        scores = eigen_smoother_scores(cv, op, T, sig, g, coords, c1, Y, w, train_err)
        op.release()
    return closed_form_path(
        "penalty",
        lam,
        alphas,
        train_err,
        validation,
        op.dtype,
        {
            "method": "direct",
            "rank": r,
            "factor": fac.method,
            "factor_on_device": dev,
            "rounding_floor": floor,
            "rounding_share": share,
        },
        scores=scores,
    )
