"""Data larger than memory: rows read from disk in blocks, never whole.

A **row source** is a lazy 2-D (features) or 1-D (targets) array whose rows are read on
demand. Every estimator, feature map and leverage function accepts one where it accepts an
array, and so does ``predict``; the kernel operator reads it block after block, the hold-out
split and the center draw work on row indices (``subset``, ``take``) without loading it.

- ``as_source(a)`` wraps a ``numpy.memmap`` (``np.load(path, mmap_mode="r")``), an h5py
  dataset, a zarr array or anything with ``shape``, ``dtype`` and row slicing. Estimators
  wrap h5py datasets and zarr arrays themselves; a memmap is an ndarray to NumPy and
  scikit-learn, and is read whole unless it is wrapped.
- ``read_table(path, target="y", columns=None)`` opens a Parquet file (read in place, by row
  groups) or a CSV file (streamed once into a temporary binary file, since text has no row
  index) and returns lazy ``(X, y)``.
- ``write_predictions(model, X, path)`` writes the predictions of a large input blockwise
  into an on-disk array (.npy, .h5, .zarr or .csv), atomically: a temporary file in the same
  folder, renamed into place only once complete.

Every read checks that the rows are finite numbers (the error names the rows) and that the
file has not changed since it was opened (size, modification time and inode):
``DataChangedError`` otherwise, rather than a model fitted on two versions of the data.
"""

from __future__ import annotations

import numbers
import os
import shutil
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

import numpy as np

__all__ = [
    "RowSource",
    "DataChangedError",
    "as_source",
    "is_source",
    "is_lazy_array",
    "read_table",
    "write_predictions",
]

#: Rows closer than this are read as one contiguous span by ``take`` (random rows of a
#: file: one read per group instead of one per row).
READ_GAP = 256
#: The most rows one such read spans (its memory stays small).
READ_SPAN = 2048
#: Decoded Parquet row groups kept per source (the operator's workers read different
#: parts of the file at once).
ROW_GROUP_CACHE = 4
#: Rows per record batch when a CSV file is streamed into its binary copy.
CSV_BATCH_BYTES = 16 * 1024**2


class DataChangedError(RuntimeError):
    """The file behind a row source changed while it was being read."""


def _fingerprint(path: str | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _float_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


class RowSource:
    """Rows of an array that stays on disk, read in blocks.

    Subclasses implement ``_read_raw(start, stop)``. ``read``, ``take`` and ``subset`` are
    the whole interface the library uses; ``np.asarray(source)`` loads everything (an
    explicit choice of the caller).

    Attributes
    ----------
    shape : tuple of int
        (n, d) for features, (n,) for a target column.
    dtype : numpy.dtype
        The dtype rows are returned in: float32 when stored as float32, else float64
        (a source of labels, ``numeric=False``, keeps the stored dtype).
    name : str
        How errors name the data ("X", "y" or a file).
    feature_names : list of str or None
        The column names of a table's features (``read_table``): an estimator fitted on
        the source records them as ``feature_names_in_``.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    name: str
    numeric: bool = True
    path: str | None = None
    feature_names: list[str] | None = None

    def __init__(self) -> None:
        self._fp = _fingerprint(self.path)

    # -- what subclasses give
    def _read_raw(self, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError

    # -- the interface
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return int(self.shape[0])

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def check_unchanged(self) -> None:
        """Raise ``DataChangedError`` if the file differs from when it was opened."""
        if self._fp is not None and _fingerprint(self.path) != self._fp:
            raise DataChangedError(
                f"{self.path} changed while it was being read (its size, modification time "
                "or inode differ from when it was opened): a fit must see one version of "
                "the data; open it again once it is written"
            )

    def _checked(self, A: np.ndarray, start: int) -> np.ndarray:
        if not self.numeric:
            return A
        A = np.ascontiguousarray(A, dtype=self.dtype)
        if not np.isfinite(A).all():
            bad = np.flatnonzero(~np.isfinite(A.reshape(len(A), -1)).all(axis=1))[0]
            raise ValueError(f"{self.name} contains NaN or infinity (row {start + bad})")
        return A

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a contiguous array (checked finite when numeric)."""
        n = len(self)
        start, stop = max(0, min(int(start), n)), max(0, min(int(stop), n))
        self.check_unchanged()
        return self._checked(np.asarray(self._read_raw(start, max(start, stop))), start)

    def take(self, idx: Any) -> np.ndarray:
        """Rows ``idx`` (any order, repeats allowed) as an array: sorted, nearby rows read as
        one span (``READ_GAP``)."""
        idx = np.asarray(idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"{self.name}: row index out of range for {len(self)} rows")
        idx = np.where(idx < 0, idx + len(self), idx)
        uniq, inverse = np.unique(idx, return_inverse=True)
        out = np.empty((len(uniq), *self.shape[1:]), dtype=self.dtype)
        i = 0
        while i < len(uniq):  # runs of rows at most READ_GAP apart, spans of READ_SPAN rows
            j = i + 1
            while (
                j < len(uniq)
                and uniq[j] - uniq[j - 1] <= READ_GAP
                and uniq[j] - uniq[i] < READ_SPAN
            ):
                j += 1
            lo, hi = int(uniq[i]), int(uniq[j - 1]) + 1
            out[i:j] = self.read(lo, hi)[uniq[i:j] - lo]
            i = j
        return out[inverse]

    def subset(self, idx: Any) -> RowSource:
        """A lazy view of the rows ``idx`` (sorted increasing: the hold-out split's parts)."""
        idx = np.asarray(idx, dtype=np.int64).ravel()
        if idx.size and (np.any(np.diff(idx) <= 0) or idx[0] < 0 or idx[-1] >= len(self)):
            raise ValueError(f"{self.name}: a subset needs increasing row indices in range")
        if idx.size == len(self):  # increasing and in range: every row
            return self
        return self._view(idx)

    def _view(self, idx: np.ndarray) -> RowSource:
        """The rows ``idx`` (checked: increasing, in range, not all)."""
        return _SubsetSource(self, idx)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            rows = self.read(start, max(start, stop))
            return rows if step == 1 else rows[::step]
        if isinstance(key, (int, np.integer)):
            k = int(key) + (len(self) if key < 0 else 0)
            return self.read(k, k + 1)[0]
        return self.take(key)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        A = self.read(0, len(self))
        return A if dtype is None else A.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, shape={self.shape}, dtype={self.dtype})"


class ArraySource(RowSource):
    """A row source over an array-like with row slicing: a NumPy memmap, an h5py dataset,
    a zarr array."""

    def __init__(self, array: Any, name: str = "X", numeric: bool = True) -> None:
        shape = tuple(int(s) for s in array.shape)
        if len(shape) not in (1, 2):
            raise ValueError(f"{name} must be 1-D or 2-D, got shape {shape}")
        stored = np.dtype(array.dtype)
        if numeric and stored.kind not in "biuf":
            raise TypeError(f"{name} must contain numbers only, got dtype {stored}")
        self.array, self.shape, self.name, self.numeric = array, shape, name, numeric
        self.dtype = _float_dtype(stored) if numeric else stored
        self.path = _file_of(array)
        super().__init__()

    def _read_raw(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.array[start:stop])


def _file_of(array: Any) -> str | None:
    """The file behind an array-like, when it has one (to notice changes)."""
    if isinstance(array, np.memmap):
        return getattr(array, "filename", None)
    f = getattr(array, "file", None)  # h5py
    if f is not None and hasattr(f, "filename"):
        return str(f.filename)
    return None


class _SubsetSource(RowSource):
    """Rows ``idx`` (increasing) of another source."""

    def __init__(self, base: RowSource, idx: np.ndarray) -> None:
        self.base, self.idx = base, idx
        self.shape = (len(idx), *base.shape[1:])
        self.dtype, self.name, self.numeric = base.dtype, base.name, base.numeric
        self.feature_names = base.feature_names
        self._fp = None  # the base checks its file

    def read(self, start: int, stop: int) -> np.ndarray:
        rows = self.idx[start:stop]
        if rows.size == 0:
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        if hi - lo <= 4 * len(rows) + READ_GAP:  # a dense part: one span
            return np.ascontiguousarray(self.base.read(lo, hi)[rows - lo])
        return self.base.take(rows)

    def take(self, idx: Any) -> np.ndarray:
        return self.base.take(self.idx[np.asarray(idx, dtype=np.int64)])

    def _view(self, idx: np.ndarray) -> RowSource:
        return _SubsetSource(self.base, self.idx[idx])

    def check_unchanged(self) -> None:
        self.base.check_unchanged()


class ParquetSource(RowSource):
    """Columns of a Parquet file read in place, by row groups (a few decoded groups are
    kept: ``ROW_GROUP_CACHE``). Row groups of up to ~100,000 rows keep that memory small."""

    def __init__(
        self, path: str, columns: list[str], name: str, numeric: bool = True, one_d: bool = False
    ) -> None:
        import pyarrow.parquet as pq

        self.path, self.columns, self.name, self.numeric = path, list(columns), name, numeric
        self._file = pq.ParquetFile(path)
        meta = self._file.metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        n = int(self._starts[-1])
        self.shape = (n,) if one_d else (n, len(self.columns))
        schema = self._file.schema_arrow
        types = [schema.field(c).type for c in self.columns]
        if numeric:
            self.dtype = np.dtype(np.float64)
            if all(str(t) == "float" for t in types):
                self.dtype = np.dtype(np.float32)
        else:
            self.dtype = np.dtype(types[0].to_pandas_dtype()) if one_d else np.dtype(object)
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        super().__init__()

    def __getstate__(self) -> dict[str, Any]:  # picklable: reopened where it is loaded
        state = dict(self.__dict__)
        del state["_file"], state["_lock"]
        state["_cache"] = OrderedDict()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        self.__dict__.update(state)
        self._file = pq.ParquetFile(self.path)
        self._lock = threading.Lock()

    def _group(self, g: int) -> np.ndarray:
        with self._lock:
            if g in self._cache:
                self._cache.move_to_end(g)
                return self._cache[g]
            table = self._file.read_row_group(g, columns=self.columns)
            cols = [table.column(c).to_numpy(zero_copy_only=False) for c in self.columns]
            if len(self.shape) == 1:
                arr = cols[0]
            else:
                arr = np.empty((table.num_rows, len(cols)), dtype=self.dtype)
                for j, c in enumerate(cols):
                    arr[:, j] = c
            self._cache[g] = arr
            while len(self._cache) > ROW_GROUP_CACHE:
                self._cache.popitem(last=False)
            return arr

    def _read_raw(self, start: int, stop: int) -> np.ndarray:
        if stop <= start:
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)
        g0 = int(np.searchsorted(self._starts, start, side="right")) - 1
        g1 = int(np.searchsorted(self._starts, stop - 1, side="right")) - 1
        parts = []
        for g in range(g0, g1 + 1):
            a = self._starts[g]
            arr = self._group(g)
            parts.append(arr[max(start - a, 0) : min(stop - a, len(arr))])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def is_source(a: Any) -> bool:
    """Whether ``a`` is a row source."""
    return isinstance(a, RowSource)


def is_lazy_array(a: Any) -> bool:
    """Whether ``a`` is an array on disk that estimators read in blocks: a row source, an
    h5py dataset or a zarr array."""
    if isinstance(a, RowSource):  # a numpy.memmap is an ndarray: as_source(memmap) reads it
        return True
    mod = type(a).__module__ or ""
    return mod.startswith(("h5py", "zarr")) and hasattr(a, "shape") and hasattr(a, "dtype")


def as_source(a: Any, name: str = "X", numeric: bool = True) -> RowSource:
    """A row source over ``a`` (a source is returned as it is).

    Parameters
    ----------
    a : RowSource, numpy.memmap, h5py.Dataset, zarr.Array or array-like with ``shape``,
        ``dtype`` and row slicing
    name : str
        How errors name it.
    numeric : bool
        Rows are numbers (converted to float64, float32 kept, and checked finite).
    """
    if isinstance(a, RowSource):
        return a
    if not (hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "__getitem__")):
        raise TypeError(f"{name}: a row source needs shape, dtype and row slicing")
    return ArraySource(a, name, numeric)


# ----------------------------------------------------------------------------- tables
def read_table(
    path: str | os.PathLike[str],
    target: str | None = "y",
    columns: Sequence[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[RowSource, RowSource | None]:
    """Open a table on disk as lazy ``(X, y)``.

    Parameters
    ----------
    path : path-like
        A Parquet file (``.parquet``, ``.pq``) or a CSV file with a header row (``.csv``,
        ``.txt``).
    target : str or None, default="y"
        The target column (None: no target, e.g. for ``predict``).
    columns : sequence of str or None
        Feature columns, in this order (None: every column but the target).
    cache_dir : path-like or None
        Where a CSV file's binary copy goes (default: the system's temporary folder). The
        copy is unlinked at once and freed with the arrays.

    Returns
    -------
    X : RowSource of shape (n, d)
    y : RowSource of shape (n,) or None
        Labels keep their dtype (strings for class names).

    Raises
    ------
    ValueError
        A missing file or column, a non-numeric feature column, an unknown format.
    """
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ValueError(f"path: no such file {p!r}")
    suffix = FsPath(p).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return _read_parquet(p, target, columns)
    if suffix in (".csv", ".txt"):
        return _read_csv(p, target, columns, cache_dir)
    raise ValueError(f"path: read_table reads Parquet (.parquet, .pq) or CSV (.csv), got {p!r}")


def _choose_columns(
    available: list[str], target: str | None, columns: Sequence[str] | None, path: str
) -> list[str]:
    if target is not None and target not in available:
        raise ValueError(f"target: no column {target!r} in {path} (columns: {available})")
    if columns is None:
        feats = [c for c in available if c != target]
    else:
        if isinstance(columns, str):
            raise TypeError("columns must be a sequence of column names, not one string")
        feats = list(columns)
        missing = [c for c in feats if c not in available]
        if missing:
            raise ValueError(f"columns: no column {missing} in {path} (columns: {available})")
        if target is not None and target in feats:
            raise ValueError(f"columns: the target {target!r} is also a feature column")
    if not feats:
        raise ValueError(f"columns: {path} has no feature column besides the target")
    return feats


def _read_parquet(
    path: str, target: str | None, columns: Sequence[str] | None
) -> tuple[RowSource, RowSource | None]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.ParquetFile(path).schema_arrow
    feats = _choose_columns(list(schema.names), target, columns, path)
    for c in feats:
        t = schema.field(c).type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            raise ValueError(f"columns: feature column {c!r} of {path} is not numeric ({t})")
    X = ParquetSource(path, feats, "X")
    X.feature_names = list(feats)
    y = None
    if target is not None:
        t = schema.field(target).type
        numeric = pa.types.is_floating(t)
        y = ParquetSource(path, [target], "y", numeric=numeric, one_d=True)
    return X, y


def _read_csv(
    path: str, target: str | None, columns: Sequence[str] | None, cache_dir: Any
) -> tuple[RowSource, RowSource | None]:
    """Stream the CSV once into an unlinked binary file (features then the target), and
    map it."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=CSV_BATCH_BYTES))
    except pa.ArrowInvalid as exc:
        raise ValueError(f"path: cannot read {path} as CSV: {exc}") from exc
    names = list(reader.schema.names)
    feats = _choose_columns(names, target, columns, path)
    if all(pa.types.is_null(reader.schema.field(c).type) for c in names):
        raise ValueError(f"path: {path} has no data rows")
    for c in feats:
        t = reader.schema.field(c).type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            raise ValueError(f"columns: feature column {c!r} of {path} is not numeric ({t})")
    label_type = reader.schema.field(target).type if target is not None else None
    numeric_target = label_type is not None and (
        pa.types.is_integer(label_type) or pa.types.is_floating(label_type)
    )
    width = len(feats) + (1 if numeric_target else 0)
    folder = os.fspath(cache_dir) if cache_dir is not None else tempfile.gettempdir()
    fd, tmp = tempfile.mkstemp(prefix="kernelpath-csv-", suffix=".bin", dir=folder)
    labels: list[Any] = []
    n = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            for batch in reader:
                try:
                    cols = [batch.column(c).to_numpy(zero_copy_only=False) for c in feats]
                except pa.ArrowInvalid as exc:
                    raise ValueError(f"path: {path}: {exc}") from exc
                rows = np.empty((batch.num_rows, width), dtype=np.float64)
                for j, c in enumerate(cols):
                    rows[:, j] = c
                if target is not None:
                    lab = batch.column(target).to_numpy(zero_copy_only=False)
                    if numeric_target:
                        rows[:, -1] = lab
                    else:
                        labels.append(lab)
                fh.write(rows.tobytes())
                n += batch.num_rows
        if n == 0:
            raise ValueError(f"path: {path} has no data rows")
        mm = np.memmap(tmp, dtype=np.float64, mode="r", shape=(n, width))
    except pa.ArrowInvalid as exc:
        raise ValueError(f"path: cannot read {path} as CSV: {exc}") from exc
    finally:
        os.unlink(tmp)  # the mapping keeps the data until the arrays are freed
    X = ArraySource(mm[:, : len(feats)], "X")
    X.feature_names = list(feats)
    y: RowSource | None = None
    if target is not None:
        if numeric_target:
            y = ArraySource(mm[:, -1], "y", numeric=False)
        else:
            y = ArraySource(np.concatenate(labels), "y", numeric=False)
    return X, y


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
    arr = None if src is not None else np.asarray(X)
    shape = src.shape if src is not None else arr.shape  # type: ignore[union-attr]
    if len(shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {tuple(shape)}")
    n, d = int(shape[0]), int(shape[1])
    if block_rows is None:
        block_rows = max(1, (64 * 1024**2) // max(1, 8 * d))
    elif isinstance(block_rows, bool) or not isinstance(block_rows, numbers.Integral):
        raise TypeError(f"block_rows must be a positive integer or None, got {block_rows!r}")
    block_rows = int(block_rows)
    if block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer or None, got {block_rows}")
    names_checked = _check_names(model, src)
    folder = os.path.dirname(os.path.abspath(out))
    tmp = tempfile.mkdtemp(prefix=".kernelpath-", dir=folder) if suffix == ".zarr" else None
    if tmp is None:
        fd, tmp = tempfile.mkstemp(prefix=".kernelpath-", suffix=suffix, dir=folder)
        os.close(fd)
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
        _replace(tmp, out, suffix == ".zarr")
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


def default_mode(path: str, is_dir: bool = False) -> None:
    """Give a file made by ``tempfile`` (mode 0600) the permissions a new file gets (0666,
    or 0777 for a folder, less the umask), before it is renamed into place."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, (0o777 if is_dir else 0o666) & ~mask)


def _replace(tmp: str, out: str, is_dir: bool) -> None:
    """Rename ``tmp`` onto ``out`` (a folder: the old one moved aside first, removed after)."""
    default_mode(tmp, is_dir)
    if not is_dir or not os.path.exists(out):
        os.replace(tmp, out)
        return
    old = tempfile.mkdtemp(prefix=".kernelpath-old-", dir=os.path.dirname(os.path.abspath(out)))
    os.rmdir(old)
    os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
