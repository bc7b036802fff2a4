"""Exact kernel regularized least squares and the spectral filters.

One eigendecomposition of the (weighted) kernel matrix gives every regularization method of
the spectral-filter family (Lo Gerfo et al. 2008; GURLS):

    D K D / n = Q diag(s) Q^T,   D = diag(sqrt(w)),
    alpha_p = D Q diag(g_p(s)) Q^T D y / n,

with g_p the filter of ``linalg.spectral_filter``: Tikhonov (KRLS, alpha = (WK + λnI)^-1 W y),
KOLS (the pseudo-inverse), truncated SVD, Landweber and the ν-method (paths over the
iteration count t). The training error at every point comes from the spectral coordinates in
O(n P); the validation predictions from one product with all the coefficients at once.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .._backend import FACTOR_DTYPE
from ..linalg import cholesky_in_place, eigh_in_place, spectral_filter
from ..operators.protocol import KernelProducts
from ..path import Path
from ..selection import penalty_grid
from ._common import Validation, as_2d, closed_form_path, weights_or_ones
from ._loo import SmootherCV, gcv_scores, loo_scores

__all__ = ["exact_path", "ITERATION_FILTERS"]

ITERATION_FILTERS = ("landweber", "nu")


def exact_path(
    op: KernelProducts,
    y: np.ndarray,
    filter: str,
    params: np.ndarray | None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    nu: float = 1.0,
    cv: SmootherCV | None = None,
    step: float | None = None,
) -> Path:
    """Path of an exact spectral-filter estimator.

    Parameters
    ----------
    op : KernelProducts (a KernelOperator, or its Dask counterpart)
        Operator of the training points against themselves (``centers = X``).
    y : ndarray of shape (n,) or (n, k)
        Targets.
    filter : {"tikhonov", "kols", "tsvd", "landweber", "nu"}
    params : ndarray of shape (P,) or None
        Penalties λ (tikhonov, tsvd) or iteration counts t (landweber, nu). ``None`` for
        tikhonov / tsvd: the automatic grid (20 values below the top eigenvalue).
    weights : ndarray of shape (n,) or None
        Sample weights w in (1/n) sum_i w_i (y_i - f(x_i))^2.
    validation : Validation or None
        Validation operator (validation points x training points) and targets.
    nu : float
        Qualification (order) of the ν-method.
    step : float or None
        Landweber's step η in units of the spectrum of K / n (the update
        alpha_t = alpha_{t-1} + (η/n) (y - K alpha_{t-1})); None: 1 / s_max. It must keep
        η s_max < 2 (else the iteration diverges): a ValueError naming ``step`` otherwise.
    cv : SmootherCV or None
        Score the path by exact leave-one-out (tikhonov) or GCV (every filter but kols)
        instead of ``validation`` (``_loo``); needs positive weights.

    Returns
    -------
    Path over "penalty" (tikhonov, kols, tsvd) or "n_iter" (landweber, nu); coefficients of
    shape (n, k) for the training points.
    """

    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    w = weights_or_ones(weights, n)
    d = np.sqrt(w)
    K = _scaled_gram(op, d if weights is not None else None)
    if filter == "tikhonov" and params is not None and np.size(params) == 1 and cv is None:
        lam = float(np.asarray(params).ravel()[0])
        if lam > 0:
            try:
                return _tikhonov_cholesky(K, Y, d, lam, op, validation)
            except np.linalg.LinAlgError:
                # λ below the rounding of a singular K (duplicated rows, λ = 1e-20): not
                # positive definite in floating point; the eigendecomposition below floors
                # the rounding's negative eigenvalues at 0. The factor overwrote K.
                K = _scaled_gram(op, d if weights is not None else None)
    s, Q = eigh_in_place(K)  # Q over K's memory; interruptible by Ctrl-C
    del K
    s = np.maximum(s, 0.0)
    c = Q.T @ (d[:, None] * Y)  # (n, k)
    if filter in ("tikhonov", "tsvd"):
        params = penalty_grid(s.max()) if params is None else np.asarray(params, float)
        name = "penalty"
    elif filter == "kols":
        params = np.zeros(1)
        name = "penalty"
    else:
        params = np.asarray(params, dtype=float)
        name = "n_iter"
    if filter == "landweber" and step is not None and not step * s.max() < 2.0:
        raise ValueError(
            f"step: Landweber with η = {step / n:.4g} diverges here: it needs η ||K|| < 2, "
            f"and ||K|| = {s.max() * n:.6g} (n = {n}); give a smaller step or step='auto'"
        )
    G = spectral_filter(filter, s, params, nu=nu, step=step)  # (P, n)
    P = len(params)
    # coefficients of all points: alpha_p = D Q (g_p * c) / n  -> (n, P, k)
    GC = G[:, :, None] * c[None, :, :]  # (P, n, k)
    alphas = (Q @ GC.transpose(1, 0, 2).reshape(n, P * k)) * (d[:, None] / n)
    alphas = alphas.reshape(n, P, k)
    # training error: ||D f - D y||^2 = ||(s g - 1) c||^2 (Q is complete)
    resid = (s[None, :, None] * G[:, :, None] - 1.0) * c[None, :, :]
    train_err = np.einsum("pnk,pnk->p", resid, resid) / (w.sum() * k)
    scores = None
    if cv is not None:  # S = D^-1 Q diag(h) Q^T D with h = s g(s)
        h = s[None, :] * G  # (P, n)
        qd = Q.T @ d
        if cv.mode == "gcv":
            wS1 = (h * qd[None, :] ** 2).sum(axis=1) if cv.center else None
            e = gcv_scores(cv, train_err, h.sum(axis=1), wS1, n)
            scores = (e, e, "mse")
        else:
            Sd = (Q * Q) @ h.T  # (n, P)
            hc = (h[:, :, None] * c[None, :, :]).transpose(1, 0, 2).reshape(n, P * k)
            F = (Q @ hc / d[:, None]).reshape(n, P, k)
            S1 = (Q @ (h * qd[None, :]).T) / d[:, None] if cv.center else None
            e, loss = loo_scores(cv, Y, F, Sd, S1, w)
            scores = (e, loss, cv.scoring)
    return closed_form_path(name, params, alphas, train_err, validation, op.dtype, scores=scores)


def _scaled_gram(op: KernelProducts, d: np.ndarray | None) -> np.ndarray:
    """D K D / n in ``FACTOR_DTYPE`` (D = diag(d), the square roots of the weights; None:
    unweighted), computed by the operator, which then releases its own copy."""
    K = op.dense()
    op.release()  # K is now ours: scale it in place
    K = K.astype(FACTOR_DTYPE, copy=False)
    if d is not None:
        K *= d[:, None]
        K *= d[None, :]
    K /= len(K)
    return K


def _tikhonov_cholesky(
    Kw: np.ndarray,
    Y: np.ndarray,
    d: np.ndarray,
    lam: float,
    op: KernelProducts,
    validation: Validation | None,
) -> Path:
    """One Tikhonov penalty: a Cholesky solve of (D K D / n + λ I) instead of an
    eigendecomposition (about 10x cheaper), alpha = D (D K D / n + λ I)^-1 D y / n."""
    n, k = Y.shape
    rhs = d[:, None] * Y
    Kw[np.diag_indices(n)] += lam
    L = cholesky_in_place(Kw)  # over Kw; interruptible by Ctrl-C
    z = scipy.linalg.cho_solve((L, True), rhs, check_finite=False)  # (DKD/n + λ)^-1 D y
    del Kw, L
    alpha = d[:, None] * z / n
    # D f = (DKD / n) z = D y - λ z, so the weighted residual is -λ z
    train_err = np.array([np.sum((lam * z) ** 2) / (np.sum(d * d) * k)])  # λ z: the residual
    return closed_form_path(
        "penalty", np.array([lam]), alpha[:, None, :], train_err, validation, op.dtype
    )
