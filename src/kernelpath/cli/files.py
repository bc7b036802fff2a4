"""The command line's data files: tables, LIBSVM, .npy / .npz, the target and the task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..data import as_source, read_table
from ..data.files import check_source
from ..data.tables import TEXT_TABLES, table_suffix, text_delimiter
from ..datasets import load_libsvm
from .names import UserError

# --------------------------------------------------------------------------- data files
TABLES = (*TEXT_TABLES, ".parquet", ".pq")
LIBSVM = (".svm", ".libsvm", ".svmlight")
#: Integer-valued targets with at most this many distinct values are class labels.
MAX_CLASSES_AUTO = 20


def _suffix(path: str) -> str:
    """The format's suffix, a compression's aside (``.csv.gz`` -> ``.csv``)."""
    return table_suffix(path)[0]


def _check_source(path: str, name: str) -> None:
    """``data.files.check_source`` as a one-line user error: a missing path, a folder or a
    FIFO named as an input file."""
    try:
        check_source(path, name)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _read_target_file(path: str, column: str | None, delimiter: str | None) -> np.ndarray:
    """A target in its own file: ``.npy``, or a CSV with a header (one column, or the one
    named by ``--target``)."""
    _check_source(path, "--target-file")
    suffix = _suffix(path)
    if suffix == ".npy":
        y = np.load(path, allow_pickle=False)
    elif suffix in TEXT_TABLES:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        sep = text_delimiter(suffix, delimiter)
        try:
            table = pcsv.read_csv(path, parse_options=pcsv.ParseOptions(delimiter=sep))
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
        raise UserError(f"--target-file: read .npy, .csv or .tsv, got {path!r}")
    if y.ndim != 1:
        raise UserError(f"--target-file: {path} must hold one column, got shape {y.shape}")
    return np.asarray(y)


def _read_data(
    path: str,
    target: str | None,
    target_file: str | None,
    columns: Sequence[str] | None,
    need_target: bool,
    delimiter: str | None = None,
    frame: bool = False,
    na_values: str | None = None,
) -> tuple[Any, Any]:
    """(X, y) of a data file; X stays on disk where the format allows (CSV is copied once
    into a binary file, Parquet is read by row groups, ``.npy`` is mapped). ``frame`` (or
    ``na_values``, comma-separated texts of missing values): a table is read into a pandas
    frame with its text columns and missing values, for a model that encodes them."""

    _check_source(path, "data")
    suffix = _suffix(path)
    X: Any
    y: Any = None
    if suffix in TABLES:
        in_file = target if target_file is None else None
        if need_target and in_file is None and target_file is None:
            raise UserError(f"{path}: name the target with --target COLUMN or --target-file")
        if frame or na_values is not None:
            X, y = _read_frame(path, in_file, columns, delimiter, na_values)
        else:
            X, y = read_table(path, target=in_file, columns=columns, delimiter=delimiter)
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
            f"{path}: read CSV or TSV (also .gz, .bz2), Parquet, LIBSVM (.svm, .libsvm, "
            f".svmlight), .npy or .npz files, got {suffix or 'no suffix'!r}"
        )
    if target_file is not None:
        y = _read_target_file(target_file, target, delimiter)
    if y is not None and len(y) != X.shape[0]:
        raise UserError(f"the target has {len(y)} rows, the data {X.shape[0]}")
    if need_target and y is None:
        raise UserError(f"{path}: no target: name it with --target or --target-file")
    if y is not None and not hasattr(y, "dtype"):
        y = np.asarray(y)
    return X, y


def _read_frame(
    path: str,
    target: str | None,
    columns: Sequence[str] | None,
    delimiter: str | None,
    na_values: str | None,
) -> tuple[Any, Any]:
    """(X, y) of a table read into a pandas frame, its text columns kept and the texts
    ``na_values`` names read as missing."""
    import pandas as pd

    suffix = _suffix(path)
    try:
        if suffix in TEXT_TABLES:
            marks = None if na_values is None else [v for v in na_values.split(",") if v]
            df = pd.read_csv(
                path, sep=text_delimiter(suffix, delimiter), na_values=marks, skipinitialspace=True
            )
        else:
            df = pd.read_parquet(path)
    except (ValueError, OSError) as exc:
        raise UserError(f"{path}: cannot read it as a table: {exc}") from None
    names = [str(c) for c in df.columns]
    for name in [*(columns or []), *([target] if target else [])]:
        if name not in names:
            raise UserError(f"no column {name!r} in {path} (columns: {names[:20]})")
    y = None
    if target is not None:
        y = df.pop(target).to_numpy()
    X = df[list(columns)] if columns else df
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
