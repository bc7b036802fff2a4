"""Online learners: recursive regularized least squares with rank-one Cholesky updates.

``RecursiveRLS`` (thesis §8.2.4, eq. 8.14-8.17) keeps, for features z = φ(x) in R^D and
targets u in R^k,

    R^T R = Z^T Z + λ I,      B = Z^T U,      W = (Z^T Z + λ I)^-1 Z^T U = R^-1 R^-T B,

and a new sample costs one rank-one update of R (``linalg.cholesky_update``, O(D^2), compiled)
plus B <- B + z u^T, whatever the number of samples seen. λ is not divided by n (n grows).
With a forgetting factor μ in (0, 1], every step first scales R by sqrt(μ) and B by μ, so
that after t samples R^T R = sum_i μ^(t-i) z_i z_i^T + μ^t λ I and B = sum_i μ^(t-i) z_i u_i^T
(exponentially weighted RLS: old samples, and the prior, fade).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from . import _backend as B
from ._validation import check_choice, check_float, check_int, check_rows
from .features import RandomFourierFeatures
from .kernels import Gaussian
from .linalg import cholesky_update

__all__ = [
    "RecursiveRLS",
    "IncrementalRLSClassifier",
    "RebalancedRLSClassifier",
    "SELECTION_RULES",
    "SemiparametricRegressor",
    "semiparametric_protocol",
    "FeatureMap",
    "as_feature_map",
]

FeatureMap = Callable[[np.ndarray], np.ndarray]
#: ``selection`` of IncrementalRLSClassifier.
SELECTION_RULES = ("best", "thesis")


def as_feature_map(features: Any, X: np.ndarray) -> FeatureMap:
    """The map z = φ(x) from ``features``: None (the inputs themselves), a transformer (fitted
    on X when it is not fitted yet) or a callable (n, d) -> (n, D)."""
    if features is None:
        return lambda A: A
    if hasattr(features, "transform"):
        try:
            check_is_fitted(features)
        except NotFittedError:
            features.fit(X)
        return features.transform  # type: ignore[no-any-return]
    if callable(features):
        return features  # type: ignore[no-any-return]
    raise TypeError(
        f"features must be None, a transformer or a callable, got {type(features).__name__}"
    )


def _rows(X: Any, name: str = "X") -> np.ndarray:
    """Checked float64 rows on the host (a tensor is checked on its device, then copied:
    the rank-one updates are sequential and run on the CPU); a 1-D array is one sample."""
    return B.to_numpy(check_rows(X, name, one_sample=True), np.float64)


def _check_labels(labels: np.ndarray, name: str) -> None:
    """Class labels must be values, not missing ones: NaN (which is not equal to itself)
    or None would become a new class at every sample."""
    for i, v in enumerate(labels):
        if v is None or (isinstance(v, (float, np.floating)) and not np.isfinite(v)):
            raise ValueError(f"{name} contains a missing label ({v!r} at position {i})")


def _host(a: Any) -> Any:
    """Targets or labels as NumPy (tensors copied to the host)."""
    return B.to_numpy(a) if B.is_tensor(a) else a


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

    def __init__(self, penalty: float = 1.0, features: Any = None, forgetting: float = 1.0):
        self.penalty = penalty
        self.features = features
        self.forgetting = forgetting

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "factor_")

    def _reset(self) -> None:
        for name in ("factor_", "cross_", "n_samples_seen_", "n_features_in_", "_W"):
            if hasattr(self, name):
                delattr(self, name)

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
        X2 = _rows(X)
        y = _host(y)
        try:
            Y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"y must contain numbers only: {exc}") from exc
        if np.ndim(X) == 1:  # one sample: y is a number or the vector of its outputs
            vector = Y.ndim == 0
            Y = Y.reshape(1, -1)
        else:
            vector = Y.ndim == 1
            Y = Y[:, None] if Y.ndim == 1 else Y
        if Y.ndim != 2 or len(Y) != len(X2):
            raise ValueError(
                f"X and y have different numbers of samples: {len(X2)} and {np.shape(y)}"
            )
        if not np.all(np.isfinite(Y)):
            raise ValueError("y contains NaN or infinity")
        if not hasattr(self, "factor_"):
            self._start(X2, Y)
            self._vector_y = vector
        elif X2.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X2.shape[1]} features, but RecursiveRLS is fitted with "
                f"{self.n_features_in_}"
            )
        elif Y.shape[1] != self.cross_.shape[1]:
            raise ValueError(
                f"y has {Y.shape[1]} outputs, but RecursiveRLS is fitted with "
                f"{self.cross_.shape[1]}"
            )
        Z = np.asarray(self._map(X2), dtype=np.float64)
        if Z.ndim != 2 or Z.shape != (len(X2), self.factor_.shape[0]):
            raise ValueError(
                f"the feature map returned shape {Z.shape}, expected "
                f"({len(X2)}, {self.factor_.shape[0]})"
            )
        mu = self._mu
        R, B = self.factor_, self.cross_
        for z, u in zip(Z, Y, strict=True):
            if mu != 1.0:
                R *= np.sqrt(mu)
                B *= mu
            cholesky_update(R, z, overwrite=True)
            B += np.outer(z, u)
        self.n_samples_seen_ += len(X2)
        self._W = None
        return self

    def _start(self, X: np.ndarray, Y: np.ndarray) -> None:
        lam = check_float(self.penalty, "penalty", 0.0, np.inf, low_open=True, high_open=True)
        self._mu = check_float(self.forgetting, "forgetting", 0.0, 1.0, low_open=True)
        self._map = as_feature_map(self.features, X)
        D = np.asarray(self._map(X[:1])).shape[1]
        self.n_features_in_ = X.shape[1]
        self.factor_ = np.sqrt(lam) * np.eye(D)
        self.cross_ = np.zeros((D, Y.shape[1]))
        self.n_samples_seen_ = 0

    @property
    def coef_(self) -> np.ndarray:
        check_is_fitted(self)
        if getattr(self, "_W", None) is None:
            R = self.factor_
            T = scipy.linalg.solve_triangular(R, self.cross_, trans="T", check_finite=False)
            self._W = scipy.linalg.solve_triangular(R, T, check_finite=False)
        W = self._W
        assert W is not None
        return W[:, 0] if self._vector_y and W.shape[1] == 1 else W

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
        X2 = _rows(X)
        if X2.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X2.shape[1]} features, but RecursiveRLS is fitted with "
                f"{self.n_features_in_}"
            )
        return B.like_input(np.asarray(self._map(X2), dtype=np.float64) @ self.coef_, X)


class _StreamClassifier:
    """What the online classifiers share: ``fit`` is a fresh ``partial_fit``, the checks of
    a batch, labels from scores, accuracy. A subclass sets ``_fitted_attr`` (the attribute
    that exists once it has started) and defines ``_start`` and ``_class_index``."""

    _fitted_attr = ""

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, self._fitted_attr)

    def fit(self, X: Any, y: Any, classes: Any = None) -> Any:
        """Forget everything, then ``partial_fit``."""
        for name in (self._fitted_attr, "classes_"):
            if hasattr(self, name):
                delattr(self, name)
        return self.partial_fit(X, y, classes)  # type: ignore[attr-defined]

    def _check_width(self, X2: np.ndarray) -> np.ndarray:
        """X2, or a ValueError when its number of features is not the fitted one."""
        fitted = self.n_features_in_  # type: ignore[attr-defined]
        if X2.shape[1] != fitted:
            raise ValueError(
                f"X has {X2.shape[1]} features, but the classifier is fitted with {fitted}"
            )
        return X2

    def _labelled_batch(self, X: Any, y: Any, classes: Any) -> tuple[np.ndarray, np.ndarray]:
        """The rows and labels of a ``partial_fit``, checked; the classifier started on the
        first call and the declared ``classes`` added in order."""
        X2 = _rows(X)
        labels = np.atleast_1d(np.asarray(_host(y), dtype=object))
        if labels.ndim != 1 or len(labels) != len(X2):
            raise ValueError(
                f"X and y have different numbers of samples: {len(X2)} and {np.shape(y)}"
            )
        _check_labels(labels, "y")
        if not self.__sklearn_is_fitted__():
            self._start(X2)  # type: ignore[attr-defined]
        else:
            self._check_width(X2)
        if classes is not None:
            declared = np.atleast_1d(np.asarray(_host(classes), dtype=object))
            _check_labels(declared, "classes")
            for label in declared:
                self._class_index(label)  # type: ignore[attr-defined]
        return X2, labels

    def _labels(self, scores: Any, X: Any) -> Any:
        """The labels of the largest scores (rows of ``scores``), like the input X."""
        best = np.argmax(B.to_numpy(scores), axis=1)
        return B.like_input(np.array(list(self.classes_[best])), X)  # type: ignore[attr-defined]

    def score(self, X: Any, y: Any) -> float:
        """Accuracy."""
        pred = self.predict(X)  # type: ignore[attr-defined]
        return float(np.mean(B.to_numpy(pred) == np.asarray(_host(y))))


class IncrementalRLSClassifier(_StreamClassifier, BaseEstimator):
    """Incremental one-vs-all RLS classification with class extension and recoding (thesis
    Algorithm 7.1).

    Targets are one-hot codes: B = Z^T Y, Y_it = 1 when sample i has class t. A label never
    seen before adds a zero column to B (constant time; R is untouched). For every candidate
    λ a factor R_λ (R^T R = Z^T Z + λ I) is rank-one updated per sample (the iCub code's one
    factor per λ), and the weights are recoded:

        W(λ, α) = R_λ^-1 R_λ^-T B Γ^α,     Γ_tt = k / k_t,

    with k the training samples seen and k_t those of class t (inverse empirical class
    frequency): α = 0 is plain RLS, α = 1 full recoding, which raises the scores of rare
    classes.

    Online model selection (§7.6.3): every ``validation_every``-th sample is held out of
    training; before anything else it is classified by every (λ, α) and its per-class
    recall is counted. ``selection="best"`` (the default) scores each (λ, α) by the balanced
    accuracy over the classes seen and keeps the best; ``selection="thesis"`` is the
    thesis's rule: only classes with at least ``min_class_size`` held-out samples are
    scored, and of the α whose best score (over λ) is not below α = 0's, the largest is
    taken, with its best λ. ``penalty_`` and ``alpha_`` are updated after every held-out
    sample.

    Parameters
    ----------
    penalty : float or sequence of floats, default=(1e0, 1e-1, 1e-2, 1e-3)
        Candidate λ > 0.
    alpha : float or sequence of floats in [0, 1], default=(0.0, 0.25, 0.5, 0.75, 1.0)
        Candidate recoding exponents.
    features : None, transformer or callable, default=None
        The map z = φ(x) (see ``RecursiveRLS``).
    validation_every : int or None, default=10
        Hold out every i-th sample for selection (the thesis: 6); None trains on everything
        and uses the first λ and α.
    selection : {"best", "thesis"}, default="best"
        How (λ, α) is chosen from the held-out samples (above).
    min_class_size : int, default=5
        With ``selection="thesis"``, the held-out samples a class needs to be scored (the
        thesis's threshold; its value is a parameter here: the text we worked from does not
        give it). Until some class has that many, the best (λ, α) by balanced accuracy is used.

    Attributes
    ----------
    classes_ : ndarray
        Labels in the order they appeared (or were declared).
    class_counts_ : ndarray of int
        Training samples per class.
    penalty_, alpha_ : float
        The chosen λ and α.
    validation_scores_ : ndarray of shape (n_penalties, n_alphas)
        Balanced accuracy on the validation stream (NaN before any validation sample).
    n_samples_seen_ : int
    """

    def __init__(
        self,
        penalty: Any = (1e0, 1e-1, 1e-2, 1e-3),
        alpha: Any = (0.0, 0.25, 0.5, 0.75, 1.0),
        features: Any = None,
        validation_every: int | None = 10,
        selection: str = "best",
        min_class_size: int = 5,
    ) -> None:
        self.penalty = penalty
        self.alpha = alpha
        self.features = features
        self.validation_every = validation_every
        self.selection = selection
        self.min_class_size = min_class_size

    _fitted_attr = "factors_"

    def _start(self, X: np.ndarray) -> None:
        lams = np.atleast_1d(np.asarray(self.penalty, dtype=float))
        if lams.ndim != 1 or lams.size == 0 or not np.all(np.isfinite(lams) & (lams > 0)):
            raise ValueError(f"penalty must be positive numbers, got {self.penalty!r}")
        alphas = np.atleast_1d(np.asarray(self.alpha, dtype=float))
        if alphas.ndim != 1 or alphas.size == 0 or not np.all((alphas >= 0) & (alphas <= 1)):
            raise ValueError(f"alpha must be numbers in [0, 1], got {self.alpha!r}")
        every = self.validation_every
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 2
        ):
            raise ValueError(f"validation_every must be an integer >= 2 or None, got {every!r}")
        check_choice(self.selection, "selection", SELECTION_RULES)
        check_int(self.min_class_size, "min_class_size", 1)
        self._lams, self._alphas = lams, alphas
        self._map = as_feature_map(self.features, X)
        D = np.asarray(self._map(X[:1])).shape[1]
        self.n_features_in_ = X.shape[1]
        self.factors_ = np.stack([np.sqrt(lam) * np.eye(D) for lam in lams])
        self.cross_ = np.zeros((D, 0))
        self.classes_ = np.array([], dtype=object)
        self.class_counts_ = np.zeros(0, dtype=np.int64)
        self.n_samples_seen_ = 0
        # validation stream: per (λ, α, class) correct counts and per-class totals
        self._val_hits = np.zeros((len(lams), len(alphas), 0))
        self._val_totals = np.zeros(0)
        self._W_cache: dict[int, np.ndarray] = {}
        self.penalty_, self.alpha_ = float(lams[0]), float(alphas[0])
        self.validation_scores_ = np.full((len(lams), len(alphas)), np.nan)

    def _class_index(self, label: Any) -> int:
        hit: np.ndarray = (
            np.flatnonzero(self.classes_ == label) if len(self.classes_) else np.empty(0, int)
        )
        if len(hit):
            return int(hit[0])
        # class extension: a zero column in B, a zero count; R is untouched
        self.classes_ = np.append(self.classes_, np.array([label], dtype=object))
        self.cross_ = np.hstack([self.cross_, np.zeros((self.cross_.shape[0], 1))])
        self.class_counts_ = np.append(self.class_counts_, 0)
        self._val_hits = np.concatenate(
            [self._val_hits, np.zeros(self._val_hits.shape[:2] + (1,))], axis=2
        )
        self._val_totals = np.append(self._val_totals, 0.0)
        return len(self.classes_) - 1

    def _weights(self, p: int) -> np.ndarray:
        """R_p^-1 R_p^-T B (before recoding), cached until the next training sample."""
        W = self._W_cache.get(p)
        if W is None:
            R = self.factors_[p]
            T = scipy.linalg.solve_triangular(R, self.cross_, trans="T", check_finite=False)
            W = scipy.linalg.solve_triangular(R, T, check_finite=False)
            self._W_cache[p] = W
        return W

    def _gamma(self, alpha: float) -> np.ndarray:
        counts = self.class_counts_.astype(float)
        k = counts.sum()
        g = np.where(counts > 0, k / np.maximum(counts, 1.0), 1.0)
        return g**alpha

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> IncrementalRLSClassifier:
        """Learn from one sample (1-D x) or a batch, one sample at a time; unseen labels are
        added as new classes.

        Parameters
        ----------
        X : array-like of shape (n_features,) or (n_samples, n_features)
        y : label or array-like of shape (n_samples,)
        classes : array-like or None
            Labels to declare now (in this order), seen or not.

        Returns
        -------
        self
        """
        X2, labels = self._labelled_batch(X, y, classes)
        Z = np.asarray(self._map(X2), dtype=np.float64)
        every = self.validation_every
        for z, label in zip(Z, labels, strict=True):
            t = self._class_index(label)
            self.n_samples_seen_ += 1
            if every is not None and self.n_samples_seen_ % every == 0:
                self._validate(z, t)
                continue
            for p in range(len(self._lams)):
                cholesky_update(self.factors_[p], z, overwrite=True)
            self.cross_[:, t] += z
            self.class_counts_[t] += 1
            self._W_cache.clear()
        return self

    def _validate(self, z: np.ndarray, t: int) -> None:
        if self.class_counts_.sum() == 0:
            return
        for p in range(len(self._lams)):
            base = z @ self._weights(p)  # scores before recoding
            for a, alpha in enumerate(self._alphas):
                pred = int(np.argmax(base * self._gamma(alpha)))
                self._val_hits[p, a, t] += pred == t
        self._val_totals[t] += 1
        # the thesis's rule once some class has min_class_size held-out samples
        thesis = self.selection == "thesis" and bool(
            np.any(self._val_totals >= self.min_class_size)
        )
        scored = self._val_totals >= (self.min_class_size if thesis else 1)
        recall = self._val_hits[:, :, scored] / self._val_totals[scored]
        self.validation_scores_ = recall.mean(axis=2)
        if thesis:
            p, a = self._thesis_choice(self.validation_scores_)
        else:
            p, a = divmod(int(np.argmax(self.validation_scores_)), len(self._alphas))
        self.penalty_ = float(self._lams[p])
        self.alpha_ = float(self._alphas[a])

    def _thesis_choice(self, scores: np.ndarray) -> tuple[int, int]:
        """(λ index, α index): the largest α whose best score over λ is at least that of
        α = 0 (the smallest α when 0 is not a candidate), and its best λ."""
        per_alpha = scores.max(axis=0)
        ref = int(np.argmin(self._alphas))
        ok = np.flatnonzero(per_alpha >= per_alpha[ref])
        a = int(ok[np.argmax(self._alphas[ok])])
        return int(np.argmax(scores[:, a])), a

    def decision_function(
        self, X: Any, penalty: float | None = None, alpha: float | None = None
    ) -> np.ndarray:
        """Recoded scores, shape (n_samples, n_classes).

        Parameters
        ----------
        X : array-like of shape (n_features,) or (n_samples, n_features)
        penalty, alpha : float or None
            A candidate λ and any α in [0, 1] instead of the chosen ones (to compare
            codings on the same model).
        """
        check_is_fitted(self)
        X2 = self._check_width(_rows(X))
        lam = self.penalty_ if penalty is None else float(penalty)
        hit = np.flatnonzero(np.isclose(self._lams, lam))
        if hit.size == 0:
            raise ValueError(f"penalty must be one of the candidates {self._lams.tolist()}")
        a = self.alpha_ if alpha is None else check_float(alpha, "alpha", 0.0, 1.0)
        Z = np.asarray(self._map(X2), dtype=np.float64)
        return B.like_input((Z @ self._weights(int(hit[0]))) * self._gamma(a), X)

    def predict(
        self, X: Any, penalty: float | None = None, alpha: float | None = None
    ) -> np.ndarray:
        """Labels of the largest recoded score (of the chosen, or the given, λ and α).

        Parameters
        ----------
        X : array-like of shape (n_features,) or (n_samples, n_features)
        penalty, alpha : float or None

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._labels(self.decision_function(X, penalty, alpha), X)


class RebalancedRLSClassifier(_StreamClassifier, BaseEstimator):
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

    Attributes
    ----------
    classes_ : ndarray
        Labels in the order they appeared (or were declared).
    class_counts_ : ndarray of int
    coef_ : ndarray of shape (D, n_classes)
        W for the data seen so far.
    n_samples_seen_ : int
    """

    def __init__(self, penalty: float = 1e-2, features: Any = None) -> None:
        self.penalty = penalty
        self.features = features

    _fitted_attr = "grams_"

    def _start(self, X: np.ndarray) -> None:
        self._lam = check_float(self.penalty, "penalty", 0.0, np.inf, low_open=True)
        self._map = as_feature_map(self.features, X)
        D = np.asarray(self._map(X[:1])).shape[1]
        self.n_features_in_ = X.shape[1]
        self.grams_: np.ndarray = np.zeros((0, D, D))
        self.sums_: np.ndarray = np.zeros((D, 0))
        self.classes_: np.ndarray = np.array([], dtype=object)
        self.class_counts_: np.ndarray = np.zeros(0, dtype=np.int64)
        self.n_samples_seen_ = 0
        self._coef: np.ndarray | None = None

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

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> RebalancedRLSClassifier:
        """Add samples (1-D x or a batch); unseen labels are new classes.

        Parameters
        ----------
        X : array-like of shape (n_features,) or (n_samples, n_features)
        y : label or array-like of shape (n_samples,)
        classes : array-like or None
            Labels to declare now (in this order), seen or not.

        Returns
        -------
        self
        """
        X2, labels = self._labelled_batch(X, y, classes)
        Z = np.asarray(self._map(X2), dtype=np.float64)
        idx = np.array([self._class_index(label) for label in labels], dtype=np.int64)
        for t in np.unique(idx):
            Zt = Z[idx == t]
            self.grams_[t] += Zt.T @ Zt
            self.sums_[:, t] += Zt.sum(axis=0)
            self.class_counts_[t] += len(Zt)
        self.n_samples_seen_ += len(Z)
        self._coef = None
        return self

    @property
    def coef_(self) -> np.ndarray:
        check_is_fitted(self)
        coef = getattr(self, "_coef", None)
        if coef is None:
            counts = self.class_counts_.astype(float)
            g = np.where(counts > 0, counts.sum() / np.maximum(counts, 1.0), 0.0)
            A = np.tensordot(g, self.grams_, axes=1)
            A[np.diag_indices_from(A)] += self._lam
            coef = scipy.linalg.solve(A, self.sums_ * g, assume_a="pos")
            self._coef = coef
        return coef

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores, shape (n_samples, n_classes)."""
        check_is_fitted(self)
        X2 = self._check_width(_rows(X))
        Z = np.asarray(self._map(X2), dtype=np.float64)
        return B.like_input(Z @ self.coef_, X)

    def predict(self, X: Any) -> np.ndarray:
        """Labels of the largest score, shape (n_samples,)."""
        return self._labels(self.decision_function(X), X)


class SemiparametricRegressor(BaseEstimator):
    """A parametric model plus a random-feature correction, both learned online (thesis
    §8.3, Fig. 8.2).

    The parametric part is a recursive RLS on user regressors: for a sample x with T outputs,
    ``regressor(x)`` returns Φ(x) of shape (T, p) and the model is ŷ = Φ(x) π̂; each sample
    adds its T rows to the RLS of π̂ (``parameters_``). The nonparametric part is a
    ``RecursiveRLS`` on random Fourier features of (x, ŷ), normalized, learning the residual
    y - ŷ. A sample updates the parametric part first, then the correction on the residual of
    the updated parametric prediction. The prediction is ŷ + Δŷ.

    Parameters
    ----------
    regressor : callable
        (n, d) -> (n, T, p): the regressor matrices Φ(x) (``make_arm_dynamics`` returns one).
    features : transformer or None, default=None
        Feature map of the normalized (x, ŷ); None: ``RandomFourierFeatures`` with a Gaussian
        kernel of width sqrt(d + T) and ``n_features`` features.
    n_features : int, default=300
    penalty : float, default=1e-3
        λ of the correction's RLS.
    parametric_penalty : float, default=1e-6
        λ of the parametric RLS: how strongly π̂ is held at ``initial_parameters``.
    initial_parameters : array-like of shape (p,) or None, default=None
        Prior π_0 (e.g. from CAD); the parametric RLS learns π̂ - π_0 on the residual
        y - Φ π_0, i.e. minimizes ||Φ π - y||^2 + λ_p ||π - π_0||^2. None: zeros.
    forgetting : float in (0, 1], default=1.0
        Forgetting factor of the correction.
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    parameters_ : ndarray of shape (p,)
        π̂.
    parametric_ : RecursiveRLS
    correction_ : RecursiveRLS
    input_mean_, input_scale_ : ndarray of shape (d + T,)
        Normalization of (x, ŷ), from the first batch given to ``fit`` / ``partial_fit``.
    """

    def __init__(
        self,
        regressor: Any,
        features: Any = None,
        n_features: int = 300,
        penalty: float = 1e-3,
        parametric_penalty: float = 1e-6,
        initial_parameters: Any = None,
        forgetting: float = 1.0,
        random_state: Any = None,
    ) -> None:
        self.regressor = regressor
        self.initial_parameters = initial_parameters
        self.features = features
        self.n_features = n_features
        self.penalty = penalty
        self.parametric_penalty = parametric_penalty
        self.forgetting = forgetting
        self.random_state = random_state

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "parametric_")

    def _phi(self, X: np.ndarray) -> np.ndarray:
        if not callable(self.regressor):
            raise TypeError(f"regressor must be callable, got {type(self.regressor).__name__}")
        try:
            P = np.asarray(self.regressor(X), dtype=np.float64)
        except (ValueError, TypeError, IndexError) as exc:
            raise ValueError(
                f"regressor failed on X of shape {X.shape} (does X have the features it "
                f"expects?): {type(exc).__name__}: {exc}"
            ) from exc
        if P.ndim != 3 or len(P) != len(X):
            raise ValueError(
                f"regressor must return an array of shape (n, T, p), got {P.shape} for "
                f"{len(X)} samples"
            )
        return P

    def fit(self, X: Any, y: Any) -> SemiparametricRegressor:
        """Forget everything and learn from (X, y) sample by sample."""
        for name in ("parametric_", "correction_"):
            if hasattr(self, name):
                delattr(self, name)
        return self.partial_fit(X, y)

    def partial_fit(self, X: Any, y: Any) -> SemiparametricRegressor:
        """Update with one sample or a batch, parametric part first.

        Parameters
        ----------
        X : array-like of shape (d,) or (n_samples, d)
        y : array-like of shape (T,) or (n_samples, T)

        Returns
        -------
        self
        """

        X2 = _rows(X)
        Y = _rows(_host(y), "y")
        if len(Y) != len(X2):
            raise ValueError(f"X and y have different numbers of samples: {len(X2)} and {len(Y)}")
        fitted_d = getattr(self, "n_features_in_", None)
        if hasattr(self, "parametric_") and X2.shape[1] != fitted_d:
            raise ValueError(
                f"X has {X2.shape[1]} features, but {type(self).__name__} is fitted with {fitted_d}"
            )
        P = self._phi(X2)
        if P.shape[1] != Y.shape[1]:
            raise ValueError(f"regressor gives {P.shape[1]} outputs, y has {Y.shape[1]}")
        if not hasattr(self, "parametric_"):
            p = P.shape[2]
            prior = (
                np.zeros(p)
                if self.initial_parameters is None
                else np.asarray(self.initial_parameters, dtype=np.float64)
            )
            if prior.shape != (p,) or not np.all(np.isfinite(prior)):
                raise ValueError(
                    f"initial_parameters must be {p} finite numbers, "
                    f"got {self.initial_parameters!r}"
                )
            self._prior = prior
            self.n_features_in_ = X2.shape[1]
            self.parametric_ = RecursiveRLS(penalty=self.parametric_penalty)
            self.parametric_.partial_fit(P[0], Y[0] - P[0] @ prior)
            y_hat0 = np.einsum("ntp,p->nt", P, self.parameters_)
            inp = np.hstack([X2, y_hat0])
            self.input_mean_ = inp.mean(axis=0)
            scale = inp.std(axis=0)
            self.input_scale_ = np.where(scale > 0, scale, 1.0)
            fmap = self.features
            if fmap is None:
                width = float(np.sqrt(inp.shape[1]))
                fmap = RandomFourierFeatures(
                    Gaussian(width), self.n_features, random_state=self.random_state
                )
            self.correction_ = RecursiveRLS(self.penalty, fmap, self.forgetting)
            start = 1
            self._correct(X2[:1], Y[:1], P[:1])
        else:
            start = 0
        for i in range(start, len(X2)):
            self.parametric_.partial_fit(P[i], Y[i] - P[i] @ self._prior)
            self._correct(X2[i : i + 1], Y[i : i + 1], P[i : i + 1])
        return self

    def _normalized(self, X: np.ndarray, y_hat: np.ndarray) -> np.ndarray:
        return (np.hstack([X, y_hat]) - self.input_mean_) / self.input_scale_

    def _correct(self, X: np.ndarray, Y: np.ndarray, P: np.ndarray) -> None:
        y_hat = np.einsum("ntp,p->nt", P, self.parameters_)
        self.correction_.partial_fit(self._normalized(X, y_hat), Y - y_hat)

    @property
    def parameters_(self) -> np.ndarray:
        check_is_fitted(self)
        return self._prior + self.parametric_.coef_

    def predict_parametric(self, X: Any) -> np.ndarray:
        """ŷ = Φ(x) π̂ alone, shape (n_samples, T)."""
        check_is_fitted(self)
        X2 = _rows(X)
        if X2.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X2.shape[1]} features, but {type(self).__name__} is fitted with "
                f"{self.n_features_in_}"
            )
        return B.like_input(np.einsum("ntp,p->nt", self._phi(X2), self.parameters_), X)

    def predict(self, X: Any) -> np.ndarray:
        """ŷ + Δŷ, shape (n_samples, T).

        Parameters
        ----------
        X : array-like of shape (d,) or (n_samples, d)
        """
        check_is_fitted(self)
        X2 = _rows(X)
        y_hat = self.predict_parametric(X2)
        delta = self.correction_.predict(self._normalized(X2, y_hat))
        return B.like_input(y_hat + delta.reshape(y_hat.shape), X)


def semiparametric_protocol(
    regressor: Any,
    X_train: Any,
    y_train: Any,
    X_stream: Any,
    y_stream: Any,
    *,
    n_parts: int = 10,
    part_size: int = 1000,
    window: int = 100,
    n_features: int = 300,
    penalty: float = 1e-3,
    random_state: Any = None,
) -> dict[str, Any]:
    """The thesis's ch. 8 comparison of a parametric (P), a nonparametric (NP) and a
    semiparametric (SP) model of inverse dynamics, learned online (§8.4, Fig. 8.4).

    All three learn (X_train, y_train) (one trajectory), then the stream's first
    ``n_parts`` parts of ``part_size`` samples arrive in order and every sample is predicted
    by each model as it stands, then learned (test-then-update, one sample at a time). P is
    the recursive RLS of the parameters π̂ on ``regressor`` (SP's parametric part: it learns
    the same with or without the correction); NP a ``RecursiveRLS`` on ``n_features``
    random Fourier features of the standardized inputs (Gaussian width sqrt(d), the
    standardization from X_train); SP ``SemiparametricRegressor(regressor, n_features=,
    penalty=)``.

    Parameters
    ----------
    regressor : callable (n, d) -> (n, T, p)
        Φ(x), as for ``SemiparametricRegressor``.
    X_train, y_train : array-like of shape (n_train, d) and (n_train, T)
    X_stream, y_stream : array-like of shape (n_stream, d) and (n_stream, T)
        At least ``n_parts * part_size`` samples.
    n_parts, part_size : int, default=10, 1000
    window : int, default=100
        Samples of the moving window of the windowed RMSE.
    n_features, penalty : the random features and λ of NP and of SP's correction.
    random_state : int, Generator or None

    Returns
    -------
    dict with, for each of "P", "NP", "SP": ``squared_errors[name]`` of shape (N,) (mean over
    the T outputs of each sample, N = n_parts * part_size), ``part_rmse[name]`` of shape
    (n_parts,), ``windowed_rmse[name]`` of shape (N - window + 1,) (the RMSE of samples
    i .. i + window - 1); and ``parameters`` (π̂ at the end).
    """

    n_parts = int(check_int(n_parts, "n_parts", 1))  # type: ignore[arg-type]
    part_size = int(check_int(part_size, "part_size", 1))  # type: ignore[arg-type]
    window = int(check_int(window, "window", 1))  # type: ignore[arg-type]
    Xa, Xs = _rows(X_train, "X_train"), _rows(X_stream, "X_stream")
    Ya = np.asarray(_host(y_train), dtype=np.float64).reshape(len(Xa), -1)
    Ys = np.asarray(_host(y_stream), dtype=np.float64)
    Ys = Ys.reshape(len(Ys), -1)
    N = n_parts * part_size
    if len(Xs) < N or len(Ys) != len(Xs):
        raise ValueError(
            f"X_stream / y_stream: {n_parts} parts of {part_size} samples need {N} samples "
            f"of X_stream and y_stream, got {len(Xs)} and {len(Ys)}"
        )
    if Xs.shape[1] != Xa.shape[1] or Ys.shape[1] != Ya.shape[1]:
        raise ValueError(
            f"X_stream / y_stream have {Xs.shape[1]} features and {Ys.shape[1]} outputs, "
            f"X_train / y_train {Xa.shape[1]} and {Ya.shape[1]}"
        )
    if window > N:
        raise ValueError(f"window={window} is longer than the stream's {N} samples")
    rng = np.random.default_rng(random_state)
    seeds = rng.integers(2**63, size=2)
    sp = SemiparametricRegressor(
        regressor, n_features=n_features, penalty=penalty, random_state=int(seeds[0])
    ).fit(Xa, Ya)
    mu, sd = Xa.mean(axis=0), Xa.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    rff = RandomFourierFeatures(
        Gaussian(np.sqrt(Xa.shape[1])), n_features, random_state=int(seeds[1])
    )
    nonpar = RecursiveRLS(penalty, rff).fit((Xa - mu) / sd, Ya)
    err = {name: np.empty(N) for name in ("P", "NP", "SP")}
    for i in range(N):
        x, y = Xs[i : i + 1], Ys[i : i + 1]
        err["P"][i] = np.mean((sp.predict_parametric(x) - y) ** 2)
        err["SP"][i] = np.mean((sp.predict(x) - y) ** 2)
        err["NP"][i] = np.mean((nonpar.predict((x - mu) / sd).reshape(y.shape) - y) ** 2)
        sp.partial_fit(x, y)
        nonpar.partial_fit((x - mu) / sd, y)
    kernel = np.ones(window) / window
    return {
        "squared_errors": err,
        "part_rmse": {
            k: np.sqrt(v.reshape(n_parts, part_size).mean(axis=1)) for k, v in err.items()
        },
        "windowed_rmse": {k: np.sqrt(np.convolve(v, kernel, mode="valid")) for k, v in err.items()},
        "parameters": sp.parameters_.copy(),
    }
