"""The ``kernelpath`` command.

    kernelpath fit DATA (--target COLUMN | --target-file FILE) [--output model.kp] [options]
    kernelpath predict MODEL DATA --output PRED [--method predict|decision_function|...]
    kernelpath evaluate MODEL DATA (--target COLUMN | --target-file FILE) [--json]
    kernelpath inspect MODEL [--plot path.png]
    kernelpath demo [--n-train N] [--n-test N] [--solver cg|direct|nytro] [--seed S]
                    [--device auto|cpu|cuda|cuda:N]
    kernelpath info

DATA is a CSV or Parquet table (features by column name; the target a column, or a separate
file), a LIBSVM text file (``.svm``, ``.libsvm``, ``.svmlight``: its own labels), a
``.npy`` matrix (target from ``--target-file``) or a ``.npz`` with arrays ``X`` and ``y``.
``fit`` chooses regression or classification from the target (``--task`` overrides), fits
the estimator's whole path with its automatic selection, and writes a model file
(``kernelpath.save``). User errors print one line on stderr and exit with status 1.

``demo`` fits the foundation benchmark's problem (x ~ N(0, I_20), y = sin(<w, x>) + 0.1 eps)
on generated data: the whole (λ, iteration) path on a 20% hold-out, then prints the path's
best point, its validation error and the test RMSE (``--device`` computes with PyTorch
there). ``info`` prints the version, threads, default memory budget and the PyTorch devices.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

import numpy as np

from . import Gaussian, NystromRegressor, NYTRORegressor, __version__
from ._backend import available_memory, n_threads, resolve_memory_budget
from .datasets import make_sin_regression
from .model_files import ModelFileError


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
    print(f"test RMSE: {rmse:.4f}  (noise level 0.1)")
    return 0


def _info(_: argparse.Namespace) -> int:
    print(f"kernelpath {__version__}")
    print(f"threads for kernel evaluation: {n_threads()}")
    print(
        f"available memory: {available_memory() / 1e9:.1f} GB; "
        f"default memory_budget: {resolve_memory_budget(None) / 1e9:.1f} GB"
    )
    from ._kernels import HAVE_NUMBA

    print(
        "rank-one Cholesky updates: "
        + ("compiled (Numba)" if HAVE_NUMBA else "NumPy loops (install numba for ~10x)")
    )
    try:
        import torch
    except ImportError:
        print("PyTorch: not installed (pip install 'kernelpath[torch]' for device=...)")
        return 0
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print(
        f"PyTorch {torch.__version__}: device='cpu'"
        + "".join(f", 'cuda:{i}' ({name})" for i, name in enumerate(gpus))
        + ("" if gpus else "; no CUDA device")
    )
    return 0


# --------------------------------------------------------------------------- data files
TABLES = (".csv", ".txt", ".parquet", ".pq")
LIBSVM = (".svm", ".libsvm", ".svmlight")
#: Integer-valued targets with at most this many distinct values are class labels.
MAX_CLASSES_AUTO = 20


class UserError(Exception):
    """A mistake in the command's input: reported as one line, exit status 1."""


def _suffix(path: str) -> str:
    s = FsPath(path).suffixes
    s = [x for x in s if x not in (".gz", ".bz2")]
    return s[-1].lower() if s else ""


def _read_target_file(path: str, column: str | None) -> np.ndarray:
    """A target in its own file: ``.npy``, or a CSV with a header (one column, or the one
    named by ``--target``)."""
    if not os.path.exists(path):
        raise UserError(f"--target-file: no such file {path!r}")
    suffix = _suffix(path)
    if suffix == ".npy":
        y = np.load(path, allow_pickle=False)
    elif suffix in (".csv", ".txt"):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        try:
            table = pcsv.read_csv(path)
        except pa.ArrowInvalid as exc:
            raise UserError(f"--target-file: cannot read {path} as CSV: {exc}") from None
        names = list(table.column_names)
        if column is None and len(names) != 1:
            raise UserError(f"--target-file: {path} has columns {names}: name one with --target")
        name = column if column is not None else names[0]
        if name not in names:
            raise UserError(f"--target: no column {name!r} in {path} (columns: {names})")
        y = table.column(name).to_numpy(zero_copy_only=False)
    else:
        raise UserError(f"--target-file: read .npy or .csv, got {path!r}")
    if y.ndim != 1:
        raise UserError(f"--target-file: {path} must hold one column, got shape {y.shape}")
    return np.asarray(y)


def _read_data(
    path: str,
    target: str | None,
    target_file: str | None,
    columns: Sequence[str] | None,
    need_target: bool,
) -> tuple[Any, Any]:
    """(X, y) of a data file; X stays on disk where the format allows (CSV is copied once
    into a binary file, Parquet is read by row groups, ``.npy`` is mapped)."""
    from .data import as_source, read_table
    from .datasets import load_libsvm

    if not os.path.exists(path):
        raise UserError(f"no such file {path!r}")
    suffix = _suffix(path)
    X: Any
    y: Any = None
    if suffix in TABLES:
        in_file = target if target_file is None else None
        if need_target and in_file is None and target_file is None:
            raise UserError(f"{path}: name the target with --target COLUMN or --target-file")
        X, y = read_table(path, target=in_file, columns=columns)
    elif suffix in LIBSVM:
        if columns:
            raise UserError("--columns: a LIBSVM file has no column names")
        X, y = load_libsvm(path)
    elif suffix == ".npy":
        X = as_source(np.load(path, mmap_mode="r", allow_pickle=False), "X")
    elif suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.keys())
            if "X" not in keys:
                raise UserError(f"{path}: a .npz needs an array named 'X' (it has {keys})")
            X = z["X"]
            key = target or "y"
            if target_file is None and key in keys:
                y = z[key]
            elif target is not None and target_file is None:
                raise UserError(f"--target: no array {target!r} in {path} (arrays: {keys})")
    else:
        raise UserError(
            f"{path}: read CSV, Parquet, LIBSVM (.svm, .libsvm, .svmlight), .npy or .npz "
            f"files, got {suffix or 'no suffix'!r}"
        )
    if target_file is not None:
        y = _read_target_file(target_file, target)
    if y is not None and len(y) != len(X):
        raise UserError(f"the target has {len(y)} rows, the data {len(X)}")
    if need_target and y is None:
        raise UserError(f"{path}: no target: name it with --target or --target-file")
    if y is not None and not hasattr(y, "dtype"):
        y = np.asarray(y)
    return X, y


def _labels(y: Any) -> np.ndarray:
    return np.asarray(y[:] if not isinstance(y, np.ndarray) else y)


def _task(y: np.ndarray, task: str) -> str:
    """``classification`` for text, boolean or few integer values; else ``regression``."""
    if task != "auto":
        return task
    if y.dtype.kind in "OUSb":
        return "classification"
    if y.dtype.kind in "iuf":
        finite = y[np.isfinite(y)] if y.dtype.kind == "f" else y
        if finite.size and np.all(finite == np.round(finite)):
            if len(np.unique(finite)) <= MAX_CLASSES_AUTO:
                return "classification"
    return "regression"


def _check_target(y: np.ndarray, task: str) -> np.ndarray:
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        bad = int(np.flatnonzero(~np.isfinite(y))[0])
        raise UserError(f"the target contains NaN or infinity (row {bad})")
    if y.dtype.kind == "O" and any(v is None for v in y):
        bad = next(i for i, v in enumerate(y) if v is None)
        raise UserError(f"the target has an empty value (row {bad})")
    if task == "regression" and y.dtype.kind not in "iufb":
        raise UserError(f"--task regression needs a numeric target, got {y.dtype} values")
    return y


# --------------------------------------------------------------------------- models
def _model_classes() -> dict[str, tuple[type, type]]:
    import kernelpath as kp

    return {
        "nystrom": (kp.NystromRegressor, kp.NystromClassifier),
        "nytro": (kp.NYTRORegressor, kp.NYTROClassifier),
        "krls": (kp.KRLSRegressor, kp.KRLSClassifier),
        "rf": (kp.RandomFeaturesRegressor, kp.RandomFeaturesClassifier),
        "sgm": (kp.SGMRegressor, kp.SGMClassifier),
        "eigenpro": (kp.EigenProRegressor, kp.EigenProClassifier),
    }


def _number_or_name(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _kernel(name: str, sigma: str | None) -> Any:
    """``--kernel`` (a name of ``kernels.make_kernel``) with ``--sigma`` for the radial ones."""
    from .kernels import make_kernel

    try:
        kernel = make_kernel(name)
    except ValueError as exc:
        raise UserError(f"--{exc}") from None
    if sigma is None:
        return name
    if not hasattr(kernel, "sigma"):
        raise UserError(f"--sigma: the {name} kernel has no width")
    radial: Any = type(kernel)  # Gaussian, Laplacian, Matern or Cauchy: they take sigma
    return radial(sigma=_number_or_name(sigma))


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _estimator(args: argparse.Namespace, task: str) -> Any:
    reg, clf = _model_classes()[args.model]
    cls = clf if task == "classification" else reg
    valid = set(cls().get_params())
    params: dict[str, Any] = {"kernel": _kernel(args.kernel, args.sigma)}
    if args.penalty is not None:
        values = [_number_or_name(v) for v in args.penalty.split(",")]
        params["penalty"] = values[0] if len(values) == 1 else values
    if args.n_centers is not None:
        params["n_centers"] = _number_or_name(args.n_centers)
        if isinstance(params["n_centers"], float) and params["n_centers"].is_integer():
            params["n_centers"] = int(params["n_centers"])
    for opt in ("max_iter", "n_features", "solver", "validation_fraction", "memory_budget"):
        value = getattr(args, opt)
        if value is not None:
            params[opt] = value
    if args.seed is not None:
        params["random_state"] = args.seed
    if args.device is not None:
        params["device"] = args.device
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set takes NAME=VALUE, got {item!r}")
        params[key.replace("-", "_")] = _parse_value(value)
    unknown = sorted(set(params) - valid)
    if unknown:
        flag = unknown[0].replace("_", "-")
        raise UserError(
            f"--{flag}: {cls.__name__} has no parameter {unknown[0]!r} "
            f"(its parameters: {', '.join(sorted(valid))})"
        )
    return cls(**params)


def _rows_x_cols(X: Any) -> str:
    return f"{X.shape[0]:,} rows x {X.shape[1]} features"


def _best(model: Any) -> str:
    if not hasattr(model, "best_params_"):
        return ""
    parts = []
    for k, v in model.best_params_.items():
        parts.append(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts)


# --------------------------------------------------------------------------- commands
def _fit(args: argparse.Namespace) -> int:
    from . import save

    columns = args.columns.split(",") if args.columns else None
    X, y = _read_data(args.data, args.target, args.target_file, columns, need_target=True)
    y = _labels(y)
    task = _task(y, args.task)
    y = _check_target(y, task)
    est = _estimator(args, task)
    out = args.output or str(FsPath(args.data).with_suffix(".kp").name)
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
    from . import load

    if not os.path.exists(path):
        raise UserError(f"no such model file {path!r}")
    return load(path)


def _predict_columns(model: Any) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    return None if names is None else [str(c) for c in names]


def _predict(args: argparse.Namespace) -> int:
    from .data import write_predictions

    model = _load_model(args.model)
    if not hasattr(model, args.method):
        raise UserError(f"--method: a {type(model).__name__} has no {args.method}")
    columns = _predict_columns(model) if _suffix(args.data) in TABLES else None
    X, _ = _read_data(args.data, None, None, columns, need_target=False)
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


def _evaluate(args: argparse.Namespace) -> int:
    model = _load_model(args.model)
    columns = _predict_columns(model) if _suffix(args.data) in TABLES else None
    X, y = _read_data(args.data, args.target, args.target_file, columns, need_target=True)
    y = _labels(y)
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
    else:
        for k, v in scores.items():
            print(f"{k}: {v:.6g}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    model = _load_model(args.model)
    lines = [f"model: kernelpath.{type(model).__name__}"]
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
                value = f"{len(model.centers_)} ({value})"
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
    from . import _backend as B
    from .leverage import effective_dimension

    return effective_dimension(np.asarray(B.to_numpy(centers)), kernel, float(lam))[0]


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
    import tempfile

    from .data import default_mode

    fd, tmp = tempfile.mkstemp(prefix=".kernelpath-", suffix=".png", dir=folder)
    os.close(fd)
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
            from .progress import tqdm_reporter

            self._ctx = tqdm_reporter(self.what)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


# --------------------------------------------------------------------------- main
def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", help="CSV, Parquet, LIBSVM, .npy or .npz file")
    p.add_argument("--target", help="the target column (or .npz array)")
    p.add_argument("--target-file", help="the target in its own file (.npy or .csv)")


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="print only the output's name")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show a progress bar (default: when stderr is a terminal)",
    )
    bar.add_argument("--no-progress", dest="progress", action="store_false")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelpath", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"kernelpath {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser("fit", help="fit a model on a data file and write a model file")
    _data_options(fit)
    fit.add_argument("--output", "-o", help="the model file (default: DATA's name with .kp)")
    fit.add_argument("--columns", help="feature columns, comma-separated (default: all)")
    fit.add_argument(
        "--model", choices=list(_model_classes()), default="nystrom", help="default: nystrom"
    )
    fit.add_argument(
        "--task",
        choices=["auto", "regression", "classification"],
        default="auto",
        help="auto: classification for text, boolean or at most 20 integer target values",
    )
    fit.add_argument("--kernel", default="gaussian")
    fit.add_argument("--sigma", help="the kernel width: a number, 'auto' or 'median'")
    fit.add_argument("--penalty", help="λ: a number, a comma-separated grid, or 'auto'")
    fit.add_argument("--n-centers", help="Nyström centers: a number or 'auto'")
    fit.add_argument("--n-features", type=int, help="random features (rf, sgm)")
    fit.add_argument("--max-iter", type=int)
    fit.add_argument("--solver")
    fit.add_argument("--validation-fraction", type=float)
    fit.add_argument("--memory-budget", help="e.g. 2GB (default: half the free memory)")
    fit.add_argument("--seed", type=int, help="random_state")
    fit.add_argument("--device", help="compute with PyTorch there (cpu, cuda, cuda:N)")
    fit.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="any other parameter (repeatable)"
    )
    _output_options(fit)
    fit.set_defaults(func=_fit)

    pred = sub.add_parser("predict", help="predict a data file with a model file")
    pred.add_argument("model", help="a model file written by fit (or kernelpath.save)")
    pred.add_argument("data", help="CSV, Parquet, LIBSVM, .npy or .npz file")
    pred.add_argument("--output", "-o", required=True, help=".csv, .npy, .h5 or .zarr")
    pred.add_argument(
        "--method",
        choices=["predict", "decision_function", "predict_proba"],
        default="predict",
    )
    _output_options(pred)
    pred.set_defaults(func=_predict)

    ev = sub.add_parser("evaluate", help="scores of a model file on labelled data")
    ev.add_argument("model")
    _data_options(ev)
    ev.add_argument("--json", action="store_true", help="one JSON line")
    _output_options(ev)
    ev.set_defaults(func=_evaluate)

    ins = sub.add_parser("inspect", help="what a model file holds")
    ins.add_argument("model")
    ins.add_argument("--plot", help="write the validation error along the path as PNG")
    ins.set_defaults(func=_inspect)

    demo = sub.add_parser("demo", help="fit a regularization path on generated data")
    demo.add_argument("--n-train", type=int, default=20000)
    demo.add_argument("--n-test", type=int, default=5000)
    demo.add_argument("--n-centers", type=int, default=1000)
    demo.add_argument("--solver", choices=["cg", "direct", "nytro"], default="cg")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument(
        "--device", default=None, help="compute with PyTorch there (auto, cpu, cuda, cuda:N)"
    )
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="version, threads and memory budget")
    info.set_defaults(func=_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernelpath`` command."""
    from sklearn.exceptions import NotFittedError

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        for name in ("n_train", "n_test", "n_centers"):
            if getattr(args, name) < 2:
                parser.error(f"--{name.replace('_', '-')} must be at least 2")
        if args.seed < 0:
            parser.error(f"--seed must be a non-negative integer, got {args.seed}")
    if getattr(args, "device", None) is not None:
        from ._backend import check_device

        try:
            check_device(args.device, "--device")
        except (ValueError, TypeError) as exc:
            parser.error(str(exc))
    try:
        return int(args.func(args))
    except (UserError, ModelFileError, ValueError, TypeError, NotFittedError, OSError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"kernelpath {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"kernelpath {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
