"""Online learners: recursive regularized least squares with rank-one Cholesky updates.

``RecursiveRLS`` (thesis §8.2.4, eq. 8.14-8.17) keeps, for features z = φ(x) in R^D and
targets u in R^k,

    R^T R = Z^T Z + λ I,      B = Z^T U,      W = (Z^T Z + λ I)^-1 Z^T U = R^-1 R^-T B,

and a new sample costs one rank-one update of R (``cholesky.cholesky_update``, O(D^2), compiled)
plus B <- B + z u^T, whatever the number of samples seen. λ is not divided by n (n grows).
With a forgetting factor μ in (0, 1], every step first scales R by sqrt(μ) and B by μ, so
that after t samples R^T R = sum_i μ^(t-i) z_i z_i^T + μ^t λ I and B = sum_i μ^(t-i) z_i u_i^T
(exponentially weighted RLS: old samples, and the prior, fade).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._backend import check_real
from .._threads import one_blas_thread
from .._validation import check_float, keep_params
from ..cholesky import cholesky_update
from .common import _host, _rows, as_feature_map, check_n_features, fitted_features, require_y

__all__ = ["RecursiveRLS"]


class RecursiveRLS(RegressorMixin, BaseEstimator):
    """Recursive (online) regularized least squares, O(D^2) per sample.

    Parameters
    ----------
    penalty : float, default=1.0
        λ > 0 in ||Z W - U||^2 + λ ||W||^2 (not divided by the number of samples).
    features : None, transformer or callable, default=None
        The map z = φ(x): None is the identity (linear RLS on the inputs); a transformer such
        as ``RandomFourierFeatures`` (fitted on the first batch if it is not fitted); or a
        callable taking an (n, d) array and returning (n, D).
    forgetting : float in (0, 1], default=1.0
        μ: each new sample first multiplies the past (and the prior λ I) by μ.

    Attributes
    ----------
    features_ : transformer, callable or None
        The feature map in use: ``features`` itself when it is fitted (or a callable, or
        None), else a clone of it fitted on the stream's first batch (``fit`` fits anew).
    coef_ : ndarray of shape (D,) or (D, n_outputs)
        W, solved from the current factor when read (two triangular solves).
    factor_ : ndarray of shape (D, D)
        Upper triangular R with R^T R = Z^T Z + λ I (weighted by μ).
    cross_ : ndarray of shape (D, n_outputs)
        B = Z^T U.
    n_samples_seen_ : int
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from kernelpath import RecursiveRLS
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> model = RecursiveRLS(penalty=1e-6)
    >>> for x_t, y_t in zip(X, y):
    ...     _ = model.partial_fit(x_t, y_t)
    >>> np.round(model.coef_, 3).tolist()
    [1.0, -2.0, 0.5]
    """

    def __init__(self, penalty: float = 1.0, *, features: Any = None, forgetting: float = 1.0):
        keep_params(self, locals())

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "factor_")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True  # y of shape (n, k): k outputs, one factor
        tags.input_tags.sparse = True  # sparse rows go through the feature map
        return tags

    def _reset(self) -> None:
        for name in ("factor_", "cross_", "n_samples_seen_", "n_features_in_", "_W_cache"):
            if hasattr(self, name):
                delattr(self, name)

    @one_blas_thread
    def fit(self, X: Any, y: Any) -> RecursiveRLS:
        """Forget everything and learn from (X, y) sample by sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        self._reset()
        return self.partial_fit(X, y)

    @one_blas_thread
    def partial_fit(self, X: Any, y: Any) -> RecursiveRLS:
        """Update with one sample (1-D x) or a mini-batch, one rank-one update per sample.

        Parameters
        ----------
        X : array-like of shape (n_features,) or (n_samples, n_features)
        y : float, array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        require_y(self, y)
        X2 = _rows(X)
        y = _host(y)
        check_real(y, "y")
        try:
            Y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"y must contain numbers only: {exc}") from exc
        if getattr(X, "ndim", 2) == 1:  # one sample: y is a number or its outputs' vector
            vector = Y.ndim == 0
            Y = Y.reshape(1, -1)
        else:
            vector = Y.ndim == 1
            Y = Y[:, None] if Y.ndim == 1 else Y
        if Y.ndim != 2 or len(Y) != X2.shape[0]:
            raise ValueError(
                f"X and y have different numbers of samples: {X2.shape[0]} and {np.shape(y)}"
            )
        if not np.all(np.isfinite(Y)):
            raise ValueError("y contains NaN or infinity")
        if not hasattr(self, "factor_"):
            self._start(X2, Y)
            self._vector_y = vector
        else:
            check_n_features(self, X2)
            if Y.shape[1] != self.cross_.shape[1]:
                raise ValueError(
                    f"y has {Y.shape[1]} outputs, but RecursiveRLS is fitted with "
                    f"{self.cross_.shape[1]}"
                )
        Z = np.asarray(self._map(X2), dtype=np.float64)
        if Z.ndim != 2 or Z.shape != (X2.shape[0], self.factor_.shape[0]):
            raise ValueError(
                f"the feature map returned shape {Z.shape}, expected "
                f"({X2.shape[0]}, {self.factor_.shape[0]})"
            )
        mu = self._mu
        R, B = self.factor_, self.cross_
        for z, u in zip(Z, Y, strict=True):
            if mu != 1.0:
                R *= np.sqrt(mu)
                B *= mu
            cholesky_update(R, z, overwrite=True)
            B += np.outer(z, u)
        self.n_samples_seen_ += X2.shape[0]
        self._W_cache.clear()
        return self

    def _start(self, X: np.ndarray, Y: np.ndarray) -> None:
        lam = check_float(self.penalty, "penalty", 0.0, np.inf, low_open=True, high_open=True)
        self._mu = check_float(self.forgetting, "forgetting", 0.0, 1.0, low_open=True)
        self.features_ = fitted_features(self.features, X)
        self._map = as_feature_map(self.features_, X)
        D = np.asarray(self._map(X[:1])).shape[1]
        self.n_features_in_ = X.shape[1]
        self.factor_ = np.sqrt(lam) * np.eye(D)
        self.cross_ = np.zeros((D, Y.shape[1]))
        self.n_samples_seen_ = 0
        self._W_cache: dict[str, np.ndarray] = {}  # W, until the next sample

    @property
    @one_blas_thread
    def coef_(self) -> np.ndarray:
        check_is_fitted(self)
        W = self._W_cache.get("W")
        if W is None:
            R = self.factor_
            T = scipy.linalg.solve_triangular(R, self.cross_, trans="T", check_finite=False)
            W = self._W_cache["W"] = scipy.linalg.solve_triangular(R, T, check_finite=False)
        return W[:, 0] if self._vector_y and W.shape[1] == 1 else W

    @one_blas_thread
    def predict(self, X: Any) -> np.ndarray:
        """φ(X) W.

        Parameters
        ----------
        X : array-like of shape (n_features,) or (n_samples, n_features)

        Returns
        -------
        ndarray or tensor of shape (n_samples,) or (n_samples, n_outputs)
            Like X.
        """
        check_is_fitted(self)
        X2 = check_n_features(self, _rows(X))
        return B.like_input(np.asarray(self._map(X2), dtype=np.float64) @ self.coef_, X)
