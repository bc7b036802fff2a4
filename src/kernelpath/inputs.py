"""The kind of an input X in one place: one interface over every kind of rows a fit reads.

``as_rows(X)`` wraps X in the adapter of its kind:

- ``DenseRows``: a NumPy array or a torch tensor (CPU or CUDA) in memory;
- ``SparseRows``: a ``scipy.sparse`` matrix or array, held as CSR (rows are what every pass
  reads); its blocks stay sparse, its rows are never densified all at once;
- ``SourceRows``: a row source on disk (``kernelpath.data``: memmap, HDF5, zarr, Parquet),
  read in row blocks;
- ``DaskRows``: a dask array, whose chunks stay where they are.

Every adapter answers the same questions: ``shape``, ``dtype``, ``device``, ``kind``;
``read(start, stop)`` (a block of rows in the form the kernels compute on: a dense array or
tensor, or a CSR block); ``subset(idx)`` (rows of the same kind: the hold-out split's parts);
``take(idx)`` (rows in memory: subsamples, minibatches; CSR for sparse rows);
``centers(idx)`` (rows as a model's centers: dense, or CSR for very sparse rows);
``sq_norms()`` (the rows' squared norms in memory, None when they are read block by block);
``check_finite(name)``; ``column_moments(rows)`` (the column statistics of ``scaling``,
from the stored entries of sparse rows); ``dense_blocks`` (whether blocks are dense arrays).
Validation, scaling, the operator and the centers ask the adapter and never branch on the
kind themselves.

Sparse rows: a CSR block times dense centers is scipy's sparse x dense product (cost n·nnz
per row, not n·d); distances come from ||x||^2 - 2 x.z + ||z||^2 as for dense rows.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse

from . import _backend as B
from .data.sources import is_source

__all__ = [
    "Rows",
    "DenseRows",
    "SparseRows",
    "SourceRows",
    "DaskRows",
    "as_rows",
    "is_sparse",
    "kind_of",
    "take_rows",
    "rows_in_memory",
    "row_sq_norms",
    "dense_block",
    "dense_columns",
    "product",
    "column_means",
    "nbytes",
    "center_rows",
    "first_of_each_row",
    "check_feature_count",
    "FEATURE_VECTORS",
    "DENSE_CENTERS_RATIO",
]


#: Sparse rows are computed densified block by block (and their centers are dense) while
#: their dense form takes at most this many times their stored entries
#: (``SparseRows.dense_blocks``).
DENSE_CENTERS_RATIO = 8
#: Rows (or column strips) densified at a time: the operator's CPU block size.
BLOCK_BYTES = 4 * 1024**2


def is_sparse(X: Any) -> bool:
    """Whether X is a ``scipy.sparse`` matrix or array."""
    return bool(scipy.sparse.issparse(X))


def is_torch_sparse(X: Any) -> bool:
    """Whether X is a torch sparse tensor (COO, CSR, CSC, BSR or BSC layout)."""
    if not B.is_tensor(X):
        return False
    import torch

    return bool(X.layout != torch.strided)


def host_sparse(X: Any) -> Any:
    """A torch sparse tensor as the scipy CSR matrix of its rows (moved to the host: sparse
    rows are computed with NumPy there); anything else as it is."""
    if not is_torch_sparse(X):
        return X
    import torch

    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D sparse tensor, got {X.ndim} dimensions")
    T = X.detach().cpu()
    if T.layout == torch.sparse_coo:
        T = T.coalesce()
    T = T.to_sparse_csr()
    return scipy.sparse.csr_matrix(
        (T.values().numpy(), T.col_indices().numpy(), T.crow_indices().numpy()),
        shape=tuple(T.shape),
    )


def kind_of(X: Any) -> str:
    """The kind of X: "sparse", "source", "dask", "tensor" or "array"."""
    if is_sparse(X):
        return "sparse"
    if is_source(X):
        return "source"
    if B.is_dask(X):
        return "dask"
    if B.is_tensor(X):
        return "tensor"
    return "array"


def _every_row(idx: np.ndarray, n: int) -> bool:
    return (
        idx.ndim == 1
        and len(idx) == n
        and (
            len(idx) == 0 or (idx[0] == 0 and idx[-1] == n - 1 and bool(np.all(np.diff(idx) == 1)))
        )
    )


class Rows:
    """The adapter of one kind of input rows (see the module's docstring)."""

    kind: ClassVar[str] = ""
    #: Whether the rows stay where they are and are read in blocks (no norms in memory).
    lazy: ClassVar[bool] = False

    @property
    def dense_blocks(self) -> bool:
        """Whether ``read`` gives dense blocks (all kinds but very sparse rows)."""
        return True

    def __init__(self, X: Any) -> None:
        self.X = X

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.X.shape[0]), int(self.X.shape[1]))

    @property
    def dtype(self) -> np.dtype:
        return B.numpy_dtype(self.X.dtype)

    @property
    def device(self) -> B.Device:
        return B.array_device(self.X)

    def read(self, start: int, stop: int) -> Any:
        """Rows ``start:stop`` in the form the kernels compute on."""
        return self.X[start:stop]

    def subset(self, idx: Any) -> Any:
        """Rows ``idx`` of the same kind (X itself when ``idx`` is every row in order)."""
        idx = np.asarray(idx)
        if _every_row(idx, self.shape[0]):
            return self.X
        return self._subset(idx)

    def _subset(self, idx: np.ndarray) -> Any:
        return self.X[idx]

    def take(self, idx: Any) -> Any:
        """Rows ``idx`` in memory, in the form blocks are computed on: a dense array (a
        tensor on X's device for a tensor), CSR for sparse rows."""
        return self.subset(idx)

    def sq_norms(self, norms: Any = None) -> Any:
        """The squared norms of every row (None for rows read in blocks): Euclidean, or
        ``norms(rows)`` (a kernel's weighted norms)."""
        return (norms or B.sq_norms)(self.X)

    def check_finite(self, name: str = "X") -> None:
        """Refuse NaN or infinity in rows held in memory (rows on disk or on a cluster are
        checked when they are read)."""
        if not B.isfinite_all(self.X):
            raise ValueError(f"{name} contains NaN or infinity")

    def to(self, device: B.Device, dtype: Any = None) -> Any:
        """X on ``device`` in ``dtype`` (a copy only when needed)."""
        return B.to_device(self.X, device, dtype)

    def row_bytes(self) -> float:
        """Bytes one row of X takes in a copy in memory (0 for rows that stay on disk or on
        a cluster: their parts are views)."""
        return 0.0 if self.lazy else float(self.shape[1] * self.dtype.itemsize)

    def read_bytes(self) -> int:
        """Bytes a row of ``read`` allocates (0 for a view of rows in memory; a row read
        from disk with its finiteness check and norm; a densified sparse row)."""
        return self.shape[1] * 9 + 8 if self.lazy else 0

    def centers(self, idx: Any) -> Any:
        """Rows ``idx`` as a model's centers, in memory: dense (``take``), or CSR for
        sparse rows whose dense form would be much larger (``SparseRows.centers``)."""
        return self.take(idx)

    def center_bytes(self, m: int) -> int:
        """Bytes of ``m`` centers drawn from X (before they are drawn)."""
        return int(m) * self.shape[1] * self.dtype.itemsize

    def for_blocks(self) -> Any:
        """X in the form a kernel operator computes on it (as it is, but for sparse rows)."""
        return self.X

    def column_moments(self, rows: Any) -> tuple[np.ndarray, ...]:
        """(mean, standard deviation, min, max, whether each column holds only its min and
        max) of the columns of rows ``rows`` (all when None), float64: the column
        statistics of ``scaling``."""
        S = self.X if rows is None else self.take(rows)
        return _moments(B.to_numpy(S, np.float64))


class DenseRows(Rows):
    """A NumPy array or a torch tensor in memory."""

    kind = "array"

    def __init__(self, X: Any) -> None:
        super().__init__(X)
        self.kind = "tensor" if B.is_tensor(X) else "array"  # type: ignore[misc]

    def check_finite(self, name: str = "X") -> None:
        if not isinstance(self.X, np.memmap):  # a file mapped in memory: one more pass
            super().check_finite(name)

    def _subset(self, idx: np.ndarray) -> Any:
        if B.is_tensor(self.X):
            torch = B._torch()
            index = torch.as_tensor(np.asarray(idx, dtype=np.int64), device=self.X.device)
            return self.X.index_select(0, index)
        return self.X[idx]


class SparseRows(Rows):
    """A ``scipy.sparse`` matrix, held as CSR.

    Two regimes, by how sparse the rows are (``dense_blocks``): rows whose dense form is at
    most ``DENSE_CENTERS_RATIO`` times their stored entries (adult: 11% stored, 6 times) are
    densified block by block, so every block, norm, column statistic and center is the one
    the dense rows give, computed by the same dense code (the same model as a dense fit, and
    BLAS products); sparser rows (text, hashed features: 50 of 10^6 stored) stay CSR, with
    CSR centers and sparse x sparse block products, never densified.
    """

    kind = "sparse"

    def __init__(self, X: Any) -> None:
        if X.format != "csr":
            X = X.tocsr()
        super().__init__(X)

    @property
    def device(self) -> B.Device:
        return B.NUMPY

    @property
    def dense_blocks(self) -> bool:
        """Whether blocks of these rows are computed densified (see the class)."""
        return self.shape[1] * self.dtype.itemsize <= DENSE_CENTERS_RATIO * self.row_bytes()

    def read(self, start: int, stop: int) -> Any:
        block = self.X[start:stop]
        return np.asarray(block.toarray()) if self.dense_blocks else block

    def take(self, idx: Any) -> Any:
        return self.X[np.asarray(idx)]  # CSR: rows in memory stay sparse

    def sq_norms(self, norms: Any = None) -> np.ndarray:
        if not self.dense_blocks:
            return row_sq_norms(self.X) if norms is None else norms(self.X)
        norms = norms or B.sq_norms
        rows = max(1, BLOCK_BYTES // max(1, 8 * self.shape[1]))
        return np.concatenate(
            [norms(self.read(s, s + rows)) for s in range(0, self.shape[0], rows)]
            or [np.zeros(0, self.dtype)]
        )

    def read_bytes(self) -> int:
        if self.dense_blocks:
            return self.shape[1] * 8 + 8
        return 3 * int(np.ceil(self.row_bytes()))  # the block's slice and the product's

    def row_bytes(self) -> float:
        n = max(self.shape[0], 1)
        entry = self.dtype.itemsize + self.X.indices.dtype.itemsize
        return self.X.nnz * entry / n + self.X.indptr.dtype.itemsize

    def centers(self, idx: Any) -> Any:
        C = self.take(idx)
        return np.asarray(C.toarray()) if self.dense_blocks else C

    def center_bytes(self, m: int) -> int:
        if self.dense_blocks:
            return super().center_bytes(m)
        return int(np.ceil(int(m) * self.row_bytes()))

    def check_finite(self, name: str = "X") -> None:
        if not np.isfinite(self.X.data).all():
            raise ValueError(f"{name} contains NaN or infinity (among its stored entries)")

    def to(self, device: B.Device, dtype: Any = None) -> Any:
        if device.is_torch:
            raise ValueError(
                f"X: a scipy.sparse matrix is computed with NumPy on the host; "
                f"device={str(device)!r} needs dense rows (X.toarray(), or a dense tensor)"
            )
        X = self.X
        if dtype is not None and X.dtype != np.dtype(dtype):
            X = X.astype(dtype)
        return X

    def for_blocks(self) -> Any:
        """The form centers take in a kernel operator: dense when ``dense_blocks``."""
        return np.asarray(self.X.toarray()) if self.dense_blocks else self.X

    def column_moments(self, rows: Any) -> tuple[np.ndarray, ...]:
        S = self.X if rows is None else self.X[np.asarray(rows)]
        if not self.dense_blocks:
            return _sparse_moments(S.astype(np.float64))
        # dense row blocks, summed row after row as NumPy sums the columns of a dense
        # array: the statistics of the dense rows, bit for bit
        n, d = S.shape
        step = max(1, BLOCK_BYTES // max(1, 8 * d))
        blocks = [(s, min(n, s + step)) for s in range(0, n, step)]

        def block(s: int, e: int) -> np.ndarray:
            return np.ascontiguousarray(S[s:e].toarray(), dtype=np.float64)

        if not n:
            return _moments(np.zeros((0, d)))
        total, lo, hi = np.zeros(d), np.full(d, np.inf), np.full(d, -np.inf)
        for s, e in blocks:
            A = block(s, e)
            total = np.add.reduce(np.vstack([total[None], A]), axis=0)
            np.minimum(lo, A.min(axis=0), out=lo)
            np.maximum(hi, A.max(axis=0), out=hi)
        mean = total / n
        squares, two = np.zeros(d), np.ones(d, dtype=bool)
        for s, e in blocks:
            A = block(s, e)
            two &= np.all((A == lo) | (A == hi), axis=0)
            A -= mean
            np.multiply(A, A, out=A)
            squares = np.add.reduce(np.vstack([squares[None], A]), axis=0)
        return mean, np.sqrt(squares / n), lo, hi, two


class SourceRows(Rows):
    """A row source on disk (``kernelpath.data``), read in row blocks."""

    kind = "source"
    lazy = True

    @property
    def device(self) -> B.Device:
        return B.NUMPY

    def read(self, start: int, stop: int) -> np.ndarray:
        return self.X.read(start, stop)

    def _subset(self, idx: np.ndarray) -> Any:
        increasing = idx.ndim == 1 and bool(np.all(np.diff(idx) > 0))
        return self.X.subset(idx) if increasing else self.X.take(idx)

    def take(self, idx: Any) -> np.ndarray:
        return self.X.take(np.asarray(idx))

    def sq_norms(self, norms: Any = None) -> None:
        return None

    def check_finite(self, name: str = "X") -> None:
        return None  # every read checks its rows

    def to(self, device: B.Device, dtype: Any = None) -> Any:
        return B.to_device(self.X, device, dtype)  # refuses a torch device


class DaskRows(SourceRows):
    """A dask array: its chunks stay on the workers; rows are gathered when taken (CSR for
    a dask array of scipy.sparse chunks)."""

    kind = "dask"

    @property
    def sparse_chunks(self) -> bool:
        """Whether the chunks are scipy.sparse matrices."""
        return is_sparse(getattr(self.X, "_meta", None))

    def _gathered(self, part: Any) -> Any:
        if self.sparse_chunks:
            return scipy.sparse.csr_matrix(part.compute())
        return np.asarray(part)

    def read(self, start: int, stop: int) -> Any:
        return self._gathered(self.X[start:stop])

    def _subset(self, idx: np.ndarray) -> Any:
        increasing = idx.ndim == 1 and bool(np.all(np.diff(idx) > 0))
        return self.X[idx] if increasing else self._gathered(self.X[idx])

    def take(self, idx: Any) -> Any:
        return self._gathered(self.X[np.asarray(idx)])

    def column_moments(self, rows: Any) -> tuple[np.ndarray, ...]:
        S = self._gathered(self.X if rows is None else self.X[np.asarray(rows)])
        return as_rows(S).column_moments(None)


def as_rows(X: Any) -> Rows:
    """The adapter of X's kind (X itself when it already is one)."""
    if isinstance(X, Rows):
        return X
    kind = kind_of(X)
    if kind == "sparse":
        return SparseRows(X)
    if kind == "source":
        return SourceRows(X)
    if kind == "dask":
        return DaskRows(X)
    return DenseRows(X)


def take_rows(X: Any, idx: Any) -> Any:
    """Rows ``idx`` (an integer array) of X, of the same kind: X itself when ``idx`` is every
    row in order (no copy); of a row source or a dask array, increasing indices give a lazy
    view (the hold-out split's parts), others the rows in memory."""
    return as_rows(X).subset(idx)


def rows_in_memory(X: Any, idx: Any) -> Any:
    """Rows ``idx`` of X in memory (NumPy, a tensor on X's device, CSR for sparse rows):
    read from a row source, gathered from a dask array (subsamples, minibatches)."""
    return as_rows(X).take(idx)


def row_sq_norms(X: Any) -> Any:
    """Squared Euclidean norms of the rows of a dense array, a tensor or a sparse matrix."""
    if is_sparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=X.dtype).ravel()
    return B.sq_norms(X)


def dense_block(X: Any) -> Any:
    """A block of rows as a dense array (a sparse block densified; others as they are)."""
    if is_sparse(X):
        return np.asarray(X.toarray())
    return X


def dense_columns(X: Any, idx: np.ndarray) -> Any:
    """Columns ``idx`` of rows in memory, dense (NumPy, a tensor on X's device, a sparse
    matrix's columns densified)."""
    if is_sparse(X):
        return np.asarray(X[:, idx].toarray())
    if B.is_tensor(X):
        return X[:, B.like_input(np.asarray(idx, dtype=np.int64), X)]
    return X[:, idx]


def product(X: Any, W: Any, out: Any = None) -> Any:
    """X @ W into ``out`` (when given) for rows X of any kind in memory and a dense or sparse
    W: the backend's product for dense arrays and tensors, scipy's sparse products otherwise
    (the result is dense)."""
    if not (is_sparse(X) or is_sparse(W)):
        return B.matmul(X, W, out=out)
    P = X @ W
    P = P.toarray() if is_sparse(P) else np.asarray(P)
    if out is None:
        return P
    out[...] = P
    return out


def column_means(X: Any) -> np.ndarray:
    """The mean of each column of rows in memory (float64, shape (d,))."""
    if is_sparse(X):
        return np.asarray(X.mean(axis=0), dtype=np.float64).ravel()
    return B.to_numpy(X, np.float64).mean(axis=0)


def nbytes(A: Any) -> int:
    """Bytes an array of any kind holds in memory: a NumPy array, a tensor, a sparse matrix
    (its stored entries, indices and row pointers); 0 for rows on disk or on a cluster."""
    if A is None or is_source(A) or B.is_dask(A):
        return 0
    if is_sparse(A):
        return int(A.data.nbytes + A.indices.nbytes + A.indptr.nbytes)
    if B.is_tensor(A):
        return int(A.element_size() * A.nelement())
    return int(getattr(A, "nbytes", 0))


def center_rows(X: Any, idx: Any) -> Any:
    """Rows ``idx`` of X as centers in memory (``Rows.centers``: dense, or CSR for sparse
    rows of few stored entries)."""
    return as_rows(X).centers(idx)


def first_of_each_row(P: Any) -> np.ndarray:
    """The positions of the first occurrence of each distinct row of ``P`` (dense, a tensor
    or sparse), increasing."""
    if is_sparse(P):
        C = P.tocsr(copy=True)
        C.sum_duplicates()
        C.eliminate_zeros()
        C.sort_indices()
        seen: dict[bytes, int] = {}
        for i in range(C.shape[0]):
            a, b = C.indptr[i], C.indptr[i + 1]
            key = C.indices[a:b].tobytes() + b"|" + C.data[a:b].astype(np.float64).tobytes()
            seen.setdefault(key, i)
        return np.sort(np.fromiter(seen.values(), dtype=np.int64, count=len(seen)))
    A = B.to_numpy(P, np.float64)
    if not len(A):
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.unique(A, axis=0, return_index=True)[1])


#: Vectors of one number per feature a fit holds (the columns' means and spreads, the
#: widths, the centers' weighted norms and their temporaries): with sparse rows of millions
#: of columns they are what grows with d.
FEATURE_VECTORS = 8


def check_feature_count(d: int, budget: int) -> None:
    """Refuse, before any pass, X of so many columns that a fit's per-feature vectors leave
    the memory budget (a LIBSVM file with a feature index of 2·10⁹: 2 rows, 16 GB a
    vector)."""
    need = FEATURE_VECTORS * 8 * int(d)
    if need > budget:
        raise ValueError(
            f"X has {d} features: the fit's per-feature vectors ({FEATURE_VECTORS} of 8 bytes "
            f"a feature, {need / 1e9:.3g} GB) exceed memory_budget={budget / 1e9:.3g} GB; "
            "give a larger memory_budget, or renumber the features (a sparse file's largest "
            "feature index sets the number of columns)"
        )


def _moments(S: np.ndarray) -> tuple[np.ndarray, ...]:
    """``Rows.column_moments`` of a dense float64 sample."""
    empty = np.zeros(S.shape[1])
    if not len(S):
        return empty, S.std(axis=0), empty, empty, np.zeros(S.shape[1], dtype=bool)
    lo, hi = S.min(axis=0), S.max(axis=0)
    return S.mean(axis=0), S.std(axis=0), lo, hi, np.all((S == lo) | (S == hi), axis=0)


def _sparse_moments(S: Any) -> tuple[np.ndarray, ...]:
    """``_moments`` of a sparse sample without densifying it: the implicit zeros count as
    values; the spread is the two-pass one (the stored values' deviations from the mean,
    and the zeros' mean^2)."""
    n, d = S.shape
    empty = np.zeros(d)
    if not n:
        return empty, np.full(d, np.nan), empty, empty, np.zeros(d, dtype=bool)
    C = S.tocsc()
    C.sum_duplicates()
    cols = np.repeat(np.arange(d), np.diff(C.indptr))
    stored = np.diff(C.indptr)
    center = np.bincount(cols, C.data, minlength=d) / n
    dev = C.data - center[cols]
    var = (np.bincount(cols, dev * dev, minlength=d) + (n - stored) * center**2) / n
    lo = np.asarray(C.min(axis=0).toarray()).ravel()
    hi = np.asarray(C.max(axis=0).toarray()).ravel()
    other = (C.data != lo[cols]) & (C.data != hi[cols])
    two = (np.bincount(cols[other], minlength=d) == 0) & ((stored == n) | (lo == 0) | (hi == 0))
    return center, np.sqrt(var), lo, hi, two
