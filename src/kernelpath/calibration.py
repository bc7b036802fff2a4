"""Class probabilities from a classifier's scores: native for the logistic loss, else a
one-parameter calibration map fit on held-out scores that leaves ``predict`` unchanged.

Scores F have one column for two classes (positive: the second class) and one per class
otherwise. Two monotone maps are fit to the held-out rows, each's scale by weighted
log-loss, and the one with the lower held-out expected calibration error is kept (both keep
the arg max, so ``predict`` is the probabilities' arg max):

- ``"temperature"``: p = softmax(a F) (two classes: p_1 = sigmoid(a f)), the scores read
  as logits;
- ``"power"``: the scores read as least-squares estimates of 2 p - 1 (what the square loss
  fits to ±1 codes, and the squared hinge near its margin): q_j = max((1 + f_j) / 2,
  EPS exp(f_j)) (strictly increasing, positive), p_j proportional to q_j^a (two classes:
  q_0 = 1 - q_1 where q_1 = the same map clipped below 1 - EPS).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

__all__ = [
    "CALIBRATION_MAPS",
    "calibration_error",
    "fit_calibration",
    "log_probabilities",
    "logits",
]

CALIBRATION_MAPS = ("temperature", "power")
#: The floor of the power map's estimates.
EPS = 1e-4
#: log a is searched in [-LOG_SCALE_BOUND, LOG_SCALE_BOUND].
LOG_SCALE_BOUND = 9.0


def _two_columns(F: np.ndarray) -> np.ndarray:
    """Scores as (n, n_classes) logits: one column f becomes (0, f)."""
    F = np.asarray(F, dtype=np.float64)
    if F.ndim == 1:
        F = F[:, None]
    if F.shape[1] == 1:
        return np.hstack([np.zeros_like(F), F])
    return F


def logits(F: np.ndarray, method: str) -> np.ndarray:
    """The map's log-odds before the scale a.

    Parameters
    ----------
    F : ndarray of shape (n,) or (n, k)
        Decision scores (one column: a binary classifier's).
    method : {"temperature", "power"}
        The calibration map.

    Returns
    -------
    ndarray of shape (n, n_classes)
    """
    F = np.asarray(F, dtype=np.float64)
    if method == "temperature":
        return _two_columns(F)
    if method != "power":
        raise ValueError(f"unknown calibration map {method!r}")
    # log q with q = max((1 + F) / 2, EPS exp(min(F, 0))), in logs so that very negative
    # scores (a diverged fit's) give a finite log-probability instead of log(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        linear = np.where(F > -1.0, np.log(np.maximum((1.0 + F) / 2.0, 0.0)), -np.inf)
    log_q = np.maximum(linear, np.log(EPS) + np.minimum(F, 0.0))
    if F.ndim == 1 or F.shape[1] == 1:
        log_q1 = np.minimum(log_q.reshape(-1), np.log1p(-EPS))
        return np.column_stack([np.log1p(-np.exp(log_q1)), log_q1])
    return log_q


def log_probabilities(F: np.ndarray, calibration: dict[str, Any] | None) -> np.ndarray:
    """Log-probabilities of decision scores under a calibration map.

    Parameters
    ----------
    F : ndarray of shape (n,) or (n, k)
        Decision scores.
    calibration : dict or None
        A map from ``fit_calibration`` ("method", "scale"); None: F are the logits of the
        logistic loss.

    Returns
    -------
    ndarray of shape (n, n_classes)
    """
    if calibration is None:
        return log_softmax(_two_columns(F), axis=1)
    Z = logits(F, str(calibration["method"]))
    return log_softmax(float(calibration["scale"]) * Z, axis=1)


def calibration_error(
    P: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, bins: int = 15
) -> float:
    """Top-label expected calibration error.

    The mean over ``bins`` equal-width bins of the top probability of the absolute
    difference between the bin's accuracy and its mean top probability, weighted by the
    bins' (weighted) shares of the rows.

    Parameters
    ----------
    P : ndarray of shape (n, n_classes)
        Class probabilities.
    y : ndarray of shape (n,)
        True class indices (columns of P).
    weights : ndarray of shape (n,) or None, default=None
        Row weights.
    bins : int, default=15
        Number of equal-width bins of the top probability.

    Returns
    -------
    float
    """
    P = np.asarray(P)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    conf = P.max(axis=1)
    right = (P.argmax(axis=1) == np.asarray(y)).astype(float)
    which = np.clip(np.digitize(conf, np.linspace(0.0, 1.0, bins + 1)[1:-1]), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = which == b
        wb = w[sel].sum()
        if wb > 0:
            total += wb * abs(np.average(right[sel] - conf[sel], weights=w[sel]))
    return float(total / w.sum())


def _nll(Z: np.ndarray, y: np.ndarray, w: np.ndarray, a: float) -> float:
    L = log_softmax(a * Z, axis=1)
    return float(-(w @ L[np.arange(len(y)), y]) / w.sum())


def fit_calibration(
    F: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
) -> dict[str, Any]:
    """The calibration map of held-out scores.

    Each map's scale a is chosen by weighted log-loss (a 1-D search over log a), and the
    map with the lower expected calibration error on these rows is kept (the log-loss chose
    temperature on adult's square-loss scores, test ECE 0.030, where the power map gives
    0.017; benchmarks/classification.py).

    Parameters
    ----------
    F : ndarray of shape (n,) or (n, k)
        Held-out decision scores.
    y : ndarray of shape (n,)
        Their class indices.
    weights : ndarray of shape (n,) or None, default=None
        Row weights.

    Returns
    -------
    dict
        "method", "scale" (a), "log_loss" and "ece" (held-out, of the kept map), "n_rows".
    """
    y = np.asarray(y, dtype=np.int64)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(y) == 0 or not w.sum() > 0:
        raise ValueError("no held-out rows with a positive weight to calibrate on")
    best: dict[str, Any] | None = None
    for method in CALIBRATION_MAPS:
        Z = logits(F, method)
        res = minimize_scalar(
            lambda t, Z=Z: _nll(Z, y, w, float(np.exp(t))),
            bounds=(-LOG_SCALE_BOUND, LOG_SCALE_BOUND),
            method="bounded",
            options={"xatol": 1e-4},
        )
        a = float(np.exp(res.x))
        loss = _nll(Z, y, w, a)
        err = calibration_error(np.exp(log_softmax(a * Z, axis=1)), y, w)
        if best is None or (err, loss) < (best["ece"], best["log_loss"]):
            best = {
                "method": method,
                "scale": a,
                "log_loss": loss,
                "ece": err,
                "n_rows": int(len(y)),
            }
    assert best is not None
    return best
