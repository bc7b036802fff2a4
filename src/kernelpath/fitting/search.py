"""The searches over kernels, as pure functions: the hold-out with successive halving, the
closed-form leave-one-out / GCV, and k-fold. Each receives a ``fit_one`` callable that fits
one kernel's path and returns a ``CandidateFit``; none touches an estimator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from ..kernels import Kernel
from ..path import Path, mean_over_folds, stack_paths
from .problem import CandidateFit, FitSettings, spawned

__all__ = [
    "FitOne",
    "Screening",
    "SearchResult",
    "SCREEN_ETA",
    "kernel_settings",
    "holdout_search",
    "smoother_search",
    "fold_search",
]

#: (kernel, training rows, validation rows or None, settings) -> the kernel's fit.
FitOne = Callable[[Kernel, np.ndarray, "np.ndarray | None", FitSettings], CandidateFit]

#: Successive halving of kernel candidates: each screening round keeps 1 / ETA of them
#: and fits on ETA times more rows.
SCREEN_ETA = 3


@dataclass(frozen=True)
class Screening:
    """How a family screens: ``settings(s, fraction, n_rows)`` gives a screening round's
    settings, ``floor(s, n_rows)`` the fewest rows a round may fit on."""

    settings: Callable[[FitSettings, float, int], FitSettings]
    floor: Callable[[FitSettings, int], int]


@dataclass
class SearchResult:
    """The search's path (a leading "sigma" or "kernel" axis for several kernels) and the
    chosen kernel's own fit."""

    path: Path
    best: CandidateFit
    #: k-fold: the chosen kernel's fit on each fold and that fold's validation rows
    folds: list[tuple[CandidateFit, np.ndarray]] | None = None


def kernel_settings(settings: FitSettings, n_kernels: int, pinned: int = 0) -> list[FitSettings]:
    """One copy of ``settings`` per kernel. With several kernels every copy gets a
    generator of the same seed: the same centers (uniform), feature draws (scaled by
    1 / sigma) and minibatches for every kernel. With one kernel besides the ``pinned``
    ones (the learned ARD widths) that kernel keeps ``settings`` (it draws what it would
    alone) and the pinned ones get generators spawned from it."""
    if n_kernels == 1:
        return [settings]
    if n_kernels - pinned == 1:
        return [replace(settings, rng=spawned(settings.rng)) for _ in range(pinned)] + [settings]
    seed = int(settings.rng.integers(2**63))
    return [replace(settings, rng=np.random.default_rng(seed)) for _ in range(n_kernels)]


def width_order(kernels: list[Kernel]) -> list[int] | None:
    """The candidates' positions by increasing width when they are one kernel at several
    widths (``sigma="auto"``, or a sequence of widths), else None."""
    widths = [k.one_width() for k in kernels]
    if len({type(k) for k in kernels}) != 1 or any(w is None for w in widths):
        return None
    rest = [{n: v for n, v in k.get_params().items() if n != "sigma"} for k in kernels]
    if any(r != rest[0] for r in rest):
        return None
    return sorted(range(len(kernels)), key=lambda i: float(widths[i]))  # type: ignore[arg-type]


def survivors(
    alive: list[int], scores: dict[int, tuple[float, float]], keep: int, widths: list[int] | None
) -> list[int]:
    """The candidates a screening round keeps: the ``keep`` best by validation score; for
    widths of one kernel, the best width and its neighbours, smaller ones first (the best
    width on a subsample overestimates the best on all rows: smaller widths need more
    data; on ijcnn1 4,443 and 13,330 rows chose 0.8, all 40,000 rows 0.5)."""
    ranked = sorted(alive, key=lambda i: scores[i])
    if widths is None:
        return sorted(ranked[:keep])
    line = [i for i in widths if i in alive]
    pos = line.index(ranked[0])
    out = [line[pos]]
    step = 1
    while len(out) < min(keep, len(line)):
        for j in (pos - step, pos + step):  # the smaller neighbour first
            if 0 <= j < len(line) and len(out) < keep:
                out.append(line[j])
        step += 1
    return sorted(out)


def _finish(
    kernels: list[Kernel],
    fits: list[CandidateFit],
    eligible: list[int],
    info: dict[str, Any] | None = None,
) -> SearchResult:
    """The chosen kernel's fit and the path of all (one path with a leading kernel axis
    for several kernels)."""
    if len(kernels) == 1:
        return SearchResult(fits[0].path, fits[0])
    best_k = min(eligible, key=lambda i: fits[i].score())
    paths = [f.path for f in fits]
    values: list[Any]
    if width_order(kernels) is not None:  # one kernel at several widths
        name, values = "sigma", [k.one_width() for k in kernels]
        info = dict(info or {}, kernels=list(kernels))
    else:
        name, values = "kernel", list(kernels)
    path = stack_paths(paths, name, values, (best_k, *paths[best_k].best_index), info)
    return SearchResult(path, fits[best_k])


def holdout_search(
    kernels: list[Kernel],
    settings: FitSettings,
    train: np.ndarray,
    val: np.ndarray | None,
    fit_one: FitOne,
    screening: Screening,
    pinned: int = 0,
) -> SearchResult:
    """Hold-out search over kernels with successive halving: the candidates are fit on
    nested subsamples of the training rows, n_tr / ETA^r, keeping the best 1 / ETA by
    validation error each round, while the smallest subsample keeps at least the
    screening floor; the survivors are fit on all the training rows. The first ``pinned``
    kernels (learned widths) skip the screening and meet the survivors at full size."""
    per_kernel = kernel_settings(settings, len(kernels), pinned)
    K, n_tr = len(kernels), len(train)
    rounds = 0
    screened = K - pinned
    if screened > 1 and val is not None:
        floor = screening.floor(per_kernel[pinned], n_tr)
        rounds = int(np.ceil(np.log(screened) / np.log(SCREEN_ETA) - 1e-9))
        while rounds and n_tr // SCREEN_ETA**rounds < floor:
            rounds -= 1
    fits: list[CandidateFit | None] = [None] * K
    rows = [n_tr] * K
    alive = list(range(pinned, K))
    rounds_info = []
    order = train[settings.rng.permutation(n_tr)] if rounds else train
    widths = width_order(kernels[pinned:])
    if widths is not None:
        widths = [pinned + i for i in widths]

    def fit(i: int, sub: np.ndarray, s: FitSettings) -> CandidateFit:
        cand = fit_one(kernels[i], sub, val, s)
        # the candidate's feature seed, drawn at its first fit, is kept for the others
        per_kernel[i] = replace(per_kernel[i], feature_seed=cand.settings.feature_seed)
        fits[i] = cand
        rows[i] = len(sub)
        return cand

    for r in range(rounds):
        size = n_tr // SCREEN_ETA ** (rounds - r)
        sub = np.sort(order[:size])  # nested subsamples
        scores = {
            i: fit(i, sub, screening.settings(per_kernel[i], size / n_tr, n_tr)).score()
            for i in alive
        }
        rounds_info.append(
            {
                "n_train": size,
                "candidates": [kernels[i] for i in alive],
                "best_val_error": [scores[i][0] for i in alive],
            }
        )
        keep = max(1, int(np.ceil(len(alive) / SCREEN_ETA)))
        alive = survivors(alive, scores, keep, widths)
    alive = list(range(pinned)) + alive
    for i in alive:
        fit(i, train, per_kernel[i])
    info = {"n_train": rows, "screening": rounds_info} if K > 1 else None
    return _finish(kernels, cast(list[CandidateFit], fits), alive, info)


def smoother_search(
    kernels: list[Kernel], settings: FitSettings, n: int, cv: str, fit_one: FitOne
) -> SearchResult:
    """Leave-one-out or GCV in closed form on all the data, for every kernel."""
    per_kernel = [replace(s, cv_mode=cv) for s in kernel_settings(settings, len(kernels))]
    every = np.arange(n)
    fits = [fit_one(k, every, None, s) for k, s in zip(kernels, per_kernel, strict=True)]
    return _finish(kernels, fits, list(range(len(kernels))), {"cv": cv})


def fold_search(
    kernels: list[Kernel],
    settings: FitSettings,
    folds: list[tuple[np.ndarray, np.ndarray]],
    fit_one: FitOne,
    penalties: Callable[[Path], np.ndarray],
) -> SearchResult:
    """k-fold (or a splitter's folds) for every kernel: the path's validation error is the
    mean over the folds; a penalty grid the solver chose ("auto") on the first fold is kept
    for the others and for the refit on all the data (``penalties`` reads it from a
    path)."""
    fits = []
    per_fold = []
    for kernel, s in zip(kernels, kernel_settings(settings, len(kernels)), strict=True):
        own = []
        for tr, va in folds:
            cand = fit_one(kernel, tr, va, s)
            own.append((cand, va))
            s = replace(s, feature_seed=cand.settings.feature_seed)
            if isinstance(s.penalty, str) and "penalty" in cand.path.params:
                s = replace(s, penalty=penalties(cand.path))
        mean = mean_over_folds([c.path for c, _ in own], {"n_folds": len(folds)})
        fits.append(replace(cand, path=mean, settings=s))
        per_fold.append(own)
    result = _finish(kernels, fits, list(range(len(kernels))), {"cv": "k-fold"})
    result.folds = per_fold[next(i for i, f in enumerate(fits) if f is result.best)]
    return result
