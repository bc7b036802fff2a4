"""The workspace of a call: its memory budget, device and thread plan, and the one builder
of operators.

A public entry point (an estimator's ``fit`` or ``predict``, a feature map's ``transform``,
``leverage_scores``, a center strategy's ``select``) turns the user's ``memory_budget``
into bytes once, with ``Workspace.of``; everything below it receives the workspace, or a
share of it (``share``), and asks it for operators. ``Workspace.operator`` is the only
caller of the operators' constructors in the library: a ``KernelOperator`` for rows in this
process (an array, a tensor on its device, sparse rows, a row source on disk), a
``DaskKernelOperator`` for a dask array, whose tasks ask the same workspace (pickled to
the workers, with the task's share) for the operators of their chunks. So every family
that reads X through operators takes every input kind the operators take, and the budget
``None`` ("a fraction of the memory available now") means one number for the whole call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from . import _backend as B
from .distributed import DaskFeatureOperator, DaskKernelOperator, dask_feature_moments
from .kernels import Kernel
from .operators import features
from .operators.features import FeatureOperator
from .operators.kernel import KernelOperator
from .operators.protocol import KernelProducts, Operator

__all__ = ["Workspace", "MIN_SHARE"]

#: The least budget an operator is given (its blocks of a few rows and their buffers).
MIN_SHARE = 2**20


@dataclass(frozen=True)
class Workspace:
    """The budget, device and threads one call computes with.

    Attributes
    ----------
    budget : int
        Bytes the call (or, after ``share``, the part of it that asks) may use.
    device : Device
        Where the call computes (the host for NumPy arrays, sparse rows, row sources and
        dask arrays; a torch device for tensors).
    n_jobs : int or None
        Worker threads of the operators on the CPU; None: every available core for large
        products, one for small ones (``KernelOperator``).
    """

    budget: int
    device: B.Device = B.NUMPY
    n_jobs: int | None = None

    @classmethod
    def of(cls, memory_budget: Any, device: B.Device | None = None) -> Workspace:
        """The workspace of an entry point: ``memory_budget`` (bytes, a string with a unit,
        or None for a fraction of the memory available now) resolved on ``device``."""
        dev = B.NUMPY if device is None else device
        return cls(B.resolve_memory_budget(memory_budget, dev), dev)

    def share(self, nbytes: float) -> Workspace:
        """This workspace with ``nbytes`` of its budget (at least ``MIN_SHARE``)."""
        return replace(self, budget=max(int(nbytes), MIN_SHARE))

    def threads(self, n_jobs: int | None) -> Workspace:
        """This workspace with ``n_jobs`` worker threads per operator."""
        return replace(self, n_jobs=n_jobs)

    def operator(
        self,
        X: Any,
        centers: Any,
        kernel: Kernel,
        cache: bool | str = "auto",
        expected_passes: int | None = None,
    ) -> KernelProducts:
        """The kernel operator K(X, centers) within this workspace's budget: computed in
        this process, or, for a dask array, on the chunks where they are (the workers of
        the active ``distributed.Client``, else dask's local scheduler)."""
        if B.is_dask(X):
            return DaskKernelOperator(
                X, centers, kernel, self, cache=cache, expected_passes=expected_passes
            )
        return self.in_process(X, centers, kernel, cache, expected_passes)

    def in_process(
        self,
        X: Any,
        centers: Any,
        kernel: Kernel,
        cache: bool | str = "auto",
        expected_passes: int | None = None,
    ) -> KernelOperator:
        """The kernel operator of rows in this process (an array, a tensor, sparse rows, a
        row source), whose blocks the gradients read (``operators.gradients``); a dask
        array is refused."""
        return KernelOperator(
            X,
            centers,
            kernel,
            self.budget,
            cache=cache,
            n_jobs=self.n_jobs,
            expected_passes=expected_passes,
        )

    def feature_operator(
        self, transform: Callable[[Any], Any], X: Any, n_features: int
    ) -> Operator:
        """The operator of the features ``transform(X)`` (n x n_features): in this process,
        or over the chunks of a dask array."""
        if B.is_dask(X):
            return DaskFeatureOperator(transform, X, n_features, self)
        return FeatureOperator(transform, X, n_features)

    def feature_moments(
        self,
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
