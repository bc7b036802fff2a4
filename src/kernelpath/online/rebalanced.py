"""The class-weighted RLS baseline of the thesis (eq. 7.22), learned online."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._threads import one_blas_thread
from .._validation import check_float, keep_params
from .common import (
    HELDOUT_CHUNKS,
    HELDOUT_EVERY,
    StreamClassifier,
    as_feature_map,
    fitted_features,
)

__all__ = ["RebalancedRLSClassifier"]


class RebalancedRLSClassifier(StreamClassifier, BaseEstimator):
    """RLS classification with rebalanced (class-weighted) least squares: the thesis's
    baseline against recoding (eq. 7.22),

        W = argmin_W  sum_i Γ_{y_i} ||W^T z_i - e_{y_i}||^2 + λ ||W||^2
          = (Z^T Γ Z + λ I)^-1 Z^T Γ Y,          Γ_tt = k / k_t,

    every sample weighted by the inverse frequency of its class (k samples, k_t of class t).
    The weights of every past sample change whenever a class count does, so there is no
    fixed-time update: ``partial_fit`` keeps one Gram matrix Z_t^T Z_t and one Z_t^T 1 per
    class (O(T D^2) memory) and each prediction after new data solves a D x D system
    (O(D^3)), where ``IncrementalRLSClassifier``'s recoding costs O(D^2) per sample.

    Parameters
    ----------
    penalty : float, default=1e-2
        λ > 0.
    features : None, transformer or callable, default=None
        The map z = φ(x) (see ``RecursiveRLS``).
    class_weight : dict or None, default=None
        Weights of classes, multiplying Γ (classes not named weigh 1); "balanced" is refused:
        Γ is that balance already.

    Attributes
    ----------
    features_ : transformer, callable or None
        The feature map in use: ``features`` itself when it is fitted (or a callable, or
        None), else a clone of it fitted on the stream's first batch (``fit`` fits anew).
    classes_ : ndarray
        Labels in the order they appeared (or were declared).
    class_counts_ : ndarray of int
    coef_ : ndarray of shape (D, n_classes)
        W for the data seen so far.
    n_samples_seen_ : int
    """

    def __init__(
        self, penalty: float = 1e-2, *, features: Any = None, class_weight: Any = None
    ) -> None:
        keep_params(self, locals())

    _fitted_attr = "grams_"
    _balanced_by = "is balanced by construction (Γ_tt = k / k_t)"

    def _start(self, X: np.ndarray) -> None:
        self._lam = check_float(self.penalty, "penalty", 0.0, np.inf, low_open=True)
        self.features_ = fitted_features(self.features, X)
        self._map = as_feature_map(self.features_, X)
        D = np.asarray(self._map(X[:1])).shape[1]
        self.n_features_in_ = X.shape[1]
        self.grams_: np.ndarray = np.zeros((0, D, D))
        self.sums_: np.ndarray = np.zeros((D, 0))
        self.classes_: np.ndarray = np.array([], dtype=object)
        self.class_counts_: np.ndarray = np.zeros(0, dtype=np.int64)
        self.n_samples_seen_ = 0
        self._coef_cache: dict[str, np.ndarray] = {}  # the coefficients, until new samples

    def _class_index(self, label: Any) -> int:
        hit = np.flatnonzero(self.classes_ == label) if len(self.classes_) else np.empty(0, int)
        if len(hit):
            return int(hit[0])
        D = self.grams_.shape[1]
        self.classes_ = np.append(self.classes_, np.array([label], dtype=object))
        self.grams_ = np.concatenate([self.grams_, np.zeros((1, D, D))])
        self.sums_ = np.hstack([self.sums_, np.zeros((D, 1))])
        self.class_counts_ = np.append(self.class_counts_, 0)
        return len(self.classes_) - 1

    def _learn_labelled(self, Z: np.ndarray, labels: np.ndarray) -> None:
        """Add the samples to the per-class sums, a chunk at a time."""
        idx = np.array([self._class_index(label) for label in labels], dtype=np.int64)
        # prequential hold-out for the probabilities: every HELDOUT_EVERY-th sample is scored
        # by the model of the samples before it (a batch in at most HELDOUT_CHUNKS pieces),
        # then learned
        for chunk in np.array_split(np.arange(len(Z)), max(1, min(len(Z), HELDOUT_CHUNKS))):
            seen = self.n_samples_seen_
            test = chunk[(seen + np.arange(1, len(chunk) + 1)) % HELDOUT_EVERY == 0]
            if len(test) and self.class_counts_.sum() > 0:
                for i, row in zip(test, Z[test] @ self.coef_, strict=True):
                    self._remember(int(idx[i]), row[None, :])
            self._learn(Z[chunk], idx[chunk])

    def _learn(self, Z: np.ndarray, idx: np.ndarray) -> None:
        """Add the feature rows Z of classes ``idx`` to the per-class sums."""
        for t in np.unique(idx):
            self._class_weight(self.classes_[t])  # checked now, used by coef_
            Zt = Z[idx == t]
            self.grams_[t] += Zt.T @ Zt
            self.sums_[:, t] += Zt.sum(axis=0)
            self.class_counts_[t] += len(Zt)
        self.n_samples_seen_ += len(Z)
        self._coef_cache.clear()

    @property
    @one_blas_thread
    def coef_(self) -> np.ndarray:
        check_is_fitted(self)
        coef = self._coef_cache.get("coef")
        if coef is None:
            counts = self.class_counts_.astype(float)
            g = np.where(counts > 0, counts.sum() / np.maximum(counts, 1.0), 0.0)
            g = g * np.array([self._class_weight(label) for label in self.classes_])
            A = np.tensordot(g, self.grams_, axes=1)
            A[np.diag_indices_from(A)] += self._lam
            try:
                coef = scipy.linalg.solve(A, self.sums_ * g, assume_a="pos")
            except np.linalg.LinAlgError:
                raise ValueError(
                    f"penalty={self.penalty!r} is below the rounding of the weighted Gram "
                    f"matrix (its largest entry {float(np.abs(A).max()):.3g}): it is singular "
                    "in float64. Center or scale the features (or the feature map's inputs), "
                    "or give a larger penalty"
                ) from None
            self._coef_cache["coef"] = coef
        return coef

    @one_blas_thread
    def decision_function(self, X: Any) -> np.ndarray:
        """Scores of the classes.

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)
            Rows to score.

        Returns
        -------
        ndarray or tensor of shape (n_samples, n_classes)
        """
        return B.like_input(self._features_to_score(X) @ self.coef_, X)

    @one_blas_thread
    def predict(self, X: Any) -> np.ndarray:
        """Labels of the largest score.

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)
            Rows to label.

        Returns
        -------
        ndarray or tensor of shape (n_samples,)
        """
        return self._labels(self.decision_function(X), X)
