"""Center selection for the Nyström estimators.

A strategy is an object with ``select(X, n_centers, rng, kernel, penalty, memory_budget)``
returning a ``CenterSelection``; ``STRATEGIES`` maps the names the estimators accept
(``centers="uniform"``, ``"leverage"``, ``"approximate-leverage"``, ``"squeak"``,
``"rpcholesky"``) to
strategies, and ``select_centers`` also accepts a strategy object or an array of points.

Order matters: the centers come in the order they were drawn, so that the first m of them
are themselves a sample of m centers (uniform draws without replacement; leverage draws
without replacement proportional to the scores). The incremental Nyström path over m uses
these prefixes.

Leverage sampling (El Alaoui & Mahoney 2015) draws columns i.i.d. with probabilities
p_i = τ_i / d_eff and weighs them by 1 / sqrt(m p_i). Repeated columns add nothing to a
Nyström model, so the draws continue until m distinct points are found, which is the same
distribution as drawing m points without replacement, one after the other, proportionally
to τ. The column weights are recorded; they do not change a Nyström KRLS model (rescaling the
columns of K_nm by a positive diagonal S is the change of variables α = S β: the same
functions, the same penalty), so the solvers do not use them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import _backend as B
from ._threads import fit_threaded
from ._validation import check_choice, check_float, check_int
from .inputs import center_rows, first_of_each_row, rows_in_memory, take_rows
from .kernels import Kernel
from .leverage import (
    SQUEAK_VARIANTS,
    _approximate_scores,
    _exact_scores,
    _squeak_scores,
    samples_within,
    squeak_dictionary,
)
from .workspace import Workspace

__all__ = [
    "select_centers",
    "chooses_size",
    "CenterSelection",
    "UniformCenters",
    "LeverageCenters",
    "SqueakCenters",
    "STRATEGIES",
    "DEFAULT_SCORE_PENALTY",
]

#: λ of the leverage scores when the estimator's penalty is a path and the strategy was not
#: given one: relative to the largest k(x, x) (1 for the radial kernels).
DEFAULT_SCORE_PENALTY = 1e-4


@dataclass
class CenterSelection:
    """The chosen centers and how they were chosen.

    Attributes
    ----------
    points : ndarray of shape (m, d)
    indices : ndarray of int, shape (m,), or None
        Rows of the training data (None for given points).
    strategy : str
    scores : ndarray of shape (n,) or None
        The leverage scores (exact or estimated) the draws used.
    weights : ndarray of shape (m,) or None
        Column weights of the sketch: 1 / sqrt(m p_i) for leverage sampling, SQUEAK's
        sqrt(q_i / (q̄ p~_i)).
    penalty : float or None
        λ of the scores.
    info : dict
        Anything else (SQUEAK's dictionary size, ...).
    """

    points: np.ndarray
    indices: np.ndarray | None
    strategy: str
    scores: np.ndarray | None = None
    weights: np.ndarray | None = None
    penalty: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


def without_repeats(sel: CenterSelection) -> CenterSelection:
    """``sel`` less every center whose values repeat an earlier center's (in the order
    drawn). A repeated center adds nothing to the span of k(c_j, .), so the Nyström model
    is the same, but it makes K_mm singular, and the factor then takes an
    eigendecomposition instead of a Cholesky factor (adult's one-hot rows repeat: 7 of 643
    uniform centers; its default fit 6.06 s -> 5.79 s at the same width and test error).
    For uniform draws (no weights)."""
    keep = np.zeros(sel.points.shape[0], dtype=bool)
    keep[first_of_each_row(sel.points)] = True
    if keep.all():
        return sel
    kept = np.flatnonzero(keep)
    indices = None if sel.indices is None else sel.indices[kept]
    return replace(sel, points=take_rows(sel.points, kept), indices=indices)


class UniformCenters:
    """m distinct training points drawn uniformly (in the order drawn)."""

    name = "uniform"

    def select(
        self,
        X: np.ndarray,
        n_centers: int,
        rng: np.random.Generator,
        kernel: Kernel,
        penalty: float | None = None,
        memory_budget: Any = None,
    ) -> CenterSelection:
        idx = rng.choice(X.shape[0], size=n_centers, replace=False)
        return CenterSelection(center_rows(X, idx), idx, self.name)

    def __repr__(self) -> str:
        return "UniformCenters()"


def _score_penalty(own: float | None, given: float | None, kernel: Kernel, X: np.ndarray) -> float:
    if own is not None:
        return own
    if given is not None and given > 0:
        return float(given)
    scale = float(
        np.max(B.to_numpy(kernel.diag(rows_in_memory(X, np.arange(min(X.shape[0], 1000))))))
    )
    return DEFAULT_SCORE_PENALTY * (scale if scale > 0 else 1.0)


def _draw_by_scores(
    scores: np.ndarray, m: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """m distinct indices drawn one after the other proportionally to ``scores``, and their
    sketch weights 1 / sqrt(m p_i)."""
    p = np.maximum(scores, 0.0)
    positive = int(np.count_nonzero(p))
    if positive < m:
        # too few points with a positive score: give the rest a tiny share, in draw order
        # after all the positive ones
        p = p + (p.sum() if p.sum() > 0 else 1.0) * 1e-12 / len(p)
    p = p / p.sum()
    idx = rng.choice(len(p), size=m, replace=False, p=p)
    return idx, 1.0 / np.sqrt(m * p[idx])


class LeverageCenters:
    """Sample centers proportionally to ridge leverage scores.

    Parameters
    ----------
    method : {"exact", "approximate"}, default="exact"
        How the scores are computed (``kernelpath.leverage_scores``).
    penalty : float or None
        λ of the scores. None: the estimator's penalty when it is one number, else
        ``DEFAULT_SCORE_PENALTY`` times max k(x, x).
    n_samples : int or None
        Columns of the approximate method.
    """

    def __init__(
        self, method: str = "exact", penalty: float | None = None, n_samples: int | None = None
    ) -> None:
        self.method = check_choice(method, "method", ("exact", "approximate"))
        self.penalty = (
            None
            if penalty is None
            else check_float(penalty, "penalty", 0.0, np.inf, low_open=True, high_open=True)
        )
        self.n_samples = check_int(n_samples, "n_samples", 1, allow_none=True)

    @property
    def name(self) -> str:
        return "leverage" if self.method == "exact" else "approximate-leverage"

    @fit_threaded
    def select(
        self,
        X: np.ndarray,
        n_centers: int,
        rng: np.random.Generator,
        kernel: Kernel,
        penalty: float | None = None,
        memory_budget: Any = None,
    ) -> CenterSelection:
        lam = _score_penalty(self.penalty, penalty, kernel, X)
        ws = Workspace.of(memory_budget)
        if self.method == "exact":
            scores = _exact_scores(X, kernel, lam, ws)
        else:
            p = (
                samples_within(ws.budget, X.shape[0])
                if self.n_samples is None
                else int(self.n_samples)
            )
            scores = _approximate_scores(X, kernel, lam, p, rng, ws)
        idx, w = _draw_by_scores(scores, n_centers, rng)
        return CenterSelection(
            center_rows(X, idx), idx, self.name, scores, w, lam, {"d_eff": float(scores.sum())}
        )

    def __repr__(self) -> str:
        return f"LeverageCenters(method={self.method!r}, penalty={self.penalty!r})"


class SqueakCenters:
    """The SQUEAK dictionary as the centers (``kernelpath.leverage.squeak``).

    The dictionary's size is SQUEAK's: about q̄ d_eff(λ). With ``n_centers`` smaller than
    the dictionary, m of its points are drawn proportionally to their multiplicities q_i
    (without replacement, in draw order); with ``n_centers`` larger, the whole dictionary is
    used. Weights: SQUEAK's S, sqrt(q_i / (q̄ p~_i)).

    Parameters
    ----------
    penalty : float or None
        λ (SQUEAK's γ = λ n); None as for ``LeverageCenters``.
    q_bar, eps, delta, batch_size, variant :
        See ``kernelpath.leverage.squeak`` (``variant="paper"``: Algorithm 1 as printed).
    regularized : bool, default=False
        Fit SQUEAK's own estimator (its Eq. 3): kernel ridge regression with the
        γ-regularized Nyström approximation K S (S^T K S + γ I)^-1 S^T K of the whole
        weighted dictionary, γ = λ n from ``penalty`` here, and the estimator's own
        ``penalty`` as the ridge μ (μ = penalty · n). False: plain Nyström on the
        dictionary's points (its weights unused). With True, leave ``n_centers=None``.
    """

    name = "squeak"
    #: the strategy picks the number of centers (the dictionary's size) when n_centers is None
    chooses_size = True

    def __init__(
        self,
        penalty: float | None = None,
        q_bar: int | None = None,
        eps: float = 0.5,
        delta: float | None = None,
        batch_size: int | None = None,
        variant: str = "auto",
        regularized: bool = False,
    ) -> None:
        self.penalty = (
            None
            if penalty is None
            else check_float(penalty, "penalty", 0.0, np.inf, low_open=True, high_open=True)
        )
        self.q_bar = q_bar
        self.eps = eps
        self.delta = delta
        self.batch_size = batch_size
        self.variant = check_choice(variant, "variant", SQUEAK_VARIANTS)
        if not isinstance(regularized, (bool, np.bool_)):
            raise TypeError(f"regularized must be True or False, got {regularized!r}")
        self.regularized = bool(regularized)

    @fit_threaded
    def select(
        self,
        X: np.ndarray,
        n_centers: int | None,
        rng: np.random.Generator,
        kernel: Kernel,
        penalty: float | None = None,
        memory_budget: Any = None,
    ) -> CenterSelection:
        if B.is_lazy(X):
            raise ValueError(
                "centers='squeak': SQUEAK's dictionary is built from X in memory; for data "
                "read from disk or a dask array use 'uniform' or 'approximate-leverage'"
            )
        lam = _score_penalty(self.penalty, penalty, kernel, X)
        ws = Workspace.of(memory_budget)
        args = (self.q_bar, self.eps, self.delta, self.batch_size, rng)
        d = squeak_dictionary(X, kernel, lam, *args, ws, self.variant)
        scores = _squeak_scores(X, kernel, d, ws)
        info: dict[str, Any] = {
            "dictionary_size": len(d),
            "q_bar": d.q_bar,
            "d_eff": float(scores.sum()),
            "variant": d.variant,
        }
        if self.regularized:
            if n_centers is not None and int(n_centers) < len(d):
                raise ValueError(
                    "SqueakCenters(regularized=True) uses the whole weighted dictionary "
                    f"({len(d)} points): leave n_centers=None, got {n_centers}"
                )
            order = np.arange(len(d))
            info["gamma"] = d.gamma
        else:
            m = len(d) if n_centers is None else min(int(n_centers), len(d))
            q = d.multiplicities.astype(float)
            order = rng.choice(len(d), size=m, replace=False, p=q / q.sum())
        idx = d.indices[order]
        points = center_rows(X, idx)
        return CenterSelection(points, idx, self.name, scores, d.weights[order], lam, info)

    def __repr__(self) -> str:
        return (
            f"SqueakCenters(penalty={self.penalty!r}, q_bar={self.q_bar!r}, "
            f"variant={self.variant!r}, regularized={self.regularized!r})"
        )


#: Candidates per block of the blocked RPCholesky: each block's kernel columns are one
#: operator pass; its candidates are drawn together from the residual diagonal and each is
#: accepted with probability (its residual now) / (its residual when drawn), which keeps
#: every pivot's law the one-at-a-time algorithm's (Epperly, Tropp & Webber's accelerated
#: RPCholesky).
RPCHOLESKY_BLOCK = 50


class RPCholeskyCenters:
    """Centers chosen by randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2023): each
    pivot is drawn proportionally to the diagonal of the residual K - F Fᵀ of the partial
    Cholesky factor F of the kernel matrix so far, so a point is drawn in proportion to how
    badly the centers drawn before explain it; the factor is updated with its column.

    Cost: about m kernel columns (n m kernel entries, in blocks of ``RPCHOLESKY_BLOCK``
    candidates, more where candidates are rejected) and
    O(n m²) for the factor, whose n x m float64 entries must fit ``memory_budget``. Pivots
    are distinct (a chosen point's residual is zero); points whose residual vanishes are
    never drawn, so fewer than m centers come back when X has fewer distinct directions.
    """

    name = "rpcholesky"

    @fit_threaded
    def select(
        self,
        X: np.ndarray,
        n_centers: int,
        rng: np.random.Generator,
        kernel: Kernel,
        penalty: float | None = None,
        memory_budget: Any = None,
    ) -> CenterSelection:
        if B.is_lazy(X):
            raise ValueError(
                "centers='rpcholesky' reads a kernel column of every row per pivot from X in "
                "memory; for data read from disk or a dask array use 'uniform' or "
                "'approximate-leverage'"
            )
        ws = Workspace.of(memory_budget)
        checked = check_int(n_centers, "n_centers", 1)
        assert checked is not None
        n, m = int(X.shape[0]), min(int(checked), int(X.shape[0]))
        need = 8 * n * (m + 2)
        if need > ws.budget:
            raise ValueError(
                f"centers='rpcholesky' holds the n x m Cholesky factor ({need / 1e6:.0f} MB for "
                f"{n} rows and {m} centers), more than memory_budget="
                f"{ws.budget / 1e6:.0f} MB: give a larger budget, fewer centers, or "
                "'uniform' centers"
            )
        F = np.zeros((n, m))
        d = np.asarray(B.to_numpy(kernel.diag(X)), dtype=np.float64).copy()
        picked: list[int] = []
        while len(picked) < m:
            total = float(d.sum())
            if not total > 0:
                break
            want = min(RPCHOLESKY_BLOCK, m - len(picked))
            drawn = d.copy()  # the residual the block's candidates were drawn from
            cand = rng.choice(n, size=want, p=d / total)
            uniq, where = np.unique(cand, return_inverse=True)
            cols = np.asarray(
                B.to_numpy(ws.operator(X, rows_in_memory(X, uniq), kernel, cache=False).dense()),
                dtype=np.float64,
            )  # (n, b): the kernel columns of the candidates
            for j, s in zip(where, cand, strict=True):  # one step per candidate, in order
                # rejection: accept with probability (its residual now) / (when drawn), so
                # every pivot is drawn from the current residual, as one at a time would be
                if not rng.random() * drawn[s] < d[s]:
                    continue
                k = len(picked)
                g = cols[:, j] - F[:, :k] @ F[s, :k]
                if not g[s] > 1e-12 * max(float(drawn.max()), 1e-300):
                    continue  # explained by the pivots before it (rounding)
                F[:, k] = g / np.sqrt(g[s])
                d -= F[:, k] ** 2
                np.maximum(d, 0.0, out=d)
                d[s] = 0.0
                picked.append(int(s))
                if len(picked) == m:
                    break
        idx = np.asarray(picked, dtype=np.int64)
        info = {"residual_trace": float(d.sum())}
        return CenterSelection(center_rows(X, idx), idx, self.name, None, None, None, info)

    def __repr__(self) -> str:
        return "RPCholeskyCenters()"


STRATEGIES: dict[str, Any] = {
    "uniform": UniformCenters(),
    "leverage": LeverageCenters("exact"),
    "approximate-leverage": LeverageCenters("approximate"),
    "squeak": SqueakCenters(),
    "rpcholesky": RPCholeskyCenters(),
}


def chooses_size(centers: Any) -> bool:
    """Whether the strategy ``centers`` (a name, a strategy object or points) picks the number
    of centers itself when ``n_centers`` is None (SQUEAK's dictionary)."""
    if isinstance(centers, str):
        centers = STRATEGIES.get(centers)
    return bool(getattr(centers, "chooses_size", False))


def select_centers(
    centers: Any,
    X: np.ndarray,
    n_centers: int | None,
    rng: np.random.Generator,
    kernel: Kernel | None = None,
    penalty: float | None = None,
    memory_budget: Any = None,
) -> CenterSelection:
    """Choose the centers.

    Parameters
    ----------
    centers : str, strategy object or array-like of shape (m, d)
        A name from ``STRATEGIES`` (``None`` means "uniform"), an object with a ``select``
        method (``LeverageCenters(...)``, ``SqueakCenters(...)``), or the points.
    X : ndarray of shape (n, d)
        Training inputs.
    n_centers : int or None
        Number of centers (already clipped to n); None lets SQUEAK choose (other strategies
        need a number).
    rng : Generator
    kernel : Kernel
        The resolved kernel (needed by the leverage strategies).
    penalty : float or None
        The estimator's penalty when it is one number (the scores' default λ).
    memory_budget : int, str or None

    Returns
    -------
    CenterSelection
    """
    if isinstance(centers, CenterSelection):  # chosen already: a refit keeps its centers
        return centers
    if centers is None:
        centers = "uniform"
    if isinstance(centers, str):
        if centers not in STRATEGIES:
            raise ValueError(
                f"centers must be one of {sorted(STRATEGIES)}, a strategy object or an "
                f"array of points, got {centers!r}"
            )
        centers = STRATEGIES[centers]
    if hasattr(centers, "select"):
        if kernel is None:
            raise ValueError("a center strategy needs the kernel")
        if n_centers is None and not chooses_size(centers):
            raise ValueError("n_centers is needed by this center strategy")
        sel: CenterSelection = centers.select(X, n_centers, rng, kernel, penalty, memory_budget)
        if n_centers is not None and sel.points.shape[0] < n_centers:
            warnings.warn(
                f"the {sel.strategy} strategy found {sel.points.shape[0]} centers, fewer than "
                f"n_centers={n_centers}",
                UserWarning,
                stacklevel=3,
            )
        return sel
    pts = B.to_numpy(centers) if B.is_tensor(centers) else np.asarray(centers)
    if pts.dtype.kind not in "iuf":
        raise TypeError(
            f"centers must be a strategy name or a numeric array, got dtype {pts.dtype}"
        )
    if pts.ndim != 2 or pts.shape[1] != X.shape[1] or len(pts) == 0:
        raise ValueError(f"centers must have shape (m, {X.shape[1]}) with m >= 1, got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("centers contains NaN or infinity")
    return CenterSelection(B.to_device(pts, B.array_device(X), B.dtype_of(X)), None, "given")
