"""Which operator: in this process, or over the chunks of a dask array on a Dask cluster.

The one place that chooses between the in-process operators (``operators``) and
their Dask counterparts (``kernelpath.distributed``, which imports dask itself only when a
dask array comes, since dask is optional).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _backend as B
from .distributed import DaskFeatureOperator, DaskKernelOperator, dask_feature_moments
from .kernels import Kernel
from .operators import features
from .operators.features import FeatureOperator
from .operators.kernel import KernelOperator
from .operators.protocol import KernelProducts, Operator

__all__ = ["make_operator", "feature_operator", "feature_moments"]


def make_operator(
    X: Any, centers: Any, kernel: Kernel, memory_budget: Any = None, **kw: Any
) -> KernelProducts:
    """The operator of ``X`` against ``centers``: a ``KernelOperator`` in this process (X in
    memory, a tensor or a row source), or, for a dask array, a ``DaskKernelOperator`` whose
    products run where the chunks are (on the workers of the active ``distributed.Client``,
    else dask's local scheduler)."""
    if B.is_dask(X):
        return DaskKernelOperator(X, centers, kernel, memory_budget, **kw)
    return KernelOperator(X, centers, kernel, memory_budget, **kw)


def feature_operator(transform: Callable[[Any], Any], X: Any, n_features: int) -> Operator:
    """The operator of the features ``transform(X)`` (n x n_features): in this process, or
    over the chunks of a dask array."""
    if B.is_dask(X):
        return DaskFeatureOperator(transform, X, n_features)
    return FeatureOperator(transform, X, n_features)


def feature_moments(
    transform: Callable[[Any], Any],
    X: Any,
    n_features: int,
    Y: np.ndarray,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(F^T W F, F^T W Y) of F = transform(X) in float64, in one pass (summed over the
    chunks on the workers for a dask array)."""
    if B.is_dask(X):
        return dask_feature_moments(transform, X, n_features, Y, weights)
    return features.feature_moments(transform, X, n_features, Y, weights)
