"""Nyström kernel regularized least squares in closed form, the whole λ path at once.

With m centers, K_mm = U diag(s) U^T and the rank-revealing factor R = U_r diag(s_r)^(-1/2)
(R R^T = K_mm^+, ``linalg.nystrom_factor``), the Nyström KRLS solution is (NYTRO eq. 13-16)

    alpha_λ = R (A^T W A + λ n I)^-1 A^T W y,      A = K_nm R,

with W = diag(w) the sample weights. One eigendecomposition A^T W A / n = V diag(σ) V^T gives
every λ: beta_λ = V diag(1 / (σ + λ)) V^T A^T W y / n, alpha_λ = R beta_λ. The O(n m^2) cost
of forming K_nm^T W K_nm is paid once; each extra λ costs O(r k).

The eigendecomposition of A^T W A squares the condition number of A: eigenvalues below about
eps σ_max are rounding, and a penalty near them gives a solution that rounding decides
(cpuSmall, m = 5000, λ = 1e-12: test RMSE 4,736 where the least-squares solution has 40.3).
The same spectrum without the squaring comes from a QR factorization of W^½ A, streamed
over row blocks of K_nm (``_qr_spectrum``: each block stacked under the triangular factor
so far, ``Q^T`` applied to the targets on the way), and an SVD of its r x r triangle
W^½ A = Q U diag(s) V^T: σ = s^2 / n, and V^T A^T W y / n = diag(s) U^T Q^T W^½ y / n,
exact to the rounding of s itself. It costs about twice the flops; ``method="auto"`` takes
it where the normal equations' solution at the chosen penalty is mostly rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from .. import linalg
from .._backend import FACTOR_DTYPE, array_device, to_device, to_numpy
from ..linalg import NystromFactor, spectral_filter
from ..operators.protocol import KernelProducts
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation, as_2d, closed_form_path, weights_or_ones
from ._loo import SmootherCV, eigen_smoother_scores

__all__ = [
    "nystrom_direct_path",
    "center_factor",
    "center_cholesky_factor",
    "direct_memory",
    "DIRECT_MATRICES",
    "QR_MATRICES",
    "DIRECT_METHODS",
]


def _torch():
    import torch

    return torch


#: m x m float64 matrices the direct path holds at its peak on the host: the factor R, the
#: projected matrix H (overwritten by its eigenvectors) and dsyevd's workspace (two,
#: ``linalg.eigh_in_place``), or R, the workers' sums of the Gram matrix (one per worker)
#: and the projection's two (measured with tracemalloc, tests/test_memory.py).
DIRECT_MATRICES = 4


#: r x r float64 matrices the QR route holds at its peak beside the factor R and a block of
#: K_nm's rows: the stacked block (half r rows of K_nm R under the r x r triangle) and the
#: QR's workspace, then the triangle, U, V^T and the SVD's workspace (``_qr_spectrum``;
#: measured with tracemalloc, m = r = 1000: 7.0 r^2 with the block).
QR_MATRICES = 7
#: How the spectrum of A^T W A is computed: "normal" (its eigendecomposition), "qr" (a QR of
#: W^½ A and an SVD of the triangle), "auto" (normal, then qr where its solution is mostly
#: rounding at the chosen penalty and the QR fits ``memory_limit``).
DIRECT_METHODS = ("auto", "normal", "qr")
#: ``method="auto"``: the share of the chosen penalty's ||beta|| below the rounding level
#: from which the path is computed again by QR: where the fit would warn
#: (``estimators._base``). Only the chosen point matters: the bottom of a default grid is
#: often rounding without deciding anything.
QR_ROUNDING_SHARE = 0.9


def qr_memory(m: int, r: int) -> int:
    """Bytes the QR route holds beside the factor: ``QR_MATRICES`` r x r matrices and a block
    of half r rows of K_nm."""
    return 8 * (QR_MATRICES * r * r + (r // 2 + 1) * m)


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


def center_cholesky_factor(op: KernelProducts) -> NystromFactor | None:
    """``center_factor`` on the host where the centers' K_mm is safely positive definite
    (R = L^-T), else None in place of its eigendecomposition
    (``linalg.cholesky_nystrom_factor``)."""
    eps = float(np.finfo(op.dtype).eps)
    return linalg.cholesky_nystrom_factor(op.center_gram(), dtype_eps=eps)


def nystrom_direct_path(
    op: KernelProducts,
    y: np.ndarray,
    penalties: np.ndarray | None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    cv: SmootherCV | None = None,
    factor: NystromFactor | None = None,
    method: str = "auto",
    memory_limit: int | None = None,
) -> Path:
    """λ path of Nyström KRLS from one eigendecomposition (or one QR and SVD).

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
    method : {"auto", "normal", "qr"}, default="auto"
        The spectrum of A^T W A from its eigendecomposition ("normal"), from a QR of W^½ A
        and an SVD of its triangle ("qr": without squaring the condition number, about
        twice the flops; in-process operators on the host), or "normal" and then "qr" where
        the chosen penalty's solution is mostly rounding (``QR_ROUNDING_SHARE``) and the QR
        fits.
    memory_limit : int or None
        Bytes the path may hold beside its operator ("auto" takes the QR only within them and
        the operator's own budget, which its released rows leave free).

    Returns
    -------
    Path over "penalty"; coefficients of shape (m, k) for the centers.
    """
    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    if method not in DIRECT_METHODS:
        raise ValueError(f"method must be one of {DIRECT_METHODS}, got {method!r}")
    w = weights_or_ones(weights, n)
    if op.expected_passes is None:  # the Gram matrix and the right-hand side (and the LOO)
        op.expected_passes = 3 if cv is not None and cv.mode == "loo" else 2
    fac = center_factor(op, preconditioned=False) if factor is None else factor
    dev = fac.on_device
    # with the intercept scored too: A^T W 1 beside A^T W y
    rhs = np.hstack([Y, np.ones((n, 1))]) if cv is not None and cv.center else Y
    qr_possible = not dev and hasattr(op, "block")
    if method == "qr" and not qr_possible:
        raise ValueError(
            "method='qr' reads the rows of an in-process operator on the host (not a Dask "
            "operator, nor a factor on the device)"
        )
    if method == "qr":
        V_d = None
        sig, V, c, floor = _qr_spectrum(op, fac, w, rhs)
    else:
        V_d, sig, V, c, floor = _normal_spectrum(op, fac, weights, w, rhs, cv)
    c1 = None
    if c.shape[1] > k:  # the ones column
        c, c1 = c[:, :k], c[:, k]
    lam = penalty_grid(sig.max()) if penalties is None else np.asarray(penalties, float)
    g = spectral_filter("tikhonov", sig, lam)  # (P, r)
    r = len(sig)
    gc = g[:, :, None] * c[None]  # (P, r, k): each penalty's solution beta in V's axes
    share = _rounding_share(gc, sig, floor)
    coords = gc.transpose(1, 0, 2).reshape(r, len(lam) * k)
    alphas = _alphas(op, fac, V_d if dev else V, coords, k)
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
    path = closed_form_path(
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
            "spectrum": "qr" if method == "qr" else "normal",
        },
        scores=scores,
    )
    # "auto": where the chosen penalty's solution is mostly rounding, the path again by QR on
    # the same grid, if the QR fits the path's memory and the operator's, which released its
    # rows before the m x m algebra (but for the leave-one-out)
    chosen = float(np.ravel(share)[int(np.ravel(path.best_index)[0])])
    if method == "auto" and chosen > QR_ROUNDING_SHARE:
        fits = _qr_fits(op, fac, cv, memory_limit)
        if qr_possible and fits:
            del path, alphas
            return nystrom_direct_path(op, y, lam, weights, validation, cv, fac, "qr", memory_limit)
        # why the rounding stays (the fit's warning says it)
        path.info["qr_unavailable"] = (
            "it did not fit memory_budget"
            if qr_possible
            else "it reads K_nm's rows on the host, not from a Dask operator or a GPU factor"
        )
    return path


def _qr_fits(op: Any, fac: NystromFactor, cv: SmootherCV | None, limit: int | None) -> bool:
    """Whether the QR route fits the path's memory and the operator's, which released its
    rows before the m x m algebra (but for the leave-one-out)."""
    released = cv is None or cv.mode != "loo"
    room = None if limit is None else limit + (op_budget(op) if released else 0)
    return room is None or qr_memory(op.m, fac.rank) <= room


def _alphas(op: Any, fac: NystromFactor, V: Any, coords: np.ndarray, k: int) -> np.ndarray:
    """The centers' coefficients alpha = R V coords of every penalty, (m, P, k); V on the
    factor's device where it is there."""
    if fac.on_device:
        B = V @ to_device(coords, array_device(V))
        return to_numpy(fac.apply(B, native=True)).reshape(op.m, -1, k)
    return fac.apply(V @ coords).reshape(op.m, -1, k)


def op_budget(op: Any) -> int:
    """The bytes an operator was given (0 for one that does not say)."""
    return int(getattr(op, "budget", 0) or 0)


def _rounding_share(gc: np.ndarray, sig: np.ndarray, floor: float) -> np.ndarray:
    """Per penalty, the share of its ||beta|| (its RKHS norm; ``gc``: (P, r, k), each
    penalty's beta in V's axes) in the directions whose eigenvalue is below the rounding
    level ``floor``: where it dominates, rounding decides the solution."""
    sq = np.einsum("prk,prk->pr", gc, gc)
    total = sq.sum(axis=1)
    return np.sqrt(sq[:, sig <= floor].sum(axis=1) / np.where(total > 0, total, 1.0))


def _normal_spectrum(
    op: KernelProducts,
    fac: NystromFactor,
    weights: np.ndarray | None,
    w: np.ndarray,
    rhs: np.ndarray,
    cv: SmootherCV | None,
) -> tuple[Any, np.ndarray, Any, np.ndarray, float]:
    """(V on the device or None, σ, V on the host or None, c = V^T A^T W rhs / n, the
    rounding floor) from the eigendecomposition of A^T W A / n (one pass for the Gram
    matrix, one for the right-hand side)."""
    n = rhs.shape[0]
    dev = fac.on_device
    b = fac.apply_t(op.rmatvec(w[:, None] * rhs, native=dev))
    G = op.gram(weights, native=dev)
    if cv is None or cv.mode != "loo":  # K_nm's cached rows go before the m x m algebra
        op.release()
    H = fac.project(G, native=dev)
    del G
    H /= n
    V_d = V = None
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
    return V_d, np.maximum(sig, 0.0), V, c, floor


def _qr_spectrum(
    op: Any, fac: NystromFactor, w: np.ndarray, rhs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(σ ascending, V, c = V^T A^T W rhs / n, the rounding floor) from a QR of W^½ A,
    A = K_nm R, streamed over blocks of half r rows (each stacked under the triangle so
    far; Q^T applied to W^½ rhs on the way, Q never formed), and an SVD of the triangle."""
    n, r = rhs.shape[0], fac.rank
    rows = max(64, r // 2)
    T = np.zeros((0, r))
    z = np.zeros((0, rhs.shape[1]))
    for s in range(0, n, rows):
        e = min(n, s + rows)
        root = np.sqrt(w[s:e])[:, None]
        Ab = fac.apply_t(to_numpy(op.block(s, e), FACTOR_DTYPE).T).T * root  # (b, r)
        S = np.vstack([T, Ab])
        Z = np.vstack([z, rhs[s:e] * root])
        del Ab
        ZQ, T = scipy.linalg.qr_multiply(S, Z.T, mode="right", overwrite_a=True)
        z = ZQ.T
        del S, Z
    U, sv, Vt = scipy.linalg.svd(T, full_matrices=False, overwrite_a=True)
    del T
    c = (sv[:, None] * (U.T @ z)) / n
    order = np.argsort(sv, kind="stable")  # ascending, as the eigendecomposition's
    sv, V, c = sv[order], Vt[order].T, c[order]
    # the singular values are exact to about eps s_max each (their squares' rounding floor)
    eps = float(np.finfo(FACTOR_DTYPE).eps)
    floor = (eps * float(sv.max(initial=0.0))) ** 2 * len(sv) / n
    return sv**2 / n, V, c, floor
