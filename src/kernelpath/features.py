"""Random Fourier features (Rahimi & Recht 2007) for the shift-invariant kernels.

For a kernel k(x, z) = κ(x - z) with spectral density p(ω) (Bochner), the map

    φ(x) = sqrt(2 / D) [cos(ω_1^T x + b_1), ..., cos(ω_D^T x + b_D)],   ω_j ~ p,  b_j ~ U[0, 2π)

gives E[φ(x)^T φ(z)] = k(x, z), with an error of order D^(-1/2). The radial kernels of
``kernelpath.kernels`` are scale mixtures of Gaussians, so every ω is a Gaussian vector
z ~ N(0, I_d) times a random scale, divided by the bandwidth σ:

- Gaussian exp(-||δ||^2 / (2σ^2)): ω = z / σ (normal frequencies);
- Matérn ν with length σ (spectral density ∝ (2ν/σ^2 + ||ω||^2)^-(ν + d/2)): the
  multivariate Student t with 2ν degrees of freedom, ω = z sqrt(2ν / u) / σ, u ~ χ²_{2ν};
- Laplacian exp(-||δ|| / σ) = Matérn ν = 1/2: multivariate Cauchy frequencies (t with one
  degree of freedom);
- Cauchy 1 / (1 + ||δ||^2 / σ^2) = ∫ e^-t e^(-t ||δ||^2 / σ^2) dt: ω = z sqrt(2t) / σ,
  t ~ Exp(1) (in one dimension, Laplace frequencies).

Orthogonal random features (Yu et al. 2016, Gaussian kernel): the directions of each block of
d frequencies are the rows of a random orthogonal matrix and their norms are χ_d, so each
ω is still N(0, I/σ^2) but the block is orthogonal: lower variance for the same D.

The frequencies come from three independent streams (directions, scales, phases) spawned
from ``random_state``, drawn feature by feature: a map with D features is the first D
features of a map with more (up to the 2 / D normalization), which the path over D uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from . import _backend as B
from ._threads import fit_threaded
from ._validation import check_int, keep_params, make_rng, validate_X
from .inputs import as_rows, column_means, product, take_rows
from .kernels import Cauchy, Gaussian, Kernel, Laplacian, Matern, make_kernel
from .linalg import nystrom_factor
from .workspace import Workspace

__all__ = [
    "RandomFourierFeatures",
    "NystromFeatures",
    "SUPPORTED_KERNELS",
    "check_rff_kernel",
    "sample_frequencies",
]

SUPPORTED_KERNELS = (Gaussian, Laplacian, Cauchy, Matern)


def check_rff_kernel(kernel: Any, hint: str = "") -> None:
    """ValueError unless ``kernel`` has random Fourier features (``hint`` ends the message)."""
    if not isinstance(kernel, SUPPORTED_KERNELS):
        raise ValueError(
            "kernel must be Gaussian, Laplacian, Cauchy or Matern for random Fourier "
            f"features{hint}, got {kernel!r}"
        )


def _streams(random_state: Any) -> tuple[np.random.Generator, ...]:
    seed = make_rng(random_state)
    return tuple(seed.spawn(3))


def sample_frequencies(
    kernel: Kernel, n_features: int, d: int, random_state: Any, orthogonal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Frequencies ω (n_features, d) and phases b (n_features,) for a resolved kernel.

    Parameters
    ----------
    kernel : Gaussian, Laplacian, Cauchy or Matern
    n_features : int
    d : int
        Input dimension.
    random_state : int, Generator or None
    orthogonal : bool
        Orthogonal blocks (Gaussian kernel only).

    Returns
    -------
    omega : ndarray of shape (n_features, d)
    phase : ndarray of shape (n_features,)
    """
    check_rff_kernel(kernel)
    assert isinstance(kernel, SUPPORTED_KERNELS)  # narrows the type for what follows
    if orthogonal and not isinstance(kernel, Gaussian):
        raise ValueError(f"orthogonal=True needs the Gaussian kernel, got {kernel!r}")
    # resolved: a number, or one width per feature (frequencies divided per feature)
    sigma: Any = kernel.widths(d) if kernel.per_feature else float(kernel.sigma)
    r_dir, r_scale, r_phase = _streams(random_state)
    D = n_features
    if orthogonal:
        blocks = []
        for _ in range(-(-D // d)):
            G = r_dir.standard_normal((d, d))
            Q, R = np.linalg.qr(G)
            Q = Q * np.sign(np.diag(R))[None, :]  # Haar-distributed
            norms = np.sqrt(r_scale.chisquare(d, size=d))
            blocks.append(Q.T * norms[:, None])
        omega = np.vstack(blocks)[:D] / sigma
    else:
        Z = r_dir.standard_normal((D, d))
        if isinstance(kernel, Gaussian):
            scale = np.ones(D)
        elif isinstance(kernel, Cauchy):
            scale = np.sqrt(2.0 * r_scale.standard_exponential(D))
        else:
            nu = 0.5 if isinstance(kernel, Laplacian) else float(kernel.nu)
            scale = np.sqrt(2.0 * nu / r_scale.chisquare(2.0 * nu, size=D))
        if kernel.per_feature:
            omega = Z * scale[:, None] / sigma[None, :]
        else:
            omega = Z * (scale / sigma)[:, None]
    phase = r_phase.uniform(0.0, 2.0 * np.pi, size=D)
    return omega, phase


def _check_center(center: Any, d: int) -> np.ndarray | None:
    """``center`` as float64 of shape (d,), or None; ValueError/TypeError naming it."""
    if center is None:
        return None
    if isinstance(center, str):
        raise ValueError(f"center must be 'mean', None or an array of {d} numbers, got {center!r}")
    try:
        c = np.asarray(center, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"center must be None or an array of {d} numbers: {exc}") from None
    if c.shape != (d,):
        raise ValueError(f"center must have shape ({d},) (one value per feature), got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("center must be finite")
    return c


class _DenseTransformer(TransformerMixin, BaseEstimator):
    """Dense output (sparse input taken); float32 and float64 kept."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class RandomFourierFeatures(_DenseTransformer):
    """Random Fourier feature map φ(x) = sqrt(2/D) cos(W (x - c) + b), a scikit-learn
    transformer (c = 0 unless ``center`` is given).

    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
        Gaussian, Laplacian, Cauchy or Matern (a name uses ``sigma="median"``, resolved on
        the data given to ``fit``).
    n_features : int, default=100
        Number D of features.
    orthogonal : bool, default=False
        Orthogonal random features (Gaussian kernel only).
    random_state : int, Generator or None, default=None
        The same value always gives the same map.
    memory_budget : int, str or None, default=None
        Bytes a block of transformed rows may take (None: half the available memory).
    device : None, "auto", "cpu", "cuda", "cuda:N" or torch.device, default=None
        Where ``transform`` computes (None: where X lives); the output follows the input.
    center : array-like of shape (n_features_in,), "mean" or None, default=None
        The point c the phases are drawn relative to: the map of the inputs x - c. Every c
        gives a map of the same kernel (a kernel does not see a shift); "mean": the column
        means of the X given to ``fit``, so that the map drawn for X is the one drawn for X
        minus its means (the estimators that scale their inputs give the training columns'
        means this way). None: c = 0.

    Attributes
    ----------
    kernel_ : Kernel
        The kernel with its bandwidth resolved.
    frequencies_ : ndarray of shape (n_features, ``n_features_in_``)
        W.
    offsets_ : ndarray of shape (n_features,)
        The phases with the center folded in, b - W c (``transform`` computes
        cos(W x + b - W c)).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from kernelpath import Gaussian, RandomFourierFeatures
    >>> X = np.random.default_rng(0).standard_normal((5, 3))
    >>> rff = RandomFourierFeatures(Gaussian(1.0), n_features=2000, random_state=0).fit(X)
    >>> Phi = rff.transform(X)
    >>> bool(np.abs(Phi @ Phi.T - Gaussian(1.0)(X, X)).max() < 0.1)
    True
    """

    def __init__(
        self,
        kernel: Any = "gaussian",
        *,
        n_features: int = 100,
        orthogonal: bool = False,
        random_state: Any = None,
        memory_budget: Any = None,
        device: Any = None,
        center: Any = None,
    ) -> None:
        keep_params(self, locals())

    def fit(self, X: Any, y: Any = None) -> RandomFourierFeatures:
        """Draw the frequencies (X gives the dimension and, for "median", the bandwidth).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in)
        y : ignored

        Returns
        -------
        self
        """
        B.check_device(self.device)
        X = validate_X(self, X, reset=True)
        D = check_int(self.n_features, "n_features", 1)
        assert D is not None
        Workspace.of(self.memory_budget)  # checked now, used by transform
        if not isinstance(self.orthogonal, (bool, np.bool_)):
            raise TypeError(f"orthogonal must be a bool, got {self.orthogonal!r}")
        rng = make_rng(self.random_state)
        kernel = make_kernel(self.kernel)
        check_rff_kernel(kernel)
        # the median heuristic and the frequencies use separate streams of random_state
        med_rng, freq_rng = rng.spawn(2)
        self.kernel_ = kernel.resolve(X, med_rng)
        given = self.center
        if isinstance(given, str) and given == "mean":
            given = column_means(X)
        center = _check_center(given, X.shape[1])
        self.frequencies_, self.offsets_ = sample_frequencies(
            self.kernel_, D, X.shape[1], freq_rng, bool(self.orthogonal)
        )
        if center is not None:
            self.offsets_ = self.offsets_ - self.frequencies_ @ center
        self._on_device: dict[tuple[str, str], tuple[Any, Any]] = {}
        return self

    def transform(self, X: Any) -> np.ndarray:
        """φ(X), shape (n_samples, n_features), in X's floating dtype.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in)

        Returns
        -------
        ndarray or tensor of shape (n_samples, n_features)
            Like X (a tensor on X's device for a tensor).
        """
        check_is_fitted(self, "frequencies_")
        dev = B.resolve_device(self.device, {"X": X})
        Xv = validate_X(self, X, reset=False)
        out = self.transform_first(as_rows(Xv).to(dev, B.dtype_of(Xv)), len(self.offsets_))
        return B.like_input(out, X)

    def _parameters_like(self, X: Any) -> tuple[Any, Any]:
        """The frequencies and phases on X's backend, device and dtype (kept per device)."""
        if not B.is_tensor(X):
            dt = B.dtype_of(X)
            return self.frequencies_.astype(dt, copy=False), self.offsets_.astype(dt, copy=False)
        cache = self.__dict__.setdefault("_on_device", {})
        key = (str(B.array_device(X)), str(X.dtype))
        if key not in cache:
            dev, dt = B.array_device(X), B.dtype_of(X)
            cache[key] = (
                B.to_device(self.frequencies_, dev, dt),
                B.to_device(self.offsets_, dev, dt),
            )
        return cache[key]

    def transform_first(
        self,
        X: np.ndarray,
        n_features: int,
        out: np.ndarray | None = None,
        normalize: bool = True,
    ) -> np.ndarray:
        """The first ``n_features`` features of the map (no input validation), normalized for
        that many (sqrt(2 / D) cos(...)), or ψ = sqrt(2) cos(...) with ``normalize=False``: a
        map with fewer features is a prefix of this one (the paths over D use it).

        Parameters
        ----------
        X : ndarray or tensor of shape (n_samples, ``n_features_in_``)
            Computed on its backend and device.
        n_features : int
            D <= ``n_features``.
        out : array of shape (n_samples, D) or None
        normalize : bool

        Returns
        -------
        array of shape (n_samples, D), on X's backend
        """
        check_is_fitted(self, "frequencies_")
        Wall, ball = self._parameters_like(X)
        W, b = Wall[:n_features], ball[:n_features]
        scale = float(np.sqrt(2.0 / (n_features if normalize else 1)))
        budget = Workspace.of(self.memory_budget, B.array_device(X)).budget
        itemsize = B.dtype_of(X).itemsize
        need = X.shape[0] * n_features * itemsize
        if out is None and need > budget:
            raise ValueError(
                f"the {X.shape[0]} x {n_features} feature matrix needs {need / 1e9:.2f} GB, more "
                f"than memory_budget={budget / 1e9:.2f} GB: transform fewer rows at a time"
            )
        if out is None:
            out = B.empty((X.shape[0], n_features), X)
        # blocks of ~4 MB: the product, the phase, the cosine and the scaling stay in cache
        # (on CUDA, large blocks)
        target = 512 * 1024**2 if B.array_device(X).is_cuda else 4 * 1024**2
        rows = int(max(1, min(X.shape[0], target // max(1, n_features * itemsize))))
        source = as_rows(X)  # sparse rows: densified blocks, or CSR x dense products
        for s in range(0, X.shape[0], rows):
            blk = out[s : s + rows]
            product(source.read(s, s + rows), W.T, out=blk)
            blk += b
            B.cos_(blk)
            blk *= scale
        return out


class NystromFeatures(_DenseTransformer):
    """Nyström feature map φ(x) = R^T k(C, x) with R R^T = K_CC^+ (``linalg.nystrom_factor``),
    so that φ(x)^T φ(z) = k(x, C) K_CC^+ k(C, z); any kernel.

    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
    n_components : int, default=100
        Number m of centers drawn uniformly from the data given to ``fit`` (at most n).
    random_state : int, Generator or None, default=None
    memory_budget : int, str or None, default=None
    device : None, "auto", "cpu", "cuda", "cuda:N" or torch.device, default=None
        Where ``fit`` and ``transform`` compute (None: where X lives); the output follows the
        input.

    Attributes
    ----------
    kernel_ : Kernel
    centers_ : ndarray or tensor of shape (m, ``n_features_in_``)
        On the device ``fit`` computed on.
    factor_ : ndarray of shape (m, r)
        R; the map has r <= m features (the numerical rank of K_CC).
    """

    def __init__(
        self,
        kernel: Any = "gaussian",
        *,
        n_components: int = 100,
        random_state: Any = None,
        memory_budget: Any = None,
        device: Any = None,
    ) -> None:
        keep_params(self, locals())

    @fit_threaded
    def fit(self, X: Any, y: Any = None) -> NystromFeatures:
        """Draw the centers and factor K_CC.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in)
        y : ignored

        Returns
        -------
        self
        """

        dev = B.resolve_device(self.device, {"X": X})
        X = validate_X(self, X, reset=True)
        X = as_rows(X).to(dev, B.dtype_of(X))
        m = check_int(self.n_components, "n_components", 1)
        assert m is not None
        rng = make_rng(self.random_state)
        self.kernel_ = make_kernel(self.kernel).resolve(X, rng)
        idx = rng.choice(X.shape[0], size=min(m, X.shape[0]), replace=False)
        self.centers_ = take_rows(X, idx)
        ws = Workspace.of(self.memory_budget, dev)
        op = ws.operator(self.centers_, self.centers_, self.kernel_)
        eps = float(np.finfo(B.dtype_of(X)).eps)
        self.factor_ = nystrom_factor(op.center_gram(), dtype_eps=eps).R
        return self

    @fit_threaded
    def transform(self, X: Any) -> np.ndarray:
        """φ(X), shape (n_samples, r).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in)

        Returns
        -------
        ndarray or tensor of shape (n_samples, r)
            Like X.
        """

        check_is_fitted(self, "factor_")
        dev = B.resolve_device(self.device, {"X": X})
        Xv = validate_X(self, X, reset=False)
        dt = B.dtype_of(Xv)
        op = Workspace.of(self.memory_budget, dev).operator(
            as_rows(Xv).to(dev, dt), B.to_device(self.centers_, dev, dt), self.kernel_, cache=False
        )
        return B.like_input(op.matvec(self.factor_.astype(dt), native=True), X)
