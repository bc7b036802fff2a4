"""The width of a radial kernel chosen before the fit (``sigma="auto"`` with a hold-out, the
default): a 1-D search over log sigma (factors of 2 around the median distance, then the
vertex of the parabola through the best and its two neighbours) scored by the closed-form λ
path of Nyström KRLS (the family's own solver for random features, NYTRO, SGM and EigenPro)
on a subsample of the training rows, corrected for the shift of the best width with n (not
for random features, whose D is fixed, nor NYTRO, regularized by its iterations); the
estimator's own solver then fits once, at that width, on all its training rows. A narrower
width that the validation rows cannot tell from the best (its paired per-row losses within
``TIE_SE`` standard errors) is taken instead of the vertex (``narrowest_tie``), where the
width is shifted with n.

Draws only from a generator spawned from the fit's (the median's subsample, the screen's
rows and centers), so the fit that follows is the fit of ``kernel=est.kernel_`` with the
same ``random_state``, number for number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..kernels import Kernel, NarrowWidthError, _RadialKernel, median_distance
from ..progress import quiet, report
from .family import Family, candidate_scores
from .kernel_models import KernelOptions, default_n_centers
from .nystrom import NystromFamily
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest, spawned

__all__ = [
    "SCREEN_ROWS",
    "SCREEN_FRACTION",
    "SCREEN_MIN_ROWS",
    "SCREEN_CENTERS_MAX",
    "SCREEN_MAX_ITER",
    "WIDTH_SHIFT",
    "COARSE_FACTORS",
    "COARSE_STRIDE",
    "TIE_SE",
    "TIE_ROWS",
    "spawned",
    "choose_width",
    "screen_rows",
    "row_losses",
    "narrowest_tie",
    "paired_difference",
]

#: The screen fits on this fraction of the training rows, at least ``SCREEN_MIN_ROWS`` (all
#: of them when there are fewer) and at most ``SCREEN_ROWS`` (measured against all rows up to
#: 6000, benchmarks/results/width_screen.json).
SCREEN_FRACTION = 0.5
SCREEN_MIN_ROWS = 2000
SCREEN_ROWS = 4000
#: The most centers a screening fit draws.
SCREEN_CENTERS_MAX = 1500
#: The best width on n_s rows is about (n / n_s)^WIDTH_SHIFT times the best on n rows
#: (measured on the shared data, docs/design.md "Choosing the width"). Not on every set:
#: MNIST's best width hardly falls with n, and the shift costs it 0.14-0.21 points of test
#: error at 5,000-20,000 centers (benchmarks/results/width_rows.json).
WIDTH_SHIFT = 0.2
#: The most iterations of a screening fit with an iterative solver (NYTRO).
SCREEN_MAX_ITER = 100
#: The search's grid, as multiples of the median distance; it goes on outward (by factors
#: of 2, at most ``EXTEND`` more) while the best is at an end.
COARSE_FACTORS = tuple(2.0**k for k in range(-4, 4))
EXTEND = 3
#: The first pass scores every ``COARSE_STRIDE``-th factor of the grid (factors of 4), then
#: the factors of 2 either side of its best: on a unimodal curve the same best and the same
#: two neighbours as scoring the whole grid, in 6 fits instead of 8 (1: the whole grid).
COARSE_STRIDE = 2
#: The vertex is rounded to a multiple of 2^(1 / VERTEX_GRID) (``_vertex``).
VERTEX_GRID = 16
#: Rounds of halving the step around the best before the vertex is taken (two scored
#: widths each; none measured as accurate, benchmarks/results/width_screen.json).
REFINE_ROUNDS = 0
#: A scored width ties with the best when its mean validation loss exceeds the best's by at
#: most TIE_SE standard errors of their paired per-row differences (the one-standard-error
#: rule); of the tied widths the narrowest is taken, the direction in which the best width
#: moves with more rows (``WIDTH_SHIFT``). The smoother choice, the widest tie, was measured
#: and lost on 12 of the 14 fits where it fired (docs/design.md "Choosing the width"). Only
#: for the families whose width is shifted (``Family.shifts_width``): random features (a
#: fixed D) and NYTRO lost with it (yacht's random features +57%, docs/design.md).
TIE_SE = 1.0
#: The most validation rows the tie rule predicts (a random subset, the same for every width).
TIE_ROWS = 20_000


class _ScreenFamily(NystromFamily):
    """The screen's Nyström family: its direct paths come from the normal equations, as the
    screen's rule was measured. With the QR route where a penalty was rounding, the exact
    tiny-penalty solutions of wide widths won the screen's fits and lost at the full fit
    (test_the_screen_finds_the_best_width_of_a_dense_grid: 13% above the best width's
    validation error, within 1% before)."""

    direct_spectrum = "normal"


_SCREEN = _ScreenFamily()


def _screen_size(family: Family, settings: FitSettings, n_tr: int, n_s: int) -> int:
    """Centers of a screening fit on ``n_s`` rows: the final model's m (the estimator's
    drawn centers, else sqrt(n) log n) times sqrt(n_s / n_tr) (the regime of Rudi et al.),
    at most ``SCREEN_CENTERS_MAX`` and n_s."""
    m = family.drawn_centers(settings, n_tr)
    if m is None:
        m = default_n_centers(n_tr)
    return int(max(1, min(n_s, SCREEN_CENTERS_MAX, round(m * np.sqrt(n_s / n_tr)))))


def _vertex(scores: dict[float, tuple[float, float]], best: float) -> float:
    """The minimum of the parabola in log sigma through the best scored factor and its
    nearest scored neighbours on either side, rounded to the grid of 2^(1/16) (``best``
    itself at an end, or where the three are not convex)."""
    fs = sorted(scores)
    i = fs.index(best)
    if i == 0 or i == len(fs) - 1:
        return best
    x = np.log([fs[i - 1], fs[i], fs[i + 1]])
    y = np.array([scores[f][0] for f in (fs[i - 1], fs[i], fs[i + 1])])
    if not np.all(np.isfinite(y)):
        return best
    d1, d2 = x[1] - x[0], x[2] - x[1]
    s1, s2 = (y[1] - y[0]) / d1, (y[2] - y[1]) / d2
    curv = (s2 - s1) / (x[2] - x[0])  # half the second derivative
    if curv <= 0:
        return best
    # vertex of y = y1 + b (x - x1) + curv (x - x1)^2, b the slope at x1
    b = (s1 * d2 + s2 * d1) / (d1 + d2)
    v = float(np.clip(x[1] - b / (2 * curv), x[0], x[2]))
    # on a grid of 2^(1/16) (2% apart): scores that differ by rounding (a Dask or torch fit,
    # chunk sums in another order) give the same width
    return float(2.0 ** (np.round(v / np.log(2) * VERTEX_GRID) / VERTEX_GRID))


def row_losses(
    family: Family, problem: FitProblem, cand: CandidateFit, rows: np.ndarray
) -> np.ndarray:
    """The squared loss on each of ``rows`` of the chosen point of ``cand``'s path, summed
    over the outputs (the ±1 codes of a classifier: its error rate moves in steps of one
    row, too coarse to pair), shape (len(rows),)."""
    R = candidate_scores(family, problem, cand, cand.path.coef(), rows) - problem.Y[rows]
    return np.einsum("ij,ij->i", R, R)


def paired_difference(
    new: np.ndarray, base: np.ndarray, w: np.ndarray | None
) -> tuple[float, float]:
    """(mean, standard error) of the per-row differences ``new - base``, ``w``-weighted
    (None: alike), the error over Kish's effective number of rows; both in units of the
    largest |difference| (their ratio is what the callers weigh), so that the squares
    neither underflow nor overflow whatever the targets' scale (per-row squared losses of
    targets near 1e-90 are near 1e-180, and their squares were 0)."""
    wt = np.ones(len(base)) if w is None else w / np.max(w)
    n_eff = wt.sum() ** 2 / np.sum(wt**2)
    d = np.asarray(new, dtype=np.float64) - base
    top = float(np.max(np.abs(d), initial=0.0))
    if not top > 0 or not np.isfinite(top):
        return (0.0, 0.0) if top == 0 else (float(np.average(d, weights=wt)), 0.0)
    d = d / top
    mean = float(np.average(d, weights=wt))
    return mean, float(np.sqrt(np.average((d - mean) ** 2, weights=wt) / max(n_eff - 1, 1)))


def narrowest_tie(losses: dict[float, np.ndarray], best: float, w: np.ndarray | None) -> float:
    """The narrowest factor whose per-row ``losses`` exceed the ``best``'s by at most
    ``TIE_SE`` standard errors of the (``w``-weighted) mean of their paired differences."""
    tied = [best]
    for f, loss in losses.items():
        mean, se = paired_difference(loss, losses[best], w)
        if mean <= TIE_SE * se:
            tied.append(f)
    return min(tied)


def screen_rows(n_tr: int) -> int:
    """Rows the screen fits on, out of ``n_tr`` training rows."""
    return int(min(n_tr, SCREEN_ROWS, max(SCREEN_MIN_ROWS, round(SCREEN_FRACTION * n_tr))))


def _search(
    score: Callable[[float], tuple[float, float]], scores: dict[float, tuple[float, float]]
) -> None:
    """The screen's order of widths (factors of the median distance), each scored by
    ``score`` into ``scores``: every ``COARSE_STRIDE``-th factor of the grid, the factors of
    2 either side of the best, outward while the best is at an end (``EXTEND`` more at
    most), then ``REFINE_ROUNDS`` halvings of the step around the best."""
    for f in COARSE_FACTORS[::COARSE_STRIDE]:
        score(f)
    if COARSE_STRIDE > 1:  # the factors of 2 either side of the best of the first pass
        best = min(scores, key=lambda f: scores[f])
        score(best / 2.0)
        score(best * 2.0)
    lo, hi = min(scores), max(scores)
    beyond = sum(f < COARSE_FACTORS[0] or f > COARSE_FACTORS[-1] for f in scores)
    for _ in range(EXTEND - beyond):  # the best at an end: the curve goes on outward
        best = min(scores, key=lambda f: scores[f])
        if best == lo:
            lo /= 2.0
            score(lo)
        elif best == hi:
            hi *= 2.0
            score(hi)
        else:
            break
    step = 2.0
    for _ in range(REFINE_ROUNDS):  # halve the step around the best: sqrt(2), 2^(1/4), ...
        step = np.sqrt(step)
        best = min(scores, key=lambda f: scores[f])
        score(best / step)
        score(best * step)


def choose_width(
    family: Family,
    problem: FitProblem,
    kernel: _RadialKernel,
    train: np.ndarray,
    val: np.ndarray,
    settings: FitSettings,
    scales: np.ndarray | None,
    rng: np.random.Generator,
    compare: list[tuple[np.ndarray, np.ndarray | None, float]] | None = None,
) -> tuple[Kernel, dict[str, Any]]:
    """(``kernel`` at the chosen width, the search's report).

    Parameters
    ----------
    kernel : radial Kernel with ``sigma="auto"``
    train, val : ndarray of int
        The hold-out split of the fit.
    settings : FitSettings
        The fit's settings (the number of centers the final model draws).
    scales : ndarray of shape (n_features,) or None
        The feature scales folded into the widths (None: the inputs as they are).
    rng : numpy.random.Generator
        The search's own generator (spawned from the fit's).
    compare : list or None
        Receives (the per-row validation losses of the best scored width, those rows'
        scoring weights, its validation error), on the rows the tie rule pairs: screens of
        several kernels with generators of one seed score the same rows, and are compared
        by them.
    """
    med = median_distance(problem.X, rng, scales, kernel._L)
    n_tr = len(train)
    n_s = screen_rows(n_tr)
    sub = train if n_s == n_tr else np.sort(rng.choice(train, n_s, replace=False))
    m_s = _screen_size(family, settings, n_tr, n_s)
    seed = int(rng.integers(2**63))
    base = replace(
        settings,
        penalty="auto",
        options=KernelOptions("direct", None, "uniform"),
        size=m_s,
        refit=False,
        cv_mode=None,
        n_iter=None,
        feature_seed=None,
    )

    def at(factor: float) -> Kernel:
        width = med * factor
        return kernel.data_width(width if scales is None else width * scales)

    scores: dict[float, tuple[float, float]] = {}
    # the tie rule where the best width moves narrower with n (the families the shift is for)
    ties = family.shifts_width
    # the rows the tie rule predicts: at most TIE_ROWS of the validation rows
    paired = val
    if (ties or compare is not None) and len(val) > TIE_ROWS:
        paired = np.sort(rng.choice(val, TIE_ROWS, replace=False))
    losses: dict[float, np.ndarray] = {}

    own = family.screens_with_own_solver
    if own:  # the estimator's solver on the subsample, as in a screening round
        base = family.screen(replace(settings, refit=False), n_s / n_tr, n_tr)
        cap = family.max_iter(base)
        if cap is not None:
            # at most SCREEN_MAX_ITER iterations: a width NYTRO needs more for on n_s rows is
            # scored by that iterate (without the cap the wide widths ran to the cap of 500)
            base = replace(base, options=replace(base.options, max_iter=min(cap, SCREEN_MAX_ITER)))
    screen = family if own else _SCREEN

    narrow: list[NarrowWidthError] = []

    def score(factor: float) -> tuple[float, float]:
        if factor not in scores:
            s = replace(base, rng=np.random.default_rng(seed))  # the same centers every width
            with quiet():  # the screen reports its widths, not their fits' steps
                try:
                    cand = screen.solve(SolveRequest(problem, at(factor), sub, val, s))
                except NarrowWidthError as exc:  # too narrow for the data's precision: out
                    narrow.append(exc)
                    scores[factor] = (np.inf, np.inf)
                    return scores[factor]
                scores[factor] = cand.score()
                if ties or compare is not None:
                    losses[factor] = row_losses(screen, problem, cand, paired)
            best = min(v[0] for v in scores.values())
            report("width screen", len(scores), None, factor=float(factor), best_val=best)
        return scores[factor]

    _search(score, scores)
    top = min(scores, key=lambda f: scores[f])
    if narrow and not np.isfinite(scores[top][0]):
        raise narrow[-1]  # every width screened is too narrow for the data
    if compare is not None:
        compare.append((losses[top], problem.scoring_weights(paired), scores[top][0]))
    # paired with the weights the validation scores them with
    tie = narrowest_tie(losses, top, problem.scoring_weights(paired)) if ties else top
    best = tie if tie < top else _vertex(scores, top)
    # the best on n_s rows overestimates the best on n_tr (a model growing with n)
    shift = (n_s / n_tr) ** WIDTH_SHIFT if family.shifts_width else 1.0
    factor = best * shift
    factors = sorted(scores)
    info = {
        "median": med,
        "n_rows": n_s,
        "n_centers": m_s,
        "solver": "own" if own else "nystrom-direct",
        "factors": factors,
        "val_error": [scores[f][0] for f in factors],
        "val_loss": [scores[f][1] for f in factors],
        "screen_best": best,
        "tie": tie,
        "shift": shift,
        "factor": factor,
        "sigma": med * factor,
        "scales": None if scales is None else np.asarray(scales, dtype=np.float64),
    }
    return at(factor), info
