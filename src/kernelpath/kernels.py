"""Kernel functions.

Every kernel is a small parameter object with

- ``K(X, Z)`` -> the block ``[k(x_i, z_j)]`` of shape ``(len(X), len(Z))``, in the inputs' dtype;
- ``K.diag(X)`` -> ``[k(x_i, x_i)]`` of shape ``(len(X),)``;
- ``K.resolve(X, random_state)`` -> a copy with data-dependent parameters (``sigma="median"``)
  replaced by numbers computed on ``X``.

Distance-based kernels compute ``||x - z||^2 = ||x||^2 + ||z||^2 - 2 <x, z>`` with one matrix
product and clip it at zero, so rounding never produces a negative squared distance. The
transforms are applied in place on the distance block, so a block costs one n x m buffer.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ._backend import get_namespace

__all__ = [
    "Kernel",
    "Gaussian",
    "Laplacian",
    "Matern",
    "Cauchy",
    "Polynomial",
    "Linear",
    "make_kernel",
    "median_distance",
    "squared_distances",
]

_MEDIAN_SUBSAMPLE = 1000


def squared_distances(
    X: np.ndarray,
    Z: np.ndarray,
    x_sq: np.ndarray | None = None,
    z_sq: np.ndarray | None = None,
) -> np.ndarray:
    """Squared Euclidean distances ``||x_i - z_j||^2``, shape ``(len(X), len(Z))``, never negative.

    ``x_sq`` and ``z_sq`` are the optional precomputed squared row norms.
    """
    xp = get_namespace(X, Z)
    if x_sq is None:
        x_sq = xp.einsum("ij,ij->i", X, X)
    if z_sq is None:
        z_sq = xp.einsum("ij,ij->i", Z, Z)
    D = X @ Z.T
    D *= -2.0
    D += x_sq[:, None]
    D += z_sq[None, :]
    xp.maximum(D, 0.0, out=D)
    return D


def median_distance(X: np.ndarray, random_state: Any = None) -> float:
    """Median pairwise Euclidean distance of ``X`` (on a subsample of at most 1000 rows)."""
    rng = np.random.default_rng(random_state)
    X = np.asarray(X)
    if len(X) > _MEDIAN_SUBSAMPLE:
        X = X[rng.choice(len(X), _MEDIAN_SUBSAMPLE, replace=False)]
    D = squared_distances(X, X)
    iu = np.triu_indices(len(X), k=1)
    d = np.sqrt(D[iu])
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


class Kernel:
    """Base class: parameters are the ``__init__`` arguments (scikit-learn style)."""

    #: True for kernels of the form k(x, z) = phi(||x - z||), with k(x, x) = 1.
    distance_based = False

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Kernel:
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for kernel {type(self).__name__}")
            setattr(self, key, value)
        self._check()
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(map(repr, self.get_params().values()))))

    def _check(self) -> None:
        """Validate parameters; raise ValueError naming the bad one."""

    def resolve(self, X: np.ndarray, random_state: Any = None) -> Kernel:
        """Return a copy whose data-dependent parameters are fixed using ``X``."""
        return type(self)(**self.get_params())

    def __call__(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Kernel block ``[k(x_i, z_j)]`` of shape ``(len(X), len(Z))``."""
        return self.block(X, Z)

    def block(
        self,
        X: np.ndarray,
        Z: np.ndarray,
        x_sq: np.ndarray | None = None,
        z_sq: np.ndarray | None = None,
        prepared: Any = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Kernel block with optional precomputed squared norms, ``prepare(Z)`` output and
        a C-contiguous output buffer ``out`` of shape (len(X), len(Z))."""
        raise NotImplementedError

    def prepare(self, Z: np.ndarray, z_sq: np.ndarray | None = None) -> Any:
        """Precompute what depends on Z alone (reused for every block against Z)."""
        return None

    def diag(self, X: np.ndarray) -> np.ndarray:
        """Diagonal ``[k(x_i, x_i)]``, shape ``(len(X),)``."""
        raise NotImplementedError

    @property
    def needs_norms(self) -> bool:
        return self.distance_based


class _RadialKernel(Kernel):
    """k(x, z) = phi(||x - z||^2) with a bandwidth ``sigma`` (number or "median").

    Blocks are computed as ``phi`` of ``s * ||x - z||^2`` where the scale ``s`` is folded into
    one augmented matrix product ``[X, ||x||^2, 1] @ [-2 s Z, s, s ||z||^2].T``, then clipped
    to the sign of ``s`` (a squared distance is never negative). The right factor depends only
    on Z and is prepared once per operator (``prepare``).
    """

    distance_based = True
    #: True when the kernel depends on ||x - z|| itself (a square root), not on its square.
    _uses_distance = False

    def __init__(self, sigma: float | str = 1.0) -> None:
        self.sigma = sigma
        self._check()

    def _check(self) -> None:
        s = self.sigma
        if isinstance(s, str):
            if s != "median":
                raise ValueError(f"sigma must be a positive number or 'median', got {s!r}")
        elif isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
            raise TypeError(f"sigma must be a positive number or 'median', got {s!r}")
        elif not (np.isfinite(s) and s > 0):
            raise ValueError(f"sigma must be a positive finite number, got {s!r}")

    def _sigma(self) -> float:
        if isinstance(self.sigma, str):
            raise ValueError(
                f"{type(self).__name__}(sigma={self.sigma!r}) must be resolved on data first "
                "(call kernel.resolve(X))"
            )
        return float(self.sigma)

    def resolve(self, X: np.ndarray, random_state: Any = None) -> Kernel:
        params = self.get_params()
        if params["sigma"] == "median":
            params["sigma"] = median_distance(X, random_state)
        return type(self)(**params)

    def diag(self, X: np.ndarray) -> np.ndarray:
        xp = get_namespace(X)
        return xp.ones(len(X), dtype=X.dtype)

    def _scale(self) -> float:
        """The factor s applied to squared distances before ``_transform``."""
        return 1.0

    def prepare(self, Z: np.ndarray, z_sq: np.ndarray | None = None) -> np.ndarray:
        xp = get_namespace(Z)
        s = self._scale()
        dtype = xp.float64 if self._uses_distance else Z.dtype
        Z = Z.astype(dtype, copy=False)
        if z_sq is None or z_sq.dtype != dtype:
            z_sq = xp.einsum("ij,ij->i", Z, Z)
        out = xp.empty((len(Z), Z.shape[1] + 2), dtype=dtype)
        out[:, :-2] = Z
        out[:, :-2] *= -2.0 * s
        out[:, -2] = s
        out[:, -1] = s * z_sq
        return out

    def block(self, X, Z, x_sq=None, z_sq=None, prepared=None, out=None):  # type: ignore[no-untyped-def]
        xp = get_namespace(X, Z)
        if prepared is None:
            prepared = self.prepare(Z, z_sq)
        # sqrt(d^2) turns the Gram trick's float32 rounding (~1e-7 ||x||^2) into distance
        # errors of ~3e-4 ||x||: kernels of the distance itself compute it in float64.
        work = xp.float64 if (self._uses_distance and X.dtype != xp.float64) else X.dtype
        Xw = X.astype(work, copy=False)
        if x_sq is None or x_sq.dtype != work:
            x_sq = xp.einsum("ij,ij->i", Xw, Xw)
        Xa = xp.empty((len(X), X.shape[1] + 2), dtype=work)
        Xa[:, :-2] = Xw
        Xa[:, -2] = x_sq
        Xa[:, -1] = 1.0
        if work == X.dtype:
            D = xp.matmul(Xa, prepared.T, out=out)
        else:
            D = Xa @ prepared.T
        if self._scale() < 0:
            xp.minimum(D, 0.0, out=D)
        else:
            xp.maximum(D, 0.0, out=D)
        D = self._transform(D)
        if D.dtype != X.dtype:
            if out is None:
                return D.astype(X.dtype)
            out[...] = D
            return out
        return D

    def _transform(self, D: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class Gaussian(_RadialKernel):
    """Gaussian kernel ``k(x, z) = exp(-||x - z||^2 / (2 sigma^2))``.

    Parameters
    ----------
    sigma : float or "median", default=1.0
        Bandwidth; "median" uses the median pairwise distance of the training inputs.
    """

    def _scale(self) -> float:
        return -0.5 / self._sigma() ** 2

    def _transform(self, D):  # type: ignore[no-untyped-def]
        xp = get_namespace(D)
        return xp.exp(D, out=D)


class Laplacian(_RadialKernel):
    """Laplacian kernel ``k(x, z) = exp(-||x - z|| / sigma)``."""

    _uses_distance = True

    def _transform(self, D):  # type: ignore[no-untyped-def]
        xp = get_namespace(D)
        xp.sqrt(D, out=D)
        D *= -1.0 / self._sigma()
        return xp.exp(D, out=D)


class Cauchy(_RadialKernel):
    """Cauchy kernel ``k(x, z) = 1 / (1 + ||x - z||^2 / sigma^2)``."""

    def _scale(self) -> float:
        return 1.0 / self._sigma() ** 2

    def _transform(self, D):  # type: ignore[no-untyped-def]
        xp = get_namespace(D)
        D += 1.0
        return xp.reciprocal(D, out=D)


class Matern(_RadialKernel):
    """Matern kernel with smoothness ``nu`` in {0.5, 1.5, 2.5}; ``r = ||x - z|| / sigma``.

    - nu = 0.5: ``exp(-r)`` (the Laplacian kernel);
    - nu = 1.5: ``(1 + sqrt(3) r) exp(-sqrt(3) r)``;
    - nu = 2.5: ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``.

    Parameters
    ----------
    sigma : float or "median", default=1.0
    nu : {0.5, 1.5, 2.5}, default=1.5
    """

    _uses_distance = True

    def __init__(self, sigma: float | str = 1.0, nu: float = 1.5) -> None:
        self.nu = nu
        super().__init__(sigma)

    def _check(self) -> None:
        super()._check()
        if self.nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"nu must be one of 0.5, 1.5, 2.5, got {self.nu!r}")

    def _transform(self, D):  # type: ignore[no-untyped-def]
        xp = get_namespace(D)
        xp.sqrt(D, out=D)
        if self.nu == 0.5:
            D *= -1.0 / self._sigma()
            return xp.exp(D, out=D)
        c = (3.0 if self.nu == 1.5 else 5.0) ** 0.5 / self._sigma()
        D *= c  # D = c * ||x - z||
        poly = 1.0 + D
        if self.nu == 2.5:
            poly += D * D / 3.0
        D *= -1.0
        xp.exp(D, out=D)
        D *= poly
        return D


class Polynomial(Kernel):
    """Polynomial kernel ``k(x, z) = (gamma <x, z> + coef0) ** degree``.

    Parameters
    ----------
    degree : int, default=3
    gamma : float or None, default=None
        ``None`` means ``1 / n_features``.
    coef0 : float, default=1.0
    """

    def __init__(self, degree: int = 3, gamma: float | None = None, coef0: float = 1.0) -> None:
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self._check()

    def _check(self) -> None:
        if isinstance(self.degree, bool) or not isinstance(self.degree, (int, np.integer)):
            raise TypeError(f"degree must be a positive integer, got {self.degree!r}")
        if self.degree < 1:
            raise ValueError(f"degree must be a positive integer, got {self.degree!r}")
        if self.gamma is not None and not (np.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"gamma must be positive or None, got {self.gamma!r}")
        if not np.isfinite(self.coef0) or self.coef0 < 0:
            raise ValueError(f"coef0 must be a non-negative finite number, got {self.coef0!r}")

    def _gamma(self, X: np.ndarray) -> float:
        return 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)

    def block(self, X, Z, x_sq=None, z_sq=None, prepared=None, out=None):  # type: ignore[no-untyped-def]
        xp = get_namespace(X, Z)
        B = xp.matmul(X, Z.T, out=out)
        B *= self._gamma(X)
        B += self.coef0
        return xp.power(B, self.degree, out=B)

    def diag(self, X: np.ndarray) -> np.ndarray:
        xp = get_namespace(X)
        return (self._gamma(X) * xp.einsum("ij,ij->i", X, X) + self.coef0) ** self.degree


class Linear(Kernel):
    """Linear kernel ``k(x, z) = <x, z>``."""

    def __init__(self) -> None:
        pass

    def block(self, X, Z, x_sq=None, z_sq=None, prepared=None, out=None):  # type: ignore[no-untyped-def]
        return get_namespace(X, Z).matmul(X, Z.T, out=out)

    def diag(self, X: np.ndarray) -> np.ndarray:
        xp = get_namespace(X)
        return xp.einsum("ij,ij->i", X, X)


_BY_NAME: dict[str, type[Kernel]] = {
    "gaussian": Gaussian,
    "rbf": Gaussian,
    "laplacian": Laplacian,
    "matern": Matern,
    "cauchy": Cauchy,
    "polynomial": Polynomial,
    "linear": Linear,
}


def make_kernel(kernel: Any) -> Kernel:
    """Turn a kernel argument (a Kernel or a name) into a Kernel instance.

    Names: "gaussian" (alias "rbf"), "laplacian", "matern", "cauchy" (these four with
    ``sigma="median"``), "polynomial", "linear".
    """
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str):
        key = kernel.lower()
        if key not in _BY_NAME:
            raise ValueError(
                f"kernel must be a Kernel or one of {sorted(_BY_NAME)}, got {kernel!r}"
            )
        cls = _BY_NAME[key]
        if issubclass(cls, _RadialKernel):
            return cls(sigma="median")
        return cls()
    raise TypeError(f"kernel must be a Kernel instance or a name, got {type(kernel).__name__}")
