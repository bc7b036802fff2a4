"""Dense linear algebra on small (m x m) matrices, always in float64.

- ``nystrom_factor``: the factor R (m x r) with R R^T = K_mm^+ (NYTRO eq. 13-16): a Cholesky
  factor when K_mm is safely positive definite, else a rank-revealing eigendecomposition,
  robust to rank-deficient K_mm (duplicate centers, huge sigma).
- ``regularized_factor``: the factor of SQUEAK's γ-regularized Nyström approximation
  (SQUEAK Eq. 3), R = W (W K_mm W + γ I)^(-1/2), for the same solvers.
- ``spectral_filter``: the filter functions g(s) of the spectral regularization methods, as
  functions of the eigenvalues s of the normalized operator (K / n, or A^T A / n).
- ``nu_method_coefficients``: the ν-method recursion coefficients (Engl, Hanke & Neubauer,
  Regularization of Inverse Problems, §6.3).
- ``top_eigenvalue``: power iteration for the largest eigenvalue of a symmetric PSD operator.

The rank-one updates of Cholesky factors are in ``cholesky``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
import scipy.sparse.linalg
from scipy.linalg.blas import dsymv as symv

from ._backend import (
    FACTOR_DTYPE,
    Device,
    array_device,
    is_tensor,
    symmetrize,
    to_device,
    to_numpy,
)
from ._kernels import (
    LAPACK_IN_THREAD_MIN,
    cholesky_lower,
    eigh_lower,
    interruptible,
)
from ._threads import dense_threads

__all__ = [
    "nystrom_factor",
    "cholesky_nystrom_factor",
    "nystrom_factor_device",
    "regularized_factor",
    "factor_on_device",
    "eigh_in_place",
    "cholesky_in_place",
    "zero_strict_upper",
    "DEVICE_FACTOR_MIN_CENTERS",
    "NystromFactor",
    "spectral_filter",
    "nu_method_coefficients",
    "top_eigenvalue",
    "FILTERS",
]

FILTERS = ("tikhonov", "kols", "tsvd", "landweber", "nu")
#: Floating-point operations of a symmetric eigendecomposition with its vectors, per m^3
#: (the tridiagonal reduction 4/3, the back-transformation 2, divide and conquer at most
#: 4/3; the count ``_threads.dense_threads`` weighs it by).
EIGH_FLOPS = 4.7
#: ``NystromFactor.top`` on the host: a dense eigendecomposition up to this rank (exact and
#: cheap there), Lanczos above it (scipy's ARPACK: 0.009 s against 0.20 s at r = 1,000).
DENSE_TOP_RANK = 64


#: On CUDA, the Nyström factor, its preconditioners and the products with R stay on the device
#: (float64, ``torch.linalg``) from this many centers on; below, the m x m algebra is LAPACK on
#: the host (see ``factor_on_device``). The host side was measured here (docs/design.md);
#: the GPU side follows FALKON, which factors on the GPU, and was not measured: no GPU was
#: lent to the work that set it.
DEVICE_FACTOR_MIN_CENTERS = 10_000


@dataclass
class NystromFactor:
    """The factor R (m x r) with R R^T = K_mm^+ and R^T K_mm R = I, and what the
    preconditioners need: M = R^T K_mm^2 R, kept as its diagonal ``s`` when R comes from the
    eigendecomposition (then M = diag(s), the eigenvalues of K_mm) or as a matrix when R comes
    from a Cholesky factor (then M = L^T L).

    R and M are float64 NumPy arrays (the host) or float64 tensors on a device. The solvers
    reach R only through the methods below, which take and return NumPy arrays (except with
    ``native=True``: the factor's own arrays), so the same solver code runs with either.
    """

    R: Any
    #: (r,) diagonal, or (r, r): the host Cholesky form keeps only the lower triangle of
    #: L^T L (see ``_lauum_lower``); the device form is the whole matrix. None: not kept
    #: (a factor made for a solver without a preconditioner, ``nystrom_factor``)
    M: Any
    method: str  # "cholesky", "eigh", "regularized", or "cholesky-eigh" (``diagonalized``)
    #: a unit top eigenvector of K_mm in R's coordinates (device Cholesky factors only)
    top_vector: Any = None

    @property
    def rank(self) -> int:
        return int(self.R.shape[1])

    @property
    def on_device(self) -> bool:
        return is_tensor(self.R)

    def _dev(self, V: Any) -> Any:
        return to_device(V, array_device(self.R), FACTOR_DTYPE)

    def apply(self, V: Any, native: bool = False) -> Any:
        """R @ V for V of shape (r, c) (or (r,)): the coefficients alpha of coordinates beta."""
        if not self.on_device:
            return self.R @ np.asarray(V, dtype=FACTOR_DTYPE)
        out = self.R @ self._dev(V)
        return out if native else to_numpy(out)

    def apply_t(self, U: Any) -> np.ndarray:
        """R^T @ U for U of shape (m, c) (NumPy or a tensor), as a float64 NumPy array."""
        if not self.on_device:
            return np.asarray(self.R.T @ to_numpy(U, FACTOR_DTYPE))
        return to_numpy(self.R.T @ self._dev(U))

    def project(self, G: Any, native: bool = False) -> Any:
        """R^T G R, symmetrized, for G of shape (m, m) (on the host: two m x m matrices
        beside G at the peak)."""
        if not self.on_device:
            m, r = self.R.shape
            with dense_threads(2.0 * r * m * (m + r)):
                H = self.R.T @ to_numpy(G, FACTOR_DTYPE)
                H = H @ self.R
            return symmetrize(H)
        H = self.R.T @ self._dev(G) @ self.R
        H = (H + H.T) / 2
        return H if native else to_numpy(H)

    def top(self) -> tuple[float, np.ndarray]:
        """The largest eigenvalue of K_mm and the matching direction in R's coordinates."""
        if self.M is None:
            raise ValueError("this factor was made without M (preconditioned=False)")
        if self.M.ndim == 1:
            M = to_numpy(self.M)
            v = np.zeros(self.rank)
            v[int(np.argmax(M))] = 1.0
            return float(M.max()), v
        if self.on_device:  # power iteration on the device: no m x m eigensolver
            val = top_eigenvalue(lambda v: to_numpy(self.M @ self._dev(v)), self.rank, 100, 1e-8)
            return val / (1 + 1e-8), np.asarray(self.top_vector, dtype=FACTOR_DTYPE)
        r = self.rank
        if r <= DENSE_TOP_RANK:
            vals, vecs = scipy.linalg.eigh(self.M, lower=True)
            return float(vals[-1]), vecs[:, -1]
        # Lanczos (ARPACK) on M's lower triangle, from a fixed start: LAPACK's subset
        # eigensolver reduces M to tridiagonal form first (4/3 r^3 flops, memory-bound), 1.5 s
        # at r = 2,000 here where this takes 0.04 s, the same eigenpair to 1e-16
        A, lower = (self.M, 1) if self.M.flags.f_contiguous else (self.M.T, 0)
        start = np.random.default_rng(0).standard_normal(r)
        with dense_threads(2.0 * r * r):
            return largest_eigenpair(lambda v: symv(1.0, A, v, lower=lower), r, v0=start)

    def preconditioner(self, scale: float, shift: float) -> Callable[[np.ndarray], np.ndarray]:
        """V -> (scale M + shift I)^-1 V (FALKON's preconditioner in these coordinates),
        NumPy in and out."""
        if self.M is None:
            raise ValueError("this factor was made without M (preconditioned=False)")
        if self.M.ndim == 1:
            d = to_numpy(scale * self.M + shift)
            return lambda V: V / (d[:, None] if V.ndim == 2 else d)
        if self.on_device:
            torch = _torch_module()
            P = scale * self.M
            P.diagonal().add_(shift)
            Lp = torch.linalg.cholesky(P)
            del P

            def solve(V: np.ndarray) -> np.ndarray:
                Vd = self._dev(V)
                out = torch.cholesky_solve(Vd[:, None] if Vd.ndim == 1 else Vd, Lp)
                return to_numpy(out[:, 0] if Vd.ndim == 1 else out)

            return solve
        P = scale * self.M  # Fortran order, like M: factored in place (one m x m each)
        P[np.diag_indices_from(P)] += shift
        cf = (cholesky_in_place(P), True)  # (its lower triangle: what cho_solve reads)
        return lambda V: scipy.linalg.cho_solve(cf, V, check_finite=False)

    def diagonalized(self) -> NystromFactor:
        """The same factor rotated so that M is diagonal: with M = Q diag(mu) Q^T, R' = R Q
        keeps R' R'^T = K_mm^+ and R'^T K_mm R' = I, and M' = R'^T K_mm^2 R' = diag(mu).
        Every preconditioner (scale M' + shift I)^-1 is then a diagonal scaling: one
        eigendecomposition of M serves any number of shifts (CG's anchors) in one m x m
        matrix, where a Cholesky factor per shift holds one each. Host factors only; M is
        overwritten (the factor is not usable afterwards)."""
        if self.M is None or self.M.ndim == 1 or self.on_device:
            return self
        m, r = self.R.shape
        with dense_threads(EIGH_FLOPS * r**3 + 2.0 * m * r * r):
            mu, Q = scipy.linalg.eigh(
                self.M, lower=True, driver="evr", overwrite_a=True, check_finite=False
            )
            self.M = None
            R = self.R @ Q
        del Q
        return NystromFactor(R, np.maximum(mu, 0.0), "cholesky-eigh")


def eigh_in_place(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues ascending, eigenvectors) of a symmetric m x m float64 matrix, by LAPACK's
    divide and conquer (dsyevd) writing the vectors over H (which is not usable afterwards).

    A C-ordered H is passed as H^T (the same matrix, Fortran-ordered), so nothing is copied:
    the peak is H and dsyevd's workspace of 2 m x m, the same as dsyevr on a C-ordered H (a
    Fortran copy and the vectors). On the clustered spectra of projected kernel matrices
    dsyevd is several times faster than dsyevr's MRRR (adult's screen, m = 640: 0.027 s
    against 0.096 s, docs/design.md "BLAS threads during a fit")."""
    if len(H) == 1:  # SciPy < 1.13 refuses dsyevd's workspace for one row
        return H[0].copy(), np.ones((1, 1), dtype=H.dtype)
    with dense_threads(EIGH_FLOPS * len(H) ** 3):
        if len(H) >= LAPACK_IN_THREAD_MIN and H.dtype == np.float64:  # Ctrl-C stops it
            return interruptible(eigh_lower, H)
        A = H.T if H.flags.c_contiguous and not H.flags.f_contiguous else H
        s, V = scipy.linalg.eigh(A, driver="evd", overwrite_a=True, check_finite=False)
    return s, V


def cholesky_in_place(K: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of a symmetric positive definite float64 matrix, written
    over K (returned as a Fortran-ordered view; read its lower triangle only); from
    ``LAPACK_IN_THREAD_MIN`` rows on computed without holding Python's lock, so that
    Ctrl-C stops it. Raises ``numpy.linalg.LinAlgError`` when K is not positive definite."""
    with dense_threads(len(K) ** 3 / 3):
        if len(K) >= LAPACK_IN_THREAD_MIN:
            return interruptible(cholesky_lower, K)
        A = K.T if K.flags.c_contiguous and not K.flags.f_contiguous else K
        return scipy.linalg.cholesky(A, lower=True, overwrite_a=True, check_finite=False)


def zero_strict_upper(L: np.ndarray) -> np.ndarray:
    """L with zeros above its diagonal, by blocks of columns (no m x m index arrays)."""
    if np.ndim(L) != 2 or L.shape[0] != L.shape[1]:
        raise ValueError(f"L must be a square matrix, got shape {np.shape(L)}")
    m = len(L)
    step = 1024
    for j in range(0, m, step):
        e = min(m, j + step)
        L[:j, j:e] = 0.0
        L[j:e, j:e] = np.tril(L[j:e, j:e])
    return L


def factor_on_device(device: Device, m: int) -> bool:
    """Whether the m x m algebra of a fit on ``device`` runs there (CUDA, m at least
    ``DEVICE_FACTOR_MIN_CENTERS``) or on the host (LAPACK, float64)."""
    return device.is_cuda and m >= DEVICE_FACTOR_MIN_CENTERS


def _torch_module() -> Any:
    import torch

    return torch


def _lauum_lower(L: np.ndarray) -> np.ndarray:
    """The lower triangle of L^T L for a lower-triangular L (zeros above the diagonal), with
    LAPACK's dlauum: m^3 / 3 flops, a third of a general product, and no m x m temporary.
    Its readers (the preconditioner's Cholesky, ``eigh``) read the lower triangle only."""
    out, info = scipy.linalg.lapack.dlauum(L, lower=1)
    if info != 0:  # pragma: no cover - dlauum fails only on bad arguments
        return np.tril(L.T @ L)
    return np.asarray(out)


def nystrom_factor(
    K_mm: np.ndarray,
    rcond: float | None = None,
    dtype_eps: float | None = None,
    preconditioned: bool = True,
) -> NystromFactor:
    """Factor of the pseudo-inverse of K_mm: R with R R^T = K_mm^+ and R^T K_mm R = I.

    When K_mm is safely positive definite (a Cholesky factor exists and LAPACK's estimate of
    its reciprocal 1-norm condition number exceeds ``eps * m**1.5``, which bounds the 2-norm
    condition below ``1 / (eps sqrt(m))``), R = L^-T with K_mm = L L^T: then R R^T = K_mm^-1
    = K_mm^+ exactly, for a fraction of the cost of an eigendecomposition (0.25 s against 1 s
    for m = 2000 here). Otherwise the rank-revealing eigendecomposition K_mm = U diag(s) U^T
    keeps the eigenvalues ``s_i > rcond * max(s)`` and R = U_r diag(s_r)^(-1/2) (R R^T is the
    truncated pseudo-inverse).

    The default cut-off is the size of the rounding in K_mm and in its eigendecomposition:
    entries with relative errors ``eps`` (the precision K_mm was computed in) perturb the
    eigenvalues by about ``eps * sqrt(m) * max_i K_ii``, and the eigensolver adds
    ``eps * max(s)``; directions below ``eps * sqrt(m) * max(s)`` are noise (an exactly
    singular K_mm, from duplicate centers, returns such values).

    Parameters
    ----------
    K_mm : ndarray of shape (m, m)
        Kernel matrix of the centers (symmetric PSD up to rounding).
    rcond : float or None
        Relative eigenvalue cut-off; default ``eps * sqrt(m)``. Giving one forces the
        eigendecomposition.
    dtype_eps : float or None
        Machine epsilon of the precision K_mm was computed in (default float64's).
    preconditioned : bool
        Keep M = R^T K_mm^2 R (CG's preconditioner, ``top``); False: a Cholesky factor
        leaves it out (one m x m matrix less).

    Returns
    -------
    NystromFactor
    """
    K = np.asarray(K_mm, dtype=FACTOR_DTYPE)
    m = K.shape[0]
    eps = np.finfo(FACTOR_DTYPE).eps if dtype_eps is None else dtype_eps
    if rcond is None and m > 0:
        fac = _cholesky_factor(K, eps, preconditioned)
        if fac is not None:
            return fac
    with dense_threads(EIGH_FLOPS * m**3):
        s, U = scipy.linalg.eigh(K, driver="evd", check_finite=False)
    s, U = s[::-1], U[:, ::-1]
    if not np.isfinite(s).all() or s[0] <= 0:
        raise ValueError("the centers' kernel matrix K_mm has no positive eigenvalue")
    if rcond is None:
        rcond = eps * np.sqrt(m)
    keep = s > rcond * s[0]
    s, R = s[keep], np.ascontiguousarray(U[:, keep])
    del U
    R /= np.sqrt(s)
    return NystromFactor(R, s, "eigh")


def cholesky_nystrom_factor(
    K_mm: np.ndarray, dtype_eps: float | None = None, preconditioned: bool = True
) -> NystromFactor | None:
    """``nystrom_factor`` where K_mm is safely positive definite (R = L^-T, by its rule),
    else None, in place of its eigendecomposition: for a caller with another factor to take
    (CG's compact factor where the eigendecomposition would cost more,
    ``krylov.compact_over_eigh``)."""
    K = np.asarray(K_mm, dtype=FACTOR_DTYPE)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise ValueError(f"K_mm must be a non-empty square matrix, got shape {K.shape}")
    if not np.isfinite(K).all():
        raise ValueError("K_mm has NaN or infinite entries")
    eps = np.finfo(FACTOR_DTYPE).eps if dtype_eps is None else dtype_eps
    return _cholesky_factor(K, eps, preconditioned)


def _cholesky_factor(K: np.ndarray, eps: float, preconditioned: bool) -> NystromFactor | None:
    """``nystrom_factor``'s R = L^-T where K is safely positive definite, else None."""
    m = K.shape[0]
    with dense_threads(m**3):  # the Cholesky factor, its inverse and M: m^3 / 3 each
        try:
            L = zero_strict_upper(cholesky_in_place(np.array(K, order="F")))
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(L)):
            return None
        anorm = float(np.abs(K).sum(axis=0).max())
        rc, info = scipy.linalg.lapack.dpocon(L, anorm, uplo="L")
        if info != 0 or not rc > eps * m**1.5:
            return None
        M = _lauum_lower(L) if preconditioned else None
        # L (Fortran order) inverted in place: R = L^-T is its C-ordered transpose
        Linv, info = scipy.linalg.lapack.dtrtri(L, lower=1, overwrite_c=1)
        if info != 0:
            return None
        return NystromFactor(np.ascontiguousarray(Linv.T), M, "cholesky")


def regularized_factor(K_mm: Any, weights: Any, gamma: float) -> NystromFactor:
    """The factor of SQUEAK's γ-regularized Nyström approximation (Calandriello et al. 2017,
    Eq. 3): with the dictionary's selection S = (columns of the centers) diag(w),

        K~ = K S (S^T K S + γ I)^-1 S^T K = A A^T,    A = K_nm R,   R = W L^-T,

    where W K_mm W + γ I = L L^T. The Nyström solvers take any R (their projected system is
    R^T K_mn K_nm R); with γ -> 0 and W = I it is ``nystrom_factor``'s R up to a rotation.
    Unlike that factor, R^T K_mm R is not the identity, and M = R^T K_mm^2 R (what the CG
    preconditioner reads) is kept as a full matrix.

    Parameters
    ----------
    K_mm : array of shape (m, m)
        Kernel matrix of the dictionary points.
    weights : array of shape (m,)
        SQUEAK's weights sqrt(q_i / (q̄ p~_i)).
    gamma : float
        γ > 0, in the units of K (SQUEAK's γ = λ n).
    """
    K = to_numpy(K_mm, FACTOR_DTYPE)
    K = (K + K.T) / 2
    w = np.asarray(to_numpy(weights, FACTOR_DTYPE)).ravel()
    if w.shape != (len(K),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be positive finite numbers, one per center")
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be a positive number, got {gamma!r}")
    Mw = w[:, None] * K * w[None, :]
    Mw[np.diag_indices_from(Mw)] += gamma
    L = cholesky_in_place(Mw)  # (its lower triangle: what the solve reads)
    with dense_threads(4.0 * len(w) ** 3):  # its inverse and two products
        Linv = scipy.linalg.solve_triangular(L, np.eye(len(w)), lower=True, check_finite=False)
        R = np.ascontiguousarray(w[:, None] * Linv.T)
        KR = K @ R
        return NystromFactor(R, KR.T @ KR, "regularized")


def nystrom_factor_device(K_mm: Any, dtype_eps: float | None = None) -> NystromFactor:
    """``nystrom_factor`` on the device of a tensor K_mm, in float64 with ``torch.linalg``.

    The same rule as on the host: R = L^-T when K_mm is safely positive definite, else the
    rank-revealing eigendecomposition with the same cut-off. LAPACK's condition estimate
    (dpocon) has no ``torch.linalg`` counterpart; the 2-norm condition is estimated instead
    by power iteration on K_mm and on K_mm^-1 (through the Cholesky factor, O(m^2) a step),
    with a factor 10 of margin for the power method's estimate from below, against the same
    bound 1 / (eps sqrt(m)).
    """
    torch = _torch_module()
    K = K_mm.to(torch.float64)
    K = (K + K.T) / 2
    m = int(K.shape[0])
    dev = array_device(K)
    eps = float(np.finfo(FACTOR_DTYPE).eps) if dtype_eps is None else dtype_eps
    L, info = torch.linalg.cholesky_ex(K)
    if int(info) == 0 and bool(torch.isfinite(L).all()):
        rng = np.random.default_rng(0)
        top = top_eigenvalue(lambda v: to_numpy(K @ to_device(v, dev)), m, 50, 1e-3, rng)

        def inv(v: np.ndarray) -> np.ndarray:
            x = to_device(v, dev)[:, None]
            return to_numpy(torch.cholesky_solve(x, L)[:, 0])

        inv_top = top_eigenvalue(inv, m, 50, 1e-3, rng)
        if 10 * top * inv_top < 1.0 / (eps * np.sqrt(m)):
            eye = torch.eye(m, dtype=K.dtype, device=K.device)
            Linv = torch.linalg.solve_triangular(L, eye, upper=False)
            return NystromFactor(Linv.T.contiguous(), L.T @ L, "cholesky", _top_vector(K, L))
    s, U = torch.linalg.eigh(K)
    s, U = torch.flip(s, (0,)), torch.flip(U, (1,))
    if not bool(torch.isfinite(s).all()) or float(s[0]) <= 0:
        raise ValueError("the centers' kernel matrix K_mm has no positive eigenvalue")
    keep = s > eps * np.sqrt(m) * s[0]
    s, U = s[keep], U[:, keep].contiguous()
    return NystromFactor(U / torch.sqrt(s), s, "eigh")


def _top_vector(K: Any, L: Any) -> np.ndarray:
    """Unit top eigenvector of K_mm (power iteration) in the coordinates of R = L^-T: v
    maps to L^T v, normalized (the host factor's ``top`` returns the same direction, up to
    sign: the top eigenvector of M = L^T L is L^T v / ||L^T v||)."""
    torch = _torch_module()
    m = int(K.shape[0])
    v = torch.ones(m, dtype=K.dtype, device=K.device) / np.sqrt(m)
    for _ in range(200):
        w = K @ v
        norm = torch.linalg.norm(w)
        if float(norm) == 0:
            break
        w = w / norm
        done = float(torch.linalg.norm(w - v)) < 1e-10
        v = w
        if done:
            break
    u = L.T @ v
    return to_numpy(u / torch.linalg.norm(u))


def spectral_filter(
    name: str, s: np.ndarray, params: np.ndarray, nu: float = 1.0, step: float | None = None
) -> np.ndarray:
    """Filter values g_p(s_i) for every parameter p and eigenvalue s_i.

    The regularized solution of ``(H / n) x = b / n`` is ``x_p = V diag(g_p(s)) V^T b / n``
    where ``H / n = V diag(s) V^T``.

    Parameters
    ----------
    name : {"tikhonov", "kols", "tsvd", "landweber", "nu"}
        - tikhonov: g = 1 / (s + λ), params = λ values (0 where s + λ is numerically 0,
          so λ = 0 gives the pseudo-inverse);
        - kols: g = 1 / s on the numerical range (params ignored, one point);
        - tsvd: g = 1 / s where s >= λ, else 0, params = λ thresholds;
        - landweber: g = (1 - (1 - η s)^t) / s with η = ``step`` (default 1 / max s),
          params = iteration counts t;
        - nu: the ν-method polynomial after t iterations, params = t.
    s : ndarray of shape (r,)
        Non-negative eigenvalues.
    params : ndarray of shape (P,)

    Returns
    -------
    ndarray of shape (P, r)
    """
    s = np.asarray(s, dtype=FACTOR_DTYPE)
    params = np.asarray(params, dtype=FACTOR_DTYPE)
    smax = float(s.max()) if s.size else 1.0
    tiny = smax * s.size * np.finfo(FACTOR_DTYPE).eps
    pos = s > tiny
    inv = np.where(pos, 1.0 / np.where(pos, s, 1.0), 0.0)
    if name == "tikhonov":
        den = s[None, :] + params[:, None]
        ok = den > tiny
        return np.where(ok, 1.0 / np.where(ok, den, 1.0), 0.0)
    if name == "kols":
        return np.broadcast_to(inv, (len(params), len(s))).copy()
    if name == "tsvd":
        return np.where(s[None, :] >= params[:, None], inv[None, :], 0.0)
    if name == "landweber":
        eta = 1.0 / smax if step is None else step
        t = params[:, None]
        # 1 - (1 - η s)^t without cancellation for small η s
        with np.errstate(divide="ignore", invalid="ignore"):
            one_minus = -np.expm1(t * np.log1p(-np.minimum(eta * s[None, :], 1.0)))
        one_minus = np.where(
            eta * s[None, :] >= 1.0, 1.0 - (1.0 - eta * s[None, :]) ** t, one_minus
        )
        return np.where(pos[None, :], one_minus * inv[None, :], eta * t)
    if name == "nu":
        T = int(params.max()) if params.size else 0
        table = _nu_table(s / smax, T, nu) / smax
        return table[params.astype(int) - 1]
    raise ValueError(f"filter must be one of {FILTERS}, got {name!r}")


def nu_method_coefficients(k: int, nu: float) -> tuple[float, float]:
    """(mu_k, omega_k) of the ν-method at iteration k >= 1 (mu_1 = 0)."""
    if k == 1:
        return 0.0, (4 * nu + 2) / (4 * nu + 1)
    mu = (
        (k - 1)
        * (2 * k - 3)
        * (2 * k + 2 * nu - 1)
        / ((k + 2 * nu - 1) * (2 * k + 4 * nu - 1) * (2 * k + 2 * nu - 3))
    )
    omega = 4 * (2 * k + 2 * nu - 1) * (k + nu - 1) / ((k + 2 * nu - 1) * (2 * k + 4 * nu - 1))
    return mu, omega


def _nu_table(h: np.ndarray, T: int, nu: float) -> np.ndarray:
    """x_t(h) for t = 1..T: the ν-method applied to the scalar problem h x = 1, ||h|| <= 1."""
    out = np.empty((T, len(h)))
    prev = np.zeros_like(h)
    cur = np.zeros_like(h)
    for k in range(1, T + 1):
        mu, om = nu_method_coefficients(k, nu)
        new = cur + mu * (cur - prev) + om * (1.0 - h * cur)
        prev, cur = cur, new
        out[k - 1] = cur
    return out


def top_eigenvalue(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    n_iter: int = 30,
    tol: float = 1e-3,
    rng: np.random.Generator | None = None,
    v0: np.ndarray | None = None,
) -> float:
    """Largest eigenvalue of a symmetric PSD operator by power iteration.

    Returns the larger of the Rayleigh quotient and ||H v||, times 1 + tol. Used for the step
    size 1 / L of gradient descent, which converges for any step below 2 / λ_max, so an
    estimate slightly under λ_max (slow convergence of the power method) is still safe.
    """
    rng = np.random.default_rng(rng)
    v = rng.standard_normal(dim) if v0 is None else np.asarray(v0, dtype=FACTOR_DTYPE)
    v = v / np.linalg.norm(v)
    lam = 0.0
    for _ in range(n_iter):
        w = np.asarray(matvec(v), dtype=FACTOR_DTYPE)
        new = float(v @ w)
        norm = np.linalg.norm(w)
        if norm == 0:
            return 0.0
        v = w / norm
        if abs(new - lam) <= tol * abs(new):
            lam = new
            break
        lam = new
    return max(lam, float(norm)) * (1 + tol)


def largest_eigenvalue(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    tol: float = 1e-7,
    v0: np.ndarray | None = None,
) -> float:
    """Largest eigenvalue of a symmetric PSD operator to relative accuracy ``tol`` by
    Lanczos (ARPACK through ``scipy.sparse.linalg.eigsh``): tens of products where the
    power method needs hundreds when the top eigenvalues are close."""
    if dim == 1:
        return float(np.asarray(matvec(np.ones(1)))[0])
    return largest_eigenpair(matvec, dim, tol, v0)[0]


def largest_eigenpair(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    tol: float = 0.0,
    v0: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """The largest eigenvalue of a symmetric operator of size ``dim`` >= 2 and its unit
    eigenvector, by Lanczos (``eigsh``) to relative accuracy ``tol`` (0: machine precision)
    from ``v0`` (None: ARPACK's random start)."""
    if int(dim) < 2:
        raise ValueError(f"dim must be at least 2 (Lanczos), got {dim!r}")
    op = scipy.sparse.linalg.LinearOperator(  # its dtype given: no probing product
        (dim, dim),
        matvec=lambda v: np.asarray(matvec(np.ravel(v)), dtype=FACTOR_DTYPE),
        dtype=FACTOR_DTYPE,
    )
    start = None if v0 is None else np.asarray(v0, dtype=FACTOR_DTYPE)
    vals, vecs = scipy.sparse.linalg.eigsh(op, k=1, which="LA", tol=tol, v0=start)
    return float(vals[0]), vecs[:, 0]
