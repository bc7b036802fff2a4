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

The estimators' ``search`` (``SEARCH_LEVELS``) adds, on a hold-out, what the library has
measured to pay on top of the plain ``"auto"`` width: ``kernel="auto"`` screens the widths
of the families ``FAMILIES`` names with one seed (the same screen rows, the same paired
validation rows) and keeps the Gaussian unless another's per-row losses are clearly lower
(``agop.clearly_lower``); then the learned-metric rounds of ``"agop"`` on the chosen kernel
(``metric_rounds``: where the training rows are few enough for their cost, full or
diagonal by the number of features, stopping at the first round that does not pay). Round
0 of each step is the model before it, so the hold-out never scores the result worse.

The inputs' scaling (``scaling``) is decided here too: the features' spreads are folded
into the widths of the kernels that ``scale`` scales, and random Fourier maps are drawn
relative to the columns' means. The order in which the stage draws from the fit's
generator is fixed (the scaling's rows, the learned widths without selection, the
median's subsample; after the split, the screen and the learned widths), so that a fit is
reproducible from ``random_state``.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import _backend as B
from .. import ard
from ..inputs import dense_block, rows_in_memory
from ..kernels import (
    AGOP_NAMES,
    Gaussian,
    Kernel,
    Laplacian,
    Matern,
    _RadialKernel,
    kernel_candidates,
    kernel_items,
    median_distance,
)
from ..progress import note
from ..scaling import check_scale, feature_statistics
from .agop import AgopRounds, clearly_lower, learn_metric
from .family import Family
from .problem import FitProblem, FitSettings, spawned
from .search import SearchResult
from .widths import choose_width, row_losses

__all__ = [
    "KernelChoice",
    "Strategy",
    "STRATEGIES",
    "SEARCH_LEVELS",
    "FAMILIES",
    "check_search",
    "choose_kernels",
    "learned_widths",
]

#: The values of the estimators' ``search``: "none" fits the kernel as given (the Gaussian
#: for ``kernel="auto"``) with its width screened; "auto" adds the family screen of
#: ``kernel="auto"``, the metric rounds and the growth of m (``fitting.growth``) where
#: they are measured to pay; "full" screens more families and runs more rounds.
SEARCH_LEVELS = ("none", "auto", "full")

#: The kernel families ``kernel="auto"`` screens at each ``search`` level, the Gaussian
#: first (the model kept unless another is clearly better on the hold-out): Matérn 5/2
#: took cpusmall's test RMSE from 3.29 to 2.92 (``benchmarks/accuracy.py``, seeds 0-2);
#: the four families at once chose worse than the Gaussian on USPS and yacht.
FAMILIES: dict[str, tuple[tuple[type[_RadialKernel], dict[str, Any]], ...]] = {
    "none": ((Gaussian, {}),),
    "auto": ((Gaussian, {}), (Matern, {"nu": 2.5})),
    "full": ((Gaussian, {}), (Matern, {"nu": 2.5}), (Matern, {"nu": 1.5}), (Laplacian, {})),
}

#: The learned-metric rounds of ``search="auto"`` run on at most this many training rows:
#: they cost a fit each (ijcnn1's 50,000 rows: 98 s against the default's 18 s, for a test
#: error 4% higher), and paid on the sets below it (energy 2.69 -> 1.38, pumadyn32nh).
METRIC_MAX_ROWS = 12_000
#: The most metric rounds of ``search="auto"`` (a round costs a width screen and a fit):
#: pumadyn32nh's hold-out error fell 8-fold by round 3, and 1.7-fold more in rounds 4-5.
METRIC_ROUNDS = 3
#: ... unless the rounds still pay: past ``METRIC_ROUNDS`` they go on (up to
#: ``agop.MAX_ROUNDS``) while each round halves the hold-out error or better. pumadyn32nh
#: (benchmarks/accuracy.py, results/accuracy.json) falls from 0.0100 after three rounds to
#: 0.0070 after five, each of its rounds 3 to 4 lowering the error by 60-80%; sets whose
#: rounds gain less stop at three.
METRIC_EXTEND_GAIN = 0.5
#: Past this many features the rounds of ``search="auto"`` learn the metric's diagonal.
METRIC_FULL_FEATURES = 256


def check_search(value: Any) -> str:
    """The estimators' ``search``, checked (``SEARCH_LEVELS``)."""
    if not isinstance(value, str) or value not in SEARCH_LEVELS:
        raise ValueError(f"search must be one of {list(SEARCH_LEVELS)}, got {value!r}")
    return value


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
        assert isinstance(stage.base, _RadialKernel)
        return metric_rounds(stage, result, search, settings, stage.base)


def metric_rounds(
    stage: KernelChoice,
    result: SearchResult,
    search: Any,
    settings: FitSettings,
    base: _RadialKernel,
    patience: int | None = None,
    diagonal: bool | None = None,
    max_rounds: int | None = None,
    extend_gain: float = 0.0,
) -> tuple[SearchResult, dict[str, Any]]:
    """The learned-metric rounds after the search ``result`` (round 0) on the stage's
    hold-out, of ``base``'s family (``agop.learn_metric``); ``patience``, ``diagonal`` and
    ``max_rounds`` as ``AgopRounds`` has them (None: the rounds' own and ``base.sigma``'s)."""
    val, problem, family = stage.validation, stage.problem, stage.family
    assert val is not None

    def width(k: _RadialKernel) -> tuple[Kernel, dict[str, Any]]:
        return choose_width(
            family, problem, k, stage.train, val, settings, None, spawned(settings.rng)
        )

    def losses(cand: Any) -> np.ndarray:
        return row_losses(family, problem, cand, val)

    rounds = AgopRounds(width, lambda k: search([k]), losses, problem.scoring_weights(val))
    if patience is not None:
        rounds = replace(rounds, patience=patience)
    if max_rounds is not None:
        rounds = replace(rounds, max_rounds=max_rounds)
    rounds = replace(rounds, diagonal=diagonal, extend_gain=extend_gain)
    return learn_metric(family, problem, result, base, stage.train, settings, stage.scales, rounds)


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
    search : str
        The estimator's ``search`` level (``SEARCH_LEVELS``).
    families : bool
        The ``searched`` kernels are the families of ``kernel="auto"``: their screens
        choose one of them (``pick_family``).
    family_info : list of dict or None
        What the family screen compared: each family's screened validation error and
        whether it was chosen.
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
    search: str = "none"
    families: bool = False
    family_info: list[dict[str, Any]] | None = None

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
            if self.families:
                chosen = [self.pick_family(settings, rng)]
            else:
                chosen, self.width_info = [], []
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

    def pick_family(self, settings: FitSettings, rng: np.random.Generator) -> Kernel:
        """The width screens of the ``searched`` families, each with a generator in the
        same state (the same screen rows and paired validation rows); the first (the
        Gaussian) is kept unless another's paired per-row losses are clearly lower
        (``agop.clearly_lower``) at a validation error no worse."""
        assert self.validation is not None
        seed = spawned(rng)
        screened: list[tuple[Kernel, dict[str, Any]]] = []
        compare: list[tuple[np.ndarray, np.ndarray | None, float]] = []
        for k in self.searched:
            screened.append(
                choose_width(
                    self.family,
                    self.problem,
                    k,
                    self.train,
                    self.validation,
                    settings,
                    self.scales,
                    copy.deepcopy(seed),
                    compare,
                )
            )
        best = 0
        for i in range(1, len(screened)):
            losses, w, err = compare[i]
            if err <= compare[best][2] and clearly_lower(losses, compare[best][0], w):
                best = i
        self.width_info = [screened[best][1]]
        self.family_info = [
            {"kernel": _family_name(k), "val_error": float(c[2]), "chosen": i == best}
            for i, (k, c) in enumerate(zip(self.searched, compare, strict=True))
        ]
        note(
            "kernel family: "
            + ", ".join(
                f"{f['kernel']} {f['val_error']:.4g}{' (chosen)' if f['chosen'] else ''}"
                for f in self.family_info
            )
        )
        return screened[best][0]

    def after_search(
        self, result: SearchResult, search: Any, settings: FitSettings
    ) -> tuple[SearchResult, dict[str, Any] | None]:
        """The learned name's step after the search (``search(kernels)`` searches again),
        or the metric rounds of ``search`` where they are to run (``runs_metric_rounds``)."""
        if self.runs_metric_rounds(result):
            base = result.best.kernel
            assert isinstance(base, _RadialKernel)
            start = type(base)(**dict(base.get_params(), sigma="auto", metric=None))
            d = int(self.problem.X.shape[1])
            return metric_rounds(
                self,
                result,
                search,
                settings,
                start,
                patience=1 if self.search == "auto" else None,
                diagonal=d > METRIC_FULL_FEATURES,
                max_rounds=METRIC_ROUNDS if self.search == "auto" else None,
                extend_gain=METRIC_EXTEND_GAIN if self.search == "auto" else 0.0,
            )
        return self.strategy.after_search(self, result, search, settings)

    def rescreen(self, kernel: Kernel, settings: FitSettings, rng: np.random.Generator) -> Kernel:
        """``kernel`` (a screened or learned one) with its width screened again under
        ``settings`` (more centers call for a narrower width): its learned metric kept,
        in the units it was learned in."""
        assert self.validation is not None and isinstance(kernel, _RadialKernel)
        learned = kernel.metric is not None
        start = type(kernel)(**dict(kernel.get_params(), sigma="auto"))
        scales = None if learned else self.scales
        picked, _ = choose_width(
            self.family, self.problem, start, self.train, self.validation, settings, scales, rng
        )
        return picked

    def runs_metric_rounds(self, result: SearchResult) -> bool:
        """Whether ``search`` runs the metric rounds after the search: a plain kernel whose
        width the hold-out screened, a kernel expansion over centers, two features or more
        and, for "auto", at most ``METRIC_MAX_ROWS`` training rows."""
        if self.search == "none" or self.strategy.name is not None or not self.searched:
            return False
        if self.validation is None or not self.family.expands_centers:
            return False
        if len(self.kernels) != 1 or not isinstance(result.best.kernel, _RadialKernel):
            return False
        if int(self.problem.X.shape[1]) < 2:
            return False
        return self.search == "full" or len(self.train) <= METRIC_MAX_ROWS


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


def _family_name(kernel: Kernel) -> str:
    """A kernel family's name in reports: "gaussian", "matern25", "laplacian"."""
    name = type(kernel).__name__.lower()
    nu = getattr(kernel, "nu", None)
    return f"{name}{int(round(10 * nu))}" if nu is not None else name


def _is_auto(sigma: Any) -> bool:
    return isinstance(sigma, str) and sigma == "auto"


#: A given width is far from the data's scale where the median distance between rows, in
#: widths, is above ``IDENTITY_WIDTHS`` (the kernel matrix is nearly the identity: a
#: Gaussian's entries at the median distance are exp(-200)) or below ``CONSTANT_WIDTHS``
#: (nearly constant: 1 - 2e-4 at the median): the fit then warns, naming ``sigma``.
IDENTITY_WIDTHS = 20.0
CONSTANT_WIDTHS = 0.02


def _check_widths_on(kernels: list[Any], X: Any) -> None:
    """Every width against the training rows in memory (``Kernel.check_data``; rows on
    disk meet the same rule in the centers' ``prepare``), and a warning for a width that
    makes the kernel matrix of the data nearly the identity or nearly constant (a width
    taken from the data never does)."""
    radial = [k for k in kernels if isinstance(k, _RadialKernel) and not isinstance(k.sigma, str)]
    if not (radial and isinstance(X, np.ndarray) and X.size):
        return
    top = np.abs(X).max(axis=0)
    for k in radial:
        k.check_data(top, "X", X.dtype)
        _warn_far_width(k, X)


def _warn_far_width(kernel: _RadialKernel, X: np.ndarray) -> None:
    """Warn where ``kernel``'s width is far from the median distance between rows of X
    (``IDENTITY_WIDTHS``, ``CONSTANT_WIDTHS``), naming ``sigma`` and that distance."""
    d = X.shape[1]
    if kernel.per_feature:
        in_widths = median_distance(X, 0, kernel.widths(d))
        scale = median_distance(X, 0)
    else:
        scale = median_distance(X, 0, None, kernel._L)
        in_widths = scale / float(kernel.sigma)
    if CONSTANT_WIDTHS <= in_widths <= IDENTITY_WIDTHS:
        return
    shape = "the identity" if in_widths > IDENTITY_WIDTHS else "constant"
    warnings.warn(
        f"sigma={kernel.sigma!r}: the median distance between rows of X is {in_widths:.3g} "
        f"widths, so the kernel matrix is nearly {shape} and the model can hardly fit; "
        f"give sigma near {scale:.3g} (the median distance), or leave sigma at 'auto' (the "
        "default) for the fit to choose it",
        UserWarning,
        stacklevel=5,
    )


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
    search = check_search(params.get("search", "none"))
    families = holdout and search != "none" and isinstance(kernel, str) and kernel == "auto"
    if families:  # kernel="auto": the families the search level screens
        items = [cls(sigma="auto", **kw) for cls, kw in FAMILIES[search]]
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
    stage.search, stage.families = search, families
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
