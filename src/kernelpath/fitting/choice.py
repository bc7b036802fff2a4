"""The kernel a fit uses: from the estimator's ``kernel`` and ``scale`` to the kernels the
search compares, and what is learned around that search. The one place that tells the
``sigma`` names apart: each has its strategy (``STRATEGIES``), and a number or one width
per feature is taken as given.

- a number, per-feature widths: the kernel as given (its widths times the features'
  spreads where the inputs are scaled);
- ``"median"``: the median distance of the (scaled) inputs;
- ``"auto"``: with a hold-out, the width screen (``widths.choose_width``) before the
  search; with k-fold, leave-one-out or GCV, the grid ``AUTO_WIDTH_FACTORS`` times the
  median distance, fit in full;
- ``"ard"``: one width per feature learned by ``ard.learn_widths``: with a hold-out, on the
  training rows after the screen, and pinned first beside the ``"auto"`` width it must beat
  (the guard); with k-fold, leave-one-out or GCV, on every row beside it; without
  selection, alone;
- ``"agop"``, ``"agop_diagonal"``: round 0 is ``"auto"``; the learned-metric rounds
  (``agop.learn_metric``) follow the search, on its hold-out.

The inputs' scaling (``scaling``) is decided here too: the features' spreads are folded
into the widths of the kernels that ``scale`` scales, and random Fourier maps are drawn
relative to the columns' means. The order in which the stage draws from the fit's
generator is fixed (the scaling's rows, the learned widths without selection, the
median's subsample; after the split, the screen and the learned widths), so that a fit is
reproducible from ``random_state``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import _backend as B
from .. import ard
from ..inputs import dense_block, rows_in_memory
from ..kernels import AGOP_NAMES, Kernel, _RadialKernel, kernel_candidates, kernel_items
from ..scaling import check_scale, feature_statistics
from .agop import AgopRounds, learn_metric
from .family import Family
from .problem import FitProblem, FitSettings, spawned
from .search import SearchResult
from .widths import choose_width, row_losses

__all__ = ["KernelChoice", "Strategy", "STRATEGIES", "choose_kernels", "learned_widths"]


def learned_widths(
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


@dataclass(frozen=True)
class Strategy:
    """What a learned ``sigma`` name asks around the search (the plain one asks nothing:
    a number, per-feature widths, "median" and "auto" are the candidates' own)."""

    name: str | None = None

    def start(self, kernel: Kernel) -> Kernel:
        """The kernel the candidates start from: a learned name starts at "auto"."""
        if self.name is None or not isinstance(kernel, _RadialKernel):
            return kernel
        return type(kernel)(**dict(kernel.get_params(), sigma="auto"))

    def check(self, family: Family, problem: FitProblem, holdout: bool) -> None:
        """Refuse a fit that cannot learn what the name asks."""
        return None

    def first(self, stage: KernelChoice) -> bool:
        """Whether the learned kernel replaces the candidates (no selection to guard it)."""
        return False

    def before_search(self, stage: KernelChoice, rng: np.random.Generator) -> None:
        """After the width screen, before the search."""
        return None

    def after_search(
        self, stage: KernelChoice, result: SearchResult, search: Any, settings: FitSettings
    ) -> tuple[SearchResult, dict[str, Any] | None]:
        """After the search: its result, and a report (None: nothing was learned)."""
        return result, None


@dataclass(frozen=True)
class LearnedWidths(Strategy):
    """``sigma="ard"``: one width per feature learned on the training rows."""

    def first(self, stage: KernelChoice) -> bool:
        return stage.no_split

    def before_search(self, stage: KernelChoice, rng: np.random.Generator) -> None:
        if stage.no_split:
            return
        rows = stage.train if stage.holdout else None
        learned, stage.ard_info = learned_widths(stage.base, stage.problem, rng, rows, stage.scales)
        stage.kernels = [learned, *stage.kernels]
        stage.pinned = 1 if stage.holdout else 0


@dataclass(frozen=True)
class LearnedMetric(Strategy):
    """``sigma="agop"`` and ``"agop_diagonal"``: the metric's rounds after the search."""

    def check(self, family: Family, problem: FitProblem, holdout: bool) -> None:
        if not holdout:
            raise ValueError(
                f"kernel: sigma={self.name!r} chooses its rounds on a hold-out; use "
                "cv='holdout' (the default) with validation_fraction > 0"
            )
        if not family.expands_centers:
            raise ValueError(
                f"kernel: sigma={self.name!r} learns a metric from the gradients of a kernel "
                f"expansion over centers; {problem.estimator}'s model is not one (use the "
                "Nystrom, NYTRO, exact KRLS or EigenPro estimators, or sigma='ard')"
            )

    def after_search(
        self, stage: KernelChoice, result: SearchResult, search: Any, settings: FitSettings
    ) -> tuple[SearchResult, dict[str, Any] | None]:
        val, problem, family = stage.validation, stage.problem, stage.family
        assert val is not None and isinstance(stage.base, _RadialKernel)

        def width(k: _RadialKernel) -> tuple[Kernel, dict[str, Any]]:
            return choose_width(
                family, problem, k, stage.train, val, settings, None, spawned(settings.rng)
            )

        def losses(cand: Any) -> np.ndarray:
            return row_losses(family, problem, cand, val)

        rounds = AgopRounds(width, lambda k: search([k]), losses, problem.scoring_weights(val))
        return learn_metric(
            family, problem, result, stage.base, stage.train, settings, stage.scales, rounds
        )


#: The strategy of each learned ``sigma`` name.
STRATEGIES: dict[str, Strategy] = {
    "ard": LearnedWidths("ard"),
    **{name: LearnedMetric(name) for name in AGOP_NAMES},
}
_PLAIN = Strategy()


@dataclass
class KernelChoice:
    """The stage's state through a fit.

    Attributes
    ----------
    kernels : list of Kernel
        The candidates (after ``before_search``: the screened widths, the learned ARD
        kernel first where it is pinned).
    pinned : int
        Leading kernels that skip the screening rounds.
    searched : list of radial Kernel
        The ``sigma="auto"`` kernels the width screen chooses (with a hold-out).
    problem : FitProblem
        The fit's problem, with the columns' means where the inputs are scaled.
    scales : ndarray of shape (n_features,) or None
        The spreads the inputs are scaled by.
    strategy : Strategy
        The learned name's (or the plain one).
    base : Kernel
        The kernel as given, where one is (the learned name's own parameters).
    """

    kernels: list[Kernel]
    searched: list[_RadialKernel]
    problem: FitProblem
    scales: np.ndarray | None
    strategy: Strategy
    base: Kernel
    family: Family
    no_split: bool
    holdout: bool
    pinned: int = 0
    train: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    validation: np.ndarray | None = None
    ard_info: dict[str, Any] | None = None
    width_info: list[dict[str, Any]] | None = None

    def before_search(
        self,
        train: np.ndarray,
        validation: np.ndarray | None,
        settings: FitSettings,
        rng: np.random.Generator,
    ) -> None:
        """With the split made: the width screen of the ``"auto"`` kernels (a hold-out),
        then the learned name's step."""
        self.train, self.validation = train, validation
        if self.searched:
            assert validation is not None
            chosen = []
            self.width_info = []
            for k in self.searched:
                picked, info = choose_width(
                    self.family,
                    self.problem,
                    k,
                    train,
                    validation,
                    settings,
                    self.scales,
                    spawned(rng),
                )
                chosen.append(picked)
                self.width_info.append(info)
            self.kernels = [*chosen, *(k for k in self.kernels if k not in chosen)]
        self.strategy.before_search(self, rng)

    def after_search(
        self, result: SearchResult, search: Any, settings: FitSettings
    ) -> tuple[SearchResult, dict[str, Any] | None]:
        """The learned name's step after the search (``search(kernels)`` searches again)."""
        return self.strategy.after_search(self, result, search, settings)


def _strategy(kernel: Any, items: list[Kernel]) -> Strategy:
    """The strategy of the kernel argument: a learned ``sigma`` name, alone, or none."""
    named = [k.sigma for k in items if isinstance(k, _RadialKernel) and isinstance(k.sigma, str)]
    asked = [s for s in named if s in STRATEGIES]
    if not asked:
        return _PLAIN
    if isinstance(kernel, (list, tuple)):
        what = "widths" if asked[0] == "ard" else "metric"
        raise ValueError(
            f"kernel: sigma={asked[0]!r} learns one kernel's {what}; give it alone, not in a "
            "sequence of kernels"
        )
    return STRATEGIES[asked[0]]


def _is_auto(sigma: Any) -> bool:
    return isinstance(sigma, str) and sigma == "auto"


def _check_widths_on(kernels: list[Any], X: Any) -> None:
    """Every given width against the training rows in memory (``Kernel.check_data``; rows
    on disk meet the same rule in the centers' ``prepare``)."""
    radial = [k for k in kernels if isinstance(k, _RadialKernel) and not isinstance(k.sigma, str)]
    if radial and isinstance(X, np.ndarray) and X.size:
        top = np.abs(X).max(axis=0)
        for k in radial:
            k.check_data(top, "X", X.dtype)


def choose_kernels(
    family: Family,
    problem: FitProblem,
    params: dict[str, Any],
    cv: Any,
    validation_fraction: float,
    rng: np.random.Generator,
) -> KernelChoice:
    """The stage before the split: the kernel argument's items and strategy, the inputs'
    scaling, and the candidates (the learned widths alone where nothing is selected)."""
    kernel = params["kernel"]
    no_split = cv == "holdout" and validation_fraction == 0
    holdout = cv == "holdout" and not no_split
    # a radial kernel given by name has its width chosen by the fit ("auto"), or the
    # median heuristic where nothing can be chosen (no validation split)
    width = "median" if no_split else "auto"
    items = kernel_items(kernel, width)
    strategy = _strategy(kernel, items)
    strategy.check(family, problem, holdout)
    base = items[0]
    items = [strategy.start(k) for k in items]
    if strategy.name is not None:
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
    stage = KernelChoice([], [], problem, scales, strategy, base, family, no_split, holdout)
    if strategy.first(stage):
        learned, stage.ard_info = learned_widths(base, problem, rng, None, scales)
        stage.kernels = [learned]
    else:
        auto = [k for k in items if isinstance(k, _RadialKernel) and _is_auto(k.sigma)]
        stage.searched = auto if holdout else []
        rest = [k for k in items if not any(k is s for s in stage.searched)]
        given = kernel if not stage.searched and strategy.name is None else rest
        stage.kernels = (
            kernel_candidates(given, problem.X, rng, scales, scale, width) if given else []
        )
    _check_widths_on(stage.kernels, problem.X)
    return stage
