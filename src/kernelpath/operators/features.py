"""The feature operator: products with the matrix of an explicit feature map of some points
(random features, Nyström features), in row blocks, never holding the matrix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from .._threads import dense_threads

__all__ = ["FeatureOperator", "feature_moments", "row_blocks", "BLOCK_BYTES"]

#: Rows per block of features: about this many bytes.
BLOCK_BYTES = 16 * 1024**2


def row_blocks(n_rows: int, n_features: int) -> list[tuple[int, int]]:
    """(start, stop) of row blocks holding about ``BLOCK_BYTES`` of float64 features."""
    rows = int(max(1, BLOCK_BYTES // max(1, 8 * n_features)))
    return [(s, min(n_rows, s + rows)) for s in range(0, n_rows, rows)]


class FeatureOperator:
    """Products with the feature matrix of some points, F = transform(X), in row blocks:
    ``matvec(B)`` = F @ B without holding F; the ``Operator`` protocol's products.
    The features are computed on X's backend and device (``transform`` of rows of X).

    Parameters
    ----------
    transform : callable (rows of X) -> features of shape (rows, n_features)
    X : ndarray or tensor of shape (n, d)
    n_features : int
    """

    def __init__(self, transform: Callable[[Any], Any], X: Any, n_features: int) -> None:
        self.transform, self.X, self.n_features = transform, X, n_features
        self.dtype = B.dtype_of(X)
        self.device = B.array_device(X)

    @property
    def shape(self) -> tuple[int, int]:
        """(n, D)."""
        return (self.X.shape[0], self.n_features)

    def matvec(self, M: Any, native: bool = False) -> Any:
        """F @ M for M of shape (D,) or (D, k) (NumPy or a tensor); NumPy out unless
        ``native``."""
        vec = M.ndim == 1
        dtype = np.result_type(self.dtype, B.dtype_of(M))
        M2 = B.to_device(M[:, None] if vec else M, self.device, dtype)
        out = B.empty((self.X.shape[0], M2.shape[1]), self.X, dtype)
        for s, e in row_blocks(self.X.shape[0], self.n_features):
            F = self.transform(self.X[s:e])
            out[s:e] = F @ B.astype(M2, B.dtype_of(F))
        out = out[:, 0] if vec else out
        return out if native else B.to_numpy(out)

    def rmatvec(self, A: Any, native: bool = False) -> Any:
        """F^T @ A for A of shape (n,) or (n, k), float64 NumPy (``native`` is accepted for
        the protocol's sake: the result is on the host)."""
        A2 = np.asarray(B.to_numpy(A), dtype=FACTOR_DTYPE)
        vec = A2.ndim == 1
        A2 = A2[:, None] if vec else A2
        out = np.zeros((self.n_features, A2.shape[1]))
        for s, e in row_blocks(self.X.shape[0], self.n_features):
            F = B.to_numpy(B.astype(self.transform(self.X[s:e]), FACTOR_DTYPE))
            out += F.T @ A2[s:e]
        return out[:, 0] if vec else out

    def gram(self, weights: Any = None, native: bool = False) -> np.ndarray:
        """F^T diag(w) F, (D, D) float64 NumPy (``feature_moments``)."""
        zero = np.zeros((self.X.shape[0], 0))
        return feature_moments(self.transform, self.X, self.n_features, zero, weights)[0]

    def projected_rows(self, T: Any, quad: Any, lin: Any) -> tuple[np.ndarray, np.ndarray]:
        """With U = F T (never formed): ``(U * U) @ quad`` and ``U @ lin`` (float64 NumPy),
        as ``KernelOperator.projected_rows``."""
        n = self.X.shape[0]
        out_q = np.empty((n, quad.shape[1]))
        out_l = np.empty((n, lin.shape[1]))
        T2 = B.to_device(T, self.device, FACTOR_DTYPE)
        for s, e in row_blocks(n, self.n_features):
            U = B.to_numpy(B.astype(self.transform(self.X[s:e]), FACTOR_DTYPE) @ T2)
            out_l[s:e] = U @ lin
            out_q[s:e] = (U * U) @ quad
        return out_q, out_l

    def release(self) -> None:
        """Nothing is cached."""


def feature_moments(
    transform: Callable[[Any], Any],
    X: Any,
    n_features: int,
    Y: np.ndarray,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(F^T W F, F^T W Y) of the features F = transform(X) (n x D), in float64, in one
    pass over row blocks of X (in memory, a tensor's device, or a row source's rows).

    Returns
    -------
    G : ndarray of shape (D, D)
    b : ndarray of shape (D, k)
    """
    Y = np.asarray(Y)
    dev = B.array_device(X)
    Y2 = B.to_device(Y[:, None] if Y.ndim == 1 else Y, dev, FACTOR_DTYPE)
    b = B.zeros((n_features, Y2.shape[1]), X, FACTOR_DTYPE)
    w = None if weights is None else B.to_device(weights, dev, FACTOR_DTYPE)
    root = None if w is None else w**0.5
    G = B.gram_zeros(n_features, X, FACTOR_DTYPE)
    for s, e in row_blocks(X.shape[0], n_features):
        F64 = B.astype(transform(X[s:e]), FACTOR_DTYPE)
        # syrk on BLAS's threads at any size: the feature map that comes next runs on one
        # thread (NumPy's cosine), so the threads' spinning afterwards costs nothing
        with dense_threads(float("inf")):
            G = B.add_gram(G, F64 if root is None else F64 * root[s:e, None])
        b += (F64 if w is None else F64 * w[s:e, None]).T @ Y2[s:e]
    return B.to_numpy(B.gram_done(G)), B.to_numpy(b)
