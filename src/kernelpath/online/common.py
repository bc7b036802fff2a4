"""What the online learners share: the feature map z = φ(x), checked rows and labels on the
host, and the batch handling of the stream classifiers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, check_is_fitted

from .. import _backend as B
from .._threads import one_blas_thread
from .._validation import (
    check_class_weight,
    check_labels,
    check_magnitude,
    check_numeric,
    check_rows,
    class_weight_value,
)
from ..calibration import fit_calibration, log_probabilities
from ..inputs import dense_block

__all__ = ["FeatureMap", "as_feature_map", "fitted_features", "StreamClassifier"]

FeatureMap = Callable[[np.ndarray], np.ndarray]


def identity(A: np.ndarray) -> np.ndarray:
    """The map of ``features=None``: the inputs themselves (a module-level function, so a
    learner that holds it pickles); a batch of sparse rows densified (the learner's
    factor is d x d: its rows are narrow enough)."""
    return dense_block(A)


def fitted_features(features: Any, X: np.ndarray) -> Any:
    """The feature map a stream starting at X uses (a learner's ``features_``): None or a
    callable as given, a fitted transformer as given, an unfitted transformer cloned and
    fitted on X. The ``features`` parameter is left as given, so that ``fit`` (a new
    stream) fits a new map instead of keeping one fitted on an earlier stream."""
    if features is None or not hasattr(features, "transform"):
        return features
    try:
        check_is_fitted(features)
    except NotFittedError:
        return clone(features).fit(X)
    return features


def as_feature_map(features: Any, X: np.ndarray) -> FeatureMap:
    """The map z = φ(x) from ``features``: None (the inputs themselves), a transformer (fitted
    on X when it is not fitted yet) or a callable (n, d) -> (n, D)."""
    if features is None:
        return identity
    if hasattr(features, "transform"):
        try:
            check_is_fitted(features)
        except NotFittedError:
            features.fit(X)
        return features.transform
    if callable(features):
        return features
    raise TypeError(
        f"features must be None, a transformer or a callable, got {type(features).__name__}"
    )


def _rows(X: Any, name: str = "X") -> np.ndarray:
    """Checked float64 rows on the host (a tensor is checked on its device, then copied:
    the rank-one updates are sequential and run on the CPU); a 1-D array is one sample.
    Other inputs go through scikit-learn's ``check_array`` (its messages for sparse,
    complex, object and empty input)."""
    if B.is_tensor(X):
        return B.to_numpy(check_rows(X, name, one_sample=True), np.float64)
    if not scipy.sparse.issparse(X):
        X = np.asarray(X)
        if X.ndim == 1:
            X = X[None, :]
    else:
        B.check_real(X, name)
    check_numeric(X, name)
    # sparse rows stay CSR: the feature maps take them (RandomFourierFeatures,
    # NystromFeatures: sparse x dense products)
    A = check_array(
        X, dtype=np.float64, input_name=name, accept_sparse="csr", accept_large_sparse=True
    )
    check_magnitude(A, name)
    return A


def check_n_features(est: Any, X2: np.ndarray) -> np.ndarray:
    """X2, or scikit-learn's ValueError when its number of features is not the fitted one."""
    fitted = est.n_features_in_
    if X2.shape[1] != fitted:
        raise ValueError(
            f"X has {X2.shape[1]} features, but {type(est).__name__} is expecting {fitted} "
            "features as input"
        )
    return X2


def require_y(est: Any, y: Any) -> None:
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None")


def _host(a: Any, name: str = "y") -> Any:
    """Targets or labels as NumPy (tensors copied to the host); sparse ones refused, naming
    the argument (rows may be sparse, targets may not)."""
    if scipy.sparse.issparse(a):
        raise TypeError(f"{name} must be dense, got a sparse {type(a).__name__}")
    B.check_real(a, name)
    return B.to_numpy(a) if B.is_tensor(a) else a


#: The held-out samples an online classifier keeps to calibrate its probabilities.
HELDOUT_ROWS = 2000
#: A learner without online selection scores every HELDOUT_EVERY-th sample before learning it
#: (a batch in at most HELDOUT_CHUNKS pieces, each scored by the model of those before).
HELDOUT_EVERY = 10
HELDOUT_CHUNKS = 10
#: The map of a learner that has held no sample out: the 0/1 scores read as probabilities.
UNCALIBRATED = {
    "method": "power",
    "scale": 1.0,
    "log_loss": float("nan"),
    "ece": float("nan"),
    "n_rows": 0,
}


class StreamClassifier:
    """What the online classifiers share: ``fit`` is a fresh ``partial_fit``, the checks of
    a batch and its feature rows, labels from scores, accuracy. A subclass sets
    ``_fitted_attr`` (the attribute that exists once it has started) and defines ``_start``
    (which sets the feature map ``_map``), ``_class_index`` and ``_learn_labelled``."""

    _map: FeatureMap

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import ClassifierTags

        tags = super().__sklearn_tags__()  # type: ignore[misc]
        # multi-class (scikit-learn's sparse checks read it); estimator_type stays unset:
        # the stream classifiers' decision_function has one column per class seen so far
        tags.classifier_tags = ClassifierTags()
        tags.input_tags.sparse = True  # sparse rows go through the feature map
        return tags

    _fitted_attr = ""

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, self._fitted_attr)

    @one_blas_thread
    def fit(self, X: Any, y: Any, classes: Any = None) -> Any:
        """Forget everything, then learn from (X, y) sample by sample (``partial_fit``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples, learned in order.
        y : array-like of shape (n_samples,)
            Their labels.
        classes : array-like or None, default=None
            Labels to know from the start (others are added when first seen).

        Returns
        -------
        self
        """
        for name in (self._fitted_attr, "classes_"):
            if hasattr(self, name):
                delattr(self, name)
        return self.partial_fit(X, y, classes)

    @one_blas_thread
    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> Any:
        """Learn from one sample (1-D x) or a batch, one sample after another; unseen labels
        are added as new classes.

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
        self._learn_labelled(self._features(X2), labels)
        return self

    def _learn_labelled(self, Z: np.ndarray, labels: np.ndarray) -> None:
        """Learn the feature rows Z (float64) of a checked batch with their ``labels``."""
        raise NotImplementedError

    def _features(self, X2: np.ndarray) -> np.ndarray:
        """The feature rows of the checked rows X2, in float64."""
        return np.asarray(self._map(X2), dtype=np.float64)

    def _features_to_score(self, X: Any) -> np.ndarray:
        """The feature rows of the rows X to score: the learner fitted, X's width checked."""
        check_is_fitted(self)
        return self._features(self._check_width(_rows(X)))

    #: What the learner does itself in place of ``class_weight="balanced"`` (for messages).
    _balanced_by = ""

    def _checked_class_weight(self) -> Any:
        """``class_weight``, checked as a whole (once per batch: ``check_class_weight``).
        "balanced" needs the class counts of all the data, which a stream learns as it
        goes: the learner's own rebalancing (``_balanced_by``) is that."""
        cw = getattr(self, "class_weight", None)
        if isinstance(cw, str) and cw == "balanced":
            raise ValueError(
                f"class_weight='balanced' needs every class count before the first sample; "
                f"{type(self).__name__} {self._balanced_by}: give a dict of class weights "
                "or None"
            )
        return check_class_weight(cw, balanced=False)

    def _class_weight(self, label: Any) -> float:
        """The weight of ``label``'s samples: ``class_weight`` (a dict; classes it does not
        name weigh 1), that value checked (the dict as a whole is checked per batch)."""
        cw = getattr(self, "class_weight", None)
        if cw is None:
            return 1.0
        if not isinstance(cw, dict):
            self._checked_class_weight()  # raises, naming what it is
        return class_weight_value(label, cw.get(label, 1.0))

    def _check_width(self, X2: np.ndarray) -> np.ndarray:
        """X2, or a ValueError when its number of features is not the fitted one."""
        return check_n_features(self, X2)

    def _labelled_batch(self, X: Any, y: Any, classes: Any) -> tuple[np.ndarray, np.ndarray]:
        """The rows and labels of a ``partial_fit``, checked; the classifier started on the
        first call and the declared ``classes`` added in order."""
        require_y(self, y)
        X2 = _rows(X)
        labels = np.atleast_1d(np.asarray(_host(y), dtype=object))
        if labels.ndim != 1 or len(labels) != X2.shape[0]:
            raise ValueError(
                f"X and y have different numbers of samples: {X2.shape[0]} and {np.shape(y)}"
            )
        self._checked_class_weight()
        known = getattr(self, "classes_", None) if self.__sklearn_is_fitted__() else None
        check_labels(labels, "y", np.empty(0, dtype=object) if known is None else known)
        if not self.__sklearn_is_fitted__():
            self._start(X2)  # type: ignore[attr-defined]
        else:
            self._check_width(X2)
        if classes is not None:
            declared = np.atleast_1d(np.asarray(_host(classes, "classes"), dtype=object))
            check_labels(declared, "classes", labels)
            for label in declared:
                self._class_index(label)  # type: ignore[attr-defined]
        return X2, labels

    def _labels(self, scores: Any, X: Any) -> Any:
        """The labels of the largest scores (rows of ``scores``), like the input X."""
        best = np.argmax(B.to_numpy(scores), axis=1)
        return B.like_input(np.array(list(self.classes_[best])), X)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ probabilities
    def _remember(self, t: int, scores: np.ndarray) -> None:
        """Keep a held-out sample's class index and its scores ``scores`` (one row per
        candidate the learner selects among, one column per class known then), the most
        recent ``HELDOUT_ROWS``."""
        kept = self.__dict__.setdefault("heldout_", [])
        kept.append((int(t), np.array(scores, dtype=np.float64)))
        if len(kept) > HELDOUT_ROWS:
            del kept[: len(kept) - HELDOUT_ROWS]
        self.__dict__.setdefault("_proba_cache", {}).clear()

    def _heldout_scores(self, scores: np.ndarray) -> np.ndarray:
        """A kept sample's scores under the learner's current choice, (k then,)."""
        return scores[0]

    def _probability_map(self) -> dict[str, Any]:
        """The calibration map of the kept held-out samples (``kernelpath.calibration``),
        refit when samples were added; before any is held out (fewer than
        ``HELDOUT_EVERY`` samples, or ``validation_every=None``), ``UNCALIBRATED``."""
        check_is_fitted(self)
        kept = self.__dict__.get("heldout_") or []
        if not kept:
            return dict(UNCALIBRATED)
        cache = self.__dict__["_proba_cache"]  # a dict made by _remember: mutated, not set
        if "map" in cache:
            return cache["map"]
        k = len(self.classes_)  # type: ignore[attr-defined]
        F = np.zeros((len(kept), k))
        for i, (_, scores) in enumerate(kept):
            row = self._heldout_scores(scores)
            F[i, : len(row)] = row  # a class added since scored 0
        y = np.array([t for t, _ in kept])
        cal = fit_calibration(2 * F - 1, y)  # 0/1 codes read as ±1 estimates
        cache["map"] = cal
        return cal

    @one_blas_thread
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Log-probabilities of the classes.

        The scores (0/1 one-hot codes, recoded) mapped by the calibration fit to the
        samples held out online (``heldout_``: each scored by the model of its time, before
        it was learned), which keeps ``predict`` the arg max (``kernelpath.calibration``).
        Before any sample is held out the scores are read as probabilities (the power map
        with exponent 1).

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)
            Rows to score.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        F = np.asarray(B.to_numpy(self.decision_function(X)), dtype=np.float64)  # type: ignore[attr-defined]
        return log_probabilities(2 * F - 1, self._probability_map())

    @one_blas_thread
    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities of the classes (``predict_log_proba``'s exponential).

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)
            Rows to score.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1; columns in the order of ``classes_``.
        """
        return np.exp(self.predict_log_proba(X))

    @one_blas_thread
    def score(self, X: Any, y: Any) -> float:
        """Accuracy of ``predict`` on (X, y).

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)
            Rows.
        y : array-like of shape (n_samples,)
            Their labels.

        Returns
        -------
        float
        """
        pred = self.predict(X)  # type: ignore[attr-defined]
        return float(np.mean(B.to_numpy(pred) == np.asarray(_host(y))))
