"""A fit as data: the problem (validated inputs), the settings of one candidate fit, and
what a candidate fit produces. Nothing here is estimator state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._backend import Device
from ..centers import CenterSelection
from ..inputs import take_rows
from ..kernels import Kernel
from ..path import Path
from ..workspace import Workspace

__all__ = [
    "FitProblem",
    "FitSettings",
    "SolveRequest",
    "CandidateFit",
    "spawned",
    "target_scale",
    "TARGET_RANGE",
]

#: Targets whose spread (the largest |y - mean|) lies in [2^-TARGET_RANGE, 2^TARGET_RANGE]
#: are fitted as given; others divided by the power of two nearest their spread, so that
#: the squared losses, their squares (the screens' tie rules) and the solvers' residuals
#: neither underflow nor overflow: the model is then the same, to rounding, at every scale
#: (``NystromRegressor`` on y * 1e-90 predicted 19% of y's spread off 1e-90 times its
#: predictions on y, and below 1e-160 the losses were 0).
TARGET_RANGE = 40


def target_scale(Y: np.ndarray) -> float:
    """The power of two the targets ``Y`` (n, k) are divided by in a fit: 1 where their
    spread lies in [2^-TARGET_RANGE, 2^TARGET_RANGE] (or is 0), else the power of two
    nearest it (a division by it is exact)."""
    spread = float(np.max(np.abs(Y - np.mean(Y, axis=0)), initial=0.0)) if Y.size else 0.0
    if spread == 0.0 or not np.isfinite(spread):
        return 1.0
    exponent = int(np.round(np.log2(spread)))
    return 1.0 if abs(exponent) <= TARGET_RANGE else float(2.0**exponent)


def spawned(rng: np.random.Generator) -> np.random.Generator:
    """A generator spawned from ``rng`` (``rng``'s own stream is left as it was)."""
    try:
        return rng.spawn(1)[0]
    except (AttributeError, TypeError):  # a generator without a seed sequence
        return np.random.default_rng(rng.integers(2**63))


@dataclass(frozen=True)
class FitProblem:
    """The validated inputs of a fit.

    Attributes
    ----------
    X : ndarray, tensor, row source or dask array of shape (n, d)
        On the device of the fit.
    Y : ndarray of shape (n, k)
        Coded targets: the targets (regression) or ±1 one-vs-all codes (classification).
    weights : ndarray of shape (n,) or None
        Sample weights rescaled to sum to n.
    labels : ndarray of shape (n,) or None
        Class labels, for stratified splits (classifiers only).
    workspace : Workspace
        The fit's budget (bytes of ``memory_budget``, resolved once), device and threads;
        it builds the fit's operators.
    single_output : bool
        The targets were one column (a 1-D y, or two classes): the model's ``coef_`` is 1-D.
    estimator : str
        The estimator's name, for messages.
    held : int
        Bytes of the budget the fit holds already (``fitting.memory``): the copy of X made
        while validating it, and at the refit the search's paths.
    center : ndarray of shape (d,) or None
        The columns' means where the fit scales its inputs (``scaling.feature_statistics``):
        random Fourier maps draw their phases relative to it. None: inputs as given.
    y_scale : float
        The power of two the regression targets were divided by to make ``Y``
        (``target_scale``; 1 for classifiers and for targets of ordinary spread): the
        model's coefficients, intercept and path are multiplied back when it is published.
    """

    X: Any
    Y: np.ndarray
    weights: np.ndarray | None
    labels: np.ndarray | None
    workspace: Workspace
    single_output: bool = False
    estimator: str = "the estimator"
    held: int = 0
    center: np.ndarray | None = None
    y_scale: float = 1.0

    @property
    def device(self) -> Device:
        return self.workspace.device

    @property
    def budget(self) -> int:
        """Bytes of ``memory_budget``."""
        return self.workspace.budget

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self.Y.shape[1])

    @property
    def classifier(self) -> bool:
        return self.labels is not None

    @property
    def scoring(self) -> str:
        """How a validation set scores a point: error rate (classifiers) or MSE."""
        return "error_rate" if self.classifier else "mse"

    def rows(self, idx: np.ndarray) -> Any:
        """X[idx] (a lazy subset for a row source or a dask array)."""
        return take_rows(self.X, idx)

    def scoring_weights(self, rows: np.ndarray) -> np.ndarray | None:
        """The weights that score ``rows`` (a hold-out, out-of-fold rows): None where the
        fit has none or none of these rows weighs anything (then they count alike)."""
        w = None if self.weights is None else self.weights[rows]
        return w if w is not None and w.sum() > 0 else None

    def targets(
        self, rows: np.ndarray, unit_mean_weights: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """(centered training targets, training weights, intercept) of ``rows``.

        The intercept is the weighted mean of the targets for regression and 0 for the ±1
        codes of classification: the models have no constant term. ``unit_mean_weights``
        rescales the training weights to mean 1 (the stochastic solvers weigh each point's
        gradient by them)."""
        wt = None if self.weights is None else self.weights[rows]
        if wt is not None and not wt.sum() > 0:
            raise ValueError(
                f"sample_weight: the {len(rows)} rows this fit trains on have weight 0 "
                "(every positive weight fell in the rows held out to validate): give more "
                "rows a positive weight, or validation_fraction=0 with a fixed penalty"
            )
        if wt is not None and unit_mean_weights:
            wt = wt * (len(wt) / wt.sum())
        Ytr = self.Y[rows]
        if self.classifier:
            intercept = np.zeros(self.Y.shape[1])
        else:
            intercept = np.average(Ytr, axis=0, weights=wt)
        return Ytr - intercept, wt, intercept


@dataclass(frozen=True)
class FitSettings:
    """What one candidate fit is asked to do; changed per candidate with
    ``dataclasses.replace``.

    Attributes
    ----------
    penalty : float, ndarray of float or "auto"
        λ, a λ grid, or the solver's own grid.
    rng : numpy.random.Generator
        The candidate's generator (centers, feature seeds, minibatches); refits continue
        its stream.
    validation_fraction : float
    n_iter_no_change : int or None
    tol : float
    refit : bool or "auto"
    options : object
        The family's own options (a frozen dataclass of the family module).
    cv_mode : "loo", "gcv" or None
        Score the path in closed form instead of on a validation set.
    size : object
        The size parameter (``n_centers`` / ``n_features``) as given, or a candidate's
        own value (screening, refit).
    n_iter : int or None
        A fixed iteration count (refits): no early stopping, the plain stopping rule.
    feature_seed : int or None
        The seed of the candidate's feature map, drawn at its first fit and kept for the
        others (screening rounds, refit).
    center_growth : float
        The multiple of the default number of centers (``n_centers=None``) the candidate
        draws (``fitting.growth``); 1: sqrt(n) log(n).
    """

    penalty: Any
    rng: np.random.Generator
    validation_fraction: float
    n_iter_no_change: int | None
    tol: float
    refit: bool | str
    options: Any = None
    cv_mode: str | None = None
    size: Any = None
    n_iter: int | None = None
    feature_seed: int | None = None
    center_growth: float = 1.0

    def seed(self) -> int:
        """The feature seed: the kept one, or a new draw from ``rng``."""
        if self.feature_seed is not None:
            return self.feature_seed
        return int(self.rng.integers(2**63))


class SolveRequest(NamedTuple):
    """One path a family is asked to fit (``Family.solve``): ``kernel`` on the problem's
    ``rows``, scored on ``val_rows`` (None: no hold-out, the path scored in closed form,
    ``settings.cv_mode``, or not at all), with ``settings``. A tuple, so that a family
    unpacks it in one line."""

    problem: FitProblem
    kernel: Kernel
    rows: np.ndarray
    val_rows: np.ndarray | None
    settings: FitSettings

    @classmethod
    def every_row(cls, problem: FitProblem, kernel: Kernel, settings: FitSettings) -> SolveRequest:
        """A fit on all the problem's rows with no hold-out (a refit)."""
        return cls(problem, kernel, np.arange(problem.n), None, settings)


@dataclass
class CandidateFit:
    """One candidate's fit: its path and what its model is made of.

    Attributes
    ----------
    kernel : Kernel
    path : Path
    intercept : ndarray of shape (k,)
    settings : FitSettings
        The settings it was fit with (its feature seed drawn).
    rows : int
        Training rows the path was fit on.
    centers : CenterSelection or None
        Nyström centers (all the training points for exact KRLS and kernel EigenPro).
    features : object or None
        The feature map (random or Nyström features) of a primal model.
    row_indices : ndarray of int or None
        The training rows' indices in the problem (where ``centers.indices`` point to).
    """

    kernel: Kernel
    path: Path
    intercept: np.ndarray
    settings: FitSettings
    rows: int
    centers: CenterSelection | None = None
    features: Any = None
    row_indices: np.ndarray | None = None

    def score(self) -> tuple[float, float]:
        """(validation error, loss) of the path's chosen point: how candidates compare."""
        path = self.path
        i = path.best_index
        err = path.val_error[i] if path.val_error is not None else np.inf
        loss = path.val_loss[i] if path.val_loss is not None else err
        err = float(err) if np.isfinite(err) else np.inf
        return err, float(loss) if np.isfinite(loss) else np.inf
