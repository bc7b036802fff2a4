"""RF-KRLS estimators: primal ridge on random Fourier features, with the λ path and the path
over the number of features D."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._validation import check_size
from ..features import RandomFourierFeatures, check_rff_kernel
from ..path import Path
from ..solvers._common import Validation
from ..solvers.random_features import (
    feature_moments,
    rf_feature_path,
    rf_penalty_path,
    rff_operator,
)
from ._base import AUTO_GRID_SIZE, _KernelPathEstimator
from ._mixins import _ClassifierMixin, _RegressorMixin

__all__ = ["RandomFeaturesRegressor", "RandomFeaturesClassifier"]

#: D of ``n_features="auto"``: the path goes up to this many features (and at most ~ n).
AUTO_MAX_FEATURES = 2000


class _RandomFeaturesBase(_KernelPathEstimator):
    _takes_dask = True
    _family = "random_features"
    _size_param = "n_features"

    def __init__(
        self,
        kernel: Any = "gaussian",
        penalty: Any = "auto",
        n_features: Any = 1000,
        orthogonal: bool = False,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        refit: bool = False,
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kernel = kernel
        self.penalty = penalty
        self.n_features = n_features
        self.orthogonal = orthogonal
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.refit = refit
        self.memory_budget = memory_budget
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _method(self) -> str:
        return "eigh"

    def _has_path(self, method: str, pen: Any) -> bool:
        return self._center_grid_requested() or not isinstance(pen, float)

    def _smoother_modes(self, method: str) -> tuple[str, ...]:
        return () if self._center_grid_requested() else ("loo", "gcv")

    def _feature_grid(self, value: Any, n: int) -> tuple[int, np.ndarray | None]:
        """(D_max, grid of D or None)."""
        size = check_size(value, "n_features")
        if isinstance(size, str):  # "auto"
            Dmax = int(min(AUTO_MAX_FEATURES, max(10, n)))
            return Dmax, np.unique(np.geomspace(1, Dmax, AUTO_GRID_SIZE).round().astype(np.int64))
        if isinstance(size, np.ndarray):
            return int(size[-1]), size
        return size, None

    def _solve(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        w: np.ndarray | None,
        tr: np.ndarray,
        va: np.ndarray | None,
        params: dict[str, Any],
        method: str,
        n_iter: int | None = None,
    ) -> Path:
        check_rff_kernel(self.kernel_)
        if not isinstance(self.orthogonal, (bool, np.bool_)):
            raise TypeError(f"orthogonal must be a bool, got {self.orthogonal!r}")
        Ytr, wt = self._center_targets(Y, w, tr)
        value = params.get("n_features", self.n_features)
        Dmax, grid = self._feature_grid(value, len(tr))
        need = 8 * Dmax * Dmax
        if need > params["budget"]:
            raise ValueError(
                f"n_features={Dmax} needs a {Dmax} x {Dmax} matrix ({need / 1e9:.2f} GB), more "
                f"than memory_budget={params['budget'] / 1e9:.2f} GB"
            )
        self._draw_feature_seed(params)  # the refit reuses the same map
        Xtr = B.take_rows(X, tr)
        fmap = RandomFourierFeatures(
            self.kernel_, Dmax, bool(self.orthogonal), self._feature_seed, params["budget"]
        ).fit(B.to_numpy(Xtr[:1]))
        self._fmap = fmap
        cv = self._smoother_cv(params)
        rhs = np.hstack([Ytr, np.ones((len(Ytr), 1))]) if cv is not None and cv.center else Ytr
        G, b = feature_moments(fmap, Xtr, Dmax, rhs, wt)
        b1 = None
        if b.shape[1] > Ytr.shape[1]:
            b, b1 = b[:, : Ytr.shape[1]], b[:, Ytr.shape[1] :]
        pen = params["penalty"]
        lam = None if isinstance(pen, str) else np.atleast_1d(pen)
        scoring = "error_rate" if self._classifier else "mse"
        if grid is not None:
            val = None
            if va is not None:
                vop = rff_operator(fmap, B.take_rows(X, va), Dmax, normalize=False)
                val = Validation(vop, Y[va] - self._intercept, scoring)  # type: ignore[arg-type]
            return rf_feature_path(G, b, Ytr, lam, grid, wt, val, B.dtype_of(X))
        val = None
        if va is not None:
            vop = rff_operator(fmap, B.take_rows(X, va), Dmax)
            val = Validation(vop, Y[va] - self._intercept, scoring)  # type: ignore[arg-type]
        fop = rff_operator(fmap, Xtr, Dmax) if cv is not None else None
        return rf_penalty_path(G, b, Ytr, lam, wt, val, B.dtype_of(X), cv, fop, b1)

    def _refit(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        w: np.ndarray | None,
        n: int,
        params: dict[str, Any],
        method: str,
        path: Path,
    ) -> None:
        """Refit on all the data at the chosen (D, λ), with the same feature map."""
        best = path.best_params
        fixed = dict(params)
        fixed["penalty"] = float(best["penalty"])
        fixed["n_features"] = int(best.get("n_features", len(path.coef())))
        fixed["feature_seed"] = self._feature_seed
        again = self._solve(X, Y, w, np.arange(n), None, fixed, method)
        self._set_model(again.coef(), again)

    def _set_model(self, coef: np.ndarray, path: Path) -> None:
        coef = np.asarray(coef)
        D = coef.shape[0]
        self.features_ = RandomFourierFeatures(
            self.kernel_, D, bool(self.orthogonal), self._feature_seed, self.memory_budget
        ).fit(self._fmap.frequencies_[:1, :] * 0)
        self.n_features_ = D
        self._store_coef(coef, self._intercept)

    def _decision(self, X: Any) -> Any:
        check_is_fitted(self, "coef_")
        Xc = self._predict_input(X)
        dtype = np.result_type(B.dtype_of(Xc), B.dtype_of(self.coef_))
        dev = B.array_device(Xc)
        op = rff_operator(self.features_, B.to_device(Xc, dev, dtype), self.n_features_)
        F = op.matvec(self.coef_, native=True)
        return F + B.to_device(np.asarray(self.intercept_, dtype=dtype), dev)


_RF_DOC = """
    Parameters
    ----------
    kernel : str, Kernel or sequence of them, default="gaussian"
        A sequence, or ``sigma="auto"``, is a path over kernels (see NystromRegressor).
        Gaussian, Laplacian, Cauchy or Matern (a name uses ``sigma="median"``).
    penalty : float, sequence of floats or "auto", default="auto"
        λ in (1/n) sum_i (y_i - φ(x_i)^T w)^2 + λ ||w||^2 with the normalized map
        φ = sqrt(2/D) cos(W x + b). A sequence is a path (one eigendecomposition of
        Φ^T Φ gives all of it); "auto": 20 values over 9 decades below the top eigenvalue of
        Φ^T Φ / n. With a path over D, the penalty per unnormalized weight μ = λ n D_max is
        held fixed, so a point with D features has λ D_max / D (``path_.params["penalty"]``).
    n_features : int, sequence of int or "auto", default=1000
        Number D of random features. A sequence, or "auto" (20 values geometric from 1 to
        min(2000, n)), fits the path over (D, λ) from one Cholesky factor per penalty
        (features added in blocks, the factor reused) and chooses D on the validation split.
    orthogonal : bool, default=False
        Orthogonal random features (Gaussian kernel).
    validation_fraction : float in [0, 1), default=0.2
    cv : "holdout", "loo", "gcv", int or splitter, default="holdout"
        See NystromRegressor; "loo" and "gcv" in closed form at one D.
    refit : bool, default=False
        Refit on all the data at the chosen (D, λ) with the same features.
    memory_budget : int, str or None, default=None
    random_state : int, Generator or None, default=None
        Seeds the split, the bandwidth heuristic and the features.
    device, verbose :
        As for NystromRegressor.

    Attributes
    ----------
    path_ : Path
    best_params_ : dict
    penalty_ : float
    n_features_ : int
        D of the model.
    features_ : RandomFourierFeatures
        The feature map of the model (``features_.transform(X) @ coef_ + intercept_``).
    coef_ : ndarray of shape (D,) or (D, n_outputs)
    intercept_ : float or ndarray
    kernel_ : Kernel
    train_indices_, validation_indices_ : ndarray of int
"""


class RandomFeaturesRegressor(_RegressorMixin, _RandomFeaturesBase):
    __doc__ = (
        "RF-KRLS: ridge regression on random Fourier features, with the λ and D paths." + _RF_DOC
    )


class RandomFeaturesClassifier(_ClassifierMixin, _RandomFeaturesBase):
    __doc__ = "RF-KRLS classifier (one-vs-all ±1 coding) on random Fourier features." + _RF_DOC
    _classifier = True
