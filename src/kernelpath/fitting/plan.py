"""The selection plan: what a fit decides before it searches (the kernels, the cv mode and
its split, the ARD guard, the checks that refuse a plan that cannot select), then the
search it chose and the final model's fit (refit or the chosen point)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _backend as B
from .. import ard
from ..kernels import Kernel, kernel_candidates
from ..path import Path
from ..selection import check_cv, cv_folds, holdout_split
from .family import Family
from .problem import CandidateFit, FitProblem, FitSettings
from .search import Screening, fold_search, holdout_search, smoother_search

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


def _wants_ard(kernel: Any) -> bool:
    """Whether ``kernel`` has ``sigma="ard"`` (alone: not in a sequence of kernels)."""
    items = kernel if isinstance(kernel, (list, tuple)) else [kernel]
    if not any(isinstance(getattr(k, "sigma", None), str) and k.sigma == "ard" for k in items):
        return False
    if isinstance(kernel, (list, tuple)):
        raise ValueError(
            "kernel: sigma='ard' learns one kernel's widths; give it alone, not in a "
            "sequence of kernels"
        )
    return True


def learned_kernel(
    kernel: Kernel, problem: FitProblem, rng: np.random.Generator, rows: np.ndarray | None
) -> tuple[Kernel, dict[str, Any]]:
    """The ``sigma="ard"`` kernel with one width per feature learned by
    ``ard.learn_widths`` on a subsample of ``rows`` (all rows when None), and its report.
    Draws from a generator spawned from ``rng`` (``rng``'s own stream is left as it was)."""
    try:
        sub_rng = rng.spawn(1)[0]
    except (AttributeError, TypeError):  # a generator without a seed sequence
        sub_rng = np.random.default_rng(rng.integers(2**63))
    n = problem.n
    pool = np.arange(n) if rows is None else rows
    if len(pool) > ard.N_SUBSAMPLE:
        pool = np.sort(sub_rng.choice(pool, ard.N_SUBSAMPLE, replace=False))
    if len(pool) < n:  # only these rows are read (X may be a row source)
        Xs, Ys = B.rows_in_memory(problem.X, pool), problem.Y[pool]
        ws = None if problem.weights is None else problem.weights[pool]
    else:
        Xs, Ys, ws = problem.X, problem.Y, problem.weights
    learned, info = ard.learn_widths(
        kernel,
        Xs,
        Ys,
        sample_weight=ws,
        random_state=sub_rng,
        memory_budget=problem.budget,
        return_info=True,
    )
    info["n_rows"] = len(pool)
    return learned, info


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
        The candidates (the learned ARD kernel first when it is pinned).
    method : str
        The solver or filter.
    cv : "holdout", "loo", "gcv", int or splitter
        How the path is scored ("holdout" also when nothing is selected).
    train, validation : ndarray of int or None
        The hold-out split (validation None: no selection).
    folds : list of (train, validation) or None
        The k-fold (or splitter) folds.
    pinned : int
        Leading kernels that skip the screening (the learned ARD widths).
    refit : bool
        Whether the model is refit on all the rows at the chosen point.
    ard_info : dict or None
        The report of ``ard.learn_widths``.
    """

    kernels: list[Kernel]
    method: str
    cv: Any
    train: np.ndarray
    validation: np.ndarray | None
    folds: list[tuple[np.ndarray, np.ndarray]] | None = None
    pinned: int = 0
    refit: bool = False
    ard_info: dict[str, Any] | None = None


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
    kernel = params["kernel"]
    # sigma="ard": the widths are learned on the training rows (all of them without a
    # hold-out) and the learned kernel joins the "auto" widths as the first candidate
    # (the guard: selection keeps it only where it beats them); the "auto" part draws
    # the same numbers as a fit with sigma="auto"
    ard_wanted = _wants_ard(kernel)
    no_split = cv == "holdout" and settings.validation_fraction == 0
    guard = ard_wanted and not no_split
    ard_info = None
    if ard_wanted and not guard:
        learned, ard_info = learned_kernel(kernel, problem, rng, None)
        kernels = [learned]
    else:
        start = type(kernel)(**dict(kernel.get_params(), sigma="auto")) if ard_wanted else kernel
        kernels = kernel_candidates(start, problem.X, rng)
    method = family.method(params)
    pen = settings.penalty
    unused = family.unused_penalty(method)
    if unused and not (isinstance(pen, str) or (isinstance(pen, float) and pen == 0)):
        raise ValueError(
            f"penalty is not used by filter={method!r} (its path is over iterations or it "
            f"has no parameter); leave it at 'auto', got {params['penalty']!r}"
        )
    has_path = family.has_path(settings, method) or len(kernels) > 1
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
            kernels, method, "holdout", tr, va, refit=settings.refit and va is not None
        )
        if guard:
            learned, ard_info = learned_kernel(kernel, problem, rng, tr)
            plan.kernels, plan.pinned = [learned, *kernels], 1
    else:
        if guard:
            learned, ard_info = learned_kernel(kernel, problem, rng, None)
            kernels = [learned, *kernels]
        plan = SelectionPlan(kernels, method, cv, every, None, refit=cv not in ("loo", "gcv"))
        if plan.refit:  # k-fold or a splitter
            y = labels if labels is not None else problem.Y
            if labels is None and problem.single_output:
                y = problem.Y[:, 0]
            plan.folds = cv_folds(cv, y, rng, problem.classifier)
    plan.ard_info = ard_info
    return plan


def select(
    family: Family, problem: FitProblem, settings: FitSettings, params: Mapping[str, Any]
) -> Selection:
    """Plan the selection from the estimator's ``params``, run the search the plan chose,
    and fit the model: the refit on all rows at the chosen point, or that point itself."""
    plan = make_plan(family, problem, settings, params)

    def fit_one(
        k: Kernel, rows: np.ndarray, val: np.ndarray | None, s: FitSettings
    ) -> CandidateFit:
        return family.solve(problem, k, rows, val, s)

    if plan.cv == "holdout":
        screening = Screening(family.screen, family.screen_floor)
        result = holdout_search(
            plan.kernels, settings, plan.train, plan.validation, fit_one, screening, plan.pinned
        )
    elif plan.folds is None:
        result = smoother_search(plan.kernels, settings, problem.n, plan.cv, fit_one)
    else:
        result = fold_search(plan.kernels, settings, plan.folds, fit_one, family.path_penalties)
    if plan.refit:
        model, coef = family.refit(problem, result.best)
    else:
        model, coef = result.best, result.best.path.coef()
    validation = plan.validation if plan.validation is not None else np.array([], dtype=int)
    return Selection(
        result.path, model, coef, len(plan.kernels), plan.train, validation, plan.ard_info
    )
