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
from typing import Any

import numpy as np

from .._backend import FACTOR_DTYPE
from ..operators.features import BLOCK_BYTES
from ..path import Path
from ..progress import report
from ..selection import EarlyStopping
from ._common import Validation, as_2d

__all__ = ["LOSSES", "AVERAGING", "loss_derivative", "loss_value", "sgm_path"]

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


def sgm_path(
    features: Callable[[np.ndarray], np.ndarray],
    n: int,
    D: int,
    Y: np.ndarray,
    loss: str,
    step_sizes: np.ndarray,
    decay: Any,
    batch_size: int,
    n_passes: int,
    averaged: bool,
    penalty: float,
    rng: np.random.Generator,
    validation: Validation | None = None,
    n_iter_no_change: int | None = None,
    tol: float = 0.0,
    weights: np.ndarray | None = None,
    averaging: str = "uniform",
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
    rng : Generator
        Draws the minibatches (shared by the step sizes).
    validation : Validation or None
        Validation set seen through an operator whose ``matvec`` applies its features.
    n_iter_no_change, tol : early stopping per step size on the validation loss.
    weights : ndarray of shape (n,) or None
        Sample weights (summing to n) multiplying each point's gradient.

    Returns
    -------
    Path with coefficients of shape (D, k) for each (step size, pass), or (θ, step size,
    pass) with several θ.
    """
    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    Y2 = as_2d(Y).astype(FACTOR_DTYPE)
    k = Y2.shape[1]
    decays = np.atleast_1d(np.asarray(decay, dtype=FACTOR_DTYPE))
    n_steps = len(step_sizes)
    # column c = i_θ * n_steps + i_η: every (θ, η) pair is one run
    eta = np.tile(np.asarray(step_sizes, dtype=FACTOR_DTYPE), len(decays))
    theta = np.repeat(decays, n_steps)
    S = len(eta)
    W = np.zeros((S, D, k))
    Wsum = np.zeros((S, D, k)) if averaged else None
    wsum = np.zeros(S)  # sum of the averaging weights (η_t, or 1 per iterate)
    iters = -(-n // batch_size)
    train = np.full((S, n_passes), np.nan)
    val_err = None if validation is None else np.full((S, n_passes), np.nan)
    val_loss = None if validation is None else np.full((S, n_passes), np.nan)
    stopper = EarlyStopping(S, n_iter_no_change, tol) if validation is not None else None
    active = np.ones(S, dtype=bool)
    stored: dict[tuple[int, ...], np.ndarray] = {}
    t = 0
    for p in range(n_passes):
        run = np.flatnonzero(active)
        if run.size == 0:
            break
        loss_sum = np.zeros(S)
        for _ in range(iters):
            t += 1
            idx = rng.integers(0, n, size=batch_size)
            Phi = np.asarray(features(idx), dtype=FACTOR_DTYPE)  # (b, D)
            F = Phi @ W[run]  # (r, b, k)
            Yb = Y2[idx][None]
            g = loss_derivative(loss, F, Yb)
            loss_sum[run] += loss_value(loss, F, Yb).sum(axis=(1, 2))
            if weights is not None:
                g = g * weights[idx][None, :, None]
            grad = np.einsum("bd,rbk->rdk", Phi, g) / batch_size
            if penalty:
                grad += penalty * W[run]
            step = eta[run] * float(t) ** (-theta[run])
            W[run] -= step[:, None, None] * grad
            if Wsum is not None:
                a = step if averaging == "step" else np.ones(len(run))
                Wsum[run] += a[:, None, None] * W[run]
                wsum[run] += a
        if not np.all(np.isfinite(W[run])):
            raise FloatingPointError("SGM diverged (non-finite weights): give a smaller step_size")
        model = W if Wsum is None else Wsum / np.maximum(wsum, 1e-300)[:, None, None]
        train[run, p] = loss_sum[run] / (iters * batch_size * k)
        if validation is not None and val_err is not None and val_loss is not None:
            Fv = validation.op.matvec(model[run].transpose(1, 0, 2).reshape(D, -1))
            Fv = np.asarray(Fv, dtype=FACTOR_DTYPE)
            e, _ = validation.errors(Fv, k)
            # stop on (and break ties by) the method's own loss: the squared loss of the ±1
            # codes punishes the confident margins the hinge loss asks for, and stopped
            # hinge SIGM on ijcnn1 at 6 passes with 6.8% error (LinearSVC: 2.7%)
            F3 = Fv.reshape(len(validation.Y), len(run), k).transpose(1, 0, 2)
            ls = loss_value(loss, F3, np.asarray(validation.Y)[None]).mean(axis=(1, 2))
            val_err[run, p], val_loss[run, p] = e, ls
            assert stopper is not None
            full_e = np.full(S, np.nan)
            full_e[run] = ls
            stopper.update(p, full_e)
            active &= stopper.active
        for r in run:  # every reached point is kept (S x passes weight vectors)
            stored[(int(r), p)] = model[r].copy()
        seen = val_err[:, : p + 1] if val_err is not None else None
        best = {"best_val": float(np.nanmin(seen))} if seen is not None else {}
        report("passes", p + 1, n_passes, active=int(active.sum()), **best)
    info = {
        "loss": loss,
        "batch_size": batch_size,
        "iterations_per_pass": iters,
        "averaged": averaged,
        "averaging": averaging,
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
