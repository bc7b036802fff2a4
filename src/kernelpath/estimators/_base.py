"""Shared machinery of the estimators: validate input, split, choose a solver, keep the path.

Estimators hold no numerical code: they code the targets (centering for regression, ±1
one-vs-all for classification), hold out the validation split, build the kernel operators and
hand over to a solver in ``kernelpath.solvers``. The fitted model is ``coef_`` (coefficients
of ``centers_``) plus ``intercept_``: f(x) = sum_j k(x, c_j) coef_j + intercept_.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_array, column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .. import _backend as B
from .._backend import resolve_memory_budget
from .._validation import (
    check_choice,
    check_float,
    check_int,
    check_labels,
    check_magnitude,
    check_numeric,
    check_penalty,
    check_size,
    make_rng,
    validate_X,
)
from ..centers import CenterSelection, chooses_size, select_centers
from ..data.sources import is_lazy_array
from ..kernels import Kernel, kernel_candidates
from ..linalg import regularized_factor
from ..operators import KernelOperator
from ..operators.dispatch import make_operator
from ..path import Path, mean_over_folds, stack_paths
from ..progress import verbose_reporter
from ..selection import STOPPING_RULES, check_cv, cv_folds, holdout_split
from ..solvers import exact_path, incremental_nystrom_path, iterative_path, nystrom_direct_path
from ..solvers._common import Validation
from ..solvers._loo import SmootherCV
from ..solvers.iterative import STEP_RULES
from ..solvers.spectral import ITERATION_FILTERS

DEFAULT_MAX_ITER = {"gd": 500, "nu": 100, "cg": 100, "landweber": 500}
MAX_CENTERS_DEFAULT = 5000
#: Number of m values of ``n_centers="auto"`` (geometric from 1 to M).
AUTO_GRID_SIZE = 20


#: n-sized vectors per output a fit holds besides the operators (their share of the budget
#: with data read from disk).
N_VECTORS = 6

#: Successive halving of kernel candidates: each screening round keeps 1 / ETA of them
#: and fits on ETA times more rows.
SCREEN_ETA = 3
#: The fewest rows of a screening round, and (Nyström) the fewest per center.
SCREEN_MIN_ROWS = 2000
SCREEN_CENTER_RATIO = 2


def _best_key(path: Path) -> tuple[float, float]:
    """(validation error, loss) of a path's chosen point: how kernels are compared."""
    i = path.best_index
    err = path.val_error[i] if path.val_error is not None else np.inf
    loss = path.val_loss[i] if path.val_loss is not None else err
    err = float(err) if np.isfinite(err) else np.inf
    return err, float(loss) if np.isfinite(loss) else np.inf


def _width_order(kernels: list[Kernel]) -> list[int] | None:
    """The candidates' positions by increasing width when they are one kernel at several
    widths (``sigma="auto"``, or a sequence of widths), else None."""
    if len({type(k) for k in kernels}) != 1 or not all(
        hasattr(k, "sigma") and not getattr(k, "per_feature", False) for k in kernels
    ):
        return None
    rest = [{n: v for n, v in k.get_params().items() if n != "sigma"} for k in kernels]
    if any(r != rest[0] for r in rest):
        return None
    return sorted(range(len(kernels)), key=lambda i: float(kernels[i].sigma))  # type: ignore[attr-defined]


def _survivors(
    alive: list[int],
    scores: dict[int, tuple[float, float]],
    keep: int,
    widths: list[int] | None,
) -> list[int]:
    """The candidates a screening round keeps: the ``keep`` best by validation score; for
    widths of one kernel, the best width and its neighbours, smaller ones first (the best
    width on a subsample overestimates the best on all rows: smaller widths need more
    data; on ijcnn1 4,443 and 13,330 rows chose 0.8, all 40,000 rows 0.5)."""
    ranked = sorted(alive, key=lambda i: scores[i])
    if widths is None:
        return sorted(ranked[:keep])
    line = [i for i in widths if i in alive]
    pos = line.index(ranked[0])
    out = [line[pos]]
    step = 1
    while len(out) < min(keep, len(line)):
        for j in (pos - step, pos + step):  # the smaller neighbour first
            if 0 <= j < len(line) and len(out) < keep:
                out.append(line[j])
        step += 1
    return sorted(out)


def _gathered(a: Any) -> Any:
    """Targets or weights as a NumPy array (O(n): gathered from a tensor, a row source or a
    dask array)."""
    if a is None:
        return None
    if B.is_tensor(a):
        return B.to_numpy(a)
    if is_lazy_array(a):
        return np.asarray(a[:]) if not hasattr(a, "read") else np.asarray(a)
    if B.is_dask(a):
        return a.compute()
    return a


def default_n_centers(n: int) -> int:
    """sqrt(n) log(n) uniform centers (Rudi, Camoriano & Rosasco 2015), at least 100, at most
    5000, at most n."""
    m = int(np.sqrt(n) * np.log(max(n, 2)))
    return int(min(n, max(100, min(m, MAX_CENTERS_DEFAULT))))


class _KernelPathEstimator(BaseEstimator):
    """Base class. Subclasses set ``_family`` ("exact", "nystrom", "nytro") and ``_classifier``."""

    _family = "nystrom"
    _classifier = False
    _solver_choices: tuple[str, ...] = ()
    #: The parameter whose sequence or "auto" value makes a path over the model size.
    _size_param = "n_centers"

    # ------------------------------------------------------------------ checks
    def _check_params(self, n: int) -> dict[str, Any]:
        return {"penalty": check_penalty(self.penalty), **self._common_params()}

    def _common_params(self) -> dict[str, Any]:
        """The parameters every estimator of the package shares, checked."""
        p: dict[str, Any] = {}
        p["validation_fraction"] = check_float(
            self.validation_fraction, "validation_fraction", 0.0, 1.0, high_open=True
        )
        p["n_iter_no_change"] = check_int(
            getattr(self, "n_iter_no_change", None), "n_iter_no_change", 1, allow_none=True
        )
        p["tol"] = check_float(getattr(self, "tol", 0.0), "tol", 0.0, np.inf, high_open=True)
        p["budget"] = resolve_memory_budget(self.memory_budget, getattr(self, "_device", None))
        p["rng"] = make_rng(self.random_state)
        if not isinstance(self.refit, (bool, np.bool_)):
            raise TypeError(f"refit must be a bool, got {self.refit!r}")
        return p

    def _center_targets(
        self, Y: np.ndarray, w: np.ndarray | None, tr: np.ndarray, unit_mean_weights: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(training targets minus ``self._intercept``, training weights). The intercept is
        their weighted mean for regression and 0 for the ±1 codes of classification: the
        models have no constant term. ``unit_mean_weights`` rescales the training weights to
        mean 1 (the stochastic solvers weigh each point's gradient by them)."""
        wt = None if w is None else w[tr]
        if wt is not None and unit_mean_weights:
            wt = wt * (len(wt) / wt.sum())
        Ytr = Y[tr]
        self._intercept = (
            np.average(Ytr, axis=0, weights=wt) if not self._classifier else np.zeros(Y.shape[1])
        )
        return Ytr - self._intercept, wt

    def _draw_feature_seed(self, params: dict[str, Any]) -> int:
        """The seed of the feature map: drawn once per fit, kept in ``params`` so that a refit
        rebuilds the same map."""
        if "feature_seed" not in params:
            params["feature_seed"] = int(params["rng"].integers(2**63))
        self._feature_seed: int = params["feature_seed"]
        return self._feature_seed

    def _method(self) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """Fit the path (over kernels too when ``kernel`` is a sequence or has
        ``sigma="auto"``) and keep its best point.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (class labels for classifiers).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights w_i: the loss is sum_i w_i (y_i - f(x_i))^2 / sum_i w_i.

        Returns
        -------
        self
        """
        verbose = check_int(getattr(self, "verbose", 0), "verbose", 0)
        with verbose_reporter(type(self).__name__, int(verbose or 0)):
            return self._fit(X, y, sample_weight)

    def _fit(self, X: Any, y: Any, sample_weight: Any) -> Any:
        X, y, sample_weight = self._validate_fit_input(X, y, sample_weight)
        n = X.shape[0]
        params = self._check_params(n)
        if self._family == "exact":  # the n x n kernel matrix is in memory anyway
            X = self._in_memory(X, params["budget"], "keeps every training point as a center")
        Y = self._encode_targets(y)
        w = None
        if sample_weight is not None:
            try:
                w = _check_sample_weight(
                    sample_weight, X, dtype=np.float64, ensure_non_negative=True
                )
            except ValueError as exc:
                raise ValueError(f"sample_weight: {exc}") from exc
            if not np.any(w > 0):
                raise ValueError("sample_weight must have at least one positive entry")
            # weights sum to n: the penalty means the same with or without them, and an
            # integer weight is the same as repeating the point
            w = w * (n / w.sum())
        rng = params["rng"]
        cv = check_cv(getattr(self, "cv", "holdout"), n, y if self._classifier else None)
        # sigma="ard": the widths are learned on the training rows (all of them without a
        # hold-out) and the learned kernel joins the "auto" widths as the first candidate
        # (the guard: selection keeps it only where it beats them); the "auto" part draws
        # the same numbers as a fit with sigma="auto"
        ard = self._wants_ard()
        guard = ard and not (cv == "holdout" and params["validation_fraction"] == 0)
        if ard and not guard:
            kernels = [self._learned_kernel(X, Y, w, rng, params, None)]
        else:
            kernels = kernel_candidates(self._isotropic_kernel() if ard else self.kernel, X, rng)
        method = self._method()
        pen = params["penalty"]
        unused_penalty = self._family == "exact" and method in ("kols", *ITERATION_FILTERS)
        if unused_penalty and not (isinstance(pen, str) or (isinstance(pen, float) and pen == 0)):
            raise ValueError(
                f"penalty is not used by filter={method!r} (its path is over iterations or it "
                f"has no parameter); leave it at 'auto', got {self.penalty!r}"
            )
        has_path = self._has_path(method, pen) or len(kernels) > 1
        if cv == "holdout" and params["validation_fraction"] == 0:
            if not isinstance(pen, float) and not unused_penalty:
                raise ValueError(
                    "validation_fraction=0 turns selection off: give penalty a single number, "
                    f"got {self.penalty!r}"
                )
            if self._center_grid_requested():
                name = self._size_param
                raise ValueError(
                    f"validation_fraction=0 turns selection off: give {name} a single number, "
                    f"got {getattr(self, name)!r}"
                )
            if len(kernels) > 1:
                raise ValueError(
                    "validation_fraction=0 turns selection off: give one kernel with one "
                    f"width, got {self.kernel!r}"
                )
        if cv in ("loo", "gcv") and has_path:
            self._check_smoother_cv(cv, method, w)
        select = has_path and (cv != "holdout" or params["validation_fraction"] > 0)
        if select and n < 2:
            raise ValueError(
                "n_samples=1: at least 2 samples are needed to hold out a validation set"
            )
        if not select:
            cv = "holdout"
        if cv == "holdout":
            if select:
                strat = y if self._classifier else None
                tr, va = holdout_split(n, params["validation_fraction"], rng, strat)
            else:
                tr, va = np.arange(n), None
            if guard:
                kernels = [self._learned_kernel(X, Y, w, rng, params, tr), *kernels]
                params["pinned"] = 1
            self.train_indices_ = tr
            self.validation_indices_ = va if va is not None else np.array([], dtype=int)
            path, sub, kparams = self._search(kernels, X, Y, w, tr, va, params, method)
            if self.refit and va is not None:
                self._refit(X, Y, w, n, kparams, method, sub)
            else:
                self._set_model(sub.coef(), sub)
        else:
            self.train_indices_ = np.arange(n)
            self.validation_indices_ = np.array([], dtype=int)
            if guard:
                kernels = [self._learned_kernel(X, Y, w, rng, params, None), *kernels]
            if cv in ("loo", "gcv"):
                path, sub, kparams = self._search_smoother(kernels, X, Y, w, params, method, cv)
                self._set_model(sub.coef(), sub)
            else:
                folds = cv_folds(cv, y, rng, self._classifier)
                path, sub, kparams = self._search_folds(kernels, X, Y, w, folds, params, method)
                self._refit(X, Y, w, n, kparams, method, sub)
        self.path_ = path
        if hasattr(self, "ard_info_"):
            self.ard_info_["chosen"] = (
                "learned" if getattr(self.kernel_, "per_feature", False) else "start"
            )
        self.best_params_ = path.best_params
        if len(kernels) > 1:
            self.best_params_["kernel"] = self.kernel_
        best = self.best_params_
        self.penalty_ = float(best.get("penalty", 0.0))
        self.n_iter_ = int(best["n_iter"]) if "n_iter" in best else 1
        return self

    def _wants_ard(self) -> bool:
        """Whether ``kernel`` has ``sigma="ard"`` (alone: not in a sequence of kernels)."""
        self.__dict__.pop("ard_info_", None)
        kernel = self.kernel
        items = kernel if isinstance(kernel, (list, tuple)) else [kernel]
        if not any(isinstance(getattr(k, "sigma", None), str) and k.sigma == "ard" for k in items):
            return False
        if isinstance(kernel, (list, tuple)):
            raise ValueError(
                "kernel: sigma='ard' learns one kernel's widths; give it alone, not in a "
                "sequence of kernels"
            )
        return True

    def _isotropic_kernel(self) -> Kernel:
        """The ``sigma="ard"`` kernel's family with ``sigma="auto"``."""
        return type(self.kernel)(**dict(self.kernel.get_params(), sigma="auto"))

    def _learned_kernel(
        self,
        X: Any,
        Y: np.ndarray,
        w: np.ndarray | None,
        rng: Any,
        params: dict[str, Any],
        rows: np.ndarray | None,
    ) -> Kernel:
        """The ``sigma="ard"`` kernel with one width per feature learned by
        ``ard.learn_widths`` on a subsample of ``rows`` (all rows when None), its report in
        ``ard_info_``. Draws from a generator spawned from ``rng`` (``rng``'s own stream
        is left as it was)."""
        from .. import ard

        try:
            sub_rng = rng.spawn(1)[0]
        except (AttributeError, TypeError):  # a generator without a seed sequence
            sub_rng = np.random.default_rng(rng.integers(2**63))
        n = X.shape[0]
        pool = np.arange(n) if rows is None else rows
        if len(pool) > ard.N_SUBSAMPLE:
            pool = np.sort(sub_rng.choice(pool, ard.N_SUBSAMPLE, replace=False))
        if len(pool) < n:  # only these rows are read (X may be a row source)
            Xs, Ys = B.rows_in_memory(X, pool), Y[pool]
            ws = None if w is None else w[pool]
        else:
            Xs, Ys, ws = X, Y, w
        learned, info = ard.learn_widths(
            self.kernel,
            Xs,
            Ys,
            sample_weight=ws,
            random_state=sub_rng,
            memory_budget=params["budget"],
            return_info=True,
        )
        info["n_rows"] = len(pool)
        self.ard_info_ = info
        return learned

    # ------------------------------------------------------- search over kernels
    def _kernel_params(self, params: dict[str, Any], kernels: list[Kernel]) -> list[dict]:
        """One copy of ``params`` per kernel. With several kernels every copy gets a
        generator of the same seed: the same centers (uniform), feature draws (scaled by
        1 / sigma) and minibatches for every kernel."""
        if len(kernels) == 1:
            return [params]
        seed = int(params["rng"].integers(2**63))
        return [dict(params, rng=np.random.default_rng(seed)) for _ in kernels]

    def _fit_kernel(
        self,
        kernel: Kernel,
        X: Any,
        Y: np.ndarray,
        w: np.ndarray | None,
        tr: np.ndarray,
        va: np.ndarray | None,
        params: dict[str, Any],
        method: str,
    ) -> tuple[Path, dict[str, Any]]:
        """The path of one kernel and the estimator's state after it (to restore the
        chosen kernel's centers, feature map and intercept)."""
        self.kernel_ = kernel
        path = self._solve(X, Y, w, tr, va, params, method)
        if not np.isfinite(path.train_error).any():
            raise ValueError(
                "no point of the path could be computed (the centers' system is numerically "
                "singular at every penalty): give larger penalties or fewer centers"
            )
        return path, dict(self.__dict__)

    def _finish_search(
        self,
        kernels: list[Kernel],
        paths: list[Path],
        states: list[dict[str, Any]],
        kparams: list[dict[str, Any]],
        eligible: list[int],
        info: dict[str, Any] | None = None,
    ) -> tuple[Path, Path, dict[str, Any]]:
        """(the path, the chosen kernel's own path, its params) after restoring the chosen
        kernel's state; several kernels make one path with a leading kernel axis."""
        if len(kernels) == 1:
            self.__dict__.update(states[0])
            return paths[0], paths[0], kparams[0]
        best_k = min(eligible, key=lambda i: _best_key(paths[i]))
        values: list[Any]
        if _width_order(kernels) is not None:  # one kernel at several widths
            name, values = "sigma", [float(getattr(k, "sigma")) for k in kernels]  # noqa: B009
        else:
            name, values = "kernel", list(kernels)
        if name == "sigma":
            info = dict(info or {}, kernels=list(kernels))
        path = stack_paths(paths, name, values, (best_k, *paths[best_k].best_index), info)
        self.__dict__.update(states[best_k])
        return path, paths[best_k], kparams[best_k]

    def _search(
        self,
        kernels: list[Kernel],
        X: Any,
        Y: np.ndarray,
        w: np.ndarray | None,
        tr: np.ndarray,
        va: np.ndarray | None,
        params: dict[str, Any],
        method: str,
    ) -> tuple[Path, Path, dict[str, Any]]:
        """Hold-out search over kernels with successive halving: the candidates are fit
        on nested subsamples of the training rows, n_tr / ETA^r, keeping the best 1 / ETA
        by validation error each round, while the smallest subsample keeps at least
        ``_screen_floor`` rows; the survivors are fit on all the training rows."""
        kparams = self._kernel_params(params, kernels)
        K = len(kernels)
        n_tr = len(tr)
        rounds = 0
        # the first ``pinned`` kernels (learned widths) skip the screening: they are fit on
        # all the training rows and compared with the screening's survivors
        pinned = int(params.get("pinned", 0))
        screened = K - pinned
        if screened > 1 and va is not None:
            floor = self._screen_floor(n_tr, params)
            rounds = int(np.ceil(np.log(screened) / np.log(SCREEN_ETA) - 1e-9))
            while rounds and n_tr // SCREEN_ETA**rounds < floor:
                rounds -= 1
        paths: list[Path | None] = [None] * K
        states: list[dict[str, Any]] = [{}] * K
        rows = [n_tr] * K
        alive = list(range(pinned, K))
        screening = []
        order = tr[params["rng"].permutation(n_tr)] if rounds else tr
        widths = _width_order(kernels[pinned:])
        if widths is not None:
            widths = [pinned + i for i in widths]
        for r in range(rounds):
            size = n_tr // SCREEN_ETA ** (rounds - r)
            sub = np.sort(order[:size])  # nested subsamples
            for i in alive:
                kp = self._screen_params(kparams[i], size / n_tr, n_tr)
                paths[i], states[i] = self._fit_kernel(kernels[i], X, Y, w, sub, va, kp, method)
                rows[i] = size
            keep = max(1, int(np.ceil(len(alive) / SCREEN_ETA)))
            scores = {i: _best_key(paths[i]) for i in alive}  # type: ignore[arg-type]
            screening.append(
                {
                    "n_train": size,
                    "candidates": [kernels[i] for i in alive],
                    "best_val_error": [scores[i][0] for i in alive],
                }
            )
            alive = _survivors(alive, scores, keep, widths)
        alive = list(range(pinned)) + alive
        for i in alive:
            paths[i], states[i] = self._fit_kernel(kernels[i], X, Y, w, tr, va, kparams[i], method)
            rows[i] = n_tr
        info = {"n_train": rows, "screening": screening} if K > 1 else None
        return self._finish_search(kernels, paths, states, kparams, alive, info)  # type: ignore[arg-type]

    def _drawn_centers(self, n_tr: int, params: dict[str, Any]) -> int | None:
        """The number of centers a Nyström fit on ``n_tr`` rows draws at one m (None when
        the centers are given, SQUEAK sizes its dictionary, or m is a path)."""
        if self._family not in ("nystrom", "nytro") or self._center_grid_requested():
            return None
        if not (self.centers is None or isinstance(self.centers, str)):
            return None
        if chooses_size(self.centers):
            return None
        nc = params.get("n_centers", getattr(self, "n_centers", None))
        return default_n_centers(n_tr) if nc is None else int(nc)

    def _screen_params(self, params: dict[str, Any], fraction: float, n_tr: int) -> dict:
        """A screening round's parameters: Nyström with a number of centers m drawn by the
        estimator itself keeps m / sqrt(n) (the regime of Rudi et al.: a fraction f of the
        rows with sqrt(f) m centers is the same problem at a smaller scale, at f^2 of the
        cost of the Gram matrix and f^1.5 of the m x m algebra)."""
        m = self._drawn_centers(n_tr, params)
        if m is None:
            return params
        return dict(params, n_centers=max(1, int(round(m * np.sqrt(fraction)))))

    def _screen_floor(self, n_tr: int, params: dict[str, Any]) -> int:
        """The fewest training rows a screening round fits on: ``SCREEN_MIN_ROWS``, and
        for Nyström at least ``SCREEN_CENTER_RATIO`` times the number of centers (a
        subsample much smaller than that would change the model, not just its noise)."""
        floor = SCREEN_MIN_ROWS
        if self._family in ("nystrom", "nytro") and not self._center_grid_requested():
            m = self._drawn_centers(n_tr, params)
            if m is None and hasattr(self.centers, "__len__") and not isinstance(self.centers, str):
                m = len(self.centers)  # given centers
            if m is not None:
                floor = max(floor, SCREEN_CENTER_RATIO * m)
        return floor

    def _check_smoother_cv(self, cv: str, method: str, w: np.ndarray | None) -> None:
        """Leave-one-out and GCV in closed form: which solvers offer them."""
        ok = self._smoother_modes(method)
        if cv not in ok:
            raise ValueError(
                f"cv={cv!r} is not available for {type(self).__name__} with "
                f"{self._solver_description(method)}: "
                + (
                    f"it offers cv in {ok}; "
                    if ok
                    else "only the Tikhonov solvers (exact KRLS, Nyström direct, random "
                    "features) have it in closed form; "
                )
                + "use cv='holdout' or an int k (k-fold)"
            )
        if w is not None and not np.all(w > 0):
            raise ValueError(
                f"sample_weight: cv={cv!r} needs positive weights (a zero weight leaves a "
                "point out already)"
            )

    def _smoother_modes(self, method: str) -> tuple[str, ...]:
        """The closed-form cv modes of this estimator and method."""
        if self._center_grid_requested():
            return ()
        if self._family == "exact":
            if method == "tikhonov":
                return ("loo", "gcv")
            return ("gcv",) if method in ("tsvd", "landweber", "nu") else ()
        if self._family == "nystrom" and method == "direct":
            return ("loo", "gcv")
        return ()

    def _solver_description(self, method: str) -> str:
        if self._center_grid_requested():
            return f"a path over {self._size_param}"
        return f"solver/filter {method!r}"

    def _smoother_cv(self, params: dict[str, Any]) -> SmootherCV | None:
        mode = params.get("cv_mode")
        if mode is None:
            return None
        return SmootherCV(mode, not self._classifier, "error_rate" if self._classifier else "mse")

    def _search_smoother(
        self,
        kernels: list[Kernel],
        X: Any,
        Y: np.ndarray,
        w: np.ndarray | None,
        params: dict[str, Any],
        method: str,
        cv: str,
    ) -> tuple[Path, Path, dict[str, Any]]:
        """Leave-one-out or GCV on all the data for every kernel."""
        kparams = [dict(p, cv_mode=cv) for p in self._kernel_params(params, kernels)]
        n = X.shape[0]
        paths, states = [], []
        for kern, kp in zip(kernels, kparams, strict=True):
            p, st = self._fit_kernel(kern, X, Y, w, np.arange(n), None, kp, method)
            paths.append(p)
            states.append(st)
        return self._finish_search(
            kernels, paths, states, kparams, list(range(len(kernels))), {"cv": cv}
        )

    def _search_folds(
        self,
        kernels: list[Kernel],
        X: Any,
        Y: np.ndarray,
        w: np.ndarray | None,
        folds: list[tuple[np.ndarray, np.ndarray]],
        params: dict[str, Any],
        method: str,
    ) -> tuple[Path, Path, dict[str, Any]]:
        """k-fold (or a splitter's folds) for every kernel: the path's validation error is
        the mean over the folds; a penalty grid chosen by the solver ("auto") on the first
        fold is kept for the others and for the refit on all the data."""
        kparams = self._kernel_params(params, kernels)
        paths, states = [], []
        for kern, kp in zip(kernels, kparams, strict=True):
            fold_paths = []
            for tr, va in folds:
                p, st = self._fit_kernel(kern, X, Y, w, tr, va, kp, method)
                fold_paths.append(p)
                if isinstance(kp["penalty"], str) and "penalty" in p.params:
                    kp["penalty"] = self._path_penalties(p)
            paths.append(mean_over_folds(fold_paths, {"n_folds": len(folds)}))
            states.append(st)
        return self._finish_search(
            kernels, paths, states, kparams, list(range(len(kernels))), {"cv": "k-fold"}
        )

    def _path_penalties(self, path: Path) -> np.ndarray:
        """The λ grid of a path (its own λ at D_max for the path over D)."""
        lam = np.asarray(path.params["penalty"], dtype=float)
        if lam.ndim == 1:
            return lam
        names = path.param_names
        if names[0] == "penalty":
            return lam[:, 0]
        return lam[-1, :]

    def _validate_fit_input(self, X: Any, y: Any, sample_weight: Any) -> tuple[Any, Any, Any]:
        """(X on the compute device, y and sample_weight as NumPy arrays); sets
        ``device_``. NumPy inputs go through scikit-learn's ``validate_data``; a tensor X is
        checked where it lives (its targets and weights may be tensors on the same device or
        NumPy arrays when it is on the CPU)."""
        dev = B.resolve_device(
            getattr(self, "device", None), {"X": X, "y": y, "sample_weight": sample_weight}
        )
        y, sample_weight = _gathered(y), _gathered(sample_weight)
        if not self._classifier:
            check_numeric(y, "y")
        if B.is_tensor(X) or is_lazy_array(X) or B.is_dask(X):
            X = validate_X(self, X, reset=True)
            self._check_lazy_input(X)
            if self._classifier:
                y = column_or_1d(y, warn=True)
            else:
                y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
            if len(y) != X.shape[0]:
                raise ValueError(
                    f"Found input variables with inconsistent numbers of samples: "
                    f"[{X.shape[0]}, {len(y)}]"
                )
        else:
            check_numeric(X, "X")
            X, y = validate_data(
                self,
                X,
                y,
                dtype=[np.float64, np.float32],
                multi_output=not self._classifier,
                y_numeric=not self._classifier,
            )
            check_magnitude(X)
        if self._classifier:
            check_labels(y)
        self._device = dev
        self.device_ = str(dev)
        return B.to_device(X, dev, B.dtype_of(X)), y, sample_weight

    #: Whether the estimator fits on a dask array (its operator's products on the workers).
    _takes_dask = False

    def _check_lazy_input(self, X: Any) -> None:
        """Refuse a dask array where the estimator has no distributed implementation."""
        if B.is_dask(X) and not self._takes_dask:
            raise TypeError(
                f"{type(self).__name__} does not take dask arrays: NystromRegressor / "
                "NystromClassifier (direct and CG, λ and m paths), NYTRO and "
                "RandomFeatures estimators fit on a cluster; compute X into memory "
                "(X.compute()) or read it from disk as a row source (kernelpath.data)"
            )

    def _dask_predict(self, X: Any, method: str) -> Any:
        """``method`` of a dask array, lazily, chunk by chunk on the workers (a dask array
        out, chunked like X's rows)."""
        from ..distributed import dask_predict

        check_is_fitted(self)
        validate_X(self, X, reset=False)
        return dask_predict(self, X, method, None)

    def _in_memory(self, X: Any, budget: int, why: str) -> Any:
        """X loaded into memory where the method needs it whole (``why``), if it fits."""
        if not B.is_lazy(X):
            return X
        need = int(np.prod(X.shape)) * np.dtype(X.dtype).itemsize
        if need > budget:
            raise ValueError(
                f"{type(self).__name__} {why}: X ({need / 1e9:.2f} GB) does not fit "
                f"memory_budget={budget / 1e9:.2f} GB; for data larger than memory use "
                "NystromRegressor / NystromClassifier, NYTRO, RandomFeatures or SGM"
            )
        return np.ascontiguousarray(np.asarray(X))

    def _predict_input(self, X: Any) -> Any:
        """X validated and on the device predictions compute on: ``device`` when it is
        set, else where X lives (a model fitted on a GPU predicts NumPy inputs with NumPy
        unless ``device`` says otherwise)."""
        dev = B.resolve_device(getattr(self, "device", None), {"X": X})
        Xv = validate_X(self, X, reset=False)
        return B.to_device(Xv, dev, B.dtype_of(Xv))

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
        """Fit again on all the data at the chosen point of ``path``.

        Gradient descent, Landweber and the ν-method keep the chosen penalty and iteration
        count (their regularization). CG reruns the same path (same penalties, hence the same
        Krylov construction) on all the data: to convergence when the chosen point had
        converged, else for the chosen number of iterations, and takes the chosen penalty's
        point. Closed forms refit at the chosen penalty.
        """
        best = path.best_params
        fixed = dict(params)
        if "n_centers" in best:  # the (m, λ) path: batch Nyström at the chosen point
            fixed["penalty"] = float(best["penalty"])
            fixed["n_centers"] = int(best["n_centers"])
            again = self._solve(X, Y, w, np.arange(n), None, fixed, "direct")
            self._set_model(again.coef(), again)
            return
        if method == "cg":
            p, t = path.best_index
            reached = int(np.isfinite(path.train_error[p]).sum())
            done = bool(path.info["converged"][p]) and t == reached - 1
            fixed["penalty"] = np.asarray(path.params["penalty"][:, 0])
            again = self._solve(
                X, Y, w, np.arange(n), None, fixed, method, n_iter=None if done else t + 1
            )
            last = int(np.isfinite(again.train_error[p]).sum()) - 1
            self._set_model(again.coef((p, last if done else min(t, last))), again)
            return
        fixed["penalty"] = float(best.get("penalty", 0.0))
        carry = best.get("n_iter") if method in ("gd", "nu", "landweber") else None
        again = self._solve(X, Y, w, np.arange(n), None, fixed, method, n_iter=carry)
        self._set_model(again.coef(), again)

    def _has_path(self, method: str, pen: Any) -> bool:
        if self._center_grid_requested():
            return True
        if self._is_iterative(method):
            return True
        if method == "kols":
            return False
        return not isinstance(pen, float)

    def _is_iterative(self, method: str) -> bool:
        return method in ("gd", "nu", "cg", *ITERATION_FILTERS)

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        if self._classifier:
            check_classification_targets(y)
            self._binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
            Y = self._binarizer.fit_transform(y).astype(np.float64)
            self.classes_ = self._binarizer.classes_
            if len(self.classes_) < 2:
                raise ValueError(
                    f"y must contain at least two classes, got 1 class: {self.classes_.tolist()!r}"
                )
            return Y
        y = np.asarray(y, dtype=np.float64)
        self._single_output = y.ndim == 1
        return y[:, None] if y.ndim == 1 else y

    def _operators(
        self, X: np.ndarray, tr: np.ndarray, va: np.ndarray | None, centers: np.ndarray, budget: int
    ) -> tuple[KernelOperator, KernelOperator | None]:
        n_tr = len(tr)
        n_va = 0 if va is None else len(va)
        share = n_tr / (n_tr + n_va)
        if B.is_lazy(X):
            # data read from disk: the budget covers the n-sized vectors of the fit too
            # (targets, centered targets, weights, predictions), the operators get the rest
            k = getattr(self, "_n_outputs_fit", 1)
            budget = max(budget - N_VECTORS * 8 * k * (n_tr + n_va), 2**20)
        Xtr = B.take_rows(X, tr)
        op = make_operator(Xtr, centers, self.kernel_, max(int(budget * share), 2**20))
        vop = None
        if va is not None:
            vop = make_operator(
                B.take_rows(X, va), centers, self.kernel_, max(int(budget * (1 - share)), 2**20)
            )
        return op, vop

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
        Ytr, wt = self._center_targets(Y, w, tr)
        sel, grid = self._centers(B.take_rows(X, tr), params)
        self._center_info = sel
        self._last_centers = sel.points
        self._n_outputs_fit = Y.shape[1]
        op, vop = self._operators(X, tr, va, sel.points, params["budget"])
        val = None
        if vop is not None and va is not None:
            scoring = "error_rate" if self._classifier else "mse"
            val = Validation(vop, Y[va] - self._intercept, scoring)
        pen = params["penalty"]
        max_iter = self._max_iter(method) if n_iter is None else int(n_iter)
        factor = None
        if "gamma" in sel.info:  # SQUEAK's γ-regularized Nyström (SqueakCenters(regularized))
            if grid is not None:
                raise ValueError(
                    "SqueakCenters(regularized=True) fits the whole dictionary: n_centers "
                    "cannot be a path"
                )
            factor = regularized_factor(op.center_gram(), sel.weights, sel.info["gamma"])
        if self._family == "exact":
            cv = self._smoother_cv(params)
            if method in ITERATION_FILTERS:
                grid = np.arange(1, max_iter + 1)
                nu, step = self._spectral_options(len(tr))
                return exact_path(op, Ytr, method, grid, wt, val, cv=cv, nu=nu, step=step)
            grid_or_none = None if isinstance(pen, str) else np.atleast_1d(pen)
            return exact_path(op, Ytr, method, grid_or_none, wt, val, cv=cv)
        if grid is not None:
            lam_or_none = None if isinstance(pen, str) else np.atleast_1d(pen)
            return incremental_nystrom_path(op, Ytr, lam_or_none, grid, wt, val)
        if method == "direct":
            grid_or_none = None if isinstance(pen, str) else np.atleast_1d(pen)
            return nystrom_direct_path(
                op, Ytr, grid_or_none, wt, val, self._smoother_cv(params), factor
            )
        penalties = None if isinstance(pen, str) else pen  # None: the solver's "auto" grid
        return iterative_path(
            op,
            Ytr,
            penalties,
            method,
            max_iter,
            wt,
            val,
            params["n_iter_no_change"] if n_iter is None else None,
            params["tol"] if n_iter is None else 0.0,
            random_state=params["rng"],
            _setup=None if factor is None else {"factor": factor},
            **self._iteration_options(n_iter is None),
        )

    def _spectral_options(self, n_tr: int) -> tuple[float, float | None]:
        """(ν, Landweber's step in units of K / n) of the exact estimators."""
        nu = check_float(getattr(self, "nu", 1.0), "nu", 0.0, np.inf, low_open=True)
        step = getattr(self, "step", "auto")
        if isinstance(step, str):
            check_choice(step, "step", ("auto", "thesis"))
            return nu, (None if step == "auto" else 2.0)  # η = 2 / n: η n = 2
        eta = check_float(step, "step", 0.0, np.inf, low_open=True)
        return nu, eta * n_tr

    def _iteration_options(self, selecting: bool) -> dict[str, Any]:
        """NYTRO's ν, step and stopping rule (``iterative_path``'s options)."""
        if self._family != "nytro":
            return {}
        nu = check_float(getattr(self, "nu", 1.0), "nu", 0.0, np.inf, low_open=True)
        step = getattr(self, "step", "auto")
        if isinstance(step, str):
            check_choice(step, "step", STEP_RULES)
        else:
            step = check_float(step, "step", 0.0, np.inf, low_open=True)
        stopping = check_choice(getattr(self, "stopping", "window"), "stopping", STOPPING_RULES)
        return {"nu": nu, "step": step, "stopping": stopping if selecting else "window"}

    def _max_iter(self, method: str) -> int:
        if getattr(self, "max_iter", None) is None:
            return DEFAULT_MAX_ITER.get(method, 100)
        return int(check_int(self.max_iter, "max_iter", 1))  # type: ignore[arg-type]

    def _center_grid_requested(self) -> bool:
        """Whether the size parameter (n_centers, n_features) asks for a path."""
        nc = getattr(self, self._size_param, None)
        return self._family != "exact" and (
            (isinstance(nc, str)) or (nc is not None and np.ndim(nc) == 1)
        )

    def _check_n_centers(self, value: Any, n: int) -> tuple[int | None, np.ndarray | None]:
        """(M, grid): the number of centers to draw and, for a path over m, the m values
        (None for one m; empty for "auto", filled once M is known). M is None when the
        strategy chooses it (SQUEAK)."""
        default = None if chooses_size(self.centers) else default_n_centers(n)
        if value is None:
            return default, None
        size = check_size(value, "n_centers")
        if isinstance(size, str):
            return default, np.array([], dtype=np.int64)
        clip = self.centers is None or isinstance(self.centers, str)
        if isinstance(size, np.ndarray):
            if size[-1] > n and clip:
                warnings.warn(
                    f"n_centers values larger than the number of training points {n} are dropped",
                    UserWarning,
                    stacklevel=5,
                )
                size = np.unique(np.minimum(size, n))
            return int(size[-1]), size
        if size > n and clip:
            warnings.warn(
                f"n_centers={size} is larger than the number of training points {n}: "
                f"using n_centers={n}",
                UserWarning,
                stacklevel=5,
            )
            size = n
        return size, None

    def _centers(
        self, Xtr: np.ndarray, params: dict[str, Any]
    ) -> tuple[CenterSelection, np.ndarray | None]:
        n = len(Xtr)
        if self._family == "exact":
            return CenterSelection(Xtr, np.arange(n), "all"), None
        value = params["n_centers"] if "n_centers" in params else getattr(self, "n_centers", None)
        m, grid = self._check_n_centers(value, n)
        if grid is not None and self._family == "nytro":
            raise ValueError(
                "n_centers as a path ('auto' or a sequence) needs the Nyström closed form: "
                "use NystromRegressor / NystromClassifier (NYTRO's path is over iterations)"
            )
        pen = params["penalty"]
        sel = select_centers(
            self.centers,
            Xtr,
            m,
            params["rng"],
            self.kernel_,
            pen if isinstance(pen, float) else None,
            params["budget"],
        )
        M = len(sel.points)
        if grid is not None:
            if grid.size == 0:  # "auto"
                grid = np.unique(np.geomspace(1, M, AUTO_GRID_SIZE).round().astype(np.int64))
            grid = grid[grid <= M] if (grid <= M).any() else np.array([M])
        return sel, grid

    def _store_coef(self, coef: np.ndarray, intercept: Any) -> None:
        """Set ``coef_`` (on the device the fit computed on) and ``intercept_`` (NumPy),
        1-D for one output (or a binary classifier)."""
        coef = np.asarray(coef)
        single = (self._classifier and coef.shape[1] == 1) or (
            not self._classifier and getattr(self, "_single_output", False)
        )
        out = coef[:, 0] if single else coef
        self.coef_ = B.to_device(out, getattr(self, "_device", B.NUMPY), out.dtype)
        inter = np.asarray(intercept, dtype=coef.dtype)
        self.intercept_ = inter[0] if single else inter

    def _set_model(self, coef: np.ndarray, path: Path) -> None:
        coef = np.asarray(coef)
        m = coef.shape[0]  # the (m, λ) path keeps the first m centers
        self.centers_ = self._last_centers[:m]
        self._store_coef(coef, self._intercept)
        sel: CenterSelection = self._center_info
        self.center_strategy_ = sel.strategy
        self.center_indices_ = None if sel.indices is None else sel.indices[:m]
        self.center_scores_ = sel.scores
        self.center_weights_ = None if sel.weights is None else sel.weights[:m]
        self.center_penalty_ = sel.penalty

    # --------------------------------------------------------------- predict
    def _decision(self, X: Any) -> Any:
        """f(X) on the prediction device (NumPy or a tensor there)."""
        check_is_fitted(self, "coef_")
        Xc = self._predict_input(X)
        # the higher of the model's and the input's precision: a float64 model's coefficients
        # (large and cancelling at small penalties) must not be rounded to float32
        dtype = np.result_type(B.dtype_of(Xc), B.dtype_of(self.coef_))
        dev = B.array_device(Xc)
        op = KernelOperator(
            B.to_device(Xc, dev, dtype),
            B.to_device(self.centers_, dev, dtype),
            self.kernel_,
            resolve_memory_budget(self.memory_budget, dev),
            cache=False,
        )
        F = op.matvec(B.to_device(self.coef_, dev, dtype), native=True)
        return F + B.to_device(np.asarray(self.intercept_, dtype=dtype), dev)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.target_tags.required = True
        return tags
