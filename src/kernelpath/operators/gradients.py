"""Gradients of a kernel expansion over an operator's rows: the derivative along the log
widths (per-feature widths learned by ARD, ``kernelpath.ard``) and the average gradient
outer product (AGOP) of f = K(., centers) coef (the learned metric, ``fitting.agop``).

A radial kernel is phi(||x A - c A||^2) in its coordinates u = x A (A = L / sigma for a
``metric`` L, diag(1 / sigma_l) for per-feature widths, I / sigma for one width), so

    grad_x f_o(x_i) = A g_io,   g_io = sum_j coef_jo Q_ij (v_j - u_i),   v_j = c_j A,

with Q = ``kernel.width_factor`` = -2 phi'(r^2) of the squared distances in those
coordinates. The AGOP is A H A^T with H = (1/n) sum_io g_io g_io^T (r x r for r
coordinates). Its factor F (AGOP = F F^T) is returned, never the d x d matrix:

- with a metric (r columns, r < d) or up to ``DENSE_AGOP_FEATURES`` features, H exactly,
  accumulated over row blocks, and F = A E diag(sqrt(lambda)) from H = E diag(lambda) E^T;
- past that, without a metric (a diagonal A, r = d), H's ``AGOP_RANK`` leading eigenpairs
  by a randomized range finder (Halko, Martinsson and Tropp 2011, algorithms 4.3 and 5.3)
  with ``AGOP_POWER`` power iterations, on products with the gradient rows that are never
  formed: G Omega = (Q diag(coef_o)) (V Omega) - diag(Q coef_o) (U Omega) and
  G^T Z = V^T (sum_o diag(coef_o) Q^T Z_o) - U^T (sum_o (Q coef_o) * Z_o). Sparse rows and
  centers stay sparse, so a pass costs what the non-zeros, n m and d s cost (s columns),
  not n d^2 nor d^3.

The diagonal of the AGOP (``sigma="agop_diagonal"``) is exact at any d: the squares of the
gradient rows summed block by block (a dense block of rows x d at a time).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse

from .. import _backend as B
from ..inputs import is_sparse
from ..kernels import squared_distances

__all__ = [
    "DENSE_AGOP_FEATURES",
    "AGOP_RANK",
    "AGOP_OVERSAMPLE",
    "AGOP_POWER",
    "width_gradient",
    "agop_factor",
    "agop_diagonal",
    "axis_scales",
]

#: Up to this many coordinates H (r x r) is accumulated exactly and decomposed (2 r^2 n
#: flops and an r^3 eigendecomposition: 1024 features cost about 1 s per 1,000 rows here).
DENSE_AGOP_FEATURES = 1024
#: Past ``DENSE_AGOP_FEATURES`` features, the leading eigenpairs of H kept in the factor.
AGOP_RANK = 128
#: Extra columns of the randomized range finder (its failure probability falls
#: exponentially with them; Halko et al. 2011, section 10.2).
AGOP_OVERSAMPLE = 16
#: Power iterations of the range finder: each is one more pass over the rows, and sharpens
#: a slowly decaying spectrum's leading subspace.
AGOP_POWER = 2


def axis_scales(A: np.ndarray) -> np.ndarray | None:
    """a (d,) where the coordinates x A are the features scaled, some dropped: every column
    of A one feature's (one non-zero), no feature in two columns (then ||x A||^2 =
    sum_l a_l^2 x_l^2, a_l 0 for a dropped feature); None for any other A. Per-feature
    widths, one width and ``sigma="agop_diagonal"``'s metrics are such; their gradients are
    computed in the features' own coordinates, sparse rows kept sparse."""
    nz = A != 0
    if not (np.all(nz.sum(axis=0) == 1) and np.all(nz.sum(axis=1) <= 1)):
        return None
    return np.sqrt(np.einsum("ij,ij->i", A, A))


def _host64(A: Any) -> Any:
    """A block as float64 on the host: CSR for sparse rows, NumPy otherwise."""
    if is_sparse(A):
        return scipy.sparse.csr_matrix(A, dtype=np.float64)
    return np.asarray(B.to_numpy(A), dtype=np.float64)


def _scaled(A: Any, a: np.ndarray) -> Any:
    """A's columns times ``a`` (sparse stays sparse)."""
    if is_sparse(A):
        return scipy.sparse.csr_matrix(A.multiply(a[None, :]))
    return A * a[None, :]


def _sq(A: Any) -> np.ndarray:
    if is_sparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


def _radial(op: Any) -> Any:
    kernel = op.kernel
    if not hasattr(kernel, "width_factor"):
        raise ValueError(
            f"kernel: {kernel!r} is not a function of a distance; its gradients are not computed"
        )
    return kernel


def _coef(op: Any, coef: Any, name: str = "coef") -> np.ndarray:
    C = np.asarray(B.to_numpy(coef), dtype=np.float64)
    if C.ndim not in (1, 2) or C.shape[0] != op.m:
        raise ValueError(f"{name} must have shape ({op.m},) or ({op.m}, k), got {C.shape}")
    return C.reshape(op.m, -1)


class _Expansion:
    """f = K(., centers) coef over ``op``'s rows in the kernel's coordinates: the centers'
    coordinates V, and for every row block its coordinates U and the factor Q."""

    def __init__(self, op: Any, coef: Any) -> None:
        self.op, self.kernel = op, _radial(op)
        self.n, self.m = op.n, op.m
        self.d = int(op.X.shape[1])
        self.C = _coef(op, coef)
        self.k = self.C.shape[1]
        self.A = self.kernel.coordinate_matrix(self.d)  # d x r
        self.a = axis_scales(self.A)
        self.metric = self.a is None
        self.V = self._coordinates(_host64(op.centers))
        self.v_sq = _sq(self.V)
        self.r = int(self.A.shape[1]) if self.metric else self.d

    def _coordinates(self, X: Any) -> Any:
        if self.a is not None:
            return _scaled(X, self.a)
        return np.asarray(X @ self.A)  # sparse @ dense: dense

    def rows_per_block(self, per_row_numbers: int) -> int:
        per_row = 8 * (2 * self.m + per_row_numbers)
        return int(max(1, min(max(self.op.block_rows, 64), self.op.budget // per_row)))

    def blocks(self, per_row_numbers: int) -> Iterator[tuple[Any, np.ndarray]]:
        """(U, Q) for every block of rows (``per_row_numbers``: what the caller keeps per
        row besides Q and the distances)."""
        rows = self.rows_per_block(per_row_numbers)
        for s in range(0, self.n, rows):
            e = min(self.n, s + rows)
            U = self._coordinates(_host64(self.op.rows.read(s, e)))
            Q = self.kernel.width_factor(squared_distances(U, self.V, _sq(U), self.v_sq))
            yield U, Q

    def outer(self) -> np.ndarray:
        """H = sum_io g_io g_io^T (r x r, not divided by n), one pass."""
        W = (self.C[:, :, None] * _dense(self.V)[:, None, :]).reshape(self.m, self.k * self.r)
        H = np.zeros((self.r, self.r))
        for U, Q in self.blocks(self.k * self.r + self.r):
            G = (Q @ W).reshape(len(Q), self.k, self.r)
            G -= (Q @ self.C)[:, :, None] * _dense(U)[:, None, :]
            G2 = G.reshape(-1, self.r)
            H += G2.T @ G2
        return H

    def squares(self) -> np.ndarray:
        """diag(H) (r,), one pass, the gradient rows formed a block at a time."""
        out = np.zeros(self.r)
        for U, Q in self.blocks(2 * self.r):
            q = Q @ self.C
            for o in range(self.k):
                G = _dense(Q @ _scaled_rows(self.V, self.C[:, o]))
                G -= _dense(_scaled_rows(U, q[:, o]))
                out += np.einsum("ij,ij->j", G, G)
        return out

    def times(self, Omega: np.ndarray) -> np.ndarray:
        """H Omega (r x s) without H: the rows' products G Omega, then G^T of them."""
        s = Omega.shape[1]
        VO = _dense(self.V @ Omega)  # m x s
        W = (self.C[:, :, None] * VO[:, None, :]).reshape(self.m, self.k * s)
        R = np.zeros((self.m, s))  # sum_o diag(coef_o) Q^T Z_o, summed over the blocks
        out = np.zeros((self.r, s))
        for U, Q in self.blocks(2 * self.k * s):
            q = Q @ self.C  # n_b x k
            Z = (Q @ W).reshape(len(Q), self.k, s)
            Z -= q[:, :, None] * _dense(U @ Omega)[:, None, :]
            for o in range(self.k):
                R += self.C[:, o, None] * (Q.T @ Z[:, o, :])
            out -= _dense(U.T @ np.einsum("no,nos->ns", q, Z))
        out += _dense(self.V.T @ R)
        return out


def _dense(A: Any) -> np.ndarray:
    return np.asarray(A.toarray()) if is_sparse(A) else np.asarray(A)


def _scaled_rows(A: Any, w: np.ndarray) -> Any:
    """A's rows times ``w`` (sparse stays sparse)."""
    if is_sparse(A):
        return scipy.sparse.csr_matrix(A.multiply(w[:, None]))
    return A * w[:, None]


def width_gradient(op: Any, left: Any, right: Any) -> np.ndarray:
    """The derivative of sum_ij (left right^T)_ij k(x_i, c_j) along the log widths:

        g_l = sum_ij (left right^T)_ij Q_ij (x_il - c_jl)^2 / sigma_l^2,

    Q = ``kernel.width_factor`` (radial kernels), for left (n, k) and right (m, k). Shape
    (n_features,) for per-feature widths, (1,) for one width (the sum over features).
    One pass over the row blocks in float64 on the host, O(n m (d + k)): every adjoint term
    of a Nystrom objective's gradient is one such pass (``ard``)."""
    kernel = op.kernel
    if not hasattr(kernel, "width_factor"):
        raise ValueError(f"kernel: {kernel!r} has no width to differentiate")
    d = int(op.X.shape[1])
    inv = 1.0 / kernel.widths(d)
    L = np.asarray(B.to_numpy(left), dtype=np.float64).reshape(op.n, -1)
    Rt = np.asarray(B.to_numpy(right), dtype=np.float64).reshape(op.m, -1)
    if L.shape[1] != Rt.shape[1]:
        raise ValueError(f"left and right need as many columns, got {L.shape}, {Rt.shape}")
    Cs = _dense(_scaled(_host64(op.centers), inv))
    c_sq = np.einsum("ij,ij->i", Cs, Cs)
    Cs2 = Cs * Cs
    rows = int(max(1, min(op.block_rows, op.budget // (8 * 3 * max(1, op.m)))))
    g = np.zeros(d)
    for s in range(0, op.n, rows):
        e = min(op.n, s + rows)
        Xs = _dense(_scaled(_host64(op.rows.read(s, e)), inv))
        x_sq = np.einsum("ij,ij->i", Xs, Xs)
        R2 = squared_distances(Xs, Cs, x_sq, c_sq)
        M = L[s:e] @ Rt.T
        M *= kernel.width_factor(R2)
        g += (Xs * Xs).T @ M.sum(axis=1)
        g += Cs2.T @ M.sum(axis=0)
        g -= 2.0 * np.einsum("ij,ij->j", Xs, M @ Cs)
    return g if kernel.per_feature else np.array([g.sum()])


def agop_factor(op: Any, coef: Any, random_state: Any = None) -> np.ndarray:
    """F (d x p) with AGOP = F F^T, the average gradient outer product of
    f = K(., centers) coef over ``op``'s rows: (1 / n) sum_i sum_o grad f_o(x_i) grad f_o(x_i)^T.

    Exact with a metric or up to ``DENSE_AGOP_FEATURES`` features; past that its
    ``AGOP_RANK`` leading eigenpairs (randomized, ``random_state`` draws the test matrix).

    Parameters
    ----------
    op : KernelOperator
        The rows x_i and the centers, with a radial kernel.
    coef : array of shape (m,) or (m, k)
    random_state : int, Generator or None

    Returns
    -------
    ndarray of shape (n_features, p), p <= min(n_features, the coordinates, AGOP_RANK past
    ``DENSE_AGOP_FEATURES``).
    """
    f = _Expansion(op, coef)
    n = max(f.n, 1)
    if f.metric or f.r <= DENSE_AGOP_FEATURES:
        vals, vecs = np.linalg.eigh(f.outer() / n)
    else:
        vals, vecs = _leading_eigenpairs(f, n, np.random.default_rng(random_state))
    keep = vals > 0
    E = vecs[:, keep] * np.sqrt(vals[keep])[None, :]
    return (f.A @ E) if f.a is None else f.a[:, None] * E


def _leading_eigenpairs(f: _Expansion, n: int, rng: np.random.Generator) -> tuple[Any, Any]:
    """The ``AGOP_RANK`` leading eigenpairs of H / n: a range finder with ``AGOP_POWER``
    power iterations (each orthonormalized), then H projected on the basis found."""
    s = min(f.r, AGOP_RANK + AGOP_OVERSAMPLE)
    Y = f.times(rng.standard_normal((f.r, s)))
    for _ in range(AGOP_POWER):
        Y = f.times(np.linalg.qr(Y)[0])
    basis = np.linalg.qr(Y)[0]
    T = basis.T @ f.times(basis) / n
    vals, W = np.linalg.eigh((T + T.T) / 2)
    top = np.argsort(vals)[::-1][:AGOP_RANK]
    return vals[top], basis @ W[:, top]


def agop_diagonal(op: Any, coef: Any) -> np.ndarray:
    """The diagonal of the AGOP of f = K(., centers) coef over ``op``'s rows (exact at any
    number of features), shape (n_features,)."""
    f = _Expansion(op, coef)
    n = max(f.n, 1)
    if f.a is None:  # diag(A H A^T): H is r x r
        H = f.outer() / n
        return np.einsum("ij,ij->i", f.A @ H, f.A)
    return f.a**2 * f.squares() / n
