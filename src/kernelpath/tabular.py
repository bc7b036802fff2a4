"""Tabular inputs as users hold them: the text (categorical) columns and missing values of
a DataFrame or array encoded inside the fitted model (``TabularEncoder``), so that
``fit``, ``predict`` and model files take the frame as it is.

- Numeric columns: missing values (NaN, None, pandas' NA) are filled with the column's
  training median, and a column that had any gets a missing indicator beside it (0/1);
  then standardized (``scale`` not False). A column missing in every training row carries
  nothing and is dropped, with a warning.
- Categorical columns (``categorical_features``: by default the frame's text, category
  and boolean columns, as gradient boosting's ``"from_dtype"`` and more): compared by
  their text; a missing value is a category of its own. Up to ``MAX_ONE_HOT`` categories:
  one column per category holding ``ONE_HOT_VALUE`` (two rows in different categories are
  at distance 1, a standard deviation of a numeric column). More: target encoding
  (scikit-learn's ``TargetEncoder``, its cross fitting for the training rows: each row's
  code is learned without it), standardized. A category seen only at predict time has no
  column (one-hot: zeros, at equal distance from every known category; target encoding:
  the training mean).
- ``missing_values="error"`` refuses missing values naming the column, for users who want
  every value given.

The fitted state is plain lists, numbers and arrays, so model files keep it (no pickle).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .inputs import is_sparse

__all__ = [
    "MAX_ONE_HOT",
    "ONE_HOT_VALUE",
    "MISSING_VALUES",
    "TabularEncoder",
    "as_frame",
    "needs_encoding",
]

#: Categories a column may have to be one-hot encoded; more are target encoded.
MAX_ONE_HOT = 32
#: The one-hot entry: rows in two categories are at distance 1.
ONE_HOT_VALUE = float(np.sqrt(0.5))
#: The values of the estimators' ``missing_values``.
MISSING_VALUES = ("impute", "error")
#: Folds of the target encoding's cross fitting.
TARGET_FOLDS = 5


def _pandas() -> Any:
    import pandas as pd

    return pd


def is_frame(X: Any) -> bool:
    """Whether X is a table with typed columns: a pandas DataFrame, or a polars / pyarrow
    table (converted with ``to_pandas``)."""
    if type(X).__module__.startswith("pandas") and hasattr(X, "columns") and hasattr(X, "dtypes"):
        return True
    return type(X).__module__.split(".")[0] in ("polars", "pyarrow") and hasattr(X, "to_pandas")


def as_frame(X: Any) -> Any:
    """X as a pandas DataFrame: a frame as it is, a polars / pyarrow table converted, an
    array's columns named by their index."""
    pd = _pandas()
    if isinstance(X, pd.DataFrame):
        return X
    if is_frame(X):
        return X.to_pandas()
    a = np.asarray(X)
    if a.ndim != 2:
        raise ValueError(f"X must be 2-D (rows by columns), got shape {a.shape}")
    return pd.DataFrame(a)


def check_missing_values(value: Any) -> str:
    if not isinstance(value, str) or value not in MISSING_VALUES:
        raise ValueError(f"missing_values must be one of {list(MISSING_VALUES)}, got {value!r}")
    return value


def needs_encoding(X: Any, categorical_features: Any, missing_values: str) -> bool:
    """Whether a fit on X encodes it: a frame with a column that is not numeric or that
    misses values, an array with categorical columns named, or a float array with NaN
    (``missing_values="impute"``). Sparse rows, tensors and row sources are taken as they
    are."""
    check_missing_values(missing_values)
    if is_sparse(X) or not (is_frame(X) or isinstance(X, (np.ndarray, list))):
        return False
    given = _given_categorical(categorical_features)
    if is_frame(X):
        frame = as_frame(X)
        if given:
            return True
        pd = _pandas()
        kinds = [_is_numeric(frame[c], pd) for c in frame.columns]
        if not all(kinds):
            return categorical_features is not None or missing_values == "impute"
        return missing_values == "impute" and bool(frame.isna().to_numpy().any())
    a = np.asarray(X)
    if given:
        return True
    if missing_values != "impute" or a.dtype.kind not in "fO":
        return False
    try:
        return bool(np.isnan(np.asarray(a, dtype=np.float64)).any())
    except (TypeError, ValueError):
        return False


def _given_categorical(categorical_features: Any) -> bool:
    """Whether ``categorical_features`` names columns (not "from_dtype" or None)."""
    if categorical_features is None or isinstance(categorical_features, str):
        return False
    return bool(np.size(categorical_features)) and bool(np.any(np.asarray(categorical_features)))


def _is_numeric(col: Any, pd: Any) -> bool:
    return bool(pd.api.types.is_numeric_dtype(col.dtype)) and not pd.api.types.is_bool_dtype(
        col.dtype
    )


class TabularEncoder:
    """A table's columns as the numeric features of a kernel model (the module's rules).

    Parameters
    ----------
    categorical_features : "from_dtype", None, sequence of str or int, or bool mask
        Which columns are categorical: "from_dtype", a frame's text (object, string),
        category and boolean columns; None, none (a text column is then refused); or the
        columns by name, by index, or as a boolean mask of length n_columns.
    missing_values : {"impute", "error"}
        "impute": the module's rules; "error": a missing value is refused, naming its
        column.
    scale : bool
        Standardize the numeric and target-encoded columns, and give one-hot entries
        ``ONE_HOT_VALUE`` (False: the numeric columns as they are, one-hot entries 1).
    random_state : int
        The seed of the target encoding's folds.

    Attributes
    ----------
    columns_ : list of str or int
        The columns of the training table, in order.
    named_ : bool
        Whether the columns were named (a frame) or numbered (an array).
    kinds_ : list of str
        Per column: "numeric", "onehot", "target" or "dropped".
    fill_ : list of float
        Per column, the value a missing numeric entry takes (its training median).
    indicator_ : list of bool
        Per column, whether it has a missing indicator.
    categories_ : list of list of str
        Per column, its categories (empty for numeric columns); a missing value is the
        category ``None``.
    encodings_ : list of ndarray
        Per target-encoded column, (n_categories, k) codes (else empty arrays).
    target_mean_ : ndarray of shape (k,)
        The code of a category seen only at predict time.
    offsets_, spreads_ : ndarray of shape (n_features_out,)
        What each output feature is centered and divided by.
    feature_columns_ : ndarray of int, shape (n_features_out,)
        The column each output feature comes from.
    feature_names_out_ : list of str
    feature_roles_ : list of str
        Per output feature: "numeric", "indicator", "onehot" or "target".
    """

    def __init__(
        self,
        categorical_features: Any = "from_dtype",
        missing_values: str = "impute",
        scale: bool = True,
        random_state: int = 0,
    ) -> None:
        self.categorical_features = categorical_features
        self.missing_values = missing_values
        self.scale = scale
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit_transform(
        self, X: Any, y: Any, classifier: bool, dense_limit: int | None = None
    ) -> Any:
        """Learn the encoding on the training table X (targets y, for target encoding)
        and return the encoded rows, (n, n_features_out) float64: a NumPy array, or a
        CSR matrix where the dense one would take more than ``dense_limit`` bytes."""
        check_missing_values(self.missing_values)
        pd = _pandas()
        frame = as_frame(X)
        self.named_ = is_frame(X)
        self.columns_ = [str(c) if self.named_ else int(c) for c in frame.columns]
        if self.named_ and len(set(self.columns_)) != len(self.columns_):
            raise ValueError("X: the frame's column names must be unique")
        cat = self._categorical(frame, pd)
        self.kinds_: list[str] = []
        self.fill_: list[float] = []
        self.indicator_: list[bool] = []
        self.categories_: list[list[Any]] = []
        self.encodings_: list[np.ndarray] = []
        codes = _target_codes(y, classifier)
        self.target_mean_ = codes.mean(axis=0)
        blocks, owners, names, roles = [], [], [], []
        for j, c in enumerate(frame.columns):
            col, name = frame[c], str(self.columns_[j])
            if cat[j]:
                block, block_names = self._fit_categorical(col, name, codes, pd)
                roles += [self.kinds_[j]] * block.shape[1]
            else:
                block, block_names = self._fit_numeric(col, name, pd)
                roles += ["numeric", "indicator"][: block.shape[1]]
            blocks.append(block)
            owners += [j] * block.shape[1]
            names += block_names
        if not owners:
            raise ValueError(
                "X: no column is left to fit on (every column is missing in every row)"
            )
        self.feature_columns_ = np.asarray(owners, dtype=np.int64)
        self.feature_names_out_ = names
        self.feature_roles_ = roles
        self.offsets_, self.spreads_ = self._scaling(blocks)
        return self._assemble(blocks, len(frame), dense_limit)

    def _categorical(self, frame: Any, pd: Any) -> list[bool]:
        """Per column, whether it is categorical (``categorical_features``)."""
        cf, d = self.categorical_features, frame.shape[1]
        if isinstance(cf, str):
            if cf != "from_dtype":
                raise ValueError(
                    "categorical_features must be 'from_dtype', None, column names, indices "
                    f"or a boolean mask, got {cf!r}"
                )
            return [not _is_numeric(frame[c], pd) for c in frame.columns]
        if cf is None:
            for c in frame.columns:
                if not _is_numeric(frame[c], pd):
                    raise TypeError(
                        f"X: column {c!r} is not numeric ({frame[c].dtype}) and "
                        "categorical_features=None names no categorical column; give "
                        "categorical_features='from_dtype' (the default) or its name"
                    )
            return [False] * d
        a = np.asarray(cf)
        if a.dtype == bool:
            if a.shape != (d,):
                raise ValueError(
                    f"categorical_features: a boolean mask must have one entry per column "
                    f"({d}), got shape {a.shape}"
                )
            return [bool(v) for v in a]
        mask = [False] * d
        for v in a.ravel().tolist():
            if isinstance(v, str):
                if v not in self.columns_:
                    raise ValueError(
                        f"categorical_features names column {v!r}, which X does not have "
                        f"(its columns: {self.columns_[:10]}{' ...' if d > 10 else ''})"
                    )
                mask[self.columns_.index(v)] = True
            elif isinstance(v, int) and not isinstance(v, bool):
                if not -d <= v < d:
                    raise ValueError(
                        f"categorical_features: index {v} is out of range for {d} columns"
                    )
                mask[v] = True
            else:
                raise TypeError(
                    f"categorical_features must hold column names or indices, got {v!r}"
                )
        return mask

    def _fit_numeric(self, col: Any, name: str, pd: Any) -> tuple[np.ndarray, list[str]]:
        values = _numeric(col, name, pd)
        missing = np.isnan(values)
        if missing.any() and self.missing_values == "error":
            raise ValueError(_missing_refused(name, int(missing.sum())))
        self.categories_.append([])
        self.encodings_.append(np.zeros((0, 0)))
        if missing.all():
            warnings.warn(
                f"X: column {name!r} is missing in every row: it carries nothing and is "
                "left out of the model",
                UserWarning,
                stacklevel=4,
            )
            self.kinds_.append("dropped")
            self.fill_.append(0.0)
            self.indicator_.append(False)
            return np.zeros((len(values), 0)), []
        fill = float(np.median(values[~missing]))
        self.kinds_.append("numeric")
        self.fill_.append(fill)
        self.indicator_.append(bool(missing.any()))
        filled = np.where(missing, fill, values)
        if missing.any():
            return np.column_stack([filled, missing]), [name, f"{name}_missing"]
        return filled[:, None], [name]

    def _fit_categorical(
        self, col: Any, name: str, codes: np.ndarray, pd: Any
    ) -> tuple[Any, list[str]]:
        texts = _texts(col, pd)
        if self.missing_values == "error" and any(t is None for t in texts):
            raise ValueError(_missing_refused(name, sum(t is None for t in texts)))
        cats = sorted({t for t in texts if t is not None})
        if any(t is None for t in texts):
            cats.append(None)  # type: ignore[arg-type]
        self.categories_.append(cats)
        self.fill_.append(0.0)
        self.indicator_.append(False)
        index = _indices(texts, cats)
        if len(cats) <= MAX_ONE_HOT:
            self.kinds_.append("onehot")
            self.encodings_.append(np.zeros((0, 0)))
            return _OneHot(index, len(cats)), [
                f"{name}={c if c is not None else 'missing'}" for c in cats
            ]
        self.kinds_.append("target")
        block, table = _target_encoded(index, len(cats), codes, self.random_state)
        self.encodings_.append(table)
        k = block.shape[1]
        return block, [name] if k == 1 else [f"{name}:{i}" for i in range(k)]

    def _scaling(self, blocks: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, spreads) of the output features: one-hot columns uncentered, their
        entries ``ONE_HOT_VALUE``; missing indicators 0/1; the others standardized (spread
        1 for a constant)."""
        d = len(self.feature_roles_)
        offsets, spreads = np.zeros(d), np.ones(d)
        if not self.scale:
            return offsets, spreads
        at = 0
        for block in blocks:
            width = block.shape[1]
            roles = self.feature_roles_[at : at + width]
            for i, role in enumerate(roles):
                if role == "onehot":
                    spreads[at + i] = 1.0 / ONE_HOT_VALUE
                elif role != "indicator":
                    v = block[:, i]
                    offsets[at + i] = float(v.mean())
                    sd = float(v.std())
                    spreads[at + i] = sd if sd > 0 else 1.0
            at += width
        return offsets, spreads

    def _assemble(self, blocks: list[Any], n: int, dense_limit: int | None) -> Any:
        """The raw blocks scaled and side by side: dense, or CSR past ``dense_limit``."""
        d = len(self.feature_roles_)
        sparse = dense_limit is not None and 8 * n * d > dense_limit
        parts, at = [], 0
        for block in blocks:
            width = block.shape[1]
            off, spr = self.offsets_[at : at + width], self.spreads_[at : at + width]
            if isinstance(block, _OneHot):
                parts.append(block.matrix(1.0 / spr, sparse))
            elif width:
                part = (block - off) / spr
                parts.append(_csr(part) if sparse else part)
            at += width
        if sparse:
            import scipy.sparse as sp

            return sp.hstack(parts, format="csr", dtype=np.float64)
        return np.hstack(parts) if parts else np.zeros((n, 0))

    # ------------------------------------------------------------------ transform
    def transform(self, X: Any, dense_limit: int | None = None) -> Any:
        """The encoded rows of X (a table with the training columns, or an array with as
        many columns), (n, n_features_out) float64: a NumPy array, or a CSR matrix where
        the dense one would take more than ``dense_limit`` bytes."""
        pd = _pandas()
        frame = as_frame(X)
        self._check_columns(frame, is_frame(X))
        blocks: list[Any] = []
        for j, c in enumerate(frame.columns):
            kind, name = self.kinds_[j], str(self.columns_[j])
            if kind == "dropped":
                continue
            col = frame[c]
            if kind == "numeric":
                values = _numeric(col, name, pd)
                missing = np.isnan(values)
                if missing.any() and self.missing_values == "error":
                    raise ValueError(_missing_refused(name, int(missing.sum())))
                filled = np.where(missing, self.fill_[j], values)
                blocks.append(
                    np.column_stack([filled, missing]) if self.indicator_[j] else filled[:, None]
                )
                continue
            texts = _texts(col, pd)
            if self.missing_values == "error" and any(t is None for t in texts):
                raise ValueError(_missing_refused(name, sum(t is None for t in texts)))
            index = _indices(texts, self.categories_[j])  # -1: unseen
            if kind == "onehot":
                blocks.append(_OneHot(index, len(self.categories_[j])))
            else:
                table = self.encodings_[j]
                seen = index[:, None] >= 0
                blocks.append(np.where(seen, table[np.maximum(index, 0)], self.target_mean_))
        return self._assemble(blocks, len(frame), dense_limit)

    def _check_columns(self, frame: Any, named: bool) -> None:
        cols = [str(c) for c in frame.columns]
        if named and self.named_:
            if cols != self.columns_:
                missing = [c for c in self.columns_ if c not in cols]
                extra = [c for c in cols if c not in self.columns_]
                raise ValueError(
                    "X: the columns must be those the model was fitted on, in that order"
                    + (f"; missing {missing[:5]}" if missing else "")
                    + (f"; not seen in fit {extra[:5]}" if extra else "")
                )
        elif frame.shape[1] != len(self.columns_):
            raise ValueError(
                f"X has {frame.shape[1]} columns, but the model was fitted on {len(self.columns_)}"
            )

    def column_sums(self, values: np.ndarray) -> np.ndarray:
        """Per input column, the sum of ``values`` over its output features (a
        relevance per encoded feature -> one per column)."""
        return np.bincount(
            self.feature_columns_,
            weights=np.asarray(values, dtype=np.float64),
            minlength=len(self.columns_),
        )


class _OneHot:
    """A one-hot block by its category indices (-1: a category not seen in fit)."""

    def __init__(self, index: np.ndarray, n_cats: int) -> None:
        self.index, self.shape = index, (len(index), n_cats)

    def matrix(self, value: np.ndarray, sparse: bool) -> Any:
        """The block with ``value[c]`` in row i's column c: dense or CSR."""
        rows = np.flatnonzero(self.index >= 0)
        cols = self.index[rows]
        if sparse:
            import scipy.sparse as sp

            return sp.csr_matrix((value[cols], (rows, cols)), shape=self.shape)
        out = np.zeros(self.shape)
        out[rows, cols] = value[cols]
        return out


def _csr(a: np.ndarray) -> Any:
    import scipy.sparse as sp

    return sp.csr_matrix(a)


def _numeric(col: Any, name: str, pd: Any) -> np.ndarray:
    """A numeric column as float64 with NaN for missing; a value that is not a number
    (a column of mixed types) is refused, naming the column and the value."""
    converted = pd.to_numeric(col, errors="coerce")
    bad = converted.isna() & ~col.isna()
    if bad.any():
        example = col[bad].iloc[0]
        raise ValueError(
            f"X: column {name!r} mixes numbers and other values ({example!r} in row "
            f"{int(np.flatnonzero(bad.to_numpy())[0])}); name it in categorical_features "
            "to treat it as categories, or clean it"
        )
    values = converted.to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isinf(values).any():
        raise ValueError(f"X: column {name!r} holds infinite values; a model needs finite ones")
    return values


def _texts(col: Any, pd: Any) -> list[str | None]:
    """A categorical column's values as text (None for a missing value)."""
    missing = col.isna().to_numpy()
    return [None if m else str(v) for v, m in zip(col.tolist(), missing, strict=True)]


def _indices(texts: list[str | None], cats: list[Any]) -> np.ndarray:
    where = {c: i for i, c in enumerate(cats)}
    return np.fromiter((where.get(t, -1) for t in texts), dtype=np.int64, count=len(texts))


def _missing_refused(name: str, count: int) -> str:
    return (
        f"X: column {name!r} has {count} missing value(s) and missing_values='error'; give "
        "missing_values='impute' (the default) to fill them inside the model, or drop them"
    )


def _target_codes(y: Any, classifier: bool) -> np.ndarray:
    """What a category's code averages: the targets (n, k), or per class 0/1 (two
    classes: one column)."""
    a = np.asarray(y)
    if classifier:
        classes, inv = np.unique(a, return_inverse=True)
        onehot = np.eye(len(classes))[inv.ravel()]
        return onehot[:, 1:] if len(classes) == 2 else onehot
    a = np.asarray(a, dtype=np.float64)
    a = np.where(np.isfinite(a), a, 0.0)  # the fit refuses non-finite targets, naming y
    return a[:, None] if a.ndim == 1 else a


def _target_encoded(
    index: np.ndarray, n_cats: int, codes: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the training rows' codes, cross fitted; the table of each category's code), per
    target column by scikit-learn's ``TargetEncoder`` (its shrinkage toward the mean)."""
    from sklearn.model_selection import KFold
    from sklearn.preprocessing import TargetEncoder

    blocks, tables = [], []
    cats = np.arange(n_cats)
    folds = KFold(TARGET_FOLDS, shuffle=True, random_state=seed)
    for t in range(codes.shape[1]):
        enc = TargetEncoder(categories=[cats], target_type="continuous", cv=folds)
        blocks.append(enc.fit_transform(index[:, None], codes[:, t])[:, 0])
        tables.append(np.asarray(enc.encodings_[0], dtype=np.float64))
    return np.column_stack(blocks), np.column_stack(tables)
