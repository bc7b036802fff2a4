"""The operator interface: what solvers ask of an operator, as ``typing.Protocol`` classes.

Every operator (kernel or feature, in process or on Dask) represents an n x p matrix A
(K_nm for n points and p = m centers, or the features F of n points) and offers
``Operator``'s products; kernel operators offer ``KernelProducts`` besides. Solvers and
the validation bookkeeping are typed against these, never against a class.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Operator", "KernelProducts", "OperatorBuilder"]


@runtime_checkable
class Operator(Protocol):
    """An n x p matrix seen only through its products (each for several columns at once)."""

    dtype: Any
    device: Any

    @property
    def shape(self) -> tuple[int, int]:
        """(n, p)."""
        ...

    def matvec(self, M: Any, native: bool = False) -> Any:
        """A @ M for M of shape (p,) or (p, k); NumPy unless ``native`` (the operator's own
        arrays: tensors on its device)."""
        ...

    def projected_rows(self, T: Any, quad: Any, lin: Any) -> tuple[np.ndarray, np.ndarray]:
        """With U = A T (never formed): ``(U * U) @ quad`` and ``U @ lin`` (float64)."""
        ...

    def release(self) -> None:
        """Free what the operator caches."""
        ...


@runtime_checkable
class KernelProducts(Operator, Protocol):
    """A kernel operator, A = K_nm: the products of the Nyström and exact solvers."""

    n: int
    m: int
    kernel: Any
    expected_passes: int | None

    def rmatvec(self, A: Any, native: bool = False) -> Any:
        """K_nm^T @ A for A of shape (n,) or (n, k)."""
        ...

    def fused(
        self, B_: Any, weights: Any = None, return_matvec: bool = False, native: bool = False
    ) -> Any:
        """K_nm^T diag(w) K_nm B in one pass (and K_nm B with ``return_matvec``)."""
        ...

    def gram(self, weights: Any = None, native: bool = False) -> Any:
        """K_nm^T diag(w) K_nm, (m, m)."""
        ...

    def center_gram(
        self, native: bool = False, out: Any = None, rows: tuple[int, int] | None = None
    ) -> Any:
        """K_mm, (m, m); with ``out`` (C-contiguous, the operator's dtype and device),
        written there by bands of rows; with ``rows`` (start, stop) too, only those rows
        (``out`` of shape (stop - start, m))."""
        ...

    def center_operator(self, memory_budget: int, columns: Any = None) -> Any:
        """K_mm (or K_m,S of the centers ``columns``) as a streamed operator over the
        centers, (m, m) or (m, len(columns))."""
        ...

    def diag(self, native: bool = False) -> Any:
        """k(x_i, x_i) of the rows, (n,)."""
        ...

    def dense(self, native: bool = False) -> Any:
        """K_nm itself, (n, m)."""
        ...

    def row_sq_norms(self, T: Any, native: bool = False) -> Any:
        """||row_i(K_nm T)||^2, (n,)."""
        ...


class OperatorBuilder(Protocol):
    """What builds operators (``kernelpath.workspace.Workspace``): the Dask operators ask it,
    on the workers, for the in-process operators of their chunks."""

    @property
    def budget(self) -> int:
        """Bytes the operators it builds may use."""
        ...

    def share(self, nbytes: float) -> OperatorBuilder:
        """The builder with ``nbytes`` of the budget."""
        ...

    def threads(self, n_jobs: int | None) -> OperatorBuilder:
        """The builder with ``n_jobs`` worker threads per operator."""
        ...

    def operator(
        self,
        X: Any,
        centers: Any,
        kernel: Any,
        cache: bool | str = "auto",
        expected_passes: int | None = None,
    ) -> KernelProducts:
        """The kernel operator K(X, centers) within the budget."""
        ...

    def feature_operator(self, transform: Any, X: Any, n_features: int) -> Operator:
        """The operator of the features ``transform(X)``."""
        ...
