"""A low-rank preconditioner for CG at large m: memory O(m r) in place of the m x m factor.

The full and compact factors (``linalg.NystromFactor``, ``compact.CompactFactor``) hold an
m x m matrix at least: 20 GB in float64 and 10 GB in float32 at m = 50,000. This one holds
an m x r matrix, r << m (the idea of EigenPro 3, Abedsoltan, Belkin & Pandit 2023,
and of the randomized Nyström preconditioner of Frangella, Tropp & Udell 2023):

- **Sketch.** A rank-r Nyström approximation K_mm ~ U diag(mu) U^T: by default the
  randomized one, (K_mm Omega)(Omega^T K_mm Omega)^+(K_mm Omega)^T for an orthonormal
  Gaussian Omega (one streamed product with K_mm); or K_mS K_SS^+ K_Sm of the first r
  centers (``sketch="columns"``: uniform centers are drawn in random order). Its thin SVD
  gives U and mu (``lowrank_factor``).
- **Coordinates.** alpha = R beta with R = U diag(mu)^(-1/2) U^T + mu_r^(-1/2) (I - U U^T)
  (symmetric, applied in O(m r)): on the sketch's directions the full factor's whitening,
  beyond it one scale. R K_mm R is then near I on the sketch and small beyond it (not I:
  the model's norm is beta^T R K_mm R beta), so CG's Galerkin problems take the Gram
  matrix V^T R K_mm R V of their basis in place of I (``inner``: one streamed product with
  K_mm a iteration, ``center_operator``, O(m) memory a row; ``krylov``). In alpha itself
  (R = I, tried first) the preconditioned vectors spanned K_mm's whole spectrum and the
  recombined products lost the small directions to rounding (docs/design.md).
- **Preconditioner.** FALKON's, scale R K_mm^2 R + λ R K_mm R (scale = mean(w) / m, since
  K_nm^T K_nm / n ~ K_mm^2 / m), which is diag(scale mu + λ) on the sketch's directions,
  and its value at the r-th, scale mu_r + λ, on the rest (Frangella, Tropp & Udell's rule):

      P^-1 v = U diag(1 / (scale mu + λ)) U^T v + (v - U U^T v) / (scale mu_r + λ).

  The preconditioned system has its top r directions near 1 and the rest at most 1, down
  to (mu / mu_r)(mu / m + λ) / (mu_r / m + λ): those converge as with no preconditioner,
  last. With r = m it is the full factor's path (tested).

Memory: the sketch's construction (``lowrank_memory``); then U (m x r) and CG's basis, with
R K_mm R V beside H V.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from .. import _backend as B
from .._backend import FACTOR_DTYPE
from .._validation import check_int

__all__ = [
    "LowRankFactor",
    "lowrank_factor",
    "lowrank_memory",
    "LOWRANK_RANK",
    "LOWRANK_NEW_SHARE",
    "CENTER_BLOCK_BYTES",
]

#: The sketch's rank r by default (at most m).
LOWRANK_RANK = 1000
#: CG's new directions are kept where their part outside the basis is at least this share of
#: their length (``krylov._extend_basis``; 1e-8 for the full factors): H V and R K R V are
#: recombined from the products of the new vectors, and a smaller share magnifies their
#: rounding by its inverse, which the directions beyond the sketch (where R K R is small)
#: cannot bear.
LOWRANK_NEW_SHARE = 1e-3
#: Bytes the streamed K_mm products and the sketch's columns take per worker block.
CENTER_BLOCK_BYTES = 16 * 1024**2


def lowrank_memory(m: int, rank: int) -> int:
    """Bytes the low-rank factor holds at its peak: the sketch (Omega and K_mm Omega, or
    K_mS), its whitened copy and the SVD's factor and work (four m x r float64 matrices),
    and the streamed K_mm products' blocks."""
    r = min(int(rank), int(m))
    return 8 * (4 * m * r + 2 * r * r) + CENTER_BLOCK_BYTES


class LowRankFactor:
    """CG's factor with the low-rank preconditioner (module docstring).

    The solvers reach it through the methods of ``NystromFactor`` that CG uses (``apply``,
    ``apply_t``: R, ``preconditioner``, ``top``) and ``inner``, the Gram matrix of the
    coordinates (R K_mm R: not I here), which only this factor has.

    Parameters
    ----------
    U : ndarray of shape (m, r)
        Orthonormal directions of the sketch of K_mm.
    mu : ndarray of shape (r,)
        Its eigenvalues, decreasing.
    gram : KernelProducts
        K_mm as a streamed operator (``center_operator``).
    eps : float
        The precision of K_mm's entries (the rounding level of ``floor``).
    """

    method = "lowrank"
    on_device = False

    def __init__(self, U: np.ndarray, mu: np.ndarray, gram: Any, eps: float) -> None:
        self.U, self.mu, self.gram = U, mu, gram
        self.m = int(U.shape[0])
        self.tail = float(mu[-1])  # mu_r: the scale of the directions beyond the sketch
        # R's scaling: mu^-1/2 on the sketch, mu_r^-1/2 beyond, as U-space corrections
        self._scale_r = mu**-0.5 - self.tail**-0.5
        # the rounding of K_mm's products (eps sqrt(m) mu_0), as R K R carries it
        self.floor = eps * np.sqrt(self.m) * float(mu[0]) / self.tail

    @property
    def rank(self) -> int:
        """The coordinates' dimension: m."""
        return self.m

    @property
    def preconditioner_rank(self) -> int:
        return int(self.U.shape[1])

    def apply(self, V: Any, native: bool = False) -> np.ndarray:
        """alpha = R V, R = U diag(mu)^-1/2 U^T + mu_r^-1/2 (I - U U^T) (symmetric)."""
        V = np.asarray(B.to_numpy(V), dtype=FACTOR_DTYPE)
        vec = V.ndim == 1
        V2 = V[:, None] if vec else V
        out = self.U @ (self._scale_r[:, None] * (self.U.T @ V2)) + V2 / np.sqrt(self.tail)
        return out[:, 0] if vec else out

    def apply_t(self, U: Any) -> np.ndarray:
        """R^T U = R U."""
        return self.apply(U)

    def inner(self, V: np.ndarray) -> np.ndarray:
        """R K_mm R V for V of shape (m, c): the Gram matrix of the coordinates (one streamed
        product with K_mm)."""
        KRV = B.to_numpy(self.gram.matvec(self.apply(V)))
        return self.apply(np.asarray(KRV, dtype=FACTOR_DTYPE))

    def top(self) -> tuple[float, np.ndarray]:
        """The largest eigenvalue of K_mm and its eigenvector, from the sketch (a Nyström
        approximation: at most the exact one)."""
        return float(self.mu[0]), self.U[:, 0].copy()

    def preconditioner(self, scale: float, shift: float) -> Callable[[np.ndarray], np.ndarray]:
        """v -> P^-1 v, P = U diag(scale mu + shift) U^T + (scale mu_r + shift)(I - U U^T):
        FALKON's preconditioner (scale R K_mm^2 R + shift R K_mm R) on the sketch's
        directions, and its value at the r-th on the rest (module docstring)."""
        d = scale * self.mu + shift
        tail = scale * self.tail + shift
        inv = 1.0 / d - 1.0 / tail
        U = self.U

        def solve(V: np.ndarray) -> np.ndarray:
            return U @ (inv[:, None] * (U.T @ V)) + V / tail

        return solve


def lowrank_factor(op: Any, rank: int = LOWRANK_RANK, sketch: str = "gaussian") -> LowRankFactor:
    """The low-rank factor of the operator's centers: a rank-r Nyström sketch of K_mm and its
    eigendecomposition U diag(mu) U^T.

    ``sketch="gaussian"``: the randomized Nyström approximation (Tropp, Yurtsever, Udell &
    Cevher 2017; the sketch of Frangella, Tropp & Udell's preconditioner): Y = K_mm Omega
    for an orthonormal Gaussian Omega (m x r, seed 0; one streamed product with K_mm),
    shifted by nu = eps ||Y||_F for stability, B = Y_nu chol(Omega^T Y_nu)^-T, its thin SVD
    U diag(s) and mu = s^2 - nu. ``"columns"``: K_mS K_SS^+ K_Sm of the first r centers. Its
    eigenvalues below eps sqrt(m) mu_0 (the full factor's cut) are dropped.

    Parameters
    ----------
    op : KernelProducts
        Its centers, kernel and dtype (``center_operator``).
    rank : int
        r, at most m.
    sketch : {"gaussian", "columns"}

    Returns
    -------
    LowRankFactor
    """
    rank = check_int(rank, "preconditioner_rank", 1)
    m = int(op.m)
    r = min(rank, m)
    budget = 2 * CENTER_BLOCK_BYTES
    eps = float(np.finfo(np.dtype(op.dtype)).eps)
    gram = op.center_operator(budget)
    if sketch == "gaussian":
        Omega, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((m, r)))
        Y = np.asarray(B.to_numpy(gram.matvec(Omega)), dtype=FACTOR_DTYPE)  # (m, r)
        nu = float(np.finfo(FACTOR_DTYPE).eps) * float(np.linalg.norm(Y))
        Y += nu * Omega
        core = Omega.T @ Y
        del Omega
        L = np.linalg.cholesky((core + core.T) / 2)
        F = scipy.linalg.solve_triangular(L, Y.T, lower=True).T  # Y L^-T
        del Y
        U, sig, _ = scipy.linalg.svd(F, full_matrices=False, overwrite_a=True, check_finite=False)
        mu = np.maximum(sig**2 - nu, 0.0)
    elif sketch == "columns":
        C = op.center_operator(budget + 8 * m * r, np.arange(r)).dense()  # (in lowrank_memory)
        C = np.asarray(B.to_numpy(C), dtype=FACTOR_DTYPE)  # (m, r)
        Kss = (C[:r] + C[:r].T) / 2
        s, Q = scipy.linalg.eigh(Kss)
        if not np.isfinite(s).all() or s[-1] <= 0:
            raise ValueError("the centers' kernel matrix K_mm has no positive eigenvalue")
        keep = s > eps * np.sqrt(r) * s[-1]
        F = C @ (Q[:, keep] / np.sqrt(s[keep]))
        del C
        U, sig, _ = scipy.linalg.svd(F, full_matrices=False, overwrite_a=True, check_finite=False)
        mu = sig**2
    else:
        raise ValueError(f"sketch must be 'gaussian' or 'columns', got {sketch!r}")
    del F
    if not np.isfinite(mu).all() or mu[0] <= 0:
        raise ValueError("the centers' kernel matrix K_mm has no positive eigenvalue")
    live = mu > eps * np.sqrt(m) * mu[0]
    U, mu = U[:, live], mu[live]
    return LowRankFactor(np.ascontiguousarray(U), mu, gram, eps)
