"""The random-features family (RF-KRLS): primal ridge on random Fourier features, with the
λ path at one D and the path over the number of features D."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import _backend as B
from .._validation import check_size
from ..features import RandomFourierFeatures, check_rff_kernel
from ..inputs import as_rows, rows_in_memory
from ..solvers._loo import SmootherCV
from ..solvers.newton import newton_memory, newton_path
from ..solvers.random_features import (
    feature_moments,
    rf_feature_path,
    rf_memory,
    rf_penalty_path,
    rff_operator,
)
from ..workspace import Workspace
from .family import Family, FittedModel, check_loss, newton_intercept, validation
from .kernel_models import AUTO_GRID_SIZE, newton_options
from .memory import fit_rows, main_fits, operator_budget, refuse_largest, row_copy_bytes
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest

__all__ = ["RandomFeaturesFamily", "AUTO_MAX_FEATURES", "rff_decision"]

#: D of ``n_features="auto"``: the path goes up to this many features (and at most ~ n).
AUTO_MAX_FEATURES = 2000


@dataclass(frozen=True)
class RandomFeaturesOptions:
    """``orthogonal`` as given (checked at the fit); ``memory_budget`` as given (the
    model's feature map keeps it)."""

    orthogonal: Any
    memory_budget: Any
    loss: str = "square"


def feature_grid(value: Any, n: int) -> tuple[int, np.ndarray | None]:
    """(D_max, grid of D or None) of ``n_features``."""
    size = check_size(value, "n_features")
    if isinstance(size, str):  # "auto"
        Dmax = int(min(AUTO_MAX_FEATURES, max(10, n)))
        return Dmax, np.unique(np.geomspace(1, Dmax, AUTO_GRID_SIZE).round().astype(np.int64))
    if isinstance(size, np.ndarray):
        return int(size[-1]), size
    return size, None


def rff_decision(model: FittedModel, X: Any, n_features: int, workspace: Workspace) -> Any:
    """f(X) = φ(X) coef + intercept with the model's first ``n_features`` random features,
    in the higher of the model's and X's precision."""
    dtype = np.result_type(B.dtype_of(X), B.dtype_of(model.coef))
    dev = B.array_device(X)
    op = rff_operator(model.features, as_rows(X).to(dev, dtype), n_features, workspace)
    F = op.matvec(model.coef, native=True)
    return F + B.to_device(np.asarray(model.intercept, dtype=dtype), dev)


class RandomFeaturesFamily(Family):
    """RF-KRLS (thesis ch. 5): the λ path from one eigendecomposition of Φ^T W Φ, or the
    (D, λ) path from one Cholesky factor per penalty."""

    size_param = "n_features"
    takes_dask = True
    # the width screen fits random features, D of them as the model has: Nyström KRLS's
    # closed form preferred widths 3x narrower than D = 1000 features can fit (ijcnn1:
    # 6.89% test error against 4.33%), and with D fixed the best width does not shift with n
    screens_with_own_solver = True
    shifts_width = False

    def fourier_features(self, params: Mapping[str, Any]) -> bool:
        return True

    def method(self, params: Mapping[str, Any]) -> str:
        return "eigh"

    def closed_form(self, method: str) -> bool:
        return True

    def options(self, params: Mapping[str, Any]) -> RandomFeaturesOptions:
        return RandomFeaturesOptions(
            params["orthogonal"], params["memory_budget"], check_loss(params)
        )

    def smoother_modes(self, settings: FitSettings, method: str) -> tuple[str, ...]:
        if settings.options.loss != "square":
            return ()
        return () if self.size_path(settings) else ("loo", "gcv")

    def _operator_budget(
        self, problem: FitProblem, copies: int, n: int, n_va: int, settings: FitSettings
    ) -> int:
        """``memory.operator_budget`` of a fit on ``n`` rows (``n_va`` validation rows):
        the solver's matrices for the largest D and every penalty of the path."""
        Dmax, grid = feature_grid(settings.size, n)
        pen = settings.penalty
        P = 20 if isinstance(pen, str) else int(np.size(pen))
        P *= 1 if grid is None else len(grid)
        solver = rf_memory(Dmax, problem.n_outputs, P, n, settings.cv_mode == "loo")
        if settings.options.loss != "square":
            solver += newton_memory(Dmax, problem.n_outputs, P, n, n_va)
        what = f"{problem.estimator} with n_features={Dmax}"
        return operator_budget(problem, copies, n + n_va, solver, what, 0, "features")

    def check_memory(self, problem: FitProblem, plan: Any, settings: FitSettings) -> None:
        refuse_largest(
            functools.partial(
                self._operator_budget, problem, row_copy_bytes(problem, n, n_va), n, n_va, settings
            )
            for n, n_va in main_fits(problem, plan)
        )

    def solve(self, request: SolveRequest) -> CandidateFit:
        problem, kernel, rows, val_rows, settings = request
        check_rff_kernel(kernel)
        orthogonal = settings.options.orthogonal
        if not isinstance(orthogonal, (bool, np.bool_)):
            raise TypeError(f"orthogonal must be a bool, got {orthogonal!r}")
        Ytr, wt, intercept = problem.targets(rows)
        Dmax, grid = feature_grid(settings.size, len(rows))
        Xtr, vX, copies = fit_rows(problem, rows, val_rows)
        n_va = 0 if vX is None else vX.shape[0]
        pen, loss = settings.penalty, settings.options.loss
        if loss != "square":
            if grid is not None:
                raise ValueError(
                    f"loss={loss!r}: n_features as a path ('auto' or a sequence) is the square "
                    "loss's closed form; give one number of features"
                )
            if B.is_dask(Xtr):
                raise ValueError(
                    f"loss={loss!r} with random features reads the rows in memory or from "
                    "disk, not from dask: give loss='square', or NystromClassifier"
                )
        self._operator_budget(problem, copies, len(rows), n_va, settings)
        settings = replace(settings, feature_seed=settings.seed())  # the refit reuses the map
        fmap = RandomFourierFeatures(
            kernel,
            n_features=Dmax,
            orthogonal=bool(orthogonal),
            random_state=settings.feature_seed,
            memory_budget=problem.budget,
            center=problem.center,
        ).fit(rows_in_memory(Xtr, [0]))
        if loss != "square":
            vop = None if vX is None else rff_operator(fmap, vX, Dmax, problem.workspace)
            val = validation(problem, vop, val_rows, intercept)
            path = newton_path(
                rff_operator(fmap, Xtr, Dmax, problem.workspace),
                Ytr,
                loss,
                None if isinstance(pen, str) else np.atleast_1d(pen),
                wt,
                val,
                None,
                newton_options(settings, "direct", B.dtype_of(problem.X)),
            )
            return CandidateFit(kernel, path, intercept, settings, len(rows), features=fmap)
        cv = None
        if settings.cv_mode is not None:
            clf = problem.classifier
            cv = SmootherCV(settings.cv_mode, not clf, "error_rate" if clf else "mse")
        rhs = np.hstack([Ytr, np.ones((len(Ytr), 1))]) if cv is not None and cv.center else Ytr
        G, b = feature_moments(fmap, Xtr, Dmax, rhs, problem.workspace, wt)
        b1 = None
        if b.shape[1] > Ytr.shape[1]:
            b, b1 = b[:, : Ytr.shape[1]], b[:, Ytr.shape[1] :]
        lam = None if isinstance(pen, str) else np.atleast_1d(pen)
        dtype = B.dtype_of(problem.X)
        if grid is not None:
            vop = (
                None
                if vX is None
                else rff_operator(fmap, vX, Dmax, problem.workspace, normalize=False)
            )
            val = validation(problem, vop, val_rows, intercept)
            path = rf_feature_path(G, b, Ytr, lam, grid, wt, val, dtype)
        else:
            vop = None if vX is None else rff_operator(fmap, vX, Dmax, problem.workspace)
            val = validation(problem, vop, val_rows, intercept)
            fop = rff_operator(fmap, Xtr, Dmax, problem.workspace) if cv is not None else None
            path = rf_penalty_path(G, b, Ytr, lam, wt, val, dtype, cv, fop, b1)
        return CandidateFit(kernel, path, intercept, settings, len(rows), features=fmap)

    def refit(self, problem: FitProblem, cand: CandidateFit) -> tuple[CandidateFit, np.ndarray]:
        """Refit on all the data at the chosen (D, λ), with the same feature map."""
        best = cand.path.best_params
        if cand.settings.options.loss != "square":
            return self.newton_refit(problem, cand)
        fixed = replace(
            cand.settings,
            penalty=float(best["penalty"]),
            # one D: the map's (a k-fold path, averaged over the folds, keeps no coefficients)
            size=int(best.get("n_features", cand.features.frequencies_.shape[0])),
        )
        return self.refit_with(problem, cand, fixed)

    def model(self, cand: CandidateFit, coef: np.ndarray) -> dict[str, Any]:
        coef, intercept = newton_intercept(cand, coef)
        D = coef.shape[0]
        opts: RandomFeaturesOptions = cand.settings.options
        features = RandomFourierFeatures(
            cand.kernel,
            n_features=D,
            orthogonal=bool(opts.orthogonal),
            random_state=cand.settings.feature_seed,
            memory_budget=opts.memory_budget,
            center=cand.features.center,
        ).fit(cand.features.frequencies_[:1, :] * 0)
        return {"coef": coef, "intercept": intercept, "features_": features, "n_features_": D}

    def decision(self, model: FittedModel, X: Any, workspace: Workspace) -> Any:
        assert model.n_features is not None
        return rff_decision(model, X, model.n_features, workspace)
