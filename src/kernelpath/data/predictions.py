"""Predictions written to disk: ``write_predictions(model, X, path)`` predicts a large input
block by block into an on-disk array (.npy, .h5, .zarr or .csv), atomically: a temporary
file in the same folder, renamed into place only once complete. It calls the ``predict``
(or other) method of the model it is given and imports no estimator: it sits above them."""

from __future__ import annotations

import numbers
import os
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

import numpy as np
import scipy.sparse

from .files import check_destination, replace_into, temporary
from .sources import RowSource, as_source, is_lazy_array

__all__ = ["write_predictions"]


# ------------------------------------------------------------------------ predictions
def write_predictions(
    model: Any,
    X: Any,
    path: str | os.PathLike[str],
    *,
    method: str = "predict",
    block_rows: int | None = None,
    dataset: str = "predictions",
    header: Sequence[str] | None = None,
) -> str:
    """Write ``model.<method>(X)`` blockwise into an on-disk array, atomically.

    The rows of X are read and predicted ``block_rows`` at a time (default: about 64 MB of
    input per block) and written into a temporary file in the destination's folder, which
    is renamed onto ``path`` only when every block is written: after a failure (a bad row,
    a full disk, an interrupt) ``path`` is untouched and no partial file is left.

    Parameters
    ----------
    model : fitted estimator
    X : array-like, row source, memmap, h5py dataset or zarr array of shape (n, d)
    path : path-like
        ``.npy`` (NumPy), ``.h5`` / ``.hdf5`` (HDF5 dataset ``dataset``), ``.zarr`` (a zarr
        array) or ``.csv`` (one column per output; a header line when ``header`` is given).
    method : {"predict", "decision_function", "predict_proba", "transform"}
    block_rows : int or None
    dataset : str
        The HDF5 dataset's name.
    header : sequence of str or None
        Column names written as the first line of a ``.csv`` (one per output).

    Returns
    -------
    str
        ``path``.
    """
    if method not in ("predict", "decision_function", "predict_proba", "transform"):
        raise ValueError(
            f"method must be predict, decision_function, predict_proba or transform, got {method!r}"
        )
    fn = getattr(model, method, None)
    if fn is None:
        raise TypeError(f"model: {type(model).__name__} has no method {method!r}")
    out = os.fspath(path)
    suffix = FsPath(out).suffix.lower()
    if suffix not in (".npy", ".h5", ".hdf5", ".zarr", ".csv"):
        raise ValueError(f"path: write .npy, .h5, .hdf5, .zarr or .csv, got {out!r}")
    if not isinstance(dataset, str) or not dataset:
        raise TypeError(f"dataset must be a non-empty string, got {dataset!r}")
    if header is not None:
        if isinstance(header, str) or not all(isinstance(h, str) for h in header):
            raise TypeError(f"header must be a sequence of column names, got {header!r}")
        if suffix != ".csv":
            raise ValueError(f"header: only a .csv output has a header line, got {out!r}")
    src = as_source(X) if is_lazy_array(X) or isinstance(X, np.memmap) else None
    sparse = scipy.sparse.issparse(X)  # scipy.sparse rows: predicted block by block as CSR
    arr = None if src is not None else (X if sparse else np.asarray(X))
    shape = src.shape if src is not None else arr.shape  # type: ignore[union-attr]
    if len(shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {tuple(shape)}")
    n, d = int(shape[0]), int(shape[1])
    if block_rows is None:  # rows of 64 MB (a sparse row: its stored entries)
        per_row = 12 * arr.nnz // max(n, 1) if sparse else 8 * d  # type: ignore[union-attr]
        block_rows = max(1, (64 * 1024**2) // max(8, per_row))
    elif isinstance(block_rows, bool) or not isinstance(block_rows, numbers.Integral):
        raise TypeError(f"block_rows must be a positive integer or None, got {block_rows!r}")
    block_rows = int(block_rows)
    if block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer or None, got {block_rows}")
    check_destination(out, directory=suffix == ".zarr")
    names_checked = _check_names(model, src)
    folder = os.path.dirname(os.path.abspath(out))
    tmp = temporary(folder, suffix, directory=suffix == ".zarr")
    writer: Any = None
    try:
        for s in range(0, n, block_rows):
            e = min(n, s + block_rows)
            rows = src.read(s, e) if src is not None else arr[s:e]  # type: ignore[index]
            with warnings.catch_warnings():  # the source's names were checked above
                if names_checked:
                    warnings.filterwarnings("ignore", "X does not have valid feature names")
                P = np.asarray(fn(rows))
            if writer is None:
                writer = _Writer(tmp, suffix, (n, *P.shape[1:]), P.dtype, dataset)
                if header is not None:
                    writer.header(list(header), 1 if P.ndim == 1 else P.shape[1])
            writer.write(s, e, P)
        if writer is None:
            raise ValueError("X has no rows")
        writer.close()
        replace_into(tmp, out, suffix == ".zarr")
    except BaseException:
        if writer is not None:
            writer.close()
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def _check_names(model: Any, src: RowSource | None) -> bool:
    """Whether a table's columns were checked against the model's ``feature_names_in_``
    (then its blocks, plain arrays, are predicted without scikit-learn's name warning)."""
    fitted = getattr(model, "feature_names_in_", None)
    names = getattr(src, "feature_names", None)
    if fitted is None or names is None:
        return False
    if list(fitted) != list(names):
        raise ValueError(
            f"X's columns {list(names)} differ from those seen at fit, {list(fitted)} "
            "(names and order must match)"
        )
    return True


class _Writer:
    """An on-disk output array written block by block."""

    def __init__(
        self, path: str, suffix: str, shape: tuple[int, ...], dtype: np.dtype, dataset: str
    ) -> None:
        self.suffix = suffix
        self.fh: Any = None
        self.arr: Any
        if dtype.kind not in "biuf" and suffix != ".csv":
            raise TypeError(
                f"path: predictions of dtype {dtype} (labels that are not numbers) can be "
                "written to .csv only"
            )
        if suffix == ".npy":
            self.arr = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
        elif suffix in (".h5", ".hdf5"):
            import h5py

            self.fh = h5py.File(path, "w")
            self.arr = self.fh.create_dataset(dataset, shape=shape, dtype=dtype)
        elif suffix == ".zarr":
            import zarr

            self.arr = zarr.open_array(path, mode="w", shape=shape, dtype=dtype)
        else:
            self.fh = open(path, "w")  # noqa: SIM115
            self.arr = None

    def header(self, names: list[str], width: int) -> None:
        if len(names) != width:
            raise ValueError(f"header: {len(names)} names for {width} output columns")
        self.fh.write(",".join(names) + "\n")

    def write(self, s: int, e: int, P: np.ndarray) -> None:
        if self.arr is not None:
            self.arr[s:e] = P
            return
        P2 = P[:, None] if P.ndim == 1 else P
        fmt = "%.17g" if P2.dtype.kind == "f" else "%s"
        np.savetxt(self.fh, P2, delimiter=",", fmt=fmt)

    def close(self) -> None:
        if self.suffix == ".npy" and self.arr is not None:
            self.arr.flush()
            self.arr = None
        if self.fh is not None:
            self.fh.close()
            self.fh = None
