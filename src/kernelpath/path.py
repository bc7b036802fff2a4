"""The regularization path: the product of every solver.

A ``Path`` is a grid of points (1-D for a λ path or an iteration path, 2-D for λ x iterations)
with, at every point, the parameter values, the training error and the validation error, and a
way to make the coefficients of any point on demand. Solvers that cannot afford to keep every
point's coefficients (iterative solvers keep only each row's best iterate) recompute the others
when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Path", "lex_argmin", "stack_paths", "mean_over_folds"]


def lex_argmin(err: np.ndarray, loss: np.ndarray | None = None) -> int:
    """Index of the smallest finite ``err``, ties broken by the smallest ``loss``, then by the
    first index."""
    e = np.where(np.isfinite(err), err, np.inf)
    if loss is None:
        return int(np.argmin(e))
    ll = np.where(np.isfinite(loss), loss, np.inf)
    return int(np.lexsort((np.arange(len(e)), ll, e))[0])


class Path:
    """A regularization path.

    Parameters
    ----------
    params : dict of str -> ndarray
        Parameter values at each point; every array has the grid's shape.
    train_error : ndarray
        Training error (mean squared error of the coded targets) at each point.
    val_error : ndarray or None
        Validation error (the ``scoring`` metric) at each point; NaN where a point was not
        reached (early stopping). ``None`` when no validation set was used.
    coef_fn : callable (index tuple) -> ndarray, or None
        Makes the coefficients of one point not in ``stored`` (None: every point is stored).
    scoring : str
        Name of the validation metric.
    best_index : tuple or None
        The chosen point; default: the minimum validation error, or the last point.
    stored : dict, optional
        Coefficients already at hand, by index tuple.
    info : dict, optional
        Solver details (e.g. ``rank`` of the Nyström factor, ``step`` of gradient descent).
    val_loss : ndarray or None
        Validation squared loss of the coded targets (same as ``val_error`` for regression);
        breaks ties of a discrete ``val_error`` (classification error rate).
    fold_errors : ndarray of shape (n_folds,) + shape, or None
        k-fold cross-validation: the validation error of every fold at every point
        (``val_error`` is their mean); see ``cv_results``.
    """

    def __init__(
        self,
        params: dict[str, np.ndarray],
        train_error: np.ndarray,
        val_error: np.ndarray | None,
        coef_fn: Callable[[tuple[int, ...]], np.ndarray] | None,
        scoring: str = "mse",
        best_index: tuple[int, ...] | None = None,
        stored: dict[tuple[int, ...], np.ndarray] | None = None,
        info: dict[str, Any] | None = None,
        val_loss: np.ndarray | None = None,
        fold_errors: np.ndarray | None = None,
    ) -> None:
        self.info = dict(info or {})
        self.fold_errors = None if fold_errors is None else np.asarray(fold_errors, dtype=float)
        self.val_loss = None if val_loss is None else np.asarray(val_loss, dtype=float)
        self.params = {k: np.asarray(v) for k, v in params.items()}
        self.train_error = np.asarray(train_error, dtype=float)
        self.val_error = None if val_error is None else np.asarray(val_error, dtype=float)
        self.scoring = scoring
        self._coef_fn = coef_fn
        self._stored = dict(stored or {})
        shape = self.train_error.shape
        for k, v in self.params.items():
            if v.shape != shape:
                raise ValueError(f"parameter {k!r} has shape {v.shape}, errors have {shape}")
        if best_index is None:
            best_index = self._default_best()
        self.best_index = tuple(int(i) for i in best_index)

    def _default_best(self) -> tuple[int, ...]:
        errs = self.val_error
        if errs is not None and np.isfinite(errs).any():
            flat = lex_argmin(
                errs.ravel(), None if self.val_loss is None else self.val_loss.ravel()
            )
        else:
            reached = np.isfinite(self.train_error)
            flat = int(np.flatnonzero(reached.ravel())[-1]) if reached.any() else 0
        return tuple(int(i) for i in np.unravel_index(flat, self.shape))

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the grid of points."""
        return tuple(self.train_error.shape)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(self.params)

    @property
    def best_params(self) -> dict[str, Any]:
        """Parameter values at the chosen point."""
        out: dict[str, Any] = {}
        for k, v in self.params.items():
            val = v[self.best_index]
            val = val.item() if isinstance(val, np.generic) else val
            if k.startswith("n_") and isinstance(val, float) and val.is_integer():
                val = int(val)  # counts padded with NaN in a stacked path are floats
            out[k] = val
        return out

    @property
    def best_val_error(self) -> float:
        if self.val_error is None:
            return float("nan")
        return float(self.val_error[self.best_index])

    def coef(self, index: tuple[int, ...] | int | None = None) -> np.ndarray:
        """Coefficients at a point of the path, made on demand.

        Parameters
        ----------
        index : tuple of int, int or None, default=None
            The point: one index per axis, a flat index, or None for the best point.

        Returns
        -------
        ndarray
            The coefficients of that point's model.
        """
        if index is None:
            idx = self.best_index
        elif isinstance(index, (int, np.integer)):
            idx = tuple(int(i) for i in np.unravel_index(int(index), self.shape))
        else:
            idx = tuple(int(i) for i in index)
        if len(idx) != len(self.shape) or any(
            not 0 <= i < s for i, s in zip(idx, self.shape, strict=True)
        ):
            raise IndexError(f"index {index!r} is outside the path of shape {self.shape}")
        if idx in self._stored:
            return self._stored[idx]
        if not np.isfinite(self.train_error[idx]):
            raise IndexError(f"point {idx} was not reached (stopped early)")
        if self._coef_fn is None:
            raise IndexError(
                f"the coefficients of point {idx} are not kept: a path loaded from a model "
                "file keeps those of its chosen point (refit for the others)"
            )
        return self._coef_fn(idx)

    def in_units(self, scale: float) -> Path:
        """This path for targets ``scale`` times larger: coefficients times ``scale``, the
        squared errors (training error, and the validation error and loss where they are
        MSE) times ``scale``^2. A fit that divides its targets by a power of two to keep
        their squares in range (``fitting.problem.target_scale``) reports its path so."""
        if scale == 1.0:
            return self
        sq = scale * scale
        mse = self.scoring == "mse"
        fn = self._coef_fn
        out = Path(
            self.params,
            self.train_error * sq,
            None if self.val_error is None else self.val_error * (sq if mse else 1.0),
            None if fn is None else (lambda idx: fn(idx) * scale),
            self.scoring,
            self.best_index,
            {k: v * scale for k, v in self._stored.items()},
            self.info,
            None if self.val_loss is None else self.val_loss * sq,
            None if self.fold_errors is None else self.fold_errors * (sq if mse else 1.0),
        )
        return out

    def __len__(self) -> int:
        return int(np.prod(self.shape))

    def __repr__(self) -> str:
        best = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, (int, float)) else f"{k}={v!r}"
            for k, v in self.best_params.items()
        )
        return f"Path(shape={self.shape}, params={self.param_names}, best: {best})"

    @property
    def cv_results(self) -> dict[str, np.ndarray]:
        """scikit-learn's ``cv_results_`` layout, one entry per point (the grid flattened in C
        order): ``param_<name>``, ``mean_val_error``, ``std_val_error`` and
        ``split<i>_val_error`` (k-fold), ``rank_val_error`` (1 = chosen; errors: lower is
        better), ``mean_train_error``."""
        out: dict[str, np.ndarray] = {f"param_{k}": v.ravel() for k, v in self.params.items()}
        val = self.val_error if self.val_error is not None else np.full(self.shape, np.nan)
        out["mean_val_error"] = val.ravel()
        if self.fold_errors is not None:
            out["std_val_error"] = self.fold_errors.reshape(len(self.fold_errors), -1).std(axis=0)
            for i, e in enumerate(self.fold_errors):
                out[f"split{i}_val_error"] = e.ravel()
        e = np.where(np.isfinite(val.ravel()), val.ravel(), np.inf)
        order = np.argsort(e, kind="stable")
        rank = np.empty(len(e), dtype=np.int64)
        rank[order] = np.arange(1, len(e) + 1)
        best = int(np.ravel_multi_index(self.best_index, self.shape))
        rank[rank < rank[best]] += 1  # the chosen point first (ties broken by val_loss)
        rank[best] = 1
        out["rank_val_error"] = rank
        out["mean_train_error"] = self.train_error.ravel()
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python summary (parameters, errors, best point), e.g. for JSON."""
        return {
            "params": {k: v.tolist() for k, v in self.params.items()},
            "train_error": self.train_error.tolist(),
            "val_error": None if self.val_error is None else self.val_error.tolist(),
            "best_index": list(self.best_index),
            "best_params": {
                k: (v if isinstance(v, (int, float)) else repr(v))
                for k, v in self.best_params.items()
            },
            "scoring": self.scoring,
        }

    def plot(self, ax: Any = None, param: str | None = None, kind: str = "auto") -> Any:
        """Plot the error along the path (needs matplotlib). Returns the matplotlib Axes.

        Parameters
        ----------
        ax : matplotlib Axes or None
        param : str or None
            The parameter on the x axis of the curves (default: the last one).
        kind : {"auto", "curves", "heatmap"}
            "curves": training and validation error against ``param`` (for a 2-D path such
            as λ x iterations, one validation curve per λ; over kernels, the best error of
            each width). "heatmap": the validation error over two grid parameters, the
            (m, λ), (D, λ) and (σ, λ) grids (the smallest over any other axis, such as the
            iterations), the chosen point marked. "auto": a heat map for those grids, curves
            otherwise.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("Path.plot needs matplotlib: pip install kernelpath[plot]") from exc
        if kind not in ("auto", "curves", "heatmap"):
            raise ValueError(f"kind must be 'auto', 'curves' or 'heatmap', got {kind!r}")
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
        names = self.param_names
        grid = self._grid_axes()
        if kind == "heatmap" or (kind == "auto" and param is None and grid is not None):
            if grid is None:
                raise ValueError(f"a heat map needs two grid parameters; this path is over {names}")
            return self._plot_heatmap(ax, *grid)
        if param is None and names[0] in ("sigma", "kernel") and len(names) > 1:
            return self._plot_kernel_axis(ax, names[0])
        x_name = param or names[-1]
        if x_name not in names:
            raise ValueError(f"param must be one of {list(names)}, got {param!r}")
        axis = names.index(x_name)
        # one curve per combination of the other parameters: x's axis last, the rest flat
        X = np.moveaxis(np.asarray(self.params[x_name], dtype=float), axis, -1)
        X = X.reshape(-1, X.shape[-1])
        has_val = self.val_error is not None
        errs = self.val_error if has_val else self.train_error
        E = np.moveaxis(np.asarray(errs, dtype=float), axis, -1).reshape(X.shape)
        others = [n for n in names if n != x_name]
        if X.shape[0] == 1:
            ax.plot(X[0], self.train_error.reshape(X.shape)[0], label="training")
            if has_val:
                ax.plot(X[0], E[0], label="validation")
        else:
            self._plot_series(ax, X, E, others, axis)
        best = tuple(self.best_index)
        bx = float(np.asarray(self.params[x_name], dtype=float)[best])
        by = float(np.asarray(errs, dtype=float)[best])
        chosen = ", ".join(f"{n}={_short(self.params[n][best])}" for n in names)
        _mark_chosen(ax, bx, by, f"chosen: {chosen}")
        if x_name in LOG_PARAMS and np.all(X[np.isfinite(X)] > 0):
            ax.set_xscale("log")
        if np.all(E[np.isfinite(E)] > 0):
            ax.set_yscale("log")
        ax.set_xlabel(PARAM_LABELS.get(x_name, x_name))
        ax.set_ylabel(error_label(self.scoring, has_val))
        ax.legend(fontsize="small", loc="best")
        return ax

    def _plot_series(
        self, ax: Any, X: np.ndarray, E: np.ndarray, others: list[str], axis: int
    ) -> None:
        """One validation curve per row: labelled in a legend up to ``MAX_LEGEND`` rows,
        beyond that coloured by the other parameter's value with a colour bar."""
        import matplotlib as mpl

        rest = [np.moveaxis(np.asarray(self.params[o]), axis, -1) for o in others]
        values = [r.reshape(X.shape)[:, 0] for r in rest]
        if X.shape[0] <= MAX_LEGEND:
            for row in range(X.shape[0]):
                lab = ", ".join(
                    f"{o}={_short(v[row])}" for o, v in zip(others, values, strict=True)
                )
                ax.plot(X[row], E[row], label=lab, linewidth=1.2)
            return
        # many curves: a colour scale over the first other parameter (log for λ, m, D)
        key = np.asarray(values[0], dtype=float)
        log = others[0] in LOG_PARAMS and np.all(key > 0)
        norm = (mpl.colors.LogNorm if log else mpl.colors.Normalize)(key.min(), key.max())
        cmap = mpl.colormaps["viridis"]
        for row in range(X.shape[0]):
            ax.plot(X[row], E[row], color=cmap(norm(key[row])), linewidth=1.0)
        bar = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
        ax.figure.colorbar(bar, ax=ax, label=PARAM_LABELS.get(others[0], others[0]))

    def _grid_axes(self) -> tuple[int, int] | None:
        """The two axes of a grid of models (not iteration counts) with a penalty axis: the
        (m, λ), (D, λ) and (σ, λ) paths; None for other paths."""
        names = self.param_names
        if "penalty" not in names or len(names) < 2:
            return None
        steps = ("n_iter", "n_epochs", "n_passes")
        others = [i for i, n in enumerate(names) if n not in steps and n != "penalty"]
        if not others or names[others[0]] == "kernel":
            return None
        return others[0], names.index("penalty")

    def _plot_heatmap(self, ax: Any, row: int, col: int) -> Any:
        """Validation error (the smallest over the other axes) on the (row, col) grid."""
        errs = self.val_error if self.val_error is not None else self.train_error
        other = tuple(a for a in range(errs.ndim) if a not in (row, col))
        with np.errstate(all="ignore"):
            E = np.fmin.reduce(errs, axis=other) if other else errs
        if row > col:
            E = E.T
        rname, cname = self.param_names[row], self.param_names[col]

        def values(axis: int, name: str) -> np.ndarray:
            v = np.moveaxis(np.asarray(self.params[name], dtype=float), axis, 0)
            return v.reshape(v.shape[0], -1)[:, 0]

        rv, cv = values(row, rname), values(col, cname)
        image = ax.imshow(np.log10(E), aspect="auto", origin="lower", cmap="viridis")
        rows, cols = _thinned(len(rv)), _thinned(len(cv))
        ax.set_yticks(rows, [_short(rv[i]) for i in rows])
        ax.set_xticks(cols, [_short(cv[i]) for i in cols], rotation=45, ha="right")
        ax.scatter(
            [self.best_index[col]], [self.best_index[row]], marker="*", s=150, color="red",
            label="chosen",
        )  # fmt: skip
        ax.set_xlabel(PARAM_LABELS.get(cname, cname))
        ax.set_ylabel(PARAM_LABELS.get(rname, rname))
        has_val = self.val_error is not None
        label = "log10 " + error_label(self.scoring, has_val)
        ax.figure.colorbar(image, ax=ax, label=label)
        ax.legend(fontsize="small", loc="lower left")  # the large-λ, few-center corner
        return ax

    def _plot_kernel_axis(self, ax: Any, name: str) -> Any:
        """The best validation (and its training) error of every kernel of a path over
        kernels, against the width or the kernel's position."""
        K = self.shape[0]
        errs = self.val_error if self.val_error is not None else self.train_error
        flat = errs.reshape(K, -1)
        best_val = np.array([np.nanmin(r) if np.isfinite(r).any() else np.nan for r in flat])
        pick = [int(np.nanargmin(r)) if np.isfinite(r).any() else 0 for r in flat]
        train = self.train_error.reshape(K, -1)[np.arange(K), pick]
        if name == "sigma":
            x = self.params[name].reshape(K, -1)[:, 0].astype(float)
            ax.set_xscale("log")
        else:
            x = np.arange(K)
            ax.set_xticks(x, [repr(v) for v in self.params[name].reshape(K, -1)[:, 0]])
        ax.plot(x, train, marker="o", label="training (at each kernel's best point)")
        if self.val_error is not None:
            ax.plot(x, best_val, marker="o", label="validation (each kernel's best)")
        b = self.best_index[0]
        _mark_chosen(ax, x[b], best_val[b] if self.val_error is not None else train[b], "chosen")
        ax.set_yscale("log")
        ax.set_xlabel(PARAM_LABELS.get(name, name))
        ax.set_ylabel(error_label(self.scoring, self.val_error is not None))
        ax.legend(fontsize="small")
        return ax


def _pad(arrays: list[np.ndarray], shape: tuple[int, ...], fill: Any = np.nan) -> np.ndarray:
    """Stack arrays of shapes <= ``shape`` into (len(arrays), *shape), padded with ``fill``."""
    out = np.full((len(arrays), *shape), fill, dtype=float)
    for i, a in enumerate(arrays):
        index: tuple[Any, ...] = (i,) + tuple(slice(0, s) for s in a.shape)
        out[index] = a
    return out


def stack_paths(
    paths: list[Path],
    name: str,
    values: list[Any],
    best_index: tuple[int, ...] | None = None,
    info: dict[str, Any] | None = None,
) -> Path:
    """One path over ``name`` (a leading axis, e.g. the kernel's width) from paths of the same
    parameters, padded with NaN (not reached) to a common shape. ``coef`` of point
    (i, *rest) is ``paths[i].coef(rest)``."""
    ndim = {len(p.shape) for p in paths}
    if len(ndim) != 1:
        raise ValueError("paths of different dimensions cannot be stacked")
    shape = tuple(int(max(p.shape[d] for p in paths)) for d in range(ndim.pop()))
    lead = np.empty((len(paths), *shape), dtype=object if name == "kernel" else float)
    for i, v in enumerate(values):
        lead[i] = v
    params: dict[str, np.ndarray] = {name: lead}
    for k in paths[0].param_names:
        params[k] = _pad([np.asarray(p.params[k], dtype=float) for p in paths], shape)
    has_val = all(p.val_error is not None for p in paths)
    has_loss = all(p.val_loss is not None for p in paths)
    has_folds = all(p.fold_errors is not None for p in paths)
    folds = None
    if has_folds:
        folds = np.stack(
            [_pad([] if p.fold_errors is None else list(p.fold_errors), shape) for p in paths],
            axis=1,
        )

    def coef(idx: tuple[int, ...]) -> np.ndarray:
        return paths[idx[0]].coef(tuple(idx[1:]))

    out_info = {"paths": paths, name + "s" if name == "kernel" else name: values}
    out_info.update(info or {})
    return Path(
        params,
        _pad([p.train_error for p in paths], shape),
        _pad([p.val_error for p in paths], shape) if has_val else None,  # type: ignore[misc]
        coef_fn=coef,
        scoring=paths[0].scoring,
        best_index=best_index,
        info=out_info,
        val_loss=_pad([p.val_loss for p in paths], shape) if has_loss else None,  # type: ignore[misc]
        fold_errors=folds,
    )


def mean_over_folds(paths: list[Path], info: dict[str, Any] | None = None) -> Path:
    """The cross-validated path of k folds' paths over the same grid: validation error and
    loss averaged over the folds (NaN where a fold did not reach a point), training error
    averaged, the parameters of the first fold, every fold's errors in ``fold_errors``.
    ``coef`` is not available (the model is refit on all the data)."""
    shape = tuple(int(max(p.shape[d] for p in paths)) for d in range(len(paths[0].shape)))
    folds = _pad([p.val_error for p in paths], shape)  # type: ignore[misc]
    losses = _pad([p.val_loss if p.val_loss is not None else p.val_error for p in paths], shape)  # type: ignore[misc]
    params = {}
    for k in paths[0].param_names:  # the first fold's, where it did not reach a point another's
        every = _pad([np.asarray(p.params[k], dtype=float) for p in paths], shape)
        params[k] = np.where(
            np.isfinite(every[0]),
            every[0],
            np.nanmax(np.where(np.isfinite(every), every, -np.inf), axis=0),
        )
    merged = dict(paths[0].info)
    if "converged" in merged:
        merged["converged"] = np.all([p.info["converged"] for p in paths], axis=0).tolist()
    merged.update(info or {})
    return Path(
        params,
        _pad([p.train_error for p in paths], shape).mean(axis=0),
        folds.mean(axis=0),
        coef_fn=None,
        scoring=paths[0].scoring,
        info=merged,
        val_loss=losses.mean(axis=0),
        fold_errors=folds,
    )


#: At most this many curves get a legend entry each; more are coloured by a colour scale.
MAX_LEGEND = 8
#: Parameters drawn on a log axis.
LOG_PARAMS = ("penalty", "n_centers", "n_features", "sigma")
#: Axis labels of the path's parameters.
PARAM_LABELS = {
    "penalty": "penalty λ",
    "n_iter": "iterations t",
    "n_epochs": "epochs",
    "n_passes": "passes",
    "n_centers": "Nyström centers m",
    "n_features": "random features D",
    "sigma": "kernel width σ",
    "kernel": "kernel",
}
#: What each scoring measures, for an axis label.
SCORING_LABELS = {
    "mse": "MSE (squared target units)",
    "error_rate": "error rate",
    "log_loss": "log-loss",
}


def error_label(scoring: str, validation: bool) -> str:
    """An axis label for the path's error: which rows and which quantity, with units."""
    what = SCORING_LABELS.get(scoring, scoring.replace("_", " "))
    return f"{'validation' if validation else 'training'} {what}"


def _mark_chosen(ax: Any, x: float, y: float, label: str) -> None:
    """The chosen point of a curve plot: a red star, named in the legend."""
    ax.plot([x], [y], marker="*", markersize=14, color="red", linestyle="none", label=label,
            zorder=5)  # fmt: skip


def _short(v: Any) -> str:
    """A parameter value for a label: integers as they are, floats to 2 digits."""
    v = np.asarray(v).item() if np.ndim(v) == 0 else v
    if isinstance(v, (int, np.integer)) or (
        isinstance(v, float) and v.is_integer() and abs(v) < 1e6
    ):
        return str(int(v))
    return f"{v:.2g}" if isinstance(v, (float, np.floating)) else str(v)


def _thinned(n: int, most: int = 10) -> list[int]:
    """At most ``most`` evenly spaced tick positions of ``n`` (the last included)."""
    step = max(1, int(np.ceil(n / most)))
    ticks = list(range(0, n, step))
    if ticks[-1] != n - 1 and n - 1 - ticks[-1] >= step / 2:
        ticks.append(n - 1)
    return ticks
