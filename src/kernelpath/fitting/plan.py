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
from .. import ard
from ..calibration import fit_calibration
from ..inputs import dense_block, rows_in_memory
from ..kernels import AGOP_NAMES, Kernel, _RadialKernel, kernel_candidates, kernel_items
from ..path import Path
from ..progress import note
from ..scaling import check_scale, feature_statistics
from ..selection import check_cv, cv_folds, holdout_split
from .agop import AgopRounds, learn_metric
from .family import Family, candidate_scores
from .memory import held_bytes
from .problem import CandidateFit, FitProblem, FitSettings, spawned
from .search import Screening, SearchResult, fold_search, holdout_search, smoother_search
from .widths import choose_width, row_losses

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


def _is_auto(sigma: Any) -> bool:
    return isinstance(sigma, str) and sigma == "auto"


def _wants(kernel: Any, *learned: str) -> bool:
    """Whether ``kernel`` has ``sigma`` one of ``learned`` ("ard", or the AGOP names),
    alone: not in a sequence of kernels."""
    items = kernel if isinstance(kernel, (list, tuple)) else [kernel]
    named = [k.sigma for k in items if isinstance(getattr(k, "sigma", None), str)]
    asked = [s for s in named if s in learned]
    if not asked:
        return False
    if isinstance(kernel, (list, tuple)):
        what = "widths" if asked[0] == "ard" else "metric"
        raise ValueError(
            f"kernel: sigma={asked[0]!r} learns one kernel's {what}; give it alone, not in a "
            "sequence of kernels"
        )
    return True


def learned_kernel(
    kernel: Kernel,
    problem: FitProblem,
    rng: np.random.Generator,
    rows: np.ndarray | None,
    scales: np.ndarray | None = None,
) -> tuple[Kernel, dict[str, Any]]:
    """The ``sigma="ard"`` kernel with one width per feature learned by
    ``ard.learn_widths`` on a subsample of ``rows`` (all rows when None), and its report;
    with ``scales`` learned on the scaled subsample and folded back (sigma_l * s_l).
    Draws from a generator spawned from ``rng`` (``rng``'s own stream is left as it was)."""
    sub_rng = spawned(rng)
    n = problem.n
    pool = np.arange(n) if rows is None else rows
    if len(pool) > ard.N_SUBSAMPLE:
        pool = np.sort(sub_rng.choice(pool, ard.N_SUBSAMPLE, replace=False))
    if len(pool) < n:  # only these rows are read (X may be a row source)
        Xs, Ys = rows_in_memory(problem.X, pool), problem.Y[pool]
        ws = None if problem.weights is None else problem.weights[pool]
    else:
        Xs, Ys, ws = problem.X, problem.Y, problem.weights
    Xs = dense_block(Xs)  # the widths' gradients take dense rows (sparse ones densified)
    if scales is not None:  # a copy of the subsample (at most ard.N_SUBSAMPLE rows)
        Xs = B.to_numpy(rows_in_memory(Xs, np.arange(Xs.shape[0])), np.float64) / scales
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
    if scales is not None:
        assert isinstance(learned, _RadialKernel)
        learned = learned.set_width(learned.widths(len(scales)) * scales)
        # the spreads the widths were learned in (plotting.plot_widths ranks in those units)
        info["feature_scales"] = [float(v) for v in scales]
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
    problem : FitProblem
        The problem the search and the model use: the one given, with the columns' means
        (``FitProblem.center``) where the inputs are scaled.
    folds : list of (train, validation) or None
        The k-fold (or splitter) folds.
    pinned : int
        Leading kernels that skip the screening (the learned ARD widths).
    refit : bool
        Whether the model is refit on all the rows at the chosen point.
    ard_info : dict or None
        The report of ``ard.learn_widths``.
    width_info : list of dict or None
        The reports of the width searches (``widths.choose_width``), one per kernel whose
        width the screen chose.
    agop : radial Kernel or None
        The kernel of ``sigma="agop"``: the search is round 0 of ``agop.learn_metric``.
    scales : ndarray of shape (n_features,) or None
        The spreads the inputs are scaled by (the units of a learned metric).
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
    ard_info: dict[str, Any] | None = None
    width_info: list[dict[str, Any]] | None = None
    agop: _RadialKernel | None = None
    scales: np.ndarray | None = None


def _check_widths_on(kernels: list[Any], X: Any) -> None:
    """Every given width against the training rows in memory (``Kernel.check_data``; rows
    on disk meet the same rule in the centers' ``prepare``)."""
    radial = [k for k in kernels if isinstance(k, _RadialKernel) and not isinstance(k.sigma, str)]
    if radial and isinstance(X, np.ndarray) and X.size:
        top = np.abs(X).max(axis=0)
        for k in radial:
            k.check_data(top, "X", X.dtype)


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
    no_split = cv == "holdout" and settings.validation_fraction == 0
    # a radial kernel given by name has its width chosen by the fit ("auto"), or the
    # median heuristic where nothing can be chosen (no validation split)
    width = "median" if no_split else "auto"
    items = kernel_items(kernel, width)
    # sigma="agop": round 0 is the fit of sigma="auto", the rounds follow the search (select)
    agop: _RadialKernel | None = None
    if _wants(kernel, *AGOP_NAMES):
        name = kernel.sigma
        if no_split or cv != "holdout":
            raise ValueError(
                f"kernel: sigma={name!r} chooses its rounds on a hold-out; use cv='holdout' (the "
                "default) with validation_fraction > 0"
            )
        if not family.expands_centers:
            raise ValueError(
                f"kernel: sigma={name!r} learns a metric from the gradients of a kernel "
                f"expansion over centers; {problem.estimator}'s model is not one (use the "
                "Nystrom, NYTRO, exact KRLS or EigenPro estimators, or sigma='ard')"
            )
        first = items[0]
        if not isinstance(first, _RadialKernel):  # pragma: no cover - only radial kernels
            raise ValueError(f"kernel: sigma={name!r} needs a radial kernel, got {first!r}")
        agop = first
        items = [type(agop)(**dict(agop.get_params(), sigma="auto"))]
        kernel = items[0]
    scale = check_scale(params.get("scale", False))
    if scale is True and not any(isinstance(k, _RadialKernel) for k in items):
        raise ValueError(
            "scale=True scales the inputs of a radial kernel (its widths per feature); "
            f"kernel={kernel!r} has none: give scale='auto' or False, or scale X yourself"
        )
    # scaled inputs: the widths in units of each column's spread; with scale on, random
    # Fourier maps are drawn relative to the columns' means (the map of standardized inputs)
    scales = None
    scaled = any(k.scaled_by(scale) for k in items)
    centered = scale is not False and family.fourier_features(params)
    if scaled or centered:
        center, spread = feature_statistics(problem.X, spawned(rng), scale == "auto")
        scales = spread if scaled else None
        problem = replace(problem, center=center if centered else None)
    # sigma="ard": the widths are learned on the training rows (all of them without a
    # hold-out) and the learned kernel joins the "auto" width as the first candidate
    # (the guard: selection keeps it only where it beats it)
    ard_wanted = _wants(kernel, "ard")
    guard = ard_wanted and not no_split
    ard_info = None
    # with a hold-out, an "auto" width is chosen by the screen (widths.choose_width) after
    # the split; with k-fold, LOO or GCV it is the grid AUTO_WIDTH_FACTORS fit in full
    screened = cv == "holdout" and not no_split
    searched: list[_RadialKernel] = []
    if ard_wanted and not guard:
        learned, ard_info = learned_kernel(items[0], problem, rng, None, scales)
        kernels = [learned]
    else:
        start = items
        if ard_wanted:
            start = [type(k)(**dict(k.get_params(), sigma="auto")) for k in items]
        searched = [
            k for k in start if screened and isinstance(k, _RadialKernel) and _is_auto(k.sigma)
        ]
        rest = [k for k in start if not any(k is s for s in searched)]
        given = kernel if not searched and not ard_wanted else rest
        kernels = kernel_candidates(given, problem.X, rng, scales, scale, width) if given else []
    _check_widths_on(kernels, problem.X)
    method = family.method(params)
    pen = settings.penalty
    unused = family.unused_penalty(method)
    if unused and not (isinstance(pen, str) or (isinstance(pen, float) and pen == 0)):
        raise ValueError(
            f"penalty is not used by filter={method!r} (its path is over iterations or it "
            f"has no parameter); leave it at 'auto', got {params['penalty']!r}"
        )
    has_path = family.has_path(settings, method) or bool(searched) or len(kernels) > 1
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
        )
        family.check_memory(problem, plan, settings)  # before the width screen's fits
        if searched:
            assert va is not None
            chosen = []
            plan.width_info = []
            for k in searched:
                picked, info = choose_width(
                    family, problem, k, tr, va, settings, scales, spawned(rng)
                )
                chosen.append(picked)
                plan.width_info.append(info)
            plan.kernels = [*chosen, *(k for k in kernels if k not in chosen)]
        if guard:
            learned, ard_info = learned_kernel(items[0], problem, rng, tr, scales)
            plan.kernels, plan.pinned = [learned, *plan.kernels], 1
    else:
        if guard:
            learned, ard_info = learned_kernel(items[0], problem, rng, None, scales)
            kernels = [learned, *kernels]
        plan = SelectionPlan(
            kernels, method, cv, every, None, problem, refit=cv not in ("loo", "gcv")
        )
        family.check_memory(problem, plan, settings)
        if plan.refit:  # k-fold or a splitter
            y = labels if labels is not None else problem.Y
            if labels is None and problem.single_output:
                y = problem.Y[:, 0]
            plan.folds = cv_folds(cv, y, rng, problem.classifier)
    plan.ard_info = ard_info
    plan.agop, plan.scales = agop, scales
    return plan


def select(
    family: Family, problem: FitProblem, settings: FitSettings, params: Mapping[str, Any]
) -> Selection:
    """Plan the selection from the estimator's ``params``, run the search the plan chose,
    and fit the model: the refit on all rows at the chosen point, or that point itself."""
    plan = make_plan(family, problem, settings, params)
    problem = plan.problem
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
        if plan.agop is not None:
            val = plan.validation
            assert val is not None

            def width(k: _RadialKernel) -> tuple[Kernel, dict[str, Any]]:
                return choose_width(
                    family, problem, k, plan.train, val, settings, None, spawned(settings.rng)
                )

            def losses(cand: CandidateFit) -> np.ndarray:
                return row_losses(family, problem, cand, val)

            rounds = AgopRounds(width, lambda k: search([k]), losses, problem.scoring_weights(val))
            result, agop_info = learn_metric(
                family, problem, result, plan.agop, plan.train, settings, plan.scales, rounds
            )
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
    if plan.width_info is not None:
        result.path.info["width_search"] = plan.width_info
    if plan.ard_info is not None:
        learned = plan.pinned and result.best.kernel is plan.kernels[0]
        plan.ard_info["chosen"] = "learned" if learned or not plan.pinned else "start"
    return Selection(
        result.path,
        model,
        coef,
        len(plan.kernels),
        plan.train,
        validation,
        plan.ard_info,
        plan.width_info,
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
