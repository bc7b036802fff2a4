"""Learned feature metrics (``sigma="agop"``): the rounds of a Recursive Feature Machine
(Radhakrishnan et al., Science 2024) on the kernel path machinery.

Round 0 is the fit of ``sigma="auto"`` (today's model). Each further round takes the fitted
predictor f of the round before, its average gradient outer product over a subsample of the
training rows, ``M = (1/n_s) sum_i sum_o grad f_o(x_i) grad f_o(x_i)^T``
(``operators.gradients``: a factor of M, never the d x d matrix; past
``DENSE_AGOP_FEATURES`` features its leading ``AGOP_RANK`` directions), and fits again with
the kernel on the distance ``(x - z)^T M (x - z) / sigma^2``: its width searched as
``sigma="auto"`` searches it, λ on the path, the same centers' rule. The metric is taken in
the units of the scaled inputs (the columns divided by their spreads where the fit scales
them) and normalized to trace d there, so the widths searched are those of the unit-spread
inputs. A round is taken over the best so far only when its hold-out loss per row (squared,
summed over the outputs) is lower by more than ``ACCEPT_SE`` standard errors of the paired
per-row differences and its validation score (error rate, MSE) is no worse; else it counts
against ``PATIENCE``. The best round is the model, so the hold-out never scores it worse
than round 0, and a round that wins on the hold-out by noise is not taken (with the plain
score, the first measurement chose later rounds that tested worse on cpusmall, abalone,
adult and ijcnn1, docs/design.md). The metric is stored as a factor L (d x r, M = L L^T)
keeping the eigenvalues of M that hold all but ``METRIC_TAIL`` of its trace: a block costs
n m r instead of n m d. ``sigma="agop_diagonal"`` keeps only M's diagonal, a learned width
per feature (d numbers instead of d^2 from the same gradients), and drops the features that
hold no more than ``METRIC_TAIL`` of its trace."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _backend as B
from ..inputs import rows_in_memory
from ..kernels import Kernel, _RadialKernel
from ..operators.gradients import (
    AGOP_RANK,
    DENSE_AGOP_FEATURES,
    agop_diagonal,
    agop_factor,
    axis_scales,
)
from ..progress import note
from .family import Family
from .problem import CandidateFit, FitProblem, FitSettings, spawned
from .search import SearchResult
from .widths import paired_difference

__all__ = [
    "AGOP_ROWS",
    "MAX_ROUNDS",
    "PATIENCE",
    "METRIC_TAIL",
    "ACCEPT_SE",
    "AgopRounds",
    "model_agop",
    "metric_factor",
    "learn_metric",
    "metric_summary",
    "clearly_lower",
]

#: Rows the gradient outer product is averaged over (a random subset of the training rows).
AGOP_ROWS = 5000
#: The most rounds after round 0.
MAX_ROUNDS = 5
#: Rounds in a row without a better hold-out score that end the rounds.
PATIENCE = 2
#: The fraction of the metric's trace its factor may leave out (the smallest eigenvalues).
METRIC_TAIL = 1e-4
#: A round replaces the best when its mean hold-out loss per row is lower by more than this
#: many standard errors of the paired differences.
ACCEPT_SE = 1.0


@dataclass(frozen=True)
class AgopRounds:
    """How a fit runs its rounds: ``width(kernel)`` is the kernel at its chosen width (and
    the width search's report), ``search(kernel)`` the hold-out search of that one kernel,
    ``losses(fit)`` the chosen point's loss on each hold-out row and ``weights`` the
    weights that score those rows (None: alike); ``patience``, ``diagonal`` and
    ``max_rounds`` as the fields say."""

    width: Callable[[_RadialKernel], tuple[Kernel, dict[str, Any]]]
    search: Callable[[Kernel], SearchResult]
    losses: Callable[[CandidateFit], np.ndarray]
    weights: np.ndarray | None = None
    #: Rounds in a row without a better hold-out score that end the rounds.
    patience: int = PATIENCE
    #: The metric's diagonal only (None: as the kernel's ``sigma`` says).
    diagonal: bool | None = None
    #: The most rounds after round 0.
    max_rounds: int = MAX_ROUNDS
    #: Past ``max_rounds``, the rounds go on (up to ``MAX_ROUNDS``) while each accepted round
    #: lowered the best hold-out error by at least this fraction (0: never past it).
    extend_gain: float = 0.0


def clearly_lower(new: np.ndarray, best: np.ndarray, w: np.ndarray | None) -> bool:
    """Whether the per-row losses ``new`` are lower on average than ``best`` by more than
    ``ACCEPT_SE`` standard errors of their (``w``-weighted) paired differences."""
    mean, se = paired_difference(new, best, w)
    return mean < -ACCEPT_SE * se


def model_agop(
    family: Family,
    problem: FitProblem,
    cand: CandidateFit,
    rows: np.ndarray,
    diagonal: bool,
    random_state: Any = None,
) -> np.ndarray:
    """The AGOP of the predictor of ``cand``'s chosen point over ``X[rows]``: its factor F
    (d x p, AGOP = F F^T), or with ``diagonal`` its diagonal (d,)
    (``operators.gradients``). Sparse rows stay sparse.

    Raises
    ------
    ValueError
        The family's model is not a kernel expansion over centers (random features, SGM).
    """
    attrs = family.model(cand, cand.path.coef())
    centers = attrs.get("centers_")
    if centers is None:
        raise ValueError(
            f"kernel: sigma='agop' learns a metric from the gradients of a kernel expansion "
            f"over centers; {problem.estimator}'s model is not one (use the Nystrom, NYTRO, "
            "exact KRLS or EigenPro estimators, or sigma='ard')"
        )
    X = rows_in_memory(problem.X, rows)
    op = problem.workspace.in_process(X, centers, cand.kernel)
    coef = np.asarray(B.to_numpy(attrs["coef"]), dtype=np.float64)
    if diagonal:
        return agop_diagonal(op, coef)
    return agop_factor(op, coef, random_state)


def metric_factor(
    agop: np.ndarray, scales: np.ndarray | None, diagonal: bool = False
) -> np.ndarray | None:
    """The factor L (d x r) of the metric M taken in the units of the scaled inputs and
    normalized to trace d there, raw units again: ``L = L_u / s``. ``agop``: a factor F of
    M = F F^T (d x p), or with ``diagonal`` M's diagonal (d,). Keeps the largest
    eigenvalues that hold all but ``METRIC_TAIL`` of the trace. ``diagonal``: the metric is
    M's diagonal, L's columns the kept features' unit vectors times the square roots of
    their weights (largest first). None where M has no positive trace (a flat predictor: no
    direction to learn)."""
    d = agop.shape[0]
    s = _spreads(scales, d)
    if diagonal:
        diag = agop * s**2
        if not np.all(np.isfinite(diag)):
            return None
        order = np.argsort(-diag, kind="stable")
        vals, vecs = diag[order], None
    else:
        Fu = agop * s[:, None]
        if not np.all(np.isfinite(Fu)):
            return None
        if Fu.shape[1] == 0:
            return None
        vecs, sv, _ = np.linalg.svd(Fu, full_matrices=False)
        vals = sv**2
    vals = np.clip(vals, 0.0, None)
    total = float(vals.sum())
    if not total > 0:
        return None
    kept = np.cumsum(vals) < (1.0 - METRIC_TAIL) * total
    r = int(min(len(vals), np.count_nonzero(kept) + 1))
    weights = np.sqrt(vals[:r] * (d / total))
    if vecs is None:  # the kept features' unit vectors, weighted
        Lu = np.zeros((d, r))
        Lu[order[:r], np.arange(r)] = weights
    else:
        Lu = vecs[:, :r] * weights
    return Lu / s[:, None]


def learn_metric(
    family: Family,
    problem: FitProblem,
    start: SearchResult,
    base: _RadialKernel,
    train: np.ndarray,
    settings: FitSettings,
    scales: np.ndarray | None,
    rounds: AgopRounds,
) -> tuple[SearchResult, dict[str, Any]]:
    """The rounds after ``start`` (round 0): (the best round's search, the report).

    Parameters
    ----------
    base : radial Kernel
        The kernel asked for, ``sigma="agop"`` or "agop_diagonal" (its other parameters
        kept).
    train : ndarray of int
        The training rows; the AGOP is averaged over ``AGOP_ROWS`` of them.
    scales : ndarray of shape (n_features,) or None
        The spreads the inputs are scaled by (the metric's units).
    """
    rng = spawned(settings.rng)
    best, best_round, current = start, 0, start
    best_losses = rounds.losses(start.best)
    history = [_round_info(0, start, None, None)]
    info: dict[str, Any] = {
        "rounds": history,
        "chosen_round": 0,
        "n_rows": int(min(len(train), AGOP_ROWS)),
        "feature_scales": None if scales is None else [float(v) for v in scales],
        "diagonal": (base.sigma == "agop_diagonal" if rounds.diagonal is None else rounds.diagonal),
    }
    if int(problem.X.shape[1]) < 2:  # one feature: a metric is one width, round 0 has it
        note("AGOP: one feature, whose metric is its width: no rounds")
        info["stopped"] = "one feature"
        return start, info
    misses, gain = 0, 0.0
    last = max(rounds.max_rounds, MAX_ROUNDS) if rounds.extend_gain > 0 else rounds.max_rounds
    for t in range(1, last + 1):
        if t > rounds.max_rounds and (misses or gain < rounds.extend_gain):  # past the count
            break
        rows = train
        if len(rows) > AGOP_ROWS:
            rows = np.sort(rng.choice(train, AGOP_ROWS, replace=False))
        M = model_agop(family, problem, current.best, rows, info["diagonal"], rng)
        L = metric_factor(M, scales, info["diagonal"])
        if L is None:
            note(f"AGOP round {t}: the predictor is flat on the sample; the rounds stop")
            history.append({"round": t, "stopped": "flat predictor"})
            break
        params = dict(base.get_params(), sigma="auto", metric=L)
        kernel, width_info = rounds.width(type(base)(**params))
        result = current = rounds.search(kernel)
        history.append(_round_info(t, result, L, width_info))
        losses = rounds.losses(result.best)
        # and the score (a classifier's error rate) no worse: a lower squared loss of the
        # codes with more errors (USPS, round 2) is not taken
        no_worse = result.best.score()[0] <= best.best.score()[0]
        better = no_worse and clearly_lower(losses, best_losses, rounds.weights)
        note(
            f"AGOP round {t}: validation error {result.best.score()[0]:.4g} "
            f"({'best so far' if better else 'not better'}; rank {L.shape[1]})"
        )
        if better:
            before = best.best.score()[0]
            gain = 1.0 - result.best.score()[0] / before if before > 0 else 0.0
            best, best_round, best_losses, misses = result, t, losses, 0
        else:
            misses += 1
            if misses >= rounds.patience:
                break
    info["chosen_round"] = best_round
    return best, info


def metric_summary(kernel: Kernel, n_features: int, scales: Any) -> dict[str, Any]:
    """The fitted kernel's metric M (its distance is (x - z)^T M (x - z)) and what it says
    of the features, in the units of the scaled inputs (``scales``, None: as given):
    ``relevances`` diag(S M S) / trace (sums to 1), ``components`` the eigenvectors of S M S
    as rows (largest first) and ``eigenvalues`` their shares of the trace; all from M's
    factor A (M = A A^T, d x r). Past ``DENSE_AGOP_FEATURES`` features ``metric`` (M
    itself, d x d numbers) is None and ``components`` keeps the leading ``AGOP_RANK``."""
    d = n_features
    s = _spreads(scales, d)
    A = kernel.coordinate_matrix(d)  # type: ignore[attr-defined]
    scales_of_axes = axis_scales(A)
    if scales_of_axes is not None:  # M is diagonal (widths, a diagonal metric)
        a = s * scales_of_axes
        order = np.argsort(-(a**2), kind="stable")
        vals = a[order] ** 2
        rows = order if d <= DENSE_AGOP_FEATURES else order[:AGOP_RANK]
        vecs_t = np.zeros((len(rows), d))
        vecs_t[np.arange(len(rows)), rows] = 1.0
        relevances = a**2
    else:
        Au = A * s[:, None]
        vecs, sv, _ = np.linalg.svd(Au, full_matrices=False)
        vals = sv**2
        vecs_t = vecs.T if d <= DENSE_AGOP_FEATURES else vecs[:, :AGOP_RANK].T
        relevances = np.einsum("ij,ij->i", Au, Au)
    total = float(vals.sum())
    return {
        "metric": A @ A.T if d <= DENSE_AGOP_FEATURES else None,
        "relevances": relevances / total,
        "components": np.ascontiguousarray(vecs_t),
        "eigenvalues": vals / total,
    }


def _round_info(
    t: int, result: SearchResult, L: np.ndarray | None, width_info: dict[str, Any] | None
) -> dict[str, Any]:
    err, loss = result.best.score()
    sigma = getattr(result.best.kernel, "sigma", None)
    return {
        "round": t,
        "val_error": err,
        "val_loss": loss,
        "sigma": float(sigma) if isinstance(sigma, (int, float)) else None,
        "rank": None if L is None else int(L.shape[1]),
        "width_search": width_info,
    }


def _spreads(scales: Any, d: int) -> np.ndarray:
    """The features' spreads (1 where the inputs are not scaled)."""
    return np.ones(d) if scales is None else np.asarray(scales, dtype=np.float64)
