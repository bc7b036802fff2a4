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
from .growth import grow_centers, grows_centers
from .memory import held_bytes
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest, spawned
from .search import Screening, SearchResult, fold_search, holdout_search, smoother_search
from .widths import paired_difference

__all__ = ["SelectionPlan", "Selection", "make_plan", "select"]


@dataclass
class Selection:
    """What a fit produced: the path, the fit the model is made of and its coefficients,
    the rows used to train and to validate, the reports of what was learned and searched,
    and (regression) the chosen point's residuals on the rows it did not see."""

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
    search_info: list[dict[str, Any]] | None = field(default=None)
    residuals: np.ndarray | None = field(default=None)
    residual_rows: np.ndarray | None = field(default=None)


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
        return family.solve(SolveRequest(problem, k, rows, val, s))

    agop_info = None
    searched = [{"step": "family", **row} for row in choice.family_info or []]
    if plan.cv == "holdout":
        screening = Screening(family.screen, family.screen_floor)

        def search(
            kernels: list[Kernel], s: FitSettings = settings, pinned: int = 0
        ) -> SearchResult:
            return holdout_search(
                kernels, s, plan.train, plan.validation, fit_one, screening, pinned
            )

        result = search(plan.kernels, settings, plan.pinned)
        result, agop_info = choice.after_search(result, search, settings)
        if grows_centers(family, settings, choice.search, plan.validation is not None):

            def rescreen(k: Kernel, s: FitSettings) -> Kernel:
                return choice.rescreen(k, s, spawned(settings.rng))

            result, grown = grow_centers(family, problem, plan, settings, result, search, rescreen)
            searched.extend({"step": "centers", **row} for row in grown)
    elif plan.folds is None:
        result = smoother_search(plan.kernels, settings, problem.n, plan.cv, fit_one)
    else:
        result = fold_search(plan.kernels, settings, plan.folds, fit_one, family.path_penalties)
    scores = held_out_scores(family, problem, plan, result)  # before a refit
    if scores is not None and plan.cv == "holdout":
        _warn_if_constant(problem, plan.train, scores)
    calibration, residuals, residual_rows = None, None, None
    if problem.classifier:
        calibration = probability_map(family, problem, plan, result, scores)
    elif scores is not None:  # what the intervals are made of (``predict_interval``)
        residuals, residual_rows = problem.Y[scores[1]] - scores[0], scores[1]
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
        _search_info(searched, agop_info, choice.search),
        residuals,
        residual_rows,
    )


def _search_info(
    searched: list[dict[str, Any]], agop_info: dict[str, Any] | None, search: str
) -> list[dict[str, Any]] | None:
    """What the ``search`` level tried, in order (the estimators' ``search_results_``):
    the families, the metric rounds, the numbers of centers; None with ``search="none"``."""
    if search == "none":
        return None
    rounds = []
    if agop_info is not None:
        chosen = agop_info.get("chosen_round", 0)
        for r in agop_info.get("rounds", []):
            if "val_error" in r:
                rounds.append(
                    {
                        "step": "metric",
                        "round": r["round"],
                        "val_error": float(r["val_error"]),
                        "chosen": r["round"] == chosen,
                    }
                )
    families = [row for row in searched if row["step"] == "family"]
    return families + rounds + [row for row in searched if row["step"] == "centers"]


def held_out_scores(
    family: Family, problem: FitProblem, plan: SelectionPlan, result: SearchResult
) -> tuple[np.ndarray, np.ndarray] | None:
    """(scores, rows): the chosen point's scores f(X[rows]) on the rows it did not see,
    (len(rows), k): the hold-out, or with k-fold every fold's out-of-fold rows; None
    without held-out rows (leave-one-out, GCV, no split)."""
    if plan.cv == "holdout":
        if plan.validation is None or len(plan.validation) == 0:
            return None
        best = result.best
        val = plan.validation
        return candidate_scores(family, problem, best, best.path.coef(), val), val
    if result.folds is None:
        return None
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
    return np.vstack([f for f, _ in parts]), np.concatenate([r for _, r in parts])


def probability_map(
    family: Family,
    problem: FitProblem,
    plan: SelectionPlan,
    result: SearchResult,
    scores: tuple[np.ndarray, np.ndarray] | None,
) -> dict[str, Any] | None:
    """How the model's probabilities are made (``kernelpath.calibration``): natively
    ({"method": "logistic"}) for the logistic loss; else the calibration map fit on the
    held-out ``scores`` of the chosen point (``held_out_scores``); None without them."""
    if family.native_probabilities(result.best.settings):
        return {"method": "logistic"}
    if scores is None:
        return None
    F, rows = scores
    Y = problem.Y[rows]
    y = np.argmax(Y, axis=1) if Y.shape[1] > 1 else (Y[:, 0] > 0).astype(np.int64)
    w = problem.scoring_weights(rows)
    out = fit_calibration(F if F.shape[1] > 1 else F[:, 0], y, w)
    out["source"] = "hold-out" if plan.cv == "holdout" else "out-of-fold"
    return out


def _warn_if_constant(problem: FitProblem, train: np.ndarray, scores: tuple) -> None:
    """Warn where the chosen model scores the validation rows no better than a constant
    does (the training mean, or the most frequent class): its per-row losses (squared
    errors, or errors of the class) not lower than the constant's by more than one
    standard error of their paired differences. Naming what to try."""
    F, val = scores
    Yt, Yv = problem.Y[train], problem.Y[val]
    if problem.classifier:
        multi = Yt.shape[1] > 1
        truth = np.argmax(Yv, axis=1) if multi else (Yv[:, 0] > 0).astype(int)
        pred = np.argmax(F, axis=1) if multi else (F[:, 0] >= 0).astype(int)
        majority = np.argmax(np.bincount(np.argmax(Yt, axis=1) if multi else Yt[:, 0] > 0))
        model, constant = (pred != truth) * 1.0, (truth != majority) * 1.0
        what = "the most frequent class"
    else:
        model = np.sum((F - Yv) ** 2, axis=1)
        constant = np.sum((np.average(Yt, axis=0) - Yv) ** 2, axis=1)
        what = "the mean of y"
    w = problem.scoring_weights(val)
    mean, se = paired_difference(model, constant, w)
    if mean < -se or not np.any(constant > 0):
        return
    err, base = np.average(model, weights=w), np.average(constant, weights=w)
    warnings.warn(
        f"the chosen model predicts the validation rows no better than {what} does "
        f"(validation loss {err:.3g} against {base:.3g}): the kernel's width may not "
        "fit the scale of X (leave sigma at 'auto', the default, or give one near the median "
        "distance between rows), or y may hardly depend on X; try scale='auto', more "
        "centers (n_centers), or another kernel",
        UserWarning,
        stacklevel=3,
    )
