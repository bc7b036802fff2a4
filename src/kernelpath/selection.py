"""Model selection: hold-out splits, penalty grids, scorers and the early-stopping rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = [
    "check_cv",
    "cv_folds",
    "CV_MODES",
    "holdout_split",
    "penalty_grid",
    "SCORERS",
    "mse",
    "error_rate",
    "EarlyStopping",
    "SlopeStopping",
    "RelativeDropStopping",
    "STOPPING_RULES",
    "make_stopper",
]


def holdout_split(
    n: int,
    validation_fraction: float,
    rng: np.random.Generator,
    stratify: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Random (optionally stratified) split of ``range(n)`` into train and validation indices.

    Both parts keep at least one point; with ``stratify`` every class keeps at least one
    training point.
    """
    n_val = int(round(validation_fraction * n))
    n_val = min(max(n_val, 1), n - 1)
    if stratify is None:
        perm = rng.permutation(n)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])
    val: list[np.ndarray] = []
    for c in np.unique(stratify):
        idx = rng.permutation(np.flatnonzero(stratify == c))
        k = min(int(round(validation_fraction * len(idx))), len(idx) - 1)
        val.append(idx[:k])
    v = np.sort(np.concatenate(val)) if val else np.array([], dtype=int)
    if len(v) == 0:  # tiny classes: fall back to one random validation point
        v = np.sort(rng.permutation(n)[:1])
    mask = np.ones(n, dtype=bool)
    mask[v] = False
    return np.flatnonzero(mask), v


#: The named modes of ``cv`` (besides an int k and a scikit-learn splitter).
CV_MODES = ("holdout", "loo", "gcv")


def check_cv(cv: Any, n: int, y: np.ndarray | None = None) -> Any:
    """Validate an estimator's ``cv``: "holdout", "loo", "gcv", an int k >= 2 (k-fold;
    stratified when ``y`` holds class labels) or an object with ``split`` and
    ``get_n_splits`` (a scikit-learn splitter). Returns the mode (a str, an int or the
    splitter).

    Raises
    ------
    ValueError
        An unknown name, k < 2, k > n_samples, or (classifiers) k larger than a class's count.
    TypeError
        Anything else.
    """
    if isinstance(cv, str):
        if cv not in CV_MODES:
            raise ValueError(f"cv must be one of {CV_MODES}, an int or a splitter, got {cv!r}")
        return cv
    if isinstance(cv, (bool, np.bool_)):
        raise TypeError(f"cv must be one of {CV_MODES}, an int or a splitter, got {cv!r}")
    if isinstance(cv, (int, np.integer)):
        k = int(cv)
        if k < 2:
            raise ValueError(f"cv={k}: k-fold cross-validation needs at least 2 folds")
        if k > n:
            raise ValueError(f"cv={k} is larger than the number of samples n_samples={n}")
        if y is not None:
            _, counts = np.unique(y, return_counts=True)
            if k > counts.min():
                raise ValueError(
                    f"cv={k} is larger than the number of samples of the smallest class "
                    f"({int(counts.min())}): stratified folds need every class in every fold"
                )
        return k
    if hasattr(cv, "split") and hasattr(cv, "get_n_splits"):
        return cv
    if isinstance(cv, Iterable) and not isinstance(cv, (bytes, dict)):
        return GivenSplits(cv)
    raise TypeError(
        f"cv must be one of {CV_MODES}, an int, a scikit-learn splitter or an iterable of "
        f"(train, validation) index arrays, got {type(cv).__name__}"
    )


class GivenSplits:
    """``cv`` given as (train, validation) index pairs (scikit-learn's convention for an
    iterable ``cv``), kept as a list so that a generator can be split more than once."""

    def __init__(self, splits: Iterable[Any]) -> None:
        pairs = []
        for i, pair in enumerate(splits):
            try:
                tr, va = pair
            except (TypeError, ValueError):
                raise TypeError(
                    f"cv: split {i} must be a (train, validation) pair of index arrays, "
                    f"got {type(pair).__name__}"
                ) from None
            pairs.append((_indices(tr, i, "train"), _indices(va, i, "validation")))
        if not pairs:
            raise ValueError("cv: the iterable of splits is empty")
        self.splits = pairs

    def split(self, X: Any = None, y: Any = None, groups: Any = None) -> Any:
        return iter(self.splits)

    def get_n_splits(self, X: Any = None, y: Any = None, groups: Any = None) -> int:
        return len(self.splits)


def _indices(a: Any, i: int, side: str) -> np.ndarray:
    """Row indices of split ``i``'s ``side``: integers (a boolean mask is taken as one)."""
    arr = np.asarray(a)
    if arr.dtype == bool:
        return np.flatnonzero(arr)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"cv: split {i}'s {side} rows must be a 1-D array of integer indices")
    return arr.astype(np.int64)


def cv_folds(
    cv: Any, y: np.ndarray, rng: np.random.Generator, classifier: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, validation) row indices of every fold: shuffled (stratified for classifiers)
    k-fold for an int, else the splitter's ``split(rows, y)`` (it sees the number of rows
    and the targets, not the features, which may be a tensor). Every fold must leave rows
    on both sides."""
    from sklearn.model_selection import KFold, StratifiedKFold

    n = len(y)
    if isinstance(cv, int):
        seed = int(rng.integers(2**31))
        if classifier:
            it = StratifiedKFold(cv, shuffle=True, random_state=seed).split(np.zeros(n), y)
        else:
            it = KFold(cv, shuffle=True, random_state=seed).split(np.zeros(n))
    else:
        it = cv.split(np.zeros((n, 1)), y)
    folds = []
    for i, (tr, va) in enumerate(it):
        tr, va = np.asarray(tr, dtype=np.int64), np.asarray(va, dtype=np.int64)
        if len(tr) == 0 or len(va) == 0:
            raise ValueError(f"cv: fold {i} leaves no training or no validation rows")
        if tr.min() < 0 or va.min() < 0 or max(tr.max(), va.max()) >= n:
            raise ValueError(f"cv: fold {i} has row indices outside [0, {n})")
        folds.append((np.sort(tr), np.sort(va)))
    if not folds:
        raise ValueError("cv: the splitter gave no folds")
    return folds


def penalty_grid(scale: float, n_values: int = 20, span: float = 1e-9) -> np.ndarray:
    """Geometric grid of ``n_values`` penalties from ``scale * span`` up to ``scale``, decreasing.

    ``scale`` is the largest eigenvalue of the normalized kernel operator (K / n), the penalty
    above which the solution is essentially zero (the GURLS convention).
    """
    scale = float(scale) if scale > 0 else 1.0
    return np.geomspace(scale, scale * span, n_values)


def mse(Y: np.ndarray, F: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Mean squared error per path point, weighted by ``w`` (n,) when given.

    Y : (n, k) targets; F : (n, P, k) predictions -> (P,) errors (mean over outputs).
    """
    D = F - Y[:, None, :]
    if w is None:
        return np.einsum("npk,npk->p", D, D) / (Y.shape[0] * Y.shape[1])
    return np.einsum("n,npk,npk->p", w, D, D) / (w.sum() * Y.shape[1])


def error_rate(Y: np.ndarray, F: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Misclassification rate per path point for ±1-coded targets (one column: sign rule;
    several: argmax), weighted by ``w`` (n,) when given. Y : (n, k); F : (n, P, k) -> (P,)."""
    if Y.shape[1] == 1:
        wrong = (F[:, :, 0] >= 0) != (Y[:, None, 0] > 0)
    else:
        wrong = F.argmax(axis=2) != Y.argmax(axis=1)[:, None]
    if w is None:
        return wrong.mean(axis=0)
    return (w @ wrong) / w.sum()


SCORERS: dict[str, Callable[..., np.ndarray]] = {
    "mse": mse,
    "error_rate": error_rate,
}


class EarlyStopping:
    """Windowed stopping rule for P paths advancing together.

    A path stops when its validation error has not improved on its best value by more than
    ``tol`` (relative) during the last ``n_iter_no_change`` iterations, like the NYTRO reference
    rule (which stops when a line fitted to the last 10 errors stops decreasing) and
    scikit-learn's ``n_iter_no_change`` / ``tol``. All paths stop together when the best value
    over all of them has not improved that way for ``n_iter_no_change`` iterations: the point
    that model selection would choose is then settled. ``n_iter_no_change=None`` never stops.
    """

    def __init__(self, n_paths: int, n_iter_no_change: int | None, tol: float) -> None:
        self.window = n_iter_no_change
        self.tol = tol
        self.best = np.full(n_paths, np.inf)
        self.best_iter = np.full(n_paths, -1)
        self.active = np.ones(n_paths, dtype=bool)
        self.global_best = np.inf
        self.global_best_iter = -1

    def update(self, t: int, errors: np.ndarray) -> np.ndarray:
        """Record the errors of iteration ``t`` for the active paths (NaN elsewhere) and
        deactivate the paths without a significant improvement for a whole window.

        Returns a mask of the paths whose error is a new best.
        """
        improved = np.zeros_like(self.active)
        act = self.active
        e = errors[act]
        old = self.best[act]
        better = e < old
        finite = np.isfinite(old)
        margin = np.where(finite, self.tol * np.abs(np.where(finite, old, 0.0)), 0.0)
        significant = ~finite & np.isfinite(e) | (e < np.where(finite, old, np.inf) - margin)
        idx = np.flatnonzero(act)
        improved[idx[better]] = True
        self.best[idx[better]] = e[better]
        # only a significant improvement resets the window
        sig_idx = idx[significant]
        self.best_iter[sig_idx] = t
        if np.isfinite(e).any():
            low = float(np.nanmin(e))
            if not np.isfinite(self.global_best) or low < self.global_best - self.tol * abs(
                self.global_best
            ):
                self.global_best_iter = t
            self.global_best = min(self.global_best, low)
        if self.window is not None:
            stale = t - self.best_iter >= self.window
            self.active &= ~stale
            if t - self.global_best_iter >= self.window:
                self.active[:] = False
        return improved


class _PerPathRule:
    """A stopping rule applied to each path on its own error history (the rules of the
    NYTRO paper and of its reference code). ``update`` has ``EarlyStopping``'s contract."""

    def __init__(self, n_paths: int) -> None:
        self.best = np.full(n_paths, np.inf)
        self.active = np.ones(n_paths, dtype=bool)
        self.history: list[list[float]] = [[] for _ in range(n_paths)]

    def _stops(self, errors: list[float]) -> bool:
        raise NotImplementedError

    def update(self, t: int, errors: np.ndarray) -> np.ndarray:
        improved = np.zeros_like(self.active)
        for p in np.flatnonzero(self.active):
            e = float(errors[p])
            if e < self.best[p]:
                improved[p] = True
                self.best[p] = e
            self.history[p].append(e)
            if self._stops(self.history[p]):
                self.active[p] = False
        return improved


class SlopeStopping(_PerPathRule):
    """The NYTRO reference code's rule (``windowLinearFitting``, the version its Table 2
    used): fit a least-squares line to the last ``window`` validation RMSEs and stop when
    the line falls by less than ``threshold`` over the window, i.e. when its slope is at
    least -threshold / window. The code's default threshold is 0 (stop when the line no
    longer slopes down); Table 2 used 0.0069 (adult), 0.000835 (ijcnn1), 0.000051
    (InsuranceCompany), 0.013 (CovertypeBinary) and 0.000113 (YearPredictionMSD).
    ``update`` receives mean squared errors; the line is fitted to their square roots."""

    def __init__(self, n_paths: int, window: int = 10, threshold: float = 0.0) -> None:
        super().__init__(n_paths)
        self.window = int(window)
        self.threshold = float(threshold)

    def _stops(self, errors: list[float]) -> bool:
        if len(errors) < self.window:
            return False
        e = np.asarray(errors[-self.window :])
        if not np.isfinite(e).all():
            return True
        slope = np.polyfit(np.arange(self.window, dtype=float), np.sqrt(np.maximum(e, 0)), 1)[0]
        return bool(slope >= -self.threshold / self.window)


class RelativeDropStopping(_PerPathRule):
    """The NYTRO paper's rule: stop when the relative RMSE on the validation set no longer
    falls by ``fraction`` (5%) of its value in one iteration, i.e. at the first t with
    RMSE_t > (1 - fraction) RMSE_{t-1}. Errors are mean squared errors (the ratio of RMSEs
    does not depend on how the RMSE is made relative)."""

    def __init__(self, n_paths: int, fraction: float = 0.05) -> None:
        super().__init__(n_paths)
        self.fraction = float(fraction)

    def _stops(self, errors: list[float]) -> bool:
        if len(errors) < 2:
            return False
        prev, cur = errors[-2], errors[-1]
        if not (np.isfinite(prev) and np.isfinite(cur)):
            return True
        return bool(np.sqrt(max(cur, 0.0)) > (1.0 - self.fraction) * np.sqrt(max(prev, 0.0)))


#: ``stopping`` of the iterative solvers: our windowed rule, the NYTRO paper's, its code's.
STOPPING_RULES = ("window", "paper", "reference")


def make_stopper(
    rule: str,
    n_paths: int,
    n_iter_no_change: int | None,
    tol: float,
    threshold: float | None = None,
) -> Any:
    """The early-stopping rule ``rule`` for ``n_paths`` paths (``EarlyStopping`` for
    "window"; ``RelativeDropStopping`` with ``threshold`` as its fraction (default 0.05) for
    "paper"; ``SlopeStopping`` over ``n_iter_no_change`` (default 10) errors with
    ``threshold`` (default 0) for "reference")."""
    if rule == "window":
        return EarlyStopping(n_paths, n_iter_no_change, tol)
    if rule == "paper":
        return RelativeDropStopping(n_paths, 0.05 if threshold is None else threshold)
    if rule == "reference":
        return SlopeStopping(n_paths, n_iter_no_change or 10, threshold or 0.0)
    raise ValueError(f"stopping must be one of {STOPPING_RULES}, got {rule!r}")
