"""Data larger than memory: row sources read in blocks (``sources``), tables on disk
(``tables``: Parquet, CSV) and predictions written to disk (``predictions``)."""

from __future__ import annotations

from .files import default_mode
from .predictions import write_predictions
from .sources import (
    ArraySource,
    DataChangedError,
    ParquetSource,
    RowSource,
    as_source,
    is_lazy_array,
    is_source,
)
from .tables import read_table

__all__ = [
    "RowSource",
    "ArraySource",
    "ParquetSource",
    "DataChangedError",
    "as_source",
    "is_source",
    "is_lazy_array",
    "read_table",
    "write_predictions",
    "default_mode",
]
