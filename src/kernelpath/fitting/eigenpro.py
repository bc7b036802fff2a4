"""The EigenPro family: kernel SGD preconditioned by the top eigensystem of a subsample
(or the same on random features), a path over epochs."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._validation import check_choice, check_float, check_int
from ..centers import CenterSelection
from ..features import RandomFourierFeatures, check_rff_kernel
from ..inputs import rows_in_memory, take_rows
from ..operators import Operator
from ..solvers.eigenpro import (
    PAPER_SUBSAMPLE_SIZE,
    STEP_RULES,
    default_damping,
    eigenpro_memory,
    feature_eigensystem,
    feature_sgd_steps,
    kernel_eigensystem,
    kernel_sgd_steps,
    paper_step_rule,
    reference_step_rule,
    sgd_path,
    step_rule,
    weighted_step,
)
from ..solvers.random_features import indexed_features, rff_operator
from ..workspace import Workspace
from .family import Family, FittedModel, check_loss, in_memory, validation
from .kernel_models import center_decision
from .memory import (
    MIN_OPERATOR_BYTES,
    fit_rows,
    main_fits,
    operator_budget,
    refuse_largest,
    row_copy_bytes,
)
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest
from .random_features import rff_decision

__all__ = ["EigenProFamily", "default_subsample_size", "BATCH_MEMORY_FRACTION"]

#: Fraction of the memory budget for one batch's kernel block (n x m) or cached features.
BATCH_MEMORY_FRACTION = 0.25


def default_subsample_size(n: int) -> int:
    """EigenPro 2's subsample: 2000 points below 100,000, else 4000 (the reference uses
    12,000, whose dense eigendecomposition takes minutes on two cores), at most n."""
    return int(min(n, 2000 if n < 100_000 else 4000))


@dataclass(frozen=True)
class EigenProOptions:
    """The checked EigenPro parameters (``damping`` None: the rule's; ``batch_size`` and
    ``step_size`` None: "auto")."""

    n_epochs: int
    q: int
    s: int | None
    rule: str
    damping: float | None
    batch_size: int | None
    step_size: float | None
    n_features: int | None


class EigenProFamily(Family):
    """EigenPro 2 (or the seed paper's rule) in kernel mode or on D random features."""

    expands_centers = True  # on centers (features_: the random-features variant)

    screens_with_own_solver = True

    def method(self, params: Mapping[str, Any]) -> str:
        return "eigenpro"

    def check_penalty(self, params: Mapping[str, Any]) -> Any:
        return 0.0

    def options(self, params: Mapping[str, Any]) -> EigenProOptions:
        check_loss(params, ("square",))
        n_epochs = check_int(params["n_epochs"], "n_epochs", 1)
        q = check_int(params["n_components"], "n_components", 0)
        s = check_int(params["subsample_size"], "subsample_size", 1, allow_none=True)
        rule = check_choice(params["rule"], "rule", STEP_RULES)
        damping = params["damping"]
        if isinstance(damping, str):
            check_choice(damping, "damping", ("auto",))
            damping = None  # the rule's: 0.95, or the seed paper's 1 (kernel) / 1/4 (RF)
        else:
            damping = check_float(damping, "damping", 0.0, 1.0, low_open=True)
        for name in ("batch_size", "step_size"):
            v = params[name]
            if isinstance(v, str):
                if v != "auto":
                    raise ValueError(f"{name} must be a positive number or 'auto', got {v!r}")
            elif name == "batch_size":
                check_int(v, name, 1)
            else:
                check_float(v, name, 0.0, np.inf, low_open=True, high_open=True)
        batch, step = params["batch_size"], params["step_size"]
        return EigenProOptions(
            n_epochs,
            q,
            s,
            rule,
            damping,
            None if batch == "auto" else int(batch),
            None if step == "auto" else float(step),
            check_int(params["n_features"], "n_features", 1, allow_none=True),
        )

    def has_path(self, settings: FitSettings, method: str) -> bool:
        return True

    def fourier_features(self, params: Mapping[str, Any]) -> bool:
        return params["n_features"] is not None

    def size_path(self, settings: FitSettings) -> bool:
        return False

    @staticmethod
    def _subsample(opts: EigenProOptions, n: int) -> tuple[int, int]:
        """(s, q): the subsample of the eigensystem and the directions flattened, for a fit
        on ``n`` rows."""
        if opts.s is not None:
            s = min(n, opts.s)
        elif opts.rule in ("paper", "reference"):  # the seed paper's M = 4800
            s = min(n, PAPER_SUBSAMPLE_SIZE)
        else:
            s = min(n, default_subsample_size(n))
        return s, min(opts.q, s - 1)

    def _operator_budget(
        self, problem: FitProblem, copies: int, n: int, n_va: int, opts: EigenProOptions
    ) -> int:
        """``memory.operator_budget`` of a fit on ``n`` rows (``n_va`` validation rows):
        the batches get ``BATCH_MEMORY_FRACTION`` of what is left, so the least left is
        the operators' floor over that fraction."""
        s, q = self._subsample(opts, n)
        fixed = eigenpro_memory(n, s, q, problem.n_outputs, n_va, opts.n_features)
        what = f"{problem.estimator} with a subsample of {s} points"
        floor = int(np.ceil(MIN_OPERATOR_BYTES / BATCH_MEMORY_FRACTION))
        return operator_budget(
            problem, copies, n + n_va, fixed, what, floor, fewer="subsample points"
        )

    def check_memory(self, problem: FitProblem, plan: Any, settings: FitSettings) -> None:
        refuse_largest(
            functools.partial(
                self._operator_budget,
                problem,
                row_copy_bytes(problem, n, n_va),
                n,
                n_va,
                settings.options,
            )
            for n, n_va in main_fits(problem, plan)
        )

    def solve(self, request: SolveRequest) -> CandidateFit:
        problem, kernel, rows, val_rows, settings = request
        opts: EigenProOptions = settings.options
        rng = settings.rng
        Xtr, Xva, copies = fit_rows(problem, rows, val_rows)
        n, n_va = Xtr.shape[0], 0 if Xva is None else Xva.shape[0]
        Ytr, wt, intercept = problem.targets(rows, unit_mean_weights=True)
        k = problem.n_outputs
        s, q = self._subsample(opts, n)
        sub = rng.choice(n, size=s, replace=False)
        D = opts.n_features
        # the budget left for the batches' kernel blocks (or feature cache) and the
        # validation operator, once the fit's own memory is set aside
        budget = self._operator_budget(problem, copies, n, n_va, opts)
        centers = fmap = None
        if D is None:
            # the kernel model's centers are its training points
            Xtr = in_memory(
                Xtr, budget, problem.estimator, "(kernel mode) keeps every training point"
            )
            Xs = take_rows(Xtr, sub)
            ws = problem.workspace.share(budget)
            K_s = np.asarray(ws.operator(Xs, Xs, kernel).center_gram())
            es = kernel_eigensystem(K_s, q, self._damping(opts, features=False))
            batch_budget = int(BATCH_MEMORY_FRACTION * budget)
            predict_batch, apply_step = kernel_sgd_steps(
                Xtr, kernel, sub, es, ws.share(batch_budget)
            )
            coef = np.zeros((n, k))
            max_batch = max(1, int(batch_budget // (8 * n)))
            vop: Operator | None = None
            if Xva is not None:
                vop = ws.share(budget - batch_budget).operator(Xva, Xtr, kernel)
            # the kernel model's centers are its training points
            centers = CenterSelection(Xtr, np.arange(n), "all")
        else:
            check_rff_kernel(kernel)
            settings = replace(settings, feature_seed=settings.seed())  # kept by the refit
            fmap = RandomFourierFeatures(
                kernel,
                n_features=D,
                random_state=settings.feature_seed,
                memory_budget=budget,
                center=problem.center,
            ).fit(rows_in_memory(Xtr, [0]))
            features = indexed_features(_first(fmap, D), Xtr, D, BATCH_MEMORY_FRACTION * budget)
            es = feature_eigensystem(features(sub), q, self._damping(opts, features=True))
            predict_batch, apply_step = feature_sgd_steps(features, es)
            coef = np.zeros((D, k))
            max_batch = max(1, int(BATCH_MEMORY_FRACTION * budget // (8 * D)))
            vop = None if Xva is None else rff_operator(fmap, Xva, D, problem.workspace)
        if opts.rule == "paper":
            m, eta = paper_step_rule(es, n, opts.batch_size)
        elif opts.rule == "reference":
            m, eta = reference_step_rule(es, n, opts.batch_size)
        else:  # the rule's step for the rule's or the given batch size
            m, eta = step_rule(es, n, max_batch, opts.batch_size)
        if wt is not None:  # the rules assume unit weights
            eta = weighted_step(es, m, eta, float(wt.max()))
        if opts.step_size is not None:
            eta = opts.step_size
        selecting = settings.n_iter is None
        info = {
            "method": "eigenpro" if q else "sgd",
            "n_components": es.q,
            "subsample_size": s,
            "top_eigenvalue": float(es.values[0]) if es.q else es.tail,
            "tail_eigenvalue": es.tail,
            "beta": es.beta,
            "damping": es.damping,
            "rule": opts.rule,
        }
        path = sgd_path(
            n,
            Ytr,
            predict_batch,
            apply_step,
            coef,
            n_epochs=opts.n_epochs if settings.n_iter is None else settings.n_iter,
            batch_size=m,
            step=eta,
            rng=rng,
            validation=validation(problem, vop, val_rows, intercept),
            n_iter_no_change=settings.n_iter_no_change if selecting else None,
            tol=settings.tol,
            info=info,
            weights=wt,
        )
        return CandidateFit(kernel, path, intercept, settings, n, centers=centers, features=fmap)

    @staticmethod
    def _damping(opts: EigenProOptions, features: bool) -> float:
        """τ: the given ``damping``, or the rule's default for this mode."""
        if opts.damping is not None:
            return float(opts.damping)
        return default_damping(opts.rule, features)

    def refit(self, problem: FitProblem, cand: CandidateFit) -> tuple[CandidateFit, np.ndarray]:
        """Run again on all the data for the chosen number of epochs (their regularization)."""
        epochs = int(cand.path.best_params["n_epochs"])
        fixed = replace(cand.settings, n_iter=epochs)
        return self.refit_with(problem, cand, fixed, (epochs - 1,))

    def model(self, cand: CandidateFit, coef: np.ndarray) -> dict[str, Any]:
        return {
            "coef": np.asarray(coef),
            "intercept": cand.intercept,
            "centers_": None if cand.centers is None else cand.centers.points,
            "features_": cand.features,
            "n_epochs_": int(cand.path.best_params["n_epochs"]),
        }

    def decision(self, model: FittedModel, X: Any, workspace: Workspace) -> Any:
        if model.features is None:
            return center_decision(model, X, model.centers, workspace)
        return rff_decision(model, X, len(model.coef), workspace)


def _first(fmap: RandomFourierFeatures, D: int) -> Any:
    return lambda A: fmap.transform_first(A, D)
