"""What a regressor knows of its errors: split-conformal intervals from the residuals of rows
the fit did not train on (``predict_interval``), and the Gaussian-process posterior standard
deviation of a kernel expansion under its fitted λ (``predict(X, return_std=True)``).

Intervals. A fit that chose its point on held-out rows has their residuals r_i = y_i -
f(x_i) (the hold-out's, or with k-fold every row's out-of-fold one). With n_v of them, the
interval f(x) ± q, q the ceil((n_v + 1) c)-th smallest |r_i|, covers a new y with
probability at least c when the new row and the held-out rows are exchangeable (split
conformal prediction: Vovk et al. 2005, Lei et al. 2018), and at most c + 1 / (n_v + 1).
The guarantee is for the model that made the residuals, fitted on the training part; a
model refit on every row at the chosen point (``refit``) is the same point fitted on more
rows, whose errors are no larger in expectation. The intervals have one width everywhere
(a locally scaled score was not measured to cover better here).

Standard deviations. Kernel ridge regression with λ is the posterior mean of a Gaussian
process with prior covariance s^2 k and noise variance sigma^2 = s^2 n λ. The posterior
variance of f has the shape v(x) = k(x, x) - k_x^T (K + n λ I)^-1 k_x (exact KRLS) under the
fitted λ. A Nyström model conditions on its m centers instead, with the noise of the rows they
stand for scaled to m of them: v(x) = k(x, x) - k_xm^T (K_mm + m λ I)^-1 k_xm (the posterior
of a process observed at the centers, with the regularization that the centers' subsampled
normal equations have). The standard deviation returned is that of y, sqrt(s^2 v(x) +
sigma^2). The two variances are fitted by maximum likelihood to the held-out residuals r_i,
r_i ~ N(0, s^2 v(x_i) + sigma^2) (at most ``CALIBRATION_ROWS`` of them): the centers' posterior
takes the rows between centers for unseen, and s^2 = sigma^2 / (n λ) made the 1.645 sigma
interval cover 0.97-1.00 of the test rows on pumadyn32nh, concrete, yacht and airfoil
(benchmarks/accuracy.py, results/accuracy.json). Where the variances cannot be fitted (no
held-out rows in memory, exact KRLS refit on them) sigma^2 is the held-out mean squared
residual and s^2 = sigma^2 / (n λ).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sl
from scipy.optimize import minimize

from .. import _backend as B
from ..inputs import rows_in_memory
from ..workspace import Workspace

__all__ = [
    "CALIBRATION_ROWS",
    "conformal_half_width",
    "posterior_shape",
    "fit_variances",
    "calibrate_posterior",
    "posterior_std",
    "check_posterior",
]

#: The most held-out rows the posterior's two variances are fitted on (a random subset beyond).
CALIBRATION_ROWS = 2000
#: The least s^2, as a share of sigma^2 at the held-out rows' median v(x): where the residuals
#: do not grow with v (a well-specified model inside the data) the likelihood takes s^2 to 0,
#: and the standard deviation would no longer grow away from the data; the floor adds 5% of
#: sigma^2 to the variance at that median row and grows with v(x) away from the data.
FLOOR_SHARE = 0.05


def conformal_half_width(residuals: np.ndarray, coverage: Any) -> np.ndarray:
    """q per output, (k,): the ceil((n_v + 1) coverage)-th smallest |residual| of the
    sorted absolute residuals (n_v, k); infinite where n_v is too small for ``coverage``."""
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.floating)):
        raise TypeError(f"coverage must be a number in (0, 1), got {coverage!r}")
    c = float(coverage)
    if not 0.0 < c < 1.0:
        raise ValueError(f"coverage must be in (0, 1), got {coverage!r}")
    n_v = residuals.shape[0]
    rank = int(np.ceil((n_v + 1) * c))
    if rank > n_v:  # too few held-out rows for this coverage: the interval is the line
        return np.full(residuals.shape[1], np.inf)
    return residuals[rank - 1]


def posterior_shape(est: Any, Xp: Any) -> np.ndarray:
    """v(x) = k(x, x) - k_xm^T (K_mm + m λ I)^-1 k_xm per row of the prepared input ``Xp``,
    (n,) (the module's rules), for a fitted Nyström or exact-KRLS model."""
    lam = float(est.penalty_)
    centers = est.centers_
    m = int(centers.shape[0])
    workspace = Workspace.of(est.memory_budget, B.array_device(Xp))
    op = workspace.in_process(Xp, centers, est.kernel_)
    K = np.asarray(B.to_numpy(op.center_gram()), dtype=np.float64)
    K[np.diag_indices(m)] += m * max(lam, 0.0) + _jitter(K)
    L = sl.cholesky(K, lower=True, overwrite_a=True, check_finite=False)
    del K
    T = sl.solve_triangular(L, np.eye(m), lower=True, check_finite=False).T  # L^-T
    del L
    explained = np.asarray(B.to_numpy(op.row_sq_norms(T)), dtype=np.float64)
    prior = np.asarray(B.to_numpy(op.diag()), dtype=np.float64)
    op.release()
    return np.clip(prior - explained, 0.0, None)


def fit_variances(shape: np.ndarray, residuals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s^2, sigma^2) per output, (k,) each: the maximum-likelihood variances of residuals
    (n_v, k) ~ N(0, s^2 shape + sigma^2), shape (n_v,). The likelihood is maximized in units
    of the mean squared residual (the same answer at every scale of y); residuals that are
    all zero give zero variances."""
    signal, noise = [], []
    median = float(np.median(shape))
    for r in residuals.T:
        r2 = np.asarray(r, dtype=np.float64) ** 2
        total = float(np.mean(r2))
        if not np.isfinite(total) or total <= 0.0:
            signal.append(0.0)
            noise.append(0.0)
            continue
        u = r2 / total

        def nll(p: np.ndarray, u: np.ndarray = u) -> float:
            a, b = np.exp(np.clip(p, -60.0, 60.0))
            var = a * shape + b
            return float(np.mean(np.log(var) + u / var))

        start = np.log([1.0 / max(float(np.mean(shape)), 1e-12), 0.5])
        res = minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-9})
        a, b = np.exp(np.clip(res.x, -60.0, 60.0)) if np.all(np.isfinite(res.x)) else (0.0, 1.0)
        # the floor: far from the data v(x) -> k(x, x) keeps its weight (see FLOOR_SHARE)
        if median > 0.0:
            a = max(a, FLOOR_SHARE * b / median)
        signal.append(float(a) * total)
        noise.append(float(b) * total)
    return np.asarray(signal), np.asarray(noise)


def calibrate_posterior(
    est: Any, X: Any, rows: np.ndarray, residuals: np.ndarray, n_train: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """(s^2, sigma^2) fitted to the held-out ``residuals`` (n_v, k) of the rows ``rows`` of
    the fit's prepared input ``X`` (``fit_variances``), or None where they cannot be: a model
    ``return_std`` refuses, input not in memory, or an exact model refit on the held-out rows
    (their posterior variance is then that of training rows)."""
    try:
        check_posterior(est)
    except ValueError:
        return None
    if B.is_lazy(X) or B.is_dask(X):
        return None
    if est.centers_.shape[0] == est.n_fit_rows_ and est.n_fit_rows_ > n_train:
        return None
    if len(rows) > CALIBRATION_ROWS:
        keep = np.sort(np.random.default_rng(0).choice(len(rows), CALIBRATION_ROWS, replace=False))
        rows, residuals = rows[keep], residuals[keep]
    shape = posterior_shape(est, rows_in_memory(X, rows))
    return fit_variances(shape, residuals)


def posterior_std(est: Any, X: Any) -> np.ndarray:
    """sqrt(s^2 v(x) + sigma^2) per row and output, (n,) or (n, k) (the module's rules),
    for a fitted Nyström or exact-KRLS regressor with the Tikhonov filter."""
    noise = np.asarray(est.noise_variance_, dtype=np.float64)
    signal = getattr(est, "signal_variance_", None)
    if signal is None:
        lam, n_fit = float(est.penalty_), int(est.n_fit_rows_)
        signal = noise / (n_fit * lam) if lam > 0 else np.zeros_like(noise)
    shape = posterior_shape(est, est._predict_input(X))
    std = np.sqrt(shape[:, None] * np.asarray(signal)[None, :] + noise[None, :])
    return std[:, 0] if std.shape[1] == 1 and np.ndim(est.coef_) == 1 else std


def _jitter(K: np.ndarray) -> float:
    """A diagonal shift that keeps the Cholesky factor of a λ = 0 Gram matrix defined."""
    return float(np.finfo(np.float64).eps * max(float(np.max(np.diag(K))), 1.0) * K.shape[0])


def check_posterior(est: Any) -> None:
    """Refuse ``return_std`` for a model it is not defined for, naming why."""
    name = type(est).__name__
    if not getattr(est._family, "expands_centers", False) or getattr(est, "centers_", None) is None:
        raise ValueError(
            f"{name}: return_std is the Gaussian-process posterior of a kernel expansion "
            "(NystromRegressor, KRLSRegressor); use predict_interval for this model"
        )
    if getattr(est, "filter", "tikhonov") != "tikhonov" or name.startswith(("NYTRO", "EigenPro")):
        raise ValueError(
            f"{name}: return_std needs a model regularized by its penalty (the Tikhonov "
            "filter of NystromRegressor or KRLSRegressor); use predict_interval"
        )
    if getattr(est, "noise_variance_", None) is None:
        raise ValueError(
            f"{name}: return_std estimates the noise from the residuals of rows the fit did "
            "not train on, and this fit held none out (cv='loo', 'gcv' or "
            "validation_fraction=0): fit with cv='holdout' or an int k"
        )
