"""SGM / SIGM estimators: stochastic gradient methods on random or Nyström features."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from .._validation import check_choice, check_float, check_int
from ..features import NystromFeatures, RandomFourierFeatures, check_rff_kernel
from ..path import Path
from ..solvers._common import Validation
from ..solvers.random_features import FeatureOperator, indexed_features
from ..solvers.sgm import AVERAGING, LOSSES, sgm_path
from ._base import _KernelPathEstimator
from ._mixins import _ClassifierMixin, _RegressorMixin

__all__ = ["SGMRegressor", "SGMClassifier"]

#: Cache the training features when they take at most this fraction of the memory budget.
CACHE_FRACTION = 0.4
#: ``step_size="grid"``: these multiples of the rule's step, run side by side.
STEP_GRID = np.array([1 / 8, 1 / 4, 1 / 2, 1.0, 2.0])


class _WithBias:
    """A feature map followed by a constant feature 1 (the intercept's weight)."""

    def __init__(self, fmap: Any) -> None:
        self.fmap = fmap

    def transform(self, X: Any) -> Any:
        F = self.fmap.transform(X)
        out = B.empty((F.shape[0], F.shape[1] + 1), F)
        out[:, :-1] = F
        out[:, -1] = 1.0
        return out


class _SGMBase(_KernelPathEstimator):
    _family = "sgm"
    _default_loss = "square"
    _losses: tuple[str, ...] = ("square",)

    def __init__(
        self,
        kernel: Any = "gaussian",
        loss: str | None = None,
        features: str = "random",
        n_features: int = 1000,
        step_size: Any = "auto",
        decay: float = 0.0,
        batch_size: int = 32,
        n_passes: int = 10,
        averaged: bool = False,
        averaging: str = "uniform",
        penalty: float = 0.0,
        fit_intercept: bool = True,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        n_iter_no_change: int | None = 5,
        tol: float = 1e-4,
        refit: bool = False,
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kernel = kernel
        self.loss = loss
        self.features = features
        self.n_features = n_features
        self.step_size = step_size
        self.decay = decay
        self.batch_size = batch_size
        self.n_passes = n_passes
        self.averaged = averaged
        self.averaging = averaging
        self.penalty = penalty
        self.fit_intercept = fit_intercept
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.refit = refit
        self.memory_budget = memory_budget
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _check_params(self, n: int) -> dict[str, Any]:
        p: dict[str, Any] = {
            "penalty": check_float(self.penalty, "penalty", 0.0, np.inf, high_open=True),
            **self._common_params(),
        }
        loss = self._default_loss if self.loss is None else self.loss
        p["loss"] = check_choice(loss, "loss", self._losses)
        p["features"] = check_choice(self.features, "features", ("random", "nystrom"))
        p["n_features"] = check_int(self.n_features, "n_features", 1)
        dec = self.decay
        if np.ndim(dec) == 0:
            p["decay"] = check_float(dec, "decay", 0.0, 1.0)
        else:
            vals = list(np.asarray(dec, dtype=object).ravel())
            if np.ndim(dec) != 1 or not vals:
                raise ValueError(
                    f"decay must be a number or a 1-D sequence of numbers, got {dec!r}"
                )
            p["decay"] = np.array([check_float(v, "decay", 0.0, 1.0) for v in vals])
        p["averaging"] = check_choice(self.averaging, "averaging", AVERAGING)
        p["batch_size"] = check_int(self.batch_size, "batch_size", 1)
        p["n_passes"] = check_int(self.n_passes, "n_passes", 1)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")
        if not isinstance(self.averaged, (bool, np.bool_)):
            raise TypeError(f"averaged must be a bool, got {self.averaged!r}")
        st = self.step_size
        if isinstance(st, str):
            if st not in ("auto", "grid"):
                raise ValueError(
                    f"step_size must be a number, a sequence, 'auto' or 'grid', got {st!r}"
                )
            p["steps"] = st
        else:
            arr = np.atleast_1d(np.asarray(st))
            if arr.dtype.kind not in "iuf" or arr.ndim != 1 or arr.size == 0:
                raise TypeError(
                    f"step_size must be a number, a sequence of numbers or 'auto', got {st!r}"
                )
            arr = arr.astype(float)
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(f"step_size values must be positive and finite, got {st!r}")
            p["steps"] = arr
        return p

    def _method(self) -> str:
        return "sgm"

    def _has_path(self, method: str, pen: Any) -> bool:
        return True

    def _feature_map(self, Xtr: np.ndarray, params: dict[str, Any]) -> Any:
        D = params["n_features"]
        if params["features"] == "random":
            check_rff_kernel(self.kernel_, " (or use features='nystrom')")
            return RandomFourierFeatures(
                self.kernel_, D, random_state=params["feature_seed"], memory_budget=params["budget"]
            ).fit(B.to_numpy(Xtr[:1]))
        return NystromFeatures(self.kernel_, D, params["feature_seed"], params["budget"]).fit(Xtr)

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
        rng = params["rng"]
        Xtr = B.take_rows(X, tr)
        n = len(Xtr)
        Ytr, wt = self._center_targets(Y, w, tr, unit_mean_weights=True)
        self._draw_feature_seed(params)
        fmap = self._feature_map(Xtr, params)
        self._fmap = fmap
        if self.fit_intercept:
            fmap = _WithBias(fmap)
        probe = fmap.transform(Xtr[: min(n, 1000)])
        D = probe.shape[1]
        features = indexed_features(fmap.transform, Xtr, D, CACHE_FRACTION * params["budget"])

        steps = params["steps"]
        if isinstance(steps, str):
            # the minibatch rule b / (κ² + (b - 1) λ_1) (κ² = max ||φ(x)||², λ_1 the top
            # eigenvalue of Φ^T Φ / n, both on up to 1000 training points): the largest step
            # for which a minibatch of b points is stable for the square loss; 4x for the
            # logistic loss (its curvature is at most 1/4)
            P = B.to_numpy(probe, FACTOR_DTYPE)
            kappa2 = float(np.max(np.einsum("ij,ij->i", P, P)))
            lam1 = float(np.linalg.norm(P, 2) ** 2 / len(P))
            b = params["batch_size"]
            scale = 4.0 if params["loss"] == "logistic" else 1.0
            rule = scale * b / max(kappa2 + (b - 1) * lam1, 1e-300)
            steps = np.array([rule]) if steps == "auto" else rule * STEP_GRID
        val = None
        if va is not None:
            scoring = "error_rate" if self._classifier else "mse"
            vop = FeatureOperator(fmap.transform, B.take_rows(X, va), D)
            val = Validation(vop, Y[va] - self._intercept, scoring)  # type: ignore[arg-type]
        passes = params["n_passes"] if n_iter is None else int(n_iter)
        return sgm_path(
            features,
            n,
            D,
            Ytr,
            params["loss"],
            steps,
            params["decay"],
            params["batch_size"],
            passes,
            bool(self.averaged),
            params["penalty"],
            rng,
            val,
            params["n_iter_no_change"] if n_iter is None else None,
            params["tol"],
            wt,
            params["averaging"],
        )

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
        """Run again on all the data with the chosen step size for the chosen passes."""
        best = path.best_params
        fixed = dict(params)
        fixed["steps"] = np.array([best["step_size"]])
        if "decay" in best:
            fixed["decay"] = float(best["decay"])
        fixed["feature_seed"] = self._feature_seed
        passes = int(best["n_passes"])
        again = self._solve(X, Y, w, np.arange(n), None, fixed, method, n_iter=passes)
        self._set_model(again.coef((0, passes - 1)), again)

    def _set_model(self, coef: np.ndarray, path: Path) -> None:
        coef = np.asarray(coef)
        inter = np.asarray(self._intercept, dtype=coef.dtype)
        if self.fit_intercept:  # the last weight is the intercept's
            inter = inter + coef[-1]
            coef = coef[:-1]
        self._store_coef(coef, inter)
        self.features_ = self._fmap
        best = path.best_params
        self.step_size_ = float(best["step_size"])
        self.n_passes_ = int(best["n_passes"])
        self.decay_ = float(best["decay"]) if "decay" in best else float(np.ravel(self.decay)[0])

    def _decision(self, X: Any) -> Any:
        check_is_fitted(self, "coef_")
        Xc = self._predict_input(X)
        op = FeatureOperator(self.features_.transform, Xc, len(self.coef_))
        F = op.matvec(self.coef_, native=True)
        return F + B.to_device(np.asarray(self.intercept_), B.array_device(F), B.dtype_of(F))


_SGM_DOC = """
    Parameters
    ----------
    kernel : str, Kernel or sequence of them, default="gaussian"
        A sequence, or ``sigma="auto"``, is a path over kernels (see NystromRegressor).
    loss : {"square", "hinge", "logistic"} or None
        None: "square" (regressor) or "hinge" (classifier, on the ±1 codes).
    features : {"random", "nystrom"}, default="random"
        Random Fourier features or Nyström features (``n_features`` uniform centers).
    n_features : int, default=1000
    step_size : float, sequence of floats, "auto" or "grid", default="auto"
        η of η_t = η t^(-θ). A sequence runs every step size on the same minibatches (a path
        over step sizes, the grid of thesis §6.4.2); "auto": b / (κ² + (b - 1) λ_1) with
        κ² = max ||φ(x)||² and λ_1 the top eigenvalue of Φ^T Φ / n (the stable minibatch
        step for the square loss; 4x for the logistic loss); "grid": that step times 1/8,
        1/4, 1/2, 1 and 2, side by side, the best chosen on the validation split.
    decay : float in [0, 1] or sequence of them, default=0.0
        θ; 0 gives constant steps. A sequence runs every θ (with every step size) on the
        same minibatches: a path over (θ, step size, passes), the thesis's Fig. 6.2b.
    batch_size : int, default=32
        b, points per iteration (drawn uniformly with replacement).
    n_passes : int, default=10
        Most passes over the data (1: SGM; more: SIGM), each ceil(n / b) iterations; early
        stopping on the validation loss ends them sooner.
    averaged : bool, default=False
        Use the averaged iterate instead of the last one.
    averaging : {"uniform", "step"}, default="uniform"
        The average: "step" is the thesis's eq. 6.4, sum_t η_t w_t / sum_t η_t; "uniform"
        the plain mean of the iterates (the two agree for θ = 0; "uniform" kept as the
        default, which weighs the late iterates more when the steps decay).
    penalty : float, default=0.0
        λ of the regularized variant (0: Algorithm 1, regularized by η and the passes).
    fit_intercept : bool, default=True
        Add a constant feature whose weight is the intercept (penalized by λ like the other
        weights); with the hinge and logistic losses on unbalanced classes the model needs
        it (ijcnn1, 20,000 points, 500 features: 12.2% error without, 7.6% with, 8.9% for
        LinearSVC).
    validation_fraction, cv, n_iter_no_change, tol, refit, memory_budget, random_state, device,
    verbose :
        As for the other estimators; the refit keeps the chosen step size and passes.

    Attributes
    ----------
    path_ : Path
        Over ("step_size", "n_passes"), or ("decay", "step_size", "n_passes").
    best_params_ : dict
    step_size_, n_passes_, decay_ :
        The chosen point.
    features_ : RandomFourierFeatures or NystromFeatures
    coef_ : ndarray of shape (D,) or (D, n_outputs)
    intercept_ : float or ndarray
"""


class SGMRegressor(_RegressorMixin, _SGMBase):
    __doc__ = "SGM / SIGM regression (square loss) on an explicit feature map." + _SGM_DOC


class SGMClassifier(_ClassifierMixin, _SGMBase):
    __doc__ = "SGM / SIGM classification (one-vs-all ±1 codes) on a feature map." + _SGM_DOC
    _classifier = True
    _default_loss = "hinge"
    _losses = LOSSES
