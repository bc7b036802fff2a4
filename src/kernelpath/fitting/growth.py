"""The growth of the number of Nyström centers in a default fit: from sqrt(n) log(n), m
doubles while the validation error pays for it.

A fit whose estimator has ``search`` other than "none", ``n_centers=None`` and uniformly
drawn centers searches, after the kernel choice, the chosen kernel again with twice the
centers (``FitSettings.center_growth``: a multiple of the default m, so that the refit on
every row keeps the chosen centers and draws as many more as the default's m for all rows
calls for) and keeps the larger m only where its validation error is lower than the best
so far by more than ``GROWTH_GAIN`` (relative); it stops at the first doubling that does
not pay, at ``MAX_DOUBLINGS`` doublings, at ``MAX_CENTER_SHARE`` of the training rows, or
where the memory budget cannot hold the fit (``Family.check_memory``). Each doubling
screens the kernel's width again with its m (more centers resolve a narrower width: at a
fixed width, twice the centers scored worse on the hold-out of a wavy 2-D target) and
keeps the rest of what was chosen at the default m (the family, the learned metric); then
one fit of that kernel. Round 0 is the model at the default m, so the hold-out never
scores the result worse.

Why the default grows m: the statistical rate of Nyström KRLS (Rudi et al., 2015) needs
m ~ sqrt(n) log(n) only at the worst-case source condition; on MNIST's 48,000 training
rows the test error went 2.91% (m = 2,361), 2.32% (4,722), 1.94% (9,444)
(``benchmarks/accuracy.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..kernels import Kernel
from ..progress import note
from .family import Family
from .memory import BudgetError
from .problem import FitProblem, FitSettings
from .search import SearchResult

__all__ = ["GROWTH_GAIN", "MAX_DOUBLINGS", "MAX_CENTER_SHARE", "grows_centers", "grow_centers"]

#: A doubling of m is kept where the validation error falls by more than this fraction of
#: the best so far.
GROWTH_GAIN = 0.02
#: The most doublings of the default m (m up to 2**MAX_DOUBLINGS times sqrt(n) log(n)).
MAX_DOUBLINGS = 2
#: m stays at most this share of the training rows: sqrt(n) log(n) is 17% of wine's 1,279
#: training rows already, and there a doubling that paid 2% on the hold-out tested 1.6%
#: worse (``benchmarks/accuracy.py``); MNIST's 48,000 rows take 4 x 2,361 = 20%.
MAX_CENTER_SHARE = 0.2


def grows_centers(family: Family, settings: FitSettings, search: str, holdout: bool) -> bool:
    """Whether the fit grows m: ``search`` on, a hold-out, and the family drawing its
    default m of uniform centers."""
    if search == "none" or not holdout or not family.grows_centers:
        return False
    centers = settings.options.centers
    uniform = centers is None or (isinstance(centers, str) and centers == "uniform")
    return uniform and family.draws_default_centers(settings)


def grow_centers(
    family: Family,
    problem: FitProblem,
    plan: Any,
    settings: FitSettings,
    result: SearchResult,
    search: Callable[..., SearchResult],
    rescreen: Callable[[Kernel, FitSettings], Kernel],
) -> tuple[SearchResult, list[dict[str, Any]]]:
    """The doublings of m after the search ``result`` (at the default m): (the best
    search, one report per m tried: ``n_centers``, ``val_error``, ``chosen``).

    ``search(kernels, settings)`` searches ``kernels`` on the plan's hold-out with
    ``settings``; ``rescreen(kernel, settings)`` is ``kernel`` with its width screened
    under ``settings``; ``plan`` is the ``SelectionPlan`` (its training rows, for m)."""
    n_tr = len(plan.train)
    best, growth = result, 1.0
    best_err = result.best.score()[0]
    m = family.drawn_centers(settings, n_tr)
    tried = [{"n_centers": m, "val_error": best_err, "chosen": True}]
    kernel = result.best.kernel
    for _ in range(MAX_DOUBLINGS):
        grown = replace(settings, center_growth=2.0 * growth)
        m_next = family.drawn_centers(grown, n_tr)
        if m_next is None or m_next > MAX_CENTER_SHARE * n_tr:
            break
        try:
            family.check_memory(problem, plan, grown)
        except BudgetError:
            note(f"centers: {m_next} do not fit the memory budget; m stays at {m}")
            break
        cand = search([rescreen(kernel, grown)], grown)
        err = cand.best.score()[0]
        pays = bool(np.isfinite(err)) and err < (1.0 - GROWTH_GAIN) * best_err
        tried.append({"n_centers": m_next, "val_error": err, "chosen": False})
        note(
            f"centers: m = {m_next}, validation error {err:.4g} against {best_err:.4g} at "
            f"m = {m} ({'kept' if pays else 'not kept: m stays'})"
        )
        if not pays:
            break
        for row in tried:
            row["chosen"] = False
        tried[-1]["chosen"] = True
        best, best_err, growth, m = cand, err, 2.0 * growth, m_next
    return best, tried
