"""Tables on disk as row sources: Parquet read in place by row groups, CSV streamed once
into a binary copy (text has no row index); ``read_table`` returns lazy ``(X, y)``."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

import numpy as np

from .files import check_source, scratch_folder
from .sources import ArraySource, ParquetSource, RowSource

__all__ = ["read_table"]

#: Rows per record batch when a CSV file is streamed into its binary copy.
CSV_BATCH_BYTES = 16 * 1024**2


# ----------------------------------------------------------------------------- tables
def read_table(
    path: str | os.PathLike[str],
    target: str | None = "y",
    columns: Sequence[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    delimiter: str | None = None,
) -> tuple[RowSource, RowSource | None]:
    """Open a table on disk as lazy ``(X, y)``.

    Parameters
    ----------
    path : path-like
        A Parquet file (``.parquet``, ``.pq``) or a delimited text file with a header row
        (``.csv``, ``.txt``, ``.tsv``), which may be compressed (``.csv.gz``, ``.tsv.bz2``).
    target : str or None, default="y"
        The target column (None: no target, e.g. for ``predict``).
    columns : sequence of str or None
        Feature columns, in this order (None: every column but the target).
    cache_dir : path-like or None
        Where a CSV file's binary copy goes (default: the system's temporary folder). The
        copy is unlinked at once and freed with the arrays.
    delimiter : str or None, default=None
        A text file's field separator, one character (None: a tab for ``.tsv``, else a
        comma).

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
    check_source(p)
    suffix, compression = table_suffix(p)
    sep = text_delimiter(suffix, delimiter)  # a given one checked whatever the format
    if suffix in (".parquet", ".pq") and not compression:
        return _read_parquet(p, target, columns)
    if suffix in TEXT_TABLES:
        return _read_csv(p, target, columns, cache_dir, sep)
    raise ValueError(
        "path: read_table reads Parquet (.parquet, .pq) or delimited text (.csv, .txt, .tsv, "
        f"optionally .gz or .bz2), got {p!r}"
    )


#: Delimited text tables, read by PyArrow (compressed ones decompressed as they are read).
TEXT_TABLES = (".csv", ".txt", ".tsv")
COMPRESSIONS = (".gz", ".bz2")


def text_delimiter(suffix: str, delimiter: str | None) -> str:
    """The field separator of a text table: the one given (one character, else
    ``ValueError``), else a tab for ``.tsv`` and a comma for the others."""
    if delimiter is not None:
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise ValueError(f"delimiter must be one character, got {delimiter!r}")
        return delimiter
    return "\t" if suffix == ".tsv" else ","


def table_suffix(path: str) -> tuple[str, str]:
    """(the format's suffix, the compression's suffix or ""), lower case:
    ``data.CSV.gz`` -> (".csv", ".gz")."""
    parts = [x.lower() for x in FsPath(path).suffixes]
    if parts and parts[-1] in COMPRESSIONS:
        return (parts[-2] if len(parts) > 1 else ""), parts[-1]
    return (parts[-1] if parts else ""), ""


def _choose_columns(
    available: list[str], target: str | None, columns: Sequence[str] | None, path: str
) -> list[str]:
    """The feature columns: ``columns`` (checked against the table's), else every column
    but the target. Linear in the number of columns (a header of 10^6 names is checked in
    a second)."""
    counts = Counter(available)
    dup = sorted(c for c, k in counts.items() if k > 1)
    if dup:
        raise ValueError(f"path: {path} has duplicate column names {_some(dup)}: rename them")
    if target is not None and target not in counts:
        raise ValueError(f"target: no column {target!r} in {path} (columns: {_some(available)})")
    if columns is None:
        feats = [c for c in available if c != target]
    else:
        if isinstance(columns, str):
            raise TypeError("columns must be a sequence of column names, not one string")
        feats = list(columns)
        missing = [c for c in feats if c not in counts]
        if missing:
            raise ValueError(
                f"columns: no column {_some(missing)} in {path} (columns: {_some(available)})"
            )
        twice = sorted(c for c, k in Counter(feats).items() if k > 1)
        if twice:
            raise ValueError(f"columns: {_some(twice)} named more than once")
        if target is not None and target in feats:
            raise ValueError(f"columns: the target {target!r} is also a feature column")
    if not feats:
        raise ValueError(f"columns: {path} has no feature column besides the target")
    return feats


#: How many column names an error message lists.
SHOWN_NAMES = 20


def _some(names: Sequence[str]) -> str:
    """``names`` as a list for a message: the first ``SHOWN_NAMES`` and how many more."""
    if len(names) <= SHOWN_NAMES:
        return repr(list(names))
    return f"{list(names[:SHOWN_NAMES])!r} and {len(names) - SHOWN_NAMES} more"


def _read_parquet(
    path: str, target: str | None, columns: Sequence[str] | None
) -> tuple[RowSource, RowSource | None]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.ParquetFile(path).schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"path: cannot read {path} as Parquet: {exc}") from None
    feats = _choose_columns(list(schema.names), target, columns, path)
    for c in feats:
        t = schema.field(c).type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            raise ValueError(
                f"columns: feature column {c!r} of {path} is not numeric ({t}); the "
                "estimators encode text columns of a pandas frame (the command line: "
                "--categorical auto)"
            )
    X = ParquetSource(path, feats, "X")
    X.feature_names = list(feats)
    y = None
    if target is not None:
        t = schema.field(target).type
        numeric = pa.types.is_floating(t)
        y = ParquetSource(path, [target], "y", numeric=numeric, one_d=True)
    return X, y


def _csv_type(pa: Any, t: Any) -> Any:
    """The type a CSV column is read as: numbers as float64 whatever the first block held
    (an integer column may hold 3.5 further down), booleans as booleans, None for text."""
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t):
        return pa.float64()
    if pa.types.is_boolean(t):
        return t
    return None


def _read_csv(
    path: str, target: str | None, columns: Sequence[str] | None, cache_dir: Any, delimiter: str
) -> tuple[RowSource, RowSource | None]:
    """Stream the CSV once into an unlinked binary file (features then the target), and
    map it.

    The column types are inferred from the first block (``CSV_BATCH_BYTES``) and widened:
    a numeric column is read as float64 in every block. The binary copy is unlinked as soon
    as it is created (where the system allows), so no signal leaves it behind.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    read = pcsv.ReadOptions(block_size=CSV_BATCH_BYTES)
    parse = pcsv.ParseOptions(delimiter=delimiter)
    try:
        first = pcsv.open_csv(path, read_options=read, parse_options=parse)
        schema = first.schema
        first.close()
        names = list(schema.names)
    except pa.ArrowInvalid as exc:
        raise ValueError(f"path: cannot read {path} as CSV: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"path: the header of {path} is not UTF-8 text ({exc.reason})") from None
    feats = _choose_columns(names, target, columns, path)
    # by name (a lookup by name scans the schema: quadratic over a wide header)
    read_types = dict(zip(names, schema.types, strict=True))
    if all(pa.types.is_null(t) for t in read_types.values()):
        raise ValueError(f"path: {path} has no data rows")
    types = {c: _csv_type(pa, t) for c, t in read_types.items()}
    for c in feats:
        if types[c] is None:
            t = read_types[c]
            raise ValueError(
                f"columns: feature column {c!r} of {path} is not numeric ({t}); the "
                "estimators encode text columns of a pandas frame (the command line: "
                "--categorical auto)"
            )
    numeric_target = target is not None and types[target] == pa.float64()
    convert = pcsv.ConvertOptions(
        column_types={c: t for c, t in types.items() if t is not None},
        include_columns=feats + ([target] if target is not None else []),
    )
    try:
        reader = pcsv.open_csv(
            path, read_options=read, parse_options=parse, convert_options=convert
        )
    except pa.ArrowInvalid as exc:
        raise ValueError(f"path: cannot read {path} as CSV: {exc}") from exc
    width = len(feats) + (1 if numeric_target else 0)
    folder = scratch_folder(cache_dir, "the CSV's binary copy", "cache_dir")
    fd, tmp = tempfile.mkstemp(prefix="kernelpath-csv-", suffix=".bin", dir=folder)
    fh = os.fdopen(fd, "w+b")
    try:
        os.unlink(tmp)  # the open file keeps the data until the mapping is freed
        tmp = ""
    except OSError:  # pragma: no cover - systems that cannot unlink an open file
        pass
    labels: list[Any] = []
    n = 0
    try:
        for batch in reader:  # its columns in include_columns' order: taken by position
            rows = np.empty((batch.num_rows, width), dtype=np.float64)
            for j in range(len(feats)):
                rows[:, j] = batch.column(j).to_numpy(zero_copy_only=False)
            if target is not None:
                lab = batch.column(len(feats)).to_numpy(zero_copy_only=False)
                if numeric_target:
                    rows[:, -1] = lab
                else:
                    labels.append(lab)
            fh.write(rows.tobytes())
            n += batch.num_rows
        if n == 0:
            raise ValueError(f"path: {path} has no data rows")
        fh.flush()
        mm = np.memmap(fh, dtype=np.float64, mode="r", shape=(n, width))
    except pa.ArrowInvalid as exc:
        raise ValueError(f"path: cannot read {path} as CSV (after row {n}): {exc}") from exc
    finally:
        fh.close()
        if tmp:  # pragma: no cover
            os.unlink(tmp)
    X = ArraySource(mm[:, : len(feats)], "X")
    X.feature_names = list(feats)
    y: RowSource | None = None
    if target is not None:
        if numeric_target:
            y = ArraySource(mm[:, -1], "y", numeric=False)
        else:
            y = ArraySource(np.concatenate(labels), "y", numeric=False)
    return X, y
