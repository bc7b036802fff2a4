"""Plots (needs matplotlib: ``pip install "kernelpath[plot]"``).

- ``Path.plot`` (in ``path.py``): the error along a path, curves or a heat map of the (m, λ),
  (D, λ) and (σ, λ) grids;
- ``plot_leverage``: ridge leverage scores against the data;
- ``plot_widths``: learned per-feature widths (``sigma="ard"``) as a ranking of relevance;
- ``plot_metric``: a learned metric (``sigma="agop"``): the features' relevances and the
  metric's leading directions;
- ``prequential_errors`` and ``plot_learning_curve``: an online learner's error on each
  batch of a stream before it learns that batch (test, then update).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _backend as B
from ._validation import check_int, check_rows
from .online import IncrementalRLSClassifier

__all__ = [
    "plot_leverage",
    "prequential_errors",
    "plot_learning_curve",
    "plot_widths",
    "plot_metric",
]


def _axes(ax: Any, figsize: tuple[float, float] | None = None) -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('plots need matplotlib: pip install "kernelpath[plot]"') from exc
    if ax is None:
        # room for the labels and the colour bar
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def plot_leverage(
    X: Any, scores: Any, features: tuple[int, int] | int = (0, 1), ax: Any = None
) -> Any:
    """Leverage scores against the data: a scatter of two features coloured by the score
    (one feature, or one-dimensional data: the score against it).

    Parameters
    ----------
    X : array-like of shape (n, d)
    scores : array-like of shape (n,)
        ``leverage_scores(X, ...)`` or an estimator's ``center_scores_`` with its rows.
    features : int or (int, int), default=(0, 1)
        The column(s) drawn.
    ax : matplotlib Axes or None

    Returns
    -------
    matplotlib Axes
    """
    X2 = check_rows(B.to_numpy(X))
    tau = np.asarray(B.to_numpy(scores), dtype=float)
    if tau.shape != (len(X2),):
        raise ValueError(f"scores must have shape ({len(X2)},), got {tau.shape}")
    cols = (features,) if isinstance(features, (int, np.integer)) else tuple(features)
    if X2.shape[1] == 1:
        cols = (0,)
    if len(cols) not in (1, 2) or any(not 0 <= int(c) < X2.shape[1] for c in cols):
        raise ValueError(
            f"features must be one or two columns of X's {X2.shape[1]}, got {features}"
        )
    ax = _axes(ax)
    if len(cols) == 1:
        ax.scatter(X2[:, cols[0]], tau, s=6)
        ax.set_xlabel(f"feature {cols[0]}")
        ax.set_ylabel("leverage score")
        ax.set_yscale("log")
        return ax
    order = np.argsort(tau)  # high scores drawn last, on top
    points = ax.scatter(
        X2[order, cols[0]], X2[order, cols[1]], c=np.log10(tau[order]), s=6, cmap="viridis"
    )
    ax.figure.colorbar(points, ax=ax, label="log10 leverage score")
    ax.set_xlabel(f"feature {cols[0]}")
    ax.set_ylabel(f"feature {cols[1]}")
    return ax


def prequential_errors(learner: Any, X: Any, y: Any, batch_size: int = 50) -> dict[str, Any]:
    """Test-then-update over a stream: each batch is predicted by the learner as it stands,
    then learned (``partial_fit``). The first batch is only learned.

    Parameters
    ----------
    learner : RecursiveRLS, IncrementalRLSClassifier or SemiparametricRegressor (or any
        estimator with ``partial_fit`` and ``predict``)
    X : array-like of shape (n, d)
    y : array-like of shape (n,) or (n, k)
    batch_size : int, default=50

    Returns
    -------
    dict
        ``seen``: samples learned before each scored batch; ``error``: its RMSE (regression)
        or error rate (labels); ``metric``: "rmse" or "error_rate".
    """
    b = check_int(batch_size, "batch_size", 1)
    assert b is not None
    X2 = check_rows(B.to_numpy(X))
    Y = np.asarray(B.to_numpy(y))
    if len(Y) != len(X2):
        raise ValueError(f"X and y have different numbers of samples: {len(X2)} and {len(Y)}")
    from sklearn.base import is_classifier

    labels = (
        Y.dtype.kind in "OUSb"
        or is_classifier(learner)
        or isinstance(learner, IncrementalRLSClassifier)
    )
    seen, errors = [], []
    for s in range(0, len(X2), b):
        xb, yb = X2[s : s + b], Y[s : s + b]
        if s > 0:
            pred = np.asarray(B.to_numpy(learner.predict(xb)))
            if labels:
                errors.append(float(np.mean(pred != yb)))
            else:
                diff = pred.reshape(yb.shape).astype(float) - yb.astype(float)
                errors.append(float(np.sqrt(np.mean(diff**2))))
            seen.append(s)
        learner.partial_fit(xb, yb)
    return {
        "seen": np.asarray(seen),
        "error": np.asarray(errors),
        "metric": "error_rate" if labels else "rmse",
    }


def plot_learning_curve(curve: dict[str, Any], ax: Any = None, label: str | None = None) -> Any:
    """Draw ``prequential_errors``'s result: each batch's error against the samples learned.

    Parameters
    ----------
    curve : dict
        The result of ``prequential_errors``.
    ax : matplotlib Axes or None, default=None
        Where to draw (None: a new figure).
    label : str or None, default=None
        The curve's legend label.

    Returns
    -------
    matplotlib Axes
    """
    ax = _axes(ax)
    ax.plot(curve["seen"], curve["error"], label=label)
    ax.set_xlabel("samples learned before the batch")
    what = "RMSE (target units)" if curve["metric"] == "rmse" else "error rate"
    ax.set_ylabel(f"{what} on the next batch")
    if label is not None:
        ax.legend(fontsize="small")
    return ax


def plot_widths(model: Any, feature_names: Any = None, ax: Any = None, X: Any = None) -> Any:
    """Per-feature kernel widths as a ranking of relevance: a horizontal bar per feature of
    its relevance ``s_l / sigma_l`` relative to the largest, most relevant on top, where
    ``s_l`` is the feature's spread: widths compared in standardized units, so a feature
    of large raw values (a population count beside a ratio) is ranked by what it does, not
    by its unit.

    Parameters
    ----------
    model : fitted estimator (its ``kernel_``) or a radial kernel with per-feature widths
        (``sigma="ard"`` fits, or a kernel with an array ``sigma``).
    feature_names : sequence of str, default=None
        The features' names; the model's ``feature_names_in_`` when it has them, else
        ``x0, x1, ...``.
    ax : matplotlib Axes or None
    X : array-like of shape (n, n_features) or None, default=None
        Rows whose spreads ``s_l`` (``scaling.feature_scales``) set the units. None: the
        spreads a scaled ``sigma="ard"`` fit learned in (its ``ard_info_``), else the raw
        units (``s_l = 1``); the x label says which.

    Returns
    -------
    matplotlib Axes
    """
    kernel = getattr(model, "kernel_", model)
    if not getattr(kernel, "per_feature", False):
        raise ValueError(
            f"model: needs a kernel with one width per feature (sigma='ard' or an array), "
            f"got {kernel!r}"
        )
    widths = kernel.widths()
    if feature_names is None:
        feature_names = getattr(model, "feature_names_in_", None)
    names = (
        [f"x{j}" for j in range(len(widths))]
        if feature_names is None
        else [str(v) for v in feature_names]
    )
    if len(names) != len(widths):
        raise ValueError(f"feature_names has {len(names)} names for {len(widths)} widths")
    spreads, units = _spreads(model, X, len(widths))
    relevance = spreads / widths
    relevance = relevance / relevance.max()
    order = np.argsort(relevance)  # barh draws the first at the bottom
    longest = max(len(v) for v in names)
    ax = _axes(ax, (5.0 + 0.08 * longest, 1.2 + 0.3 * max(len(widths), 4)))
    ax.barh(np.arange(len(widths)), relevance[order])
    ax.set_yticks(np.arange(len(widths)), [names[j] for j in order])
    ax.set_xscale("log")
    ax.set_xlabel(f"relevance: spread / width, over the largest\n({units})")
    ax.set_title(f"{type(kernel).__name__}: learned widths")
    return ax


def _spreads(model: Any, X: Any, d: int) -> tuple[np.ndarray, str]:
    """The features' spreads that set plot_widths' units, and the units' name."""
    if X is not None:
        from .scaling import feature_scales

        X2 = check_rows(B.to_numpy(X))
        if X2.shape[1] != d:
            raise ValueError(f"X has {X2.shape[1]} features, the widths {d}")
        return feature_scales(X2, np.random.default_rng(0)), "units of X's spreads"
    info = getattr(model, "ard_info_", None) or {}
    scales = info.get("feature_scales")
    if scales is not None and len(scales) == d:
        return np.asarray(scales, dtype=float), "standardized units"
    return np.ones(d), "raw units"


def plot_metric(
    model: Any, feature_names: Any = None, top: int = 20, n_directions: int = 3, axes: Any = None
) -> Any:
    """A learned metric (``sigma="agop"``): the ``top`` features by relevance (the metric's
    diagonal in the units of the scaled inputs, over its trace) and its ``n_directions``
    leading eigenvectors with their shares of the trace; as images where the features are
    the pixels of a square image (d = 64, 256, 784, ...), else as bars over the features.

    Parameters
    ----------
    model : estimator fitted with ``sigma="agop"`` (its ``feature_relevances_``,
        ``metric_components_`` and ``metric_eigenvalues_``)
    feature_names : sequence of str, default=None
        The features' names; the model's ``feature_names_in_`` when it has them, else
        ``x0, x1, ...``.
    top : int, default=20
        Features shown in the ranking.
    n_directions : int, default=3
        Leading directions shown (at most the metric's rank).
    axes : sequence of matplotlib Axes or None
        1 + n_directions Axes to draw on; None: a new figure.

    Returns
    -------
    list of matplotlib Axes
    """
    rel = getattr(model, "feature_relevances_", None)
    if rel is None:
        raise ValueError(
            "model: needs an estimator fitted with sigma='agop' (its feature_relevances_), "
            f"got {type(model).__name__}"
        )
    top = check_int(top, "top", 1)
    n_directions = check_int(n_directions, "n_directions", 0)
    comps, shares = model.metric_components_, model.metric_eigenvalues_
    k = min(n_directions, len(comps))
    d = len(rel)
    if feature_names is None:
        feature_names = getattr(model, "feature_names_in_", None)
    names = (
        [f"x{j}" for j in range(d)] if feature_names is None else [str(v) for v in feature_names]
    )
    if len(names) != d:
        raise ValueError(f"feature_names has {len(names)} names for {d} features")
    side = int(round(np.sqrt(d)))
    image = d >= 64 and side * side == d
    if axes is None:
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError('plots need matplotlib: pip install "kernelpath[plot]"') from exc
        height = 4.0 if image else 1.4 + 0.28 * max(min(top, d), 4)
        _, grid = plt.subplots(1, 1 + k, figsize=(4.0 * (1 + k), height), layout="constrained")
        axes = list(np.atleast_1d(grid))
    axes = list(axes)
    if len(axes) != 1 + k:
        raise ValueError(
            f"axes: needs {1 + k} Axes (the ranking and {k} directions), got {len(axes)}"
        )
    if image:
        axes[0].imshow(np.asarray(rel).reshape(side, side), cmap="viridis")
        axes[0].set_axis_off()
        axes[0].set_title("relevance of each pixel")
    else:
        order = np.argsort(rel)[::-1][:top][::-1]  # barh draws the first at the bottom
        axes[0].barh(np.arange(len(order)), np.asarray(rel)[order])
        axes[0].set_yticks(np.arange(len(order)), [names[j] for j in order])
        axes[0].set_xlabel("relevance: share of the metric's trace\n(standardized units)")
        axes[0].set_title("learned metric: features")
    for i in range(k):
        ax, v = axes[1 + i], np.asarray(comps[i])
        title = f"direction {i + 1}: {100 * float(shares[i]):.1f}% of the trace"
        if image:
            lim = float(np.abs(v).max()) or 1.0
            ax.imshow(v.reshape(side, side), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_axis_off()
        else:
            ax.bar(np.arange(d), v)
            ax.set_xticks(np.arange(d), names, rotation=90)
            ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_title(title)
    return axes
