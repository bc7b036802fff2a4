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
process with prior covariance s^2 k and noise variance sigma^2 = s^2 n λ. sigma^2 is the
held-out mean squared residual (``noise_variance_``), so s^2 = sigma^2 / (n λ), n the rows
the model was fitted on. Exact KRLS gives the exact posterior variance of f,
s^2 (k(x, x) - k_x^T (K + n λ I)^-1 k_x). A Nyström model conditions on its m centers
instead, with the noise of the rows they stand for scaled to m of them:
s^2 (k(x, x) - k_xm^T (K_mm + m λ I)^-1 k_xm) (the posterior of a process observed at the
centers, with the regularization that the centers' subsampled normal equations have). The
standard deviation returned is that of y: sqrt(var f + sigma^2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sl

from .. import _backend as B
from ..workspace import Workspace

__all__ = ["conformal_half_width", "posterior_std", "check_posterior"]


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


def posterior_std(est: Any, X: Any) -> np.ndarray:
    """sqrt(var f(x) + sigma^2) per row and output, (n,) or (n, k) (the module's rules), for
    a fitted Nyström or exact-KRLS regressor with the Tikhonov filter."""
    noise = np.asarray(est.noise_variance_, dtype=np.float64)
    lam, n_fit = float(est.penalty_), int(est.n_fit_rows_)
    centers = est.centers_
    m = int(centers.shape[0])
    Xp = est._predict_input(X)
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
    shape = np.clip(prior - explained, 0.0, None)  # var f / s^2
    scale = noise / (n_fit * lam) if lam > 0 else np.zeros_like(noise)
    std = np.sqrt(shape[:, None] * scale[None, :] + noise[None, :])
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
