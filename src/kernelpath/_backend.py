"""Array namespace, dtype policy and memory budget.

Numerical code asks this module for the namespace of its inputs (``get_namespace``) and calls
that namespace rather than ``numpy`` directly, so that a PyTorch namespace can be slotted in
without touching the solvers. Today the only namespace is NumPy (with SciPy for the dense
factorizations).

Dtype policy
------------
float32 and float64 inputs are both supported end to end. Data, kernel blocks and predictions
keep the input's floating dtype (``compute_dtype``); the m x m factorizations (eigen-
decompositions of K_mm and of the projected systems, Cholesky factors) are always done in
float64 (``FACTOR_DTYPE``), because they square condition numbers.

Memory budget
-------------
``resolve_memory_budget`` turns the user's ``memory_budget`` (bytes, a string such as
``"2GB"``, or ``None``) into a number of bytes. ``None`` means a fraction
(``DEFAULT_BUDGET_FRACTION``) of the memory available when the call is made.
"""

from __future__ import annotations

import os
import re
from types import ModuleType
from typing import Any

import numpy as np

FACTOR_DTYPE = np.float64
DEFAULT_BUDGET_FRACTION = 0.5
_FALLBACK_AVAILABLE = 4 * 1024**3

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}


def get_namespace(*arrays: Any) -> ModuleType:
    """Return the array namespace shared by ``arrays``.

    Parameters
    ----------
    *arrays : array-like
        Arrays (or ``None``) whose namespace is wanted.

    Returns
    -------
    module
        The namespace (``numpy`` for NumPy arrays and array-likes).

    Raises
    ------
    TypeError
        If the arrays come from different namespaces.
    """
    found: ModuleType | None = None
    for a in arrays:
        if a is None:
            continue
        mod = type(a).__module__.split(".")[0]
        ns = np if mod in ("numpy", "builtins") else None
        if ns is None:
            raise TypeError(
                f"arrays of type {type(a).__name__!r} are not supported yet; pass NumPy arrays"
            )
        if found is not None and ns is not found:
            raise TypeError("all arrays must come from the same array namespace")
        found = ns
    return found if found is not None else np


def compute_dtype(*arrays: Any) -> np.dtype:
    """The floating dtype computations on ``arrays`` keep: float32 only if all inputs are."""
    dtypes = [np.asarray(a).dtype for a in arrays if a is not None]
    if dtypes and all(d == np.float32 for d in dtypes):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable`` on Linux, else physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_AVAILABLE


def resolve_memory_budget(memory_budget: Any) -> int:
    """Turn a user-supplied ``memory_budget`` into bytes.

    Parameters
    ----------
    memory_budget : int, float, str or None
        Bytes (a positive number), a string with a unit (``"512MB"``, ``"2GiB"``), or ``None``
        for ``DEFAULT_BUDGET_FRACTION`` of the memory available now.

    Returns
    -------
    int
        The budget in bytes.
    """
    if memory_budget is None:
        return int(DEFAULT_BUDGET_FRACTION * available_memory())
    if isinstance(memory_budget, bool):
        raise TypeError(
            f"memory_budget must be a number of bytes or a string, got {memory_budget!r}"
        )
    if isinstance(memory_budget, str):
        m = re.fullmatch(
            r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", memory_budget
        )
        if m is None or m.group(2).upper() not in _UNITS:
            raise ValueError(
                f"memory_budget must look like '512MB' or '2GiB', got {memory_budget!r}"
            )
        value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    elif isinstance(memory_budget, (int, float, np.integer, np.floating)):
        value = float(memory_budget)
    else:
        raise TypeError(
            f"memory_budget must be a number of bytes or a string, got {memory_budget!r}"
        )
    if not np.isfinite(value) or value < 1024**2:
        raise ValueError(f"memory_budget must be at least 1 MiB, got {memory_budget!r}")
    return int(value)


def n_threads() -> int:
    """Number of worker threads used for kernel evaluation (the usable cores)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
