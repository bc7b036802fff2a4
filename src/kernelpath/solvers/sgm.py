"""Stochastic gradient methods on an explicit feature map: SGM (one pass) and SIGM (several
passes), thesis ch. 6, Algorithm 1 (Lin & Rosasco, "Optimal rates for multi-pass stochastic
gradient methods").

With features φ(x) in R^D, a loss ℓ(f, y), step sizes η_t = η t^(-θ) (θ = 0: constant) and
minibatches of b indices drawn uniformly with replacement,

    w_{t+1} = w_t - η_t ( (1/b) sum_{i in batch t} ℓ'(<w_t, φ(x_i)>, y_i) φ(x_i) + λ w_t ),

with λ = 0 in Algorithm 1 (the step size and the number of passes regularize; λ > 0 is the
regularized variant). A pass is ceil(n / b) iterations. The averaged iterate is the
step-weighted mean of eq. 6.4, w̄_T = sum_{t=1}^T η_t w_t / sum_{t=1}^T η_t
(``averaging="step"``, w_t the iterate after step t), or the uniform mean
(1/T) sum_{t=1}^T w_t (``averaging="uniform"``); the two agree for constant steps (θ = 0).
Losses (of the ±1 codes for classification):

- square:   ℓ = (f - y)^2 / 2,          ℓ' = f - y
- hinge:    ℓ = max(0, 1 - y f),        ℓ' = -y [y f < 1]   (a subgradient)
- logistic: ℓ = log(1 + exp(-y f)),     ℓ' = -y / (1 + exp(y f))

Several step sizes, and several decays θ, run side by side on the same minibatches: the path
is over (step size, passes), or (θ, step size, passes) for several θ (the thesis's Fig. 6.2b
and Table 6.2), with the validation error after every pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._backend import FACTOR_DTYPE
from ..operators.features import BLOCK_BYTES
from ..path import Path
from ..progress import report
from ..selection import EarlyStopping
from ._common import Validation, as_2d

__all__ = ["LOSSES", "AVERAGING", "SGMRun", "loss_derivative", "loss_value", "sgm_path"]

LOSSES = ("square", "hinge", "logistic")
AVERAGING = ("uniform", "step")


def loss_derivative(name: str, F: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """ℓ'(f, y) elementwise; for the hinge loss the left-hand derivative ℓ'_−(y, f) of the
    thesis's eq. 6.3 (at the kink y f = 1 it is −y for y > 0 and 0 for y < 0)."""
    if name == "square":
        return F - Y
    if name == "hinge":
        yf = Y * F
        return np.where((yf < 1.0) | ((yf == 1.0) & (Y > 0)), -Y, 0.0)
    if name == "logistic":
        z = np.clip(Y * F, -50.0, 50.0)
        return -Y / (1.0 + np.exp(z))
    raise ValueError(f"loss must be one of {LOSSES}, got {name!r}")


def loss_value(name: str, F: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """ℓ(f, y) elementwise."""
    if name == "square":
        return 0.5 * (F - Y) ** 2
    if name == "hinge":
        return np.maximum(0.0, 1.0 - Y * F)
    if name == "logistic":
        return np.logaddexp(0.0, -Y * F)
    raise ValueError(f"loss must be one of {LOSSES}, got {name!r}")


def sgm_memory(D: int, d: int, nystrom: bool, n_steps: int, k: int, n_val: int) -> int:
    """Bytes an SGM fit holds beside the data and its feature cache: the Nyström feature
    map's D x D factor and its making (two D x D, ``nystrom``), three blocks of features in
    flight (``operators.features.BLOCK_BYTES`` each: the transform's intermediates), the
    iterates and their averages (D x steps k, four each), and the validation predictions
    (n_val x steps k, twice)."""
    factor = 8 * (2 * D * D + D * d) if nystrom else 8 * D * d
    blocks = 3 * min(BLOCK_BYTES, 8 * max(n_val, 1000) * D)
    return factor + blocks + 8 * (4 * D + 2 * n_val) * n_steps * k


@dataclass(frozen=True)
class SGMRun:
    """How Algorithm 1 runs (the solver's settings in one object).

    Attributes
    ----------
    loss : {"square", "hinge", "logistic"}
    step_sizes : ndarray of shape (S,)
        η of each run.
    decay : float or ndarray of shape (Θ,)
        θ >= 0: η_t = η t^(-θ); several θ run side by side (a path axis "decay").
    batch_size, n_passes : int
    averaged : bool
        Score and keep the averaged iterate instead of the last one.
    averaging : {"uniform", "step"}
        The uniform mean of the iterates, or eq. 6.4's step-weighted mean.
    penalty : float
        λ >= 0 (0: Algorithm 1).
    n_iter_no_change, tol : early stopping per step size on the validation loss.
    """

    loss: str
    step_sizes: np.ndarray
    decay: Any = 0.0
    batch_size: int = 1
    n_passes: int = 1
    averaged: bool = True
    penalty: float = 0.0
    averaging: str = "uniform"
    n_iter_no_change: int | None = None
    tol: float = 0.0


class _Runs:
    """The S = Θ x steps runs side by side: their weights, averages and step schedules."""

    def __init__(self, run: SGMRun, D: int, k: int) -> None:
        self.decays = np.atleast_1d(np.asarray(run.decay, dtype=FACTOR_DTYPE))
        self.n_steps = len(run.step_sizes)
        # column c = i_θ * n_steps + i_η: every (θ, η) pair is one run
        self.eta = np.tile(np.asarray(run.step_sizes, dtype=FACTOR_DTYPE), len(self.decays))
        self.theta = np.repeat(self.decays, self.n_steps)
        S = self.S = len(self.eta)
        self.W = np.zeros((S, D, k))
        self.Wsum = np.zeros((S, D, k)) if run.averaged else None
        self.wsum = np.zeros(S)  # sum of the averaging weights (η_t, or 1 per iterate)

    def model(self) -> np.ndarray:
        """Each run's iterate as scored and kept: the last one, or the average."""
        if self.Wsum is None:
            return self.W
        return self.Wsum / np.maximum(self.wsum, 1e-300)[:, None, None]


def _one_pass(
    runs: _Runs,
    run: SGMRun,
    alive: np.ndarray,
    features: Callable[[np.ndarray], np.ndarray],
    Y2: np.ndarray,
    weights: np.ndarray | None,
    rng: np.random.Generator,
    t: int,
) -> tuple[np.ndarray, int]:
    """One pass (ceil(n / b) minibatches) of the runs ``alive``: the training loss summed
    over the pass per run, and the step count after it."""
    n, b = len(Y2), run.batch_size
    W = runs.W
    loss_sum = np.zeros(runs.S)
    for _ in range(-(-n // b)):
        t += 1
        idx = rng.integers(0, n, size=b)
        Phi = np.asarray(features(idx), dtype=FACTOR_DTYPE)  # (b, D)
        F = Phi @ W[alive]  # (r, b, k)
        Yb = Y2[idx][None]
        g = loss_derivative(run.loss, F, Yb)
        loss_sum[alive] += loss_value(run.loss, F, Yb).sum(axis=(1, 2))
        if weights is not None:
            g = g * weights[idx][None, :, None]
        grad = np.einsum("bd,rbk->rdk", Phi, g) / b
        if run.penalty:
            grad += run.penalty * W[alive]
        step = runs.eta[alive] * float(t) ** (-runs.theta[alive])
        W[alive] -= step[:, None, None] * grad
        if runs.Wsum is not None:
            a = step if run.averaging == "step" else np.ones(len(alive))
            runs.Wsum[alive] += a[:, None, None] * W[alive]
            runs.wsum[alive] += a
    if not np.all(np.isfinite(W[alive])):
        raise FloatingPointError("SGM diverged (non-finite weights): give a smaller step_size")
    return loss_sum, t


def _scored(
    validation: Validation, model: np.ndarray, alive: np.ndarray, loss: str, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """(validation error, validation loss) of the runs ``alive``."""
    D = model.shape[1]
    Fv = validation.op.matvec(model[alive].transpose(1, 0, 2).reshape(D, -1))
    Fv = np.asarray(Fv, dtype=FACTOR_DTYPE)
    e, _ = validation.errors(Fv, k)
    # stop on (and break ties by) the method's own loss: the squared loss of the ±1 codes
    # punishes the confident margins the hinge loss asks for, and stopped hinge SIGM on
    # ijcnn1 at 6 passes with 6.8% error (LinearSVC: 2.7%)
    F3 = Fv.reshape(len(validation.Y), len(alive), k).transpose(1, 0, 2)
    ls = loss_value(loss, F3, np.asarray(validation.Y)[None]).mean(axis=(1, 2))
    return e, ls


def sgm_path(
    features: Callable[[np.ndarray], np.ndarray],
    n: int,
    D: int,
    Y: np.ndarray,
    run: SGMRun,
    rng: np.random.Generator,
    validation: Validation | None = None,
    weights: np.ndarray | None = None,
) -> Path:
    """Run Algorithm 1 for every step size at once; a Path over ("step_size", "n_passes").

    Parameters
    ----------
    features : callable (indices) -> ndarray of shape (len(indices), D)
        The feature map of the training points.
    n, D : int
        Training points and features.
    Y : ndarray of shape (n,) or (n, k)
        Targets (±1 codes for classification).
    run : SGMRun
        The loss, the step sizes and decays, the minibatches, the averaging, λ and the
        early-stopping rule.
    rng : Generator
        Draws the minibatches (shared by the step sizes).
    validation : Validation or None
        Validation set seen through an operator whose ``matvec`` applies its features.
    weights : ndarray of shape (n,) or None
        Sample weights (summing to n) multiplying each point's gradient.

    Returns
    -------
    Path with coefficients of shape (D, k) for each (step size, pass), or (θ, step size,
    pass) with several θ.
    """
    if run.averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {run.averaging!r}")
    Y2 = as_2d(Y).astype(FACTOR_DTYPE)
    k = Y2.shape[1]
    runs = _Runs(run, D, k)
    S, n_passes = runs.S, run.n_passes
    train = np.full((S, n_passes), np.nan)
    val_err = None if validation is None else np.full((S, n_passes), np.nan)
    val_loss = None if validation is None else np.full((S, n_passes), np.nan)
    stopper = EarlyStopping(S, run.n_iter_no_change, run.tol) if validation is not None else None
    active = np.ones(S, dtype=bool)
    stored: dict[tuple[int, ...], np.ndarray] = {}
    t = 0
    for p in range(n_passes):
        alive = np.flatnonzero(active)
        if alive.size == 0:
            break
        loss_sum, t = _one_pass(runs, run, alive, features, Y2, weights, rng, t)
        model = runs.model()
        train[alive, p] = loss_sum[alive] / (-(-n // run.batch_size) * run.batch_size * k)
        if validation is not None and val_err is not None and val_loss is not None:
            val_err[alive, p], val_loss[alive, p] = _scored(validation, model, alive, run.loss, k)
            assert stopper is not None
            stopper.update(p, val_loss[:, p])
            active &= stopper.active
        for r in alive:  # every reached point is kept (S x passes weight vectors)
            stored[(int(r), p)] = model[r].copy()
        seen = val_err[:, : p + 1] if val_err is not None else None
        best = {"best_val": float(np.nanmin(seen))} if seen is not None else {}
        report("passes", p + 1, n_passes, active=int(active.sum()), **best)
    return _path(runs, run, train, val_err, val_loss, stored, validation, -(-n // run.batch_size))


def _path(
    runs: _Runs,
    run: SGMRun,
    train: np.ndarray,
    val_err: np.ndarray | None,
    val_loss: np.ndarray | None,
    stored: dict[tuple[int, ...], np.ndarray],
    validation: Validation | None,
    iters: int,
) -> Path:
    """The path over (step size, passes), or (θ, step size, passes) for several θ."""
    decays, eta, n_steps, n_passes = runs.decays, runs.eta, runs.n_steps, run.n_passes
    info = {
        "loss": run.loss,
        "batch_size": run.batch_size,
        "iterations_per_pass": iters,
        "averaged": run.averaged,
        "averaging": run.averaging,
        "decay": decays.tolist() if len(decays) > 1 else float(decays[0]),
    }
    scoring = validation.scoring if validation is not None else "mse"
    if len(decays) == 1:
        steps_grid, pass_grid = np.meshgrid(eta, np.arange(1, n_passes + 1), indexing="ij")
        return Path(
            {"step_size": steps_grid, "n_passes": pass_grid},
            train,
            val_err,
            coef_fn=None,
            scoring=scoring,
            stored=stored,
            val_loss=val_loss,
            info=info,
        )
    shape = (len(decays), n_steps, n_passes)
    grids = np.meshgrid(decays, eta[:n_steps], np.arange(1, n_passes + 1), indexing="ij")

    def cube(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a.reshape(shape)

    return Path(
        {"decay": grids[0], "step_size": grids[1], "n_passes": grids[2]},
        train.reshape(shape),
        cube(val_err),
        coef_fn=None,
        scoring=scoring,
        stored={(c // n_steps, c % n_steps, p): v for (c, p), v in stored.items()},
        val_loss=cube(val_loss),
        info=info,
    )
