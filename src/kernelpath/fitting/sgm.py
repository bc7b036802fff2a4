"""The SGM / SIGM family: stochastic gradient methods on random or Nyström features, a path
over (step size, passes), or (θ, step size, passes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from .._validation import check_choice, check_float, check_int
from ..features import NystromFeatures, RandomFourierFeatures, check_rff_kernel
from ..inputs import rows_in_memory
from ..kernels import Kernel
from ..solvers.random_features import indexed_features
from ..solvers.sgm import AVERAGING, SGMRun, sgm_memory, sgm_path
from ..workspace import Workspace
from .family import Family, FittedModel, validation
from .memory import fit_rows, operator_budget
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest

__all__ = ["SGMFamily", "CACHE_FRACTION", "STEP_GRID"]

#: Cache the training features when they take at most this fraction of the memory budget.
CACHE_FRACTION = 0.4
#: ``step_size="grid"``: these multiples of the rule's step, run side by side.
STEP_GRID = np.array([1 / 8, 1 / 4, 1 / 2, 1.0, 2.0])


class WithBias:
    """A feature map followed by a constant feature 1 (the intercept's weight)."""

    def __init__(self, fmap: Any) -> None:
        self.fmap = fmap

    def transform(self, X: Any) -> Any:
        F = self.fmap.transform(X)
        out = B.empty((F.shape[0], F.shape[1] + 1), F)
        out[:, :-1] = F
        out[:, -1] = 1.0
        return out


@dataclass(frozen=True)
class SGMOptions:
    """The checked SGM parameters; ``steps`` is "auto", "grid" or the step sizes."""

    loss: str
    features: str
    n_features: int
    decay: Any
    averaging: str
    batch_size: int
    n_passes: int
    fit_intercept: bool
    averaged: bool
    steps: Any


class SGMFamily(Family):
    """SGM (one pass) and SIGM (several) with the square, hinge or logistic loss."""

    screens_with_own_solver = True

    def __init__(self, default_loss: str = "square", losses: tuple[str, ...] = ("square",)):
        self.default_loss = default_loss
        self.losses = losses

    def method(self, params: Mapping[str, Any]) -> str:
        return "sgm"

    def check_penalty(self, params: Mapping[str, Any]) -> Any:
        return check_float(params["penalty"], "penalty", 0.0, np.inf, high_open=True)

    def options(self, params: Mapping[str, Any]) -> SGMOptions:
        loss = self.default_loss if params["loss"] is None else params["loss"]
        dec = params["decay"]
        if np.ndim(dec) == 0:
            decay: Any = check_float(dec, "decay", 0.0, 1.0)
        else:
            vals = list(np.asarray(dec, dtype=object).ravel())
            if np.ndim(dec) != 1 or not vals:
                raise ValueError(
                    f"decay must be a number or a 1-D sequence of numbers, got {dec!r}"
                )
            decay = np.array([check_float(v, "decay", 0.0, 1.0) for v in vals])
        opts = {
            "loss": check_choice(loss, "loss", self.losses),
            "features": check_choice(params["features"], "features", ("random", "nystrom")),
            "n_features": check_int(params["n_features"], "n_features", 1),
            "decay": decay,
            "averaging": check_choice(params["averaging"], "averaging", AVERAGING),
            "batch_size": check_int(params["batch_size"], "batch_size", 1),
            "n_passes": check_int(params["n_passes"], "n_passes", 1),
        }
        for name in ("fit_intercept", "averaged"):
            if not isinstance(params[name], (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {params[name]!r}")
        return SGMOptions(
            **opts,
            fit_intercept=bool(params["fit_intercept"]),
            averaged=bool(params["averaged"]),
            steps=_check_steps(params["step_size"]),
        )

    def has_path(self, settings: FitSettings, method: str) -> bool:
        return True

    def fourier_features(self, params: Mapping[str, Any]) -> bool:
        return bool(params["features"] == "random")

    def feature_map(
        self,
        Xtr: Any,
        kernel: Kernel,
        opts: SGMOptions,
        seed: int,
        budget: int,
        center: np.ndarray | None,
    ) -> RandomFourierFeatures | NystromFeatures:
        D = opts.n_features
        if opts.features == "random":
            check_rff_kernel(kernel, " (or use features='nystrom')")
            return RandomFourierFeatures(
                kernel, n_features=D, random_state=seed, memory_budget=budget, center=center
            ).fit(rows_in_memory(Xtr, [0]))
        return NystromFeatures(kernel, n_components=D, random_state=seed, memory_budget=budget).fit(
            Xtr
        )

    def solve(self, request: SolveRequest) -> CandidateFit:
        problem, kernel, rows, val_rows, settings = request
        opts: SGMOptions = settings.options
        Xtr, Xva, copies = fit_rows(problem, rows, val_rows)
        n = Xtr.shape[0]
        Ytr, wt, intercept = problem.targets(rows, unit_mean_weights=True)
        seed = settings.seed()
        settings = replace(settings, feature_seed=seed)  # the refit reuses the map
        n_va = 0 if Xva is None else Xva.shape[0]
        n_steps = len(STEP_GRID) if isinstance(opts.steps, str) else np.size(opts.steps)
        D = opts.n_features + opts.fit_intercept
        d = int(Xtr.shape[1])
        fixed = sgm_memory(D, d, opts.features == "nystrom", int(n_steps), problem.n_outputs, n_va)
        what = f"{problem.estimator} with n_features={opts.n_features}"
        left = operator_budget(problem, copies, n + n_va, fixed, what, 0, "features")
        fmap = self.feature_map(Xtr, kernel, opts, seed, problem.budget, problem.center)
        full = WithBias(fmap) if opts.fit_intercept else fmap
        probe = full.transform(Xtr[: min(n, 1000)])
        D = probe.shape[1]
        # the feature cache in what the fit's own memory leaves
        features = indexed_features(full.transform, Xtr, D, CACHE_FRACTION * left)
        steps = opts.steps
        if isinstance(steps, str):
            # the minibatch rule b / (κ² + (b - 1) λ_1) (κ² = max ||φ(x)||², λ_1 the top
            # eigenvalue of Φ^T Φ / n, both on up to 1000 training points): the largest step
            # for which a minibatch of b points is stable for the square loss; 4x for the
            # logistic loss (its curvature is at most 1/4)
            P = B.to_numpy(probe, FACTOR_DTYPE)
            kappa2 = float(np.max(np.einsum("ij,ij->i", P, P)))
            lam1 = float(np.linalg.norm(P, 2) ** 2 / len(P))
            b = opts.batch_size
            scale = 4.0 if opts.loss == "logistic" else 1.0
            rule = scale * b / max(kappa2 + (b - 1) * lam1, 1e-300)
            steps = np.array([rule]) if steps == "auto" else rule * STEP_GRID
        vop = None if Xva is None else problem.workspace.feature_operator(full.transform, Xva, D)
        selecting = settings.n_iter is None
        run = SGMRun(
            loss=opts.loss,
            step_sizes=steps,
            decay=opts.decay,
            batch_size=opts.batch_size,
            n_passes=opts.n_passes if settings.n_iter is None else settings.n_iter,
            averaged=opts.averaged,
            penalty=settings.penalty,
            averaging=opts.averaging,
            n_iter_no_change=settings.n_iter_no_change if selecting else None,
            tol=settings.tol,
        )
        path = sgm_path(
            features,
            n,
            D,
            Ytr,
            run,
            settings.rng,
            validation(problem, vop, val_rows, intercept),
            wt,
        )
        return CandidateFit(kernel, path, intercept, settings, n, features=fmap)

    def refit(self, problem: FitProblem, cand: CandidateFit) -> tuple[CandidateFit, np.ndarray]:
        """Run again on all the data with the chosen step size (and θ) for the chosen
        passes, with the same feature map."""
        best = cand.path.best_params
        opts: SGMOptions = cand.settings.options
        opts = replace(opts, steps=np.array([best["step_size"]]))
        if "decay" in best:
            opts = replace(opts, decay=float(best["decay"]))
        passes = int(best["n_passes"])
        fixed = replace(cand.settings, options=opts, n_iter=passes)
        return self.refit_with(problem, cand, fixed, (0, passes - 1))

    def model(self, cand: CandidateFit, coef: np.ndarray) -> dict[str, Any]:
        opts: SGMOptions = cand.settings.options
        coef = np.asarray(coef)
        inter = np.asarray(cand.intercept, dtype=coef.dtype)
        if opts.fit_intercept:  # the last weight is the intercept's
            inter = inter + coef[-1]
            coef = coef[:-1]
        best = cand.path.best_params
        return {
            "coef": coef,
            "intercept": inter,
            "features_": cand.features,
            "step_size_": float(best["step_size"]),
            "n_passes_": int(best["n_passes"]),
            "decay_": float(best["decay"]) if "decay" in best else float(np.ravel(opts.decay)[0]),
        }

    def native_probabilities(self, settings: FitSettings) -> bool:
        """SGM's logistic loss is one-vs-all on stochastic iterates: calibrated too."""
        return False

    def decision(self, model: FittedModel, X: Any, workspace: Workspace) -> Any:
        op = workspace.feature_operator(model.features.transform, X, len(model.coef))
        F = op.matvec(model.coef, native=True)
        return F + B.to_device(np.asarray(model.intercept), B.array_device(F), B.dtype_of(F))


def _check_steps(st: Any) -> Any:
    """``step_size``: "auto", "grid", or a positive number or 1-D sequence of them."""
    if isinstance(st, str):
        if st not in ("auto", "grid"):
            raise ValueError(
                f"step_size must be a number, a sequence, 'auto' or 'grid', got {st!r}"
            )
        return st
    arr = np.atleast_1d(np.asarray(st))
    if arr.dtype.kind not in "iuf" or arr.ndim != 1 or arr.size == 0:
        raise TypeError(f"step_size must be a number, a sequence of numbers or 'auto', got {st!r}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"step_size values must be positive and finite, got {st!r}")
    return arr
