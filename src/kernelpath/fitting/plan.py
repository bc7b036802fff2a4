"""The selection plan: what a fit decides before it searches (the kernels, the cv mode and
its split, the ARD guard, the checks that refuse a plan that cannot select), then the
search it chose and the final model's fit (refit or the chosen point)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import _backend as B
from ..calibration import fit_calibration
from ..kernels import Kernel
from ..path import Path
from ..progress import note
from ..selection import check_cv, cv_folds, holdout_split
from .choice import KernelChoice, choose_kernels
from .family import Family, candidate_scores
from .memory import held_bytes
from .problem import CandidateFit, FitProblem, FitSettings
from .search import Screening, SearchResult, fold_search, holdout_search, smoother_search

__all__ = ["SelectionPlan", "Selection", "make_plan", "select"]


@dataclass
class Selection:
    """What a fit produced: the path, the fit the model is made of and its coefficients,
    the rows used to train and to validate, and the ARD report."""

    path: Path
    model: CandidateFit
    coef: np.ndarray
    n_kernels: int
    train: np.ndarray
    validation: np.ndarray
    ard_info: dict[str, Any] | None = field(default=None)
    width_info: list[dict[str, Any]] | None = field(default=None)
    calibration: dict[str, Any] | None = field(default=None)
    agop_info: dict[str, Any] | None = field(default=None)


def _refit(settings: FitSettings, problem: FitProblem, family: Family, method: str) -> bool:
    """``refit`` resolved. "auto": refit on all the rows where the chosen point is a closed
    form at its λ (Nyström direct, exact KRLS's Tikhonov / kOLS / TSVD, random features) and
    the data are in memory; not an iterate (CG, gradient descent, SGM, EigenPro: refit with
    the chosen iteration count on more rows, CG's early-stopped point on cpusmall went from
    test RMSE 3.7 to 16.5, docs/design.md), nor data read from disk or Dask (one more pass)."""
    if isinstance(settings.refit, str):
        return family.closed_form(method) and not B.is_lazy(problem.X)
    return bool(settings.refit)


def _check_selection_off(
    family: Family, settings: FitSettings, method: str, n_kernels: int, params: Mapping[str, Any]
) -> None:
    """``validation_fraction=0`` without another cv: one model, every choice given."""
    off = "validation_fraction=0 turns selection off"
    if not isinstance(settings.penalty, float) and not family.unused_penalty(method):
        raise ValueError(f"{off}: give penalty a single number, got {params['penalty']!r}")
    if family.size_path(settings):
        name = family.size_param
        raise ValueError(f"{off}: give {name} a single number, got {params[name]!r}")
    if n_kernels > 1:
        raise ValueError(f"{off}: give one kernel with one width, got {params['kernel']!r}")


def _check_smoother(
    family: Family, settings: FitSettings, method: str, cv: str, problem: FitProblem
) -> None:
    """Leave-one-out and GCV in closed form: which solvers offer them."""
    ok = family.smoother_modes(settings, method)
    if cv not in ok:
        raise ValueError(
            f"cv={cv!r} is not available for {problem.estimator} with "
            f"{family.describe(settings, method)}: "
            + (
                f"it offers cv in {ok}; "
                if ok
                else "only the Tikhonov solvers (exact KRLS, Nyström direct, random "
                "features) have it in closed form; "
            )
            + "use cv='holdout' or an int k (k-fold)"
        )
    w = problem.weights
    if w is not None and not np.all(w > 0):
        raise ValueError(
            f"sample_weight: cv={cv!r} needs positive weights (a zero weight leaves a "
            "point out already)"
        )


@dataclass
class SelectionPlan:
    """What a fit decided before searching.

    Attributes
    ----------
    kernels : list of Kernel
        The candidates (``choice``'s: the learned ARD kernel first when it is pinned).
    method : str
        The solver or filter.
    cv : "holdout", "loo", "gcv", int or splitter
        How the path is scored ("holdout" also when nothing is selected).
    train, validation : ndarray of int or None
        The hold-out split (validation None: no selection).
    problem : FitProblem
        The problem the search and the model use: the one given, with the columns' means
        (``FitProblem.center``) where the inputs are scaled.
    folds : list of (train, validation) or None
        The k-fold (or splitter) folds.
    pinned : int
        Leading kernels that skip the screening (the learned ARD widths).
    refit : bool
        Whether the model is refit on all the rows at the chosen point.
    choice : KernelChoice
        The kernel choice stage (``choice``): its reports, and its step after the search.
    """

    kernels: list[Kernel]
    method: str
    cv: Any
    train: np.ndarray
    validation: np.ndarray | None
    problem: FitProblem
    folds: list[tuple[np.ndarray, np.ndarray]] | None = None
    pinned: int = 0
    refit: bool = False
    choice: KernelChoice | None = None


def make_plan(
    family: Family, problem: FitProblem, settings: FitSettings, params: Mapping[str, Any]
) -> SelectionPlan:
    """Decide the search from the estimator's ``params``: the kernels, the cv mode and its
    split, the ARD guard; refuse a plan that cannot select. Draws from ``settings.rng`` in
    a fixed order (the kernels' median, the split or folds), so that a fit is
    reproducible from ``random_state``."""
    rng, n = settings.rng, problem.n
    labels = problem.labels
    cv = check_cv(params.get("cv", "holdout"), n, labels)
    no_split = cv == "holdout" and settings.validation_fraction == 0
    choice = choose_kernels(family, problem, dict(params), cv, settings.validation_fraction, rng)
    problem, kernels = choice.problem, choice.kernels
    method = family.method(params)
    pen = settings.penalty
    unused = family.unused_penalty(method)
    if unused and not (isinstance(pen, str) or (isinstance(pen, float) and pen == 0)):
        raise ValueError(
            f"penalty is not used by filter={method!r} (its path is over iterations or it "
            f"has no parameter); leave it at 'auto', got {params['penalty']!r}"
        )
    has_path = family.has_path(settings, method) or bool(choice.searched) or len(kernels) > 1
    if no_split:
        _check_selection_off(family, settings, method, len(kernels), params)
    if cv in ("loo", "gcv") and has_path:
        _check_smoother(family, settings, method, cv, problem)
    selecting = has_path and not no_split
    if selecting and n < 2:
        raise ValueError("n_samples=1: at least 2 samples are needed to hold out a validation set")
    every = np.arange(n)
    if not selecting or cv == "holdout":
        tr, va = (
            holdout_split(n, settings.validation_fraction, rng, labels)
            if selecting
            else (every, None)
        )
        plan = SelectionPlan(
            kernels,
            method,
            "holdout",
            tr,
            va,
            problem,
            refit=_refit(settings, problem, family, method) and va is not None,
            choice=choice,
        )
        family.check_memory(problem, plan, settings)  # before the width screen's fits
        choice.before_search(tr, va, settings, rng)
        plan.kernels, plan.pinned = choice.kernels, choice.pinned
    else:
        choice.before_search(every, None, settings, rng)
        plan = SelectionPlan(
            choice.kernels,
            method,
            cv,
            every,
            None,
            problem,
            refit=cv not in ("loo", "gcv"),
            choice=choice,
        )
        family.check_memory(problem, plan, settings)
        if plan.refit:  # k-fold or a splitter
            y = labels if labels is not None else problem.Y
            if labels is None and problem.single_output:
                y = problem.Y[:, 0]
            plan.folds = cv_folds(cv, y, rng, problem.classifier)
    return plan


def select(
    family: Family, problem: FitProblem, settings: FitSettings, params: Mapping[str, Any]
) -> Selection:
    """Plan the selection from the estimator's ``params``, run the search the plan chose,
    and fit the model: the refit on all rows at the chosen point, or that point itself."""
    plan = make_plan(family, problem, settings, params)
    problem, choice = plan.problem, plan.choice
    assert choice is not None
    cost = family.cost(problem, plan)
    if cost is not None:
        note(cost.describe())
        if cost.advice is not None:
            warnings.warn(f"{cost.describe()}: {cost.advice}", UserWarning, stacklevel=3)

    def fit_one(
        k: Kernel, rows: np.ndarray, val: np.ndarray | None, s: FitSettings
    ) -> CandidateFit:
        return family.solve(problem, k, rows, val, s)

    agop_info = None
    if plan.cv == "holdout":
        screening = Screening(family.screen, family.screen_floor)

        def search(kernels: list[Kernel], pinned: int = 0) -> SearchResult:
            return holdout_search(
                kernels, settings, plan.train, plan.validation, fit_one, screening, pinned
            )

        result = search(plan.kernels, plan.pinned)
        result, agop_info = choice.after_search(result, search, settings)
    elif plan.folds is None:
        result = smoother_search(plan.kernels, settings, problem.n, plan.cv, fit_one)
    else:
        result = fold_search(plan.kernels, settings, plan.folds, fit_one, family.path_penalties)
    calibration = None
    if problem.classifier:  # before a refit: the scores of rows the model did not see
        calibration = probability_map(family, problem, plan, result)
    if plan.refit:  # beside what the search holds (its paths, the chosen point's centers)
        held = replace(problem, held=problem.held + held_bytes(result, problem.X))
        model, coef = family.refit(held, result.best)
    else:
        model, coef = result.best, result.best.path.coef()
    validation = plan.validation if plan.validation is not None else np.array([], dtype=int)
    if choice.width_info is not None:
        result.path.info["width_search"] = choice.width_info
    if choice.ard_info is not None:
        learned = plan.pinned and result.best.kernel is plan.kernels[0]
        choice.ard_info["chosen"] = "learned" if learned or not plan.pinned else "start"
    return Selection(
        result.path,
        model,
        coef,
        len(plan.kernels),
        plan.train,
        validation,
        choice.ard_info,
        choice.width_info,
        calibration,
        agop_info,
    )


def probability_map(
    family: Family, problem: FitProblem, plan: SelectionPlan, result: SearchResult
) -> dict[str, Any] | None:
    """How the model's probabilities are made (``kernelpath.calibration``): natively
    ({"method": "logistic"}) for the logistic loss; else the calibration map fit on the
    hold-out scores of the chosen point (k-fold: its out-of-fold scores); None without
    held-out rows (leave-one-out, GCV, no split)."""
    if family.native_probabilities(result.best.settings):
        return {"method": "logistic"}
    if plan.cv == "holdout":
        if plan.validation is None or len(plan.validation) == 0:
            return None
        best = result.best
        parts = [
            (
                candidate_scores(family, problem, best, best.path.coef(), plan.validation),
                plan.validation,
            )
        ]
    elif result.folds is not None:
        index = result.best.path.best_index
        parts = []
        for cand, va in result.folds:
            try:
                coef = cand.path.coef(index)
            except IndexError:  # a point this fold did not reach
                continue
            parts.append((candidate_scores(family, problem, cand, coef, va), va))
        if not parts:
            return None
    else:
        return None
    F = np.vstack([f for f, _ in parts])
    rows = np.concatenate([r for _, r in parts])
    Y = problem.Y[rows]
    y = np.argmax(Y, axis=1) if Y.shape[1] > 1 else (Y[:, 0] > 0).astype(np.int64)
    w = problem.scoring_weights(rows)
    out = fit_calibration(F if F.shape[1] > 1 else F[:, 0], y, w)
    out["source"] = "hold-out" if plan.cv == "holdout" else "out-of-fold"
    return out
