"""Row sources: arrays on disk (memmaps, HDF5, zarr, Parquet) whose rows are read in blocks.

A **row source** is a lazy 2-D (features) or 1-D (targets) array whose rows are read on
demand. Every estimator, feature map and leverage function accepts one where it accepts an
array, and so does ``predict``; the kernel operator reads it block after block, the hold-out
split and the center draw work on row indices (``subset``, ``take``) without loading it.
``as_source(a)`` wraps a ``numpy.memmap`` (``np.load(path, mmap_mode="r")``), an h5py
dataset, a zarr array or anything with ``shape``, ``dtype`` and row slicing. Estimators
wrap h5py datasets and zarr arrays themselves; a memmap is an ndarray to NumPy and
scikit-learn, and is read whole unless it is wrapped.

Every read checks that the rows are finite numbers (the error names the rows) and that the
file has not changed since it was opened (size, modification time and inode):
``DataChangedError`` otherwise, rather than a model fitted on two versions of the data.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = [
    "RowSource",
    "ArraySource",
    "ParquetSource",
    "DataChangedError",
    "as_source",
    "is_source",
    "is_lazy_array",
    "magnitude_limit",
]

#: Rows closer than this are read as one contiguous span by ``take`` (random rows of a
#: file: one read per group instead of one per row).
READ_GAP = 256
#: The most rows one such read spans (its memory stays small).
READ_SPAN = 2048
#: Decoded Parquet row groups kept per source (the operator's workers read different
#: parts of the file at once).
ROW_GROUP_CACHE = 4


def magnitude_limit(d: int, dtype: Any) -> float:
    """The largest |x| whose rows of d features keep their squared norms and distances
    finite in ``dtype``: sqrt(max / (4 d))."""
    return float(np.sqrt(np.finfo(np.dtype(dtype)).max / (4 * max(int(d), 1))))


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
        if not A.size:
            return A
        # one pass: each row's largest |x| (NaN where the row holds one) gives both checks
        top = np.abs(A.reshape(len(A), -1)).max(axis=1)
        if not np.isfinite(top).all():
            bad = int(np.flatnonzero(~np.isfinite(top))[0])
            raise ValueError(f"{self.name} contains NaN or infinity (row {start + bad})")
        if A.ndim == 2:  # the rule rows in memory meet (_validation.check_magnitude)
            limit = magnitude_limit(A.shape[1], A.dtype)
            if top.max() > limit:
                bad = int(np.argmax(top > limit))
                raise ValueError(
                    f"{self.name} has values up to {top[bad]:.3g} (row {start + bad}): squared "
                    f"distances of rows overflow {A.dtype} (|x| must stay below {limit:.3g}); "
                    "rescale the features"
                )
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
        self._file = pq.ParquetFile(path, page_checksum_verification=True)
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
        self._file = pq.ParquetFile(self.path, page_checksum_verification=True)
        self._lock = threading.Lock()

    def _group(self, g: int) -> np.ndarray:
        with self._lock:
            if g in self._cache:
                self._cache.move_to_end(g)
                return self._cache[g]
            try:  # pages written with checksums are verified (pyarrow does when asked)
                table = self._file.read_row_group(g, columns=self.columns)
            except OSError as exc:
                raise ValueError(
                    f"{self.path}: row group {g} (rows {self._starts[g]}-"
                    f"{self._starts[g + 1] - 1}) cannot be read, the file is damaged: {exc}"
                ) from exc
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
