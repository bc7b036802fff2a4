"""EigenPro estimators: preconditioned kernel SGD (or on random features), a path over epochs."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._validation import check_choice, check_float, check_int
from ..features import RandomFourierFeatures, check_rff_kernel
from ..operators import KernelOperator
from ..path import Path
from ..solvers._common import Validation
from ..solvers.eigenpro import (
    STEP_RULES,
    default_damping,
    feature_eigensystem,
    feature_sgd_steps,
    kernel_eigensystem,
    kernel_sgd_steps,
    paper_step_rule,
    sgd_path,
    step_rule,
)
from ..solvers.random_features import indexed_features, rff_operator
from ._base import _KernelPathEstimator
from ._mixins import _ClassifierMixin, _RegressorMixin

__all__ = ["EigenProRegressor", "EigenProClassifier", "default_subsample_size"]

#: Fraction of the memory budget for one batch's kernel block (n x m) or cached features.
BATCH_MEMORY_FRACTION = 0.25


def default_subsample_size(n: int) -> int:
    """EigenPro 2's subsample: 2000 points below 100,000, else 4000 (the reference uses
    12,000, whose dense eigendecomposition takes minutes on two cores), at most n."""
    return int(min(n, 2000 if n < 100_000 else 4000))


class _EigenProBase(_KernelPathEstimator):
    _family = "eigenpro"

    def __init__(
        self,
        kernel: Any = "gaussian",
        n_epochs: int = 30,
        n_components: int = 160,
        subsample_size: int | None = None,
        damping: Any = "auto",
        batch_size: Any = "auto",
        step_size: Any = "auto",
        rule: str = "eigenpro2",
        n_features: int | None = None,
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
        self.n_epochs = n_epochs
        self.n_components = n_components
        self.subsample_size = subsample_size
        self.damping = damping
        self.batch_size = batch_size
        self.step_size = step_size
        self.rule = rule
        self.n_features = n_features
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.refit = refit
        self.memory_budget = memory_budget
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    # ------------------------------------------------------------------ checks
    def _check_params(self, n: int) -> dict[str, Any]:
        p: dict[str, Any] = {"penalty": 0.0, **self._common_params()}
        p["n_epochs"] = check_int(self.n_epochs, "n_epochs", 1)
        p["q"] = check_int(self.n_components, "n_components", 0)
        p["s"] = check_int(self.subsample_size, "subsample_size", 1, allow_none=True)
        p["rule"] = check_choice(self.rule, "rule", STEP_RULES)
        if isinstance(self.damping, str):
            check_choice(self.damping, "damping", ("auto",))
            p["damping"] = None  # the rule's: 0.95, or the seed paper's 1 (kernel) / 1/4 (RF)
        else:
            p["damping"] = check_float(self.damping, "damping", 0.0, 1.0, low_open=True)
        for name in ("batch_size", "step_size"):
            v = getattr(self, name)
            if isinstance(v, str):
                if v != "auto":
                    raise ValueError(f"{name} must be a positive number or 'auto', got {v!r}")
            elif name == "batch_size":
                check_int(v, name, 1)
            else:
                check_float(v, name, 0.0, np.inf, low_open=True, high_open=True)
        p["n_features"] = check_int(self.n_features, "n_features", 1, allow_none=True)
        return p

    @staticmethod
    def _damping(params: dict[str, Any], features: bool) -> float:
        """τ: the given ``damping``, or the rule's default for this mode."""
        if params["damping"] is not None:
            return float(params["damping"])
        return default_damping(params["rule"], features)

    def _method(self) -> str:
        return "eigenpro"

    def _has_path(self, method: str, pen: Any) -> bool:
        return True

    # ------------------------------------------------------------------ solve
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
        budget = params["budget"]
        Xtr = B.take_rows(X, tr)
        n = len(Xtr)
        Ytr, wt = self._center_targets(Y, w, tr, unit_mean_weights=True)
        k = Y.shape[1]
        s = min(n, params["s"] if params["s"] is not None else default_subsample_size(n))
        q = min(params["q"], s - 1)
        sub = rng.choice(n, size=s, replace=False)
        scoring = "error_rate" if self._classifier else "mse"
        D = params["n_features"]
        self._fmap = None
        if D is None:
            # the kernel model's centers are its training points
            Xtr = self._in_memory(Xtr, budget, "(kernel mode) keeps every training point")
            Xs = B.take_rows(Xtr, sub)
            K_s = np.asarray(KernelOperator(Xs, Xs, self.kernel_, budget).center_gram())
            es = kernel_eigensystem(K_s, q, self._damping(params, features=False))
            predict_batch, apply_step = kernel_sgd_steps(Xtr, self.kernel_, sub, es, budget)
            coef = np.zeros((n, k))
            max_batch = max(1, int(BATCH_MEMORY_FRACTION * budget // (8 * n)))
            val = None
            if va is not None:
                vop = KernelOperator(B.take_rows(X, va), Xtr, self.kernel_, budget, cache="auto")
                val = Validation(vop, Y[va] - self._intercept, scoring)
            self._last_centers = Xtr
        else:
            check_rff_kernel(self.kernel_)
            fmap = RandomFourierFeatures(
                self.kernel_,
                D,
                random_state=self._draw_feature_seed(params),
                memory_budget=budget,
            ).fit(B.to_numpy(Xtr[:1]))
            self._fmap = fmap
            features = indexed_features(
                lambda A: fmap.transform_first(A, D), Xtr, D, BATCH_MEMORY_FRACTION * budget
            )

            es = feature_eigensystem(features(sub), q, self._damping(params, features=True))
            predict_batch, apply_step = feature_sgd_steps(features, es)
            coef = np.zeros((D, k))
            max_batch = max(1, int(BATCH_MEMORY_FRACTION * budget // (8 * D)))
            val = None
            if va is not None:
                val = Validation(
                    rff_operator(fmap, B.take_rows(X, va), D),  # type: ignore[arg-type]
                    Y[va] - self._intercept,
                    scoring,
                )
        batch = None if self.batch_size == "auto" else int(self.batch_size)
        if params["rule"] == "paper":
            m, eta = paper_step_rule(es, n, batch)
        else:  # the rule's step for the rule's or the given batch size
            m, eta = step_rule(es, n, max_batch, batch)
        if self.step_size != "auto":
            eta = float(self.step_size)
        epochs = params["n_epochs"] if n_iter is None else int(n_iter)
        info = {
            "method": "eigenpro" if q else "sgd",
            "n_components": es.q,
            "subsample_size": s,
            "top_eigenvalue": float(es.values[0]) if es.q else es.tail,
            "tail_eigenvalue": es.tail,
            "beta": es.beta,
            "damping": es.damping,
            "rule": params["rule"],
        }
        return sgd_path(
            n,
            Ytr,
            predict_batch,
            apply_step,
            coef,
            epochs,
            m,
            eta,
            rng,
            val,
            params["n_iter_no_change"] if n_iter is None else None,
            params["tol"],
            info,
            wt,
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
        """Run again on all the data for the chosen number of epochs (their regularization)."""
        epochs = int(path.best_params["n_epochs"])
        again = self._solve(X, Y, w, np.arange(n), None, dict(params), method, n_iter=epochs)
        self._set_model(again.coef((epochs - 1,)), again)

    def _set_model(self, coef: np.ndarray, path: Path) -> None:
        coef = np.asarray(coef)
        self._store_coef(coef, self._intercept)
        if self._fmap is None:
            self.centers_ = self._last_centers
            self.features_ = None
        else:
            self.centers_ = None  # type: ignore[assignment]
            self.features_ = self._fmap
        self.n_epochs_ = int(path.best_params["n_epochs"])

    def _decision(self, X: Any) -> Any:
        check_is_fitted(self, "coef_")
        if self.features_ is None:
            return super()._decision(X)
        Xc = self._predict_input(X)
        dtype = np.result_type(B.dtype_of(Xc), B.dtype_of(self.coef_))
        dev = B.array_device(Xc)
        op = rff_operator(self.features_, B.to_device(Xc, dev, dtype), len(self.coef_))
        F = op.matvec(self.coef_, native=True)
        return F + B.to_device(np.asarray(self.intercept_, dtype=dtype), dev)


_EP_DOC = """
    Parameters
    ----------
    kernel : str, Kernel or sequence of them, default="gaussian"
        A sequence, or ``sigma="auto"``, is a path over kernels (see NystromRegressor).
    n_epochs : int, default=30
        Most epochs; the path (validation error after every epoch) stops earlier with
        ``n_iter_no_change``.
    n_components : int, default=160
        q, the top eigendirections the preconditioner flattens (0: plain kernel SGD).
    subsample_size : int or None, default=None
        s, the subsample of the eigensystem; None: 2000 below 100,000 points, else 4000.
    damping : float in (0, 1] or "auto", default="auto"
        τ: the top directions are flattened to τ λ_{q+1}. "auto": 0.95 with
        ``rule="eigenpro2"``; the seed paper's 1 for kernels and 1/4 for random features
        with ``rule="paper"``.
    batch_size : int or "auto", default="auto"
        "auto": min(β / λ_{q+1} + 1, memory limit, n) (EigenPro 2); 256 (at most n) with
        ``rule="paper"``.
    step_size : float or "auto", default="auto"
        "auto": m / (β + (m - 1) λ_{q+1}) for the batch size m (EigenPro 2); with
        ``rule="paper"``, 1.5 / λ_{q+1} (``solvers.eigenpro.paper_step_rule``).
    rule : {"eigenpro2", "paper"}, default="eigenpro2"
        Which paper's step, batch size and damping "auto" means: EigenPro 2's (measured
        better, the default) or the seed paper's (Ma & Belkin 2017, as its released code
        sets them; ``docs/guide/eigenpro.md``).
    n_features : int or None, default=None
        None: kernel EigenPro (coefficients on the training points). A number D: EigenPro
        on D random Fourier features (primal).
    validation_fraction, cv, n_iter_no_change, tol, refit, memory_budget, random_state, device,
    verbose :
        As for the other estimators; the refit keeps the chosen number of epochs.

    Attributes
    ----------
    path_ : Path
        Over "n_epochs"; ``path_.info`` has the batch size, step size and eigenvalues.
    best_params_ : dict
    n_epochs_ : int
    coef_ : ndarray
        On ``centers_`` (kernel EigenPro: the training points) or on ``features_``.
    centers_ : ndarray or None
    features_ : RandomFourierFeatures or None
    intercept_ : float or ndarray
    kernel_ : Kernel
"""


class EigenProRegressor(_RegressorMixin, _EigenProBase):
    __doc__ = "EigenPro: kernel SGD preconditioned by the top eigensystem." + _EP_DOC


class EigenProClassifier(_ClassifierMixin, _EigenProBase):
    __doc__ = "EigenPro classifier (one-vs-all ±1 coding, square loss)." + _EP_DOC
    _classifier = True
