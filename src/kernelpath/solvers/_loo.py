"""Leave-one-out and generalized cross-validation of the Tikhonov solvers, in closed form.

A Tikhonov fit (exact KRLS, Nyström KRLS with its centers held fixed, RF-KRLS) is a linear
smoother: its fitted values are f = S z with

    S = A (A^T W A + λ n I)^-1 A^T W,     A^T W A / n = V diag(σ) V^T,

(A = D^-1 Q diag(s)^1/2 for exact KRLS, K_nm R for Nyström, Φ for random features). Leaving
point i out means its weight w_i -> 0 with the unnormalized penalty λ n and the other
weights held fixed (as ``RidgeCV`` and GURLS do); the refit's prediction at x_i is then

    g_i = ((S z)_i - S_ii z_i) / (1 - S_ii)        (the fit on z with z_i replaced by g_i is
                                                     the leave-one-out fit),

so the leave-one-out residual is (z_i - (S z)_i) / (1 - S_ii). For regression the intercept
(the weighted mean of the targets) is re-estimated without point i as well: with
c_i = (sum_j w_j y_j - w_i y_i) / (W - w_i) the targets of the left-out fit are y - c_i, and
(S (y - c_i))_i = (S z)_i - δ_i (S 1)_i with z = y - ȳ, δ_i = c_i - ȳ = -w_i z_i / (W - w_i).

GCV (Golub, Heath & Wahba) replaces every S_ii by the mean tr(H) / n of the whole fit's hat
matrix H (with the intercept, H = S (I - 1 w^T / W) + 1 w^T / W, tr H = tr S - w^T S 1 / W + 1):
GCV = (1/W) sum_i w_i (z_i - (S z)_i)^2 / (1 - tr H / n)^2. It needs no pass over the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SmootherCV", "loo_scores", "gcv_scores", "eigen_smoother_scores"]


@dataclass(frozen=True)
class SmootherCV:
    """What a Tikhonov solver scores its path by instead of a validation set.

    mode : "loo" or "gcv"
    center : bool
        The targets were centered by their weighted mean (regression): the intercept is
        re-estimated when a point is left out.
    scoring : "mse" or "error_rate"
        The scores of the path: mean squared error of the (coded) targets, or the
        misclassification rate of the left-out predictions (ties broken by their squared
        loss). GCV estimates the squared loss only.
    """

    mode: str
    center: bool
    scoring: str = "mse"


def loo_scores(
    cv: SmootherCV,
    Z: np.ndarray,
    F: np.ndarray,
    Sd: np.ndarray,
    S1: np.ndarray | None,
    w: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(errors, squared losses) of exact leave-one-out at every penalty, each of shape (P,).

    Parameters
    ----------
    Z : ndarray of shape (n, k)
        The targets of the fit (centered for regression, ±1 codes for classification).
    F : ndarray of shape (n, P, k)
        Fitted values S Z for every penalty.
    Sd : ndarray of shape (n, P)
        The diagonal of S.
    S1 : ndarray of shape (n, P) or None
        S applied to the vector of ones (needed when ``cv.center``).
    w : ndarray of shape (n,)
        Positive weights (summing to n).
    """
    W = float(w.sum())
    Zs = Z[:, None, :]
    Sz = F
    if cv.center:
        assert S1 is not None
        delta = -w[:, None] * Z / (W - w[:, None])  # (n, k)
        Zs = Zs - delta[:, None, :]
        Sz = F - delta[:, None, :] * S1[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        R = (Zs - Sz) / (1.0 - Sd)[:, :, None]  # left-out residuals (n, P, k)
    k = Z.shape[1]
    loss = np.einsum("n,npk->p", w, R * R) / (W * k)
    if cv.scoring == "mse":
        err = loss
    else:  # the left-out predictions of the ±1 codes (no intercept for classifiers)
        G = Zs - R
        if k == 1:
            wrong = (G[:, :, 0] >= 0) != (Z[:, None, 0] > 0)
        else:
            wrong = G.argmax(axis=2) != Z.argmax(axis=1)[:, None]
        err = (w[:, None] * wrong).sum(axis=0) / W
        err = np.where(np.isfinite(loss), err, np.nan)
    bad = ~np.isfinite(loss)
    return np.where(bad, np.nan, err), np.where(bad, np.nan, loss)


def gcv_scores(
    cv: SmootherCV, train_err: np.ndarray, trace: np.ndarray, wS1: np.ndarray | None, n: int
) -> np.ndarray:
    """GCV at every penalty, shape (P,), from the weighted training MSE, tr S and w^T S 1
    (with the intercept); NaN where the fit interpolates (tr H = n)."""
    trH = trace + (1.0 - np.asarray(wS1) / n if cv.center else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.asarray(train_err) / (1.0 - trH / n) ** 2
    return np.where(np.isfinite(g) & (trH < n), g, np.nan)


def eigen_smoother_scores(
    cv: SmootherCV,
    rows: Any,
    T: Any,
    sig: np.ndarray,
    g: np.ndarray,
    coords: np.ndarray,
    c1: np.ndarray | None,
    Y: np.ndarray,
    w: np.ndarray,
    train_err: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, str]:
    """(errors, losses, scoring) of leave-one-out or GCV for a smoother known through the
    eigendecomposition A^T W A / n = V diag(sig) V^T (Nyström: A = K_nm R, RF: A = Φ).

    Parameters
    ----------
    rows : object with ``projected_rows(T, quad, lin)``
        The training rows' operator; U = A V is its rows times ``T`` (leave-one-out only).
    T : ndarray of shape (m, r) or None
        R V (Nyström) or V (RF); None for GCV.
    sig : ndarray of shape (r,)
    g : ndarray of shape (P, r)
        The Tikhonov filter 1 / (sig + λ_p).
    coords : ndarray of shape (r, P * k)
        g c for every penalty and output (c = V^T A^T W Y / n): S Y = U coords.
    c1 : ndarray of shape (r,) or None
        V^T A^T W 1 / n, when the intercept is re-estimated (``cv.center``).
    Y, w : the targets of the fit (n, k) and the positive weights (n,)
    train_err : ndarray of shape (P,)
        The weighted training MSE (GCV).
    """
    n, k = Y.shape
    P = g.shape[0]
    if cv.mode == "gcv":
        trace = (sig[None, :] * g).sum(axis=1)
        wS1 = None if c1 is None else n * (g * c1[None, :] ** 2).sum(axis=1)
        e = gcv_scores(cv, np.maximum(train_err, 0.0), trace, wS1, n)
        return e, e, "mse"
    # S_ii = w_i sum_j U_ij^2 / (n (sig_j + λ)), S Y = U (g c), S 1 = U (g c1)
    lin = coords if c1 is None else np.hstack([coords, (g * c1[None, :]).T])
    Sd, FS = rows.projected_rows(T, (g / n).T, lin)
    Sd *= w[:, None]
    F = FS[:, : P * k].reshape(n, P, k)
    S1 = None if c1 is None else FS[:, P * k :]
    e, loss = loo_scores(cv, Y, F, Sd, S1, w)
    return e, loss, cv.scoring
