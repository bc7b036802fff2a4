"""The in-process operators: products with kernel matrices (``kernel``, the only code that
evaluates kernel blocks) and feature matrices (``features``), and the interface the solvers
see (``protocol``). Their Dask counterparts are in ``kernelpath.distributed``;
``kernelpath.workspace`` builds one or the other."""

from __future__ import annotations

from .features import FeatureOperator, row_blocks
from .kernel import CACHE_FRACTION, KernelOperator
from .protocol import KernelProducts, Operator

__all__ = [
    "KernelOperator",
    "FeatureOperator",
    "Operator",
    "KernelProducts",
    "row_blocks",
    "CACHE_FRACTION",
]
