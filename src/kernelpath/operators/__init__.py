"""The operator layer: products with kernel matrices (``kernel``) and feature matrices
(``features``) in this process, and ``dispatch``, which chooses between them and their Dask
counterparts (``kernelpath.distributed``); the interface the solvers see is ``protocol``.
The only code that evaluates kernel blocks. ``dispatch`` is not imported here: it sits above
``kernelpath.distributed``, which sits above the in-process operators."""

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
