"""Incremental one-vs-all RLS classification with class extension and recoding (thesis
Algorithm 7.1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator

from .. import _backend as B
from .._threads import one_blas_thread
from .._validation import check_choice, check_float, check_int, keep_params
from ..cholesky import cholesky_update
from .common import StreamClassifier, as_feature_map, fitted_features

__all__ = ["IncrementalRLSClassifier", "SELECTION_RULES"]

#: ``selection`` of IncrementalRLSClassifier.
SELECTION_RULES = ("best", "thesis")


class IncrementalRLSClassifier(StreamClassifier, BaseEstimator):
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
    class_weight : dict or None, default=None
        Weights of classes (scikit-learn's meaning): a sample of class t enters as
        c_t z z^T and c_t z e_t^T (weighted RLS); classes not named weigh 1. The recoding Γ^α
        still uses the class counts: it is the online counterpart of "balanced", which is
        refused (it needs every class count before the first sample).

    Attributes
    ----------
    features_ : transformer, callable or None
        The feature map in use: ``features`` itself when it is fitted (or a callable, or
        None), else a clone of it fitted on the stream's first batch (``fit`` fits anew).
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
        *,
        alpha: Any = (0.0, 0.25, 0.5, 0.75, 1.0),
        features: Any = None,
        validation_every: int | None = 10,
        selection: str = "best",
        min_class_size: int = 5,
        class_weight: dict[Any, float] | None = None,
    ) -> None:
        keep_params(self, locals())

    _fitted_attr = "factors_"
    _balanced_by = "rebalances by recoding its scores (alpha, chosen online)"

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
        self.features_ = fitted_features(self.features, X)
        self._map = as_feature_map(self.features_, X)
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

    def _learn_labelled(self, Z: np.ndarray, labels: np.ndarray) -> None:
        """One sample at a time: every ``validation_every``-th is scored by the model of the
        samples before it (a vote for a (λ, α)) instead of learned."""
        every = self.validation_every
        for z, label in zip(Z, labels, strict=True):
            t = self._class_index(label)
            self.n_samples_seen_ += 1
            if every is not None and self.n_samples_seen_ % every == 0:
                self._validate(z, t)
                continue
            c = self._class_weight(label)  # weighted RLS: c z z^T and c z e_t^T
            for p in range(len(self._lams)):
                cholesky_update(self.factors_[p], np.sqrt(c) * z, overwrite=True)
            self.cross_[:, t] += c * z
            self.class_counts_[t] += 1
            self._W_cache.clear()

    def _validate(self, z: np.ndarray, t: int) -> None:
        if self.class_counts_.sum() == 0:
            return
        bases = np.array([z @ self._weights(p) for p in range(len(self._lams))])
        for p, base in enumerate(bases):  # scores before recoding
            for a, alpha in enumerate(self._alphas):
                pred = int(np.argmax(base * self._gamma(alpha)))
                self._val_hits[p, a, t] += pred == t
        self._remember(t, bases)
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

    def _heldout_scores(self, scores: np.ndarray) -> np.ndarray:
        """A held-out sample's scores at the chosen λ, recoded with the chosen α."""
        p = int(np.flatnonzero(np.isclose(self._lams, self.penalty_))[0])
        return scores[p] * self._gamma(self.alpha_)[: scores.shape[1]]

    def _thesis_choice(self, scores: np.ndarray) -> tuple[int, int]:
        """(λ index, α index): the largest α whose best score over λ is at least that of
        α = 0 (the smallest α when 0 is not a candidate), and its best λ."""
        per_alpha = scores.max(axis=0)
        ref = int(np.argmin(self._alphas))
        ok = np.flatnonzero(per_alpha >= per_alpha[ref])
        a = int(ok[np.argmax(self._alphas[ok])])
        return int(np.argmax(scores[:, a])), a

    @one_blas_thread
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
        Z = self._features_to_score(X)
        lam = self.penalty_ if penalty is None else float(penalty)
        hit = np.flatnonzero(np.isclose(self._lams, lam))
        if hit.size == 0:
            raise ValueError(f"penalty must be one of the candidates {self._lams.tolist()}")
        a = self.alpha_ if alpha is None else check_float(alpha, "alpha", 0.0, 1.0)
        return B.like_input((Z @ self._weights(int(hit[0]))) * self._gamma(a), X)

    @one_blas_thread
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
