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

__all__ = ["Path", "lex_argmin"]


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
    ) -> None:
        self.info = dict(info or {})
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
        return {k: v[self.best_index].item() for k, v in self.params.items()}

    @property
    def best_val_error(self) -> float:
        if self.val_error is None:
            return float("nan")
        return float(self.val_error[self.best_index])

    def coef(self, index: tuple[int, ...] | int | None = None) -> np.ndarray:
        """Coefficients at ``index`` (default: the best point), made on demand."""
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
        if not np.isfinite(self.train_error[idx]) or self._coef_fn is None:
            raise IndexError(f"point {idx} was not reached (stopped early)")
        return self._coef_fn(idx)

    def __len__(self) -> int:
        return int(np.prod(self.shape))

    def __repr__(self) -> str:
        best = ", ".join(f"{k}={v:.4g}" for k, v in self.best_params.items())
        return f"Path(shape={self.shape}, params={self.param_names}, best: {best})"

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python summary (parameters, errors, best point), e.g. for JSON."""
        return {
            "params": {k: v.tolist() for k, v in self.params.items()},
            "train_error": self.train_error.tolist(),
            "val_error": None if self.val_error is None else self.val_error.tolist(),
            "best_index": list(self.best_index),
            "best_params": self.best_params,
            "scoring": self.scoring,
        }

    def plot(self, ax: Any = None, param: str | None = None) -> Any:
        """Plot training and validation error along the path (needs matplotlib).

        For a 2-D path (λ x iterations) one validation curve per λ is drawn against the
        iterations. Returns the matplotlib Axes.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("Path.plot needs matplotlib: pip install kernelpath[plot]") from exc
        if ax is None:
            _, ax = plt.subplots()
        names = self.param_names
        x_name = param or names[-1]
        X = self.params[x_name]
        if X.ndim == 1:
            ax.plot(X, self.train_error, label="train")
            if self.val_error is not None:
                ax.plot(X, self.val_error, label=f"validation ({self.scoring})")
            ax.axvline(X[self.best_index], color="gray", linestyle=":", label="chosen")
        else:
            others = [n for n in names if n != x_name]
            for row in range(X.shape[0]):
                lab = ", ".join(f"{o}={self.params[o][row, 0]:.2g}" for o in others)
                errs = self.val_error if self.val_error is not None else self.train_error
                ax.plot(X[row], errs[row], label=lab)
        if np.all(X[np.isfinite(X)] > 0) and x_name in ("penalty",):
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(x_name)
        ax.set_ylabel("error")
        ax.legend(fontsize="small")
        return ax
