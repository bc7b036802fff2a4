"""The command line's commands: fit, predict, evaluate, inspect, demo and info."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path as FsPath
from typing import Any

import numpy as np

from .. import _backend as B
from .._version import __version__
from ..data import default_mode, write_predictions
from ..data.files import check_destination, temporary
from ..datasets import make_sin_regression
from ..estimators import (
    NystromRegressor,
    NYTRORegressor,
)
from ..inputs import check_feature_count, dense_block
from ..kernels import Gaussian
from ..leverage import effective_dimension
from ..model_files import load, save
from ..progress import tqdm_reporter
from ..workspace import Workspace
from .files import TABLES, _check_target, _labels, _read_data, _suffix, _task
from .models import _best, _estimator, _rows_x_cols
from .names import UserError


def _demo(args: argparse.Namespace) -> int:
    X, y, w = make_sin_regression(args.n_train, 20, 0.1, random_state=args.seed)
    Xt, yt, _ = make_sin_regression(args.n_test, 20, 0.1, random_state=args.seed + 1, w=w)
    kernel = Gaussian(sigma=5.0)
    if args.solver == "nytro":
        est = NYTRORegressor(
            kernel,
            n_centers=args.n_centers,
            solver="nu",
            n_iter_no_change=30,
            random_state=args.seed,
            device=args.device,
        )
    else:
        est = NystromRegressor(
            kernel,
            n_centers=args.n_centers,
            solver=args.solver,
            random_state=args.seed,
            device=args.device,
        )
    print(
        f"kernelpath {__version__} demo: n_train={args.n_train}, n_test={args.n_test}, d=20, "
        f"Gaussian sigma=5, {args.n_centers} centers, solver={args.solver}"
        + ("" if args.device is None else f", device={args.device}")
    )
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    rmse = float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))
    path = est.path_
    print(
        f"path: shape {path.shape} over {', '.join(path.param_names)}; fit {fit_s:.2f} s "
        f"(computed on {est.device_})"
    )
    best = ", ".join(f"{k}={v:.3g}" for k, v in est.best_params_.items())
    print(f"best point: {best}  (validation MSE {path.best_val_error:.4f})")
    print(_demo_result(rmse, float(np.std(yt)), 0.1))
    return 0


def _demo_result(rmse: float, spread: float, noise: float) -> str:
    """The demo's headline: how much of what can be learned the fit learned. y = f(x) +
    noise: no model beats the noise's RMSE on average and predicting the mean gives the
    target's spread, so the share learned is (spread² - RMSE²) / (spread² - noise²)."""
    learned = (spread**2 - rmse**2) / (spread**2 - noise**2)
    return (
        f"result: the fit learned {100 * learned:.1f}% of the signal (test RMSE {rmse:.4f}; "
        f"the noise alone gives {noise:.4f}, predicting the mean {spread:.4f})"
    )


# --------------------------------------------------------------------------- commands
def _check_output(path: str, option: str = "--output", **inputs: str | None) -> None:
    """Refuse, before any work, an output in a missing or read-only folder, one that is not
    a regular file (or a folder, for a .zarr array) or missing path
    (``data.files.check_destination``: a link, a FIFO, a device), or one that is a file the
    command reads (``inputs``: the option's name and its path)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{option}: no folder {folder!r} to write {path!r} in")
    if not os.access(folder, os.W_OK):
        raise UserError(f"{option}: the folder {folder!r} is not writable")
    try:
        check_destination(path, option, directory=_suffix(path) == ".zarr")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for name, source in inputs.items():
        if source is not None and os.path.exists(path) and os.path.exists(source):
            if os.path.samefile(path, source):
                raise UserError(
                    f"{option}: {path!r} is the {name} this command reads; writing it "
                    "would replace it. Give another --output"
                )


def _fit(args: argparse.Namespace) -> int:

    columns = None
    if args.columns is not None:  # "" names no column: refused, not every column
        columns = args.columns.split(",")
        if not all(columns):
            raise UserError(f"--columns: an empty column name in {args.columns!r}")
    frame = args.categorical is not None
    X, y = _read_labelled(args, columns, frame)
    task = _task(y, args.task)
    y = _check_target(y, task)
    est = _estimator(args, task)
    out = args.output or str(FsPath(args.data).with_suffix(".kp").name)
    _check_output(out, data=args.data, target_file=args.target_file)
    try:  # before the first line of progress: a refusal is the command's one line
        check_feature_count(int(X.shape[1]), Workspace.of(est.memory_budget).budget)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    _say(args, f"fitting {type(est).__name__} ({task}) on {_rows_x_cols(X)}")
    t0 = time.perf_counter()
    with _progress(args, "fit"):
        est.fit(X, y)
    sec = time.perf_counter() - t0
    save(est, out)
    path = getattr(est, "path_", None)
    val = ""
    if path is not None and path.val_error is not None:
        val = f"; validation {path.scoring} {path.best_val_error:.4g}"
    _say(args, f"fitted in {sec:.1f} s; chosen: {_best(est)}{val}")
    print(out)
    return 0


def _load_model(path: str) -> Any:

    if not os.path.exists(path):
        raise UserError(f"no such model file {path!r}")
    return load(path)


def _predict_columns(model: Any) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    return None if names is None else [str(c) for c in names]


def _predict(args: argparse.Namespace) -> int:

    _check_output(args.output, model=args.model, data=args.data)
    model = _load_model(args.model)
    if not hasattr(model, args.method):
        raise UserError(f"--method: a {type(model).__name__} has no {args.method}")
    columns = _predict_columns(model) if _suffix(args.data) in TABLES else None
    encodes = getattr(model, "encoder_", None) is not None
    X, _ = _read_data(
        args.data, None, None, columns, False, args.delimiter, encodes, args.na_values
    )
    if _suffix(args.output) == ".csv":
        classes = [str(c) for c in getattr(model, "classes_", [])]
        header = ["prediction"]
        if args.method in ("decision_function", "predict_proba") and len(classes) > 2:
            header = classes
        elif args.method == "decision_function" and classes:
            header = [f"score_{classes[-1]}"] if len(classes) == 2 else classes
        elif args.method == "predict_proba":
            header = classes
    else:
        header = None
    t0 = time.perf_counter()
    with _progress(args, "predict"):
        write_predictions(model, X, args.output, method=args.method, header=header)
    _say(args, f"predicted {_rows_x_cols(X)} in {time.perf_counter() - t0:.1f} s")
    print(args.output)
    return 0


def _metrics(model: Any, X: Any, y: np.ndarray) -> dict[str, float]:
    from sklearn import metrics

    pred = np.asarray(model.predict(X))
    if hasattr(model, "classes_"):
        out = {
            "accuracy": float(metrics.accuracy_score(y, pred)),
            "balanced_accuracy": float(metrics.balanced_accuracy_score(y, pred)),
        }
        if len(model.classes_) == 2 and hasattr(model, "decision_function"):
            if set(np.unique(y)) <= set(model.classes_.tolist()) and len(np.unique(y)) == 2:
                score = np.asarray(model.decision_function(X))
                out["auc"] = float(metrics.roc_auc_score(y == model.classes_[1], score))
        return out
    y = y.astype(float)
    return {
        "rmse": float(np.sqrt(metrics.mean_squared_error(y, pred))),
        "mae": float(metrics.mean_absolute_error(y, pred)),
        "r2": float(metrics.r2_score(y, pred)),
    }


def _read_labelled(
    args: argparse.Namespace, columns: list[str] | None, frame: bool
) -> tuple[Any, Any]:
    """(X, y) of ``fit``'s or ``evaluate``'s data file, the target as labels where it is text;
    ``frame``: read a table with its text columns for a model that encodes them."""
    X, y = _read_data(
        args.data,
        args.target,
        args.target_file,
        columns,
        True,
        args.delimiter,
        frame,
        args.na_values,
    )
    return X, _labels(y)


def _evaluate(args: argparse.Namespace) -> int:
    model = _load_model(args.model)
    columns = _predict_columns(model) if _suffix(args.data) in TABLES else None
    encodes = getattr(model, "encoder_", None) is not None
    X, y = _read_labelled(args, columns, encodes)
    if hasattr(model, "classes_"):
        unseen = sorted({str(v) for v in np.unique(y)} - {str(c) for c in model.classes_})
        if unseen:
            raise UserError(
                f"the target has labels the model never saw ({', '.join(unseen[:5])}): is "
                f"this the model for this task? (its classes: {list(model.classes_)[:10]})"
            )
        y = np.asarray(y).astype(model.classes_.dtype)
    else:
        if y.dtype.kind not in "iufb":
            raise UserError(
                f"{type(model).__name__} is a regressor, but the target holds {y.dtype} "
                "values (labels?): is this the model for this task?"
            )
        y = _check_target(y, "regression")
    with _progress(args, "evaluate"):
        scores = _metrics(model, X, y)
    if args.json:
        print(json.dumps({"rows": int(X.shape[0]), **scores}))
    elif args.quiet:
        print(f"{next(iter(scores.values())):.6g}")
    else:
        for k, v in scores.items():
            print(f"{k}: {v:.6g}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    if args.plot:
        if _suffix(args.plot) != ".png":
            raise UserError(f"--plot writes a .png file, got {args.plot!r}")
        _check_output(args.plot, "--plot", model=args.model)
    model = _load_model(args.model)
    lines = []
    steps = getattr(model, "steps", None)
    if steps is not None:  # a scikit-learn Pipeline: its steps, then its estimator
        lines.append("pipeline: " + " -> ".join(type(step).__name__ for _, step in steps))
        model = steps[-1][1]
    lines.append(f"model: kernelpath.{type(model).__name__}")
    defaults = type(model)().get_params() if _constructible(model) else {}
    changed = {
        k: v
        for k, v in model.get_params(deep=False).items()
        if k not in defaults or repr(defaults[k]) != repr(v)
    }
    if changed:
        lines.append("parameters: " + ", ".join(f"{k}={v!r}" for k, v in changed.items()))
    for attr, label in (
        ("n_features_in_", "features"),
        ("classes_", "classes"),
        ("kernel_", "kernel"),
        ("center_strategy_", "centers"),
        ("n_samples_seen_", "samples seen"),
    ):
        if hasattr(model, attr):
            value = getattr(model, attr)
            if attr == "classes_":
                value = ", ".join(str(c) for c in value)
            if attr == "center_strategy_" and hasattr(model, "centers_"):
                value = f"{model.centers_.shape[0]} ({value})"
            lines.append(f"{label}: {value}")
    names = _predict_columns(model)
    if names:
        lines.append("feature names: " + ", ".join(names))
    path = getattr(model, "path_", None)
    if path is not None:
        grid = ", ".join(f"{k} ({_span(v)})" for k, v in path.params.items())
        lines.append(f"path: shape {path.shape} over {grid}; scored by {path.scoring}")
        lines.append(f"chosen point: {_best(model)} (index {path.best_index})")
        if path.val_error is not None:
            err = path.best_val_error
            lines.append(f"validation {path.scoring} at the chosen point: {err:.6g}")
    d_eff = _effective_dimension(model)
    if d_eff is not None:
        lines.append(f"d_eff at the chosen penalty, on the centers: {d_eff:.4g}")
    print("\n".join(lines))
    if args.plot:
        _plot(model, args.plot)
        print(f"plot: {args.plot}")
    return 0


def _constructible(model: Any) -> bool:
    try:
        type(model)()
    except TypeError:
        return False
    return True


def _span(v: np.ndarray) -> str:
    finite = np.asarray(v, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return "-"
    lo, hi = float(finite.min()), float(finite.max())
    n = len(np.unique(finite))
    return f"{n} values, {lo:.3g} to {hi:.3g}" if n > 1 else f"{lo:.3g}"


def _effective_dimension(model: Any) -> float | None:
    """d_eff(λ) = tr(K_mm (K_mm + m λ I)^-1) of the centers at the chosen λ: the data's
    effective dimension estimated on the centers (a uniform sample of the rows)."""
    centers = getattr(model, "centers_", None)
    kernel = getattr(model, "kernel_", None)
    lam = getattr(model, "penalty_", None)
    if centers is None or kernel is None or not lam or not np.isfinite(lam):
        return None

    return effective_dimension(B.to_numpy(dense_block(centers)), kernel, float(lam))[0]


def _plot(model: Any, out: str) -> None:
    """The validation error along the model's path, as a PNG written atomically."""
    path = getattr(model, "path_", None)
    if path is None:
        raise UserError(f"--plot: a {type(model).__name__} has no path to plot")
    if _suffix(out) != ".png":
        raise UserError(f"--plot writes a .png file, got {out!r}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError('--plot needs matplotlib: pip install "kernelpath[plot]"') from None
    fig, ax = plt.subplots(figsize=(6, 4))
    path.plot(ax=ax)
    ax.set_title(f"{type(model).__name__}: validation along the path")
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(out))
    tmp = temporary(folder, suffix=".png")
    try:
        fig.savefig(tmp, format="png", dpi=120)
        default_mode(tmp)
        os.replace(tmp, out)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)


# --------------------------------------------------------------------------- progress
def _say(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


class _progress:
    """A tqdm bar over the library's progress reports while the command runs (when stderr
    is a terminal, or with ``--progress``; never with ``--quiet``)."""

    def __init__(self, args: argparse.Namespace, what: str) -> None:
        show = getattr(args, "progress", None)
        if show is None:
            show = sys.stderr.isatty()
        self.show = bool(show) and not getattr(args, "quiet", False)
        self.what = what
        self._ctx: Any = None

    def __enter__(self) -> _progress:
        if self.show:
            self._ctx = tqdm_reporter(self.what)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
