"""The radial kernels: one width, one per feature or a learned metric (``_RadialKernel``),
and Gaussian, Laplacian, Cauchy and Matern."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _backend as B
from .. import _fused
from ..inputs import dense_columns, is_sparse, product, row_sq_norms
from .base import (
    _LOG2E,
    AGOP_NAMES,
    AUTO_WIDTH_FACTORS,
    LEARNED_WIDTHS,
    SIGMA_MAX,
    SIGMA_MIN,
    WIDTH_NAMES,
    Kernel,
    SparseFactor,
    _is_width_vector,
    median_distance,
    width_units_limit,
)


class NarrowWidthError(ValueError):
    """A width too narrow for the magnitude of the data (``_RadialKernel.check_data``)."""


class _RadialKernel(Kernel):
    """k(x, z) = phi(||x - z||^2) with a bandwidth ``sigma``: a number, one positive width per
    feature (1-D array), "median", "auto" (a grid of widths searched by a fit), "ard" (one
    width per feature learned by a fit, ``kernelpath.learn_widths``), "agop" (a metric
    learned by a fit from its predictor's gradients, ``kernelpath.fitting.agop``) or
    "agop_diagonal" (its diagonal only).

    ``metric``, a matrix L of shape (n_features, r) with r <= n_features, measures distances
    in the coordinates x L: ``||(x - z) L||^2 / sigma^2`` (one width ``sigma``).

    Blocks are computed as ``phi`` of ``s * ||x - z||^2`` where the scale ``s`` is folded into
    one augmented matrix product ``[X, ||x||^2, 1] @ [-2 s Z, s, s ||z||^2].T``, then clipped
    to the sign of ``s`` (a squared distance is never negative). The right factor depends only
    on Z and is prepared once per operator (``prepare``).
    """

    distance_based = True
    #: Whether the scaled squared distances are always clipped to their sign before the
    #: transform (a square root or a pole would turn rounding into NaN or a wrong value);
    #: otherwise only when the rounding can matter (``clip_needed``).
    _needs_clip = True
    #: Largest rounding error of s ||x - z||^2 left unclipped (kernel values at most this
    #: far above 1).
    CLIP_TOLERANCE = 1e-12
    #: Whether ``_transform`` is exactly exp (exp2 with ``base2``) of the scaled squared
    #: distances, so that ``_fused.exp_block`` may compute a block in one pass.
    _fused_exp = False
    #: No metric: the default of kernels restored from model files written before it existed.
    metric: Any = None
    #: (the metric, ``_metric_axes`` of it): found once per metric, not stored in files.
    _axes: Any = None

    def __init__(self, sigma: float | str = "auto", metric: Any = None) -> None:
        self.sigma = sigma
        self.metric = metric
        self._check()

    def _check(self) -> None:
        s = self.sigma
        self._check_metric()
        if isinstance(s, str):
            if s not in WIDTH_NAMES:
                raise ValueError(
                    f"sigma must be a positive number, an array of them (one per feature), "
                    f"'median', 'auto', 'ard', 'agop' or 'agop_diagonal', got {s!r}"
                )
        elif _is_width_vector(s):
            self._check_widths(s)
        elif isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
            raise TypeError(
                f"sigma must be a positive number, a 1-D array of them (one per feature), "
                f"'median', 'auto', 'ard', 'agop' or 'agop_diagonal', got {s!r} (for a path "
                "over widths give a sequence of kernels)"
            )
        elif not (np.isfinite(s) and s > 0):
            raise ValueError(f"sigma must be a positive finite number, got {s!r}")
        elif not SIGMA_MIN <= s <= SIGMA_MAX:
            raise ValueError(
                f"sigma must be in [{SIGMA_MIN:g}, {SIGMA_MAX:g}] (a kernel computes with "
                f"1 / sigma^2, which is not representable outside), got {s!r}"
            )

    def _check_metric(self) -> None:
        L = self.metric
        if L is None:
            return
        if isinstance(L, str) or not hasattr(L, "__len__"):
            raise TypeError(
                f"metric must be None or a matrix of shape (n_features, r), got {type(L).__name__}"
            )
        try:
            arr = np.asarray(B.to_numpy(L), dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError("metric: the matrix must hold numbers") from None
        if np.asarray(B.to_numpy(L)).dtype == bool:
            raise TypeError("metric: the matrix must hold numbers, got booleans")
        if arr.ndim != 2 or arr.size == 0 or arr.shape[1] > arr.shape[0]:
            raise ValueError(
                "metric must be a non-empty matrix of shape (n_features, r) with "
                f"r <= n_features, got shape {arr.shape}"
            )
        if not np.isfinite(arr).all():
            raise ValueError("metric: every entry must be finite")
        if not np.any(arr):
            raise ValueError("metric: the matrix is zero (every distance would be 0)")
        s = self.sigma
        if _is_width_vector(s) or (isinstance(s, str) and s in LEARNED_WIDTHS):
            raise ValueError(
                f"metric: give one width sigma (a number, 'median' or 'auto') with a metric, "
                f"got sigma={s!r}"
            )

    def __repr__(self) -> str:
        params = self.get_params()
        L = params.pop("metric")
        args = [f"{k}={v!r}" for k, v in params.items()]
        if L is not None:  # the matrix by its shape (the numbers are in get_params)
            args.append(f"metric=<{np.shape(L)[0]} x {np.shape(L)[1]} matrix>")
        return f"{type(self).__name__}({', '.join(args)})"

    @property
    def _L(self) -> np.ndarray | None:
        """The metric as a float64 NumPy matrix (None without one)."""
        if self.metric is None:
            return None
        return np.asarray(B.to_numpy(self.metric), dtype=np.float64)

    def _metric_for(self, n_features: int) -> np.ndarray | None:
        """The metric (float64) checked against data of ``n_features`` columns (None
        without one)."""
        L = self._L
        if L is not None and L.shape[0] != n_features:
            raise ValueError(
                f"metric has {L.shape[0]} rows (one per feature) but X has {n_features} features"
            )
        return L

    def coordinates(self, X: Any) -> Any:
        """X in the kernel's coordinates before the width: ``X @ metric`` (X itself without a
        metric), on X's backend and dtype, shape (len(X), r). A metric whose columns are
        single features, scaled (``sigma="agop_diagonal"``'s), selects and scales those
        columns (cost: the rows' entries, not their product with a d x r matrix)."""
        L = self._metric_for(int(X.shape[1]))
        if L is None:
            return X
        axes = self._metric_axes()
        if axes is None:
            return X @ B.astype(B.like_input(L, X), B.dtype_of(X))
        idx, w = axes
        C = dense_columns(X, idx)
        return C * B.astype(B.like_input(w, C), B.dtype_of(C))[None, :]

    def _metric_axes(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(feature of each column, its scale) when every column of the metric is one
        feature's, scaled, and no feature is in two columns; else None. Kept for the metric
        it was found for (``_axes``)."""
        cached = self._axes
        if cached is not None and cached[0] is self.metric:
            return cached[1]
        L = self._L
        out = None
        if L is not None:
            nz = L != 0
            if np.all(nz.sum(axis=0) == 1) and np.all(nz.sum(axis=1) <= 1):
                idx = np.argmax(nz, axis=0)
                out = (idx, L[idx, np.arange(L.shape[1])])
        self._axes = (self.metric, out)
        return out

    def _coordinates_and_norms(self, X: Any, sq: Any) -> tuple[Any, Any]:
        """(X's coordinates, their squared weighted norms): ``sq`` when given, else computed
        from the coordinates (X @ metric is formed once)."""
        C = self.coordinates(X)
        if sq is None:
            sq = B.sq_norms(C) if self.metric is not None else self.sq_norms(X)
        return C, sq

    def coordinate_matrix(self, n_features: int) -> np.ndarray:
        """A (n_features x r) such that the kernel is phi(||x A - z A||^2): L / sigma with a
        ``metric`` L, diag(1 / sigma_l) for per-feature widths, I / sigma for one width. The
        kernel's distance is (x - z)^T A A^T (x - z)."""
        L = self._metric_for(n_features)
        if L is not None:
            return L / self._sigma()
        return np.diag(1.0 / self.widths(n_features))

    @staticmethod
    def _check_widths(s: Any) -> None:
        try:
            arr = np.asarray(s, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"sigma: the per-feature widths must be numbers, got {s!r}") from None
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(
                f"sigma: per-feature widths are a non-empty 1-D array, got shape {arr.shape}"
            )
        if np.asarray(s).dtype == bool:
            raise TypeError("sigma: the per-feature widths must be numbers, got booleans")
        if not (np.isfinite(arr).all() and (arr > 0).all()):
            raise ValueError(
                f"sigma: every per-feature width must be positive and finite, got {s!r}"
            )
        if not ((arr >= SIGMA_MIN).all() and (arr <= SIGMA_MAX).all()):
            raise ValueError(
                f"sigma: every per-feature width must be in [{SIGMA_MIN:g}, {SIGMA_MAX:g}] "
                f"(a kernel computes with 1 / sigma^2), got {s!r}"
            )

    def check_data(self, max_abs: Any, name: str = "X", dtype: Any = np.float64) -> None:
        """Refuse a width too narrow for this data's magnitude: kernel blocks are computed
        from norms, d^2 = ||x||^2 + ||z||^2 - 2 <x, z>, whose rounding is about
        4 (d + 2) eps max ||x||^2; measured in widths it must stay below 1, else even
        k(x, x) comes out wrong (0 instead of 1 at sigma = 1e-140 on unit data) and, further
        down, the squares overflow. The rule: ||x / sigma|| <= ``width_units_limit(d)``
        for every row x (bounded by the largest |x_l| of each feature). A narrow width on
        data near the origin is allowed (a nearly diagonal kernel is a valid one); far from
        it, center X.

        Parameters
        ----------
        max_abs : array of shape (n_features,)
            The largest |x_l| of each feature of the data the kernel meets.
        name : str, default="X"
            The data's name in the error.
        dtype : dtype, default=np.float64
            The precision the blocks are computed in.
        """
        if isinstance(self.sigma, str):
            return
        m = np.asarray(B.to_numpy(max_abs), dtype=np.float64).ravel()
        L = self._metric_for(len(m))
        if L is not None:  # ||x L|| <= sum_l |x_l| ||L_l||: the bound in one width
            m = np.array([float(m @ np.linalg.norm(L, axis=1))])
        w = self.widths(len(m))
        lim = width_units_limit(len(m) if L is None else L.shape[1], dtype)
        with np.errstate(over="ignore"):
            norm = float(np.sqrt(np.sum((m / w) ** 2)))
        if norm <= lim:
            return
        j = int(np.argmax(m / w))
        which = f" (feature {j})" if self.per_feature else ""
        raise NarrowWidthError(
            f"sigma: a width of {w[j]:.3g}{which} is too narrow for the values of {name} (up "
            f"to {m[j]:.3g}): the rounding of squared distances computed from norms, "
            f"measured in widths, exceeds 1 (||x / sigma|| up to {norm:.3g}, at most "
            f"{lim:.3g} in {np.dtype(dtype).name}); give sigma >= {w[j] * norm / lim:.3g} "
            f"(widths up to {SIGMA_MAX:g}), or center the data"
        )

    def on_data(self, X: Any) -> Kernel:
        if isinstance(self.sigma, str) and self.sigma in ("auto", "median"):
            return self.data_width(median_distance(X, 0, None, self._L))
        return self

    def one_width(self) -> float | None:
        if self.per_feature or isinstance(self.sigma, str):
            return None
        return float(self.sigma)

    @property
    def per_feature(self) -> bool:
        """Whether ``sigma`` is one width per feature."""
        return _is_width_vector(self.sigma)

    def widths(self, n_features: int | None = None) -> np.ndarray:
        """The widths as a float64 array: one per feature for ``n_features`` (a single width
        repeated), or the per-feature array (checked against ``n_features`` when given)."""
        if isinstance(self.sigma, str):
            self._sigma()  # raises: not resolved
        if self.per_feature:
            w = np.asarray(self.sigma, dtype=np.float64)
            if n_features is not None and len(w) != n_features:
                raise ValueError(
                    f"sigma has {len(w)} widths (one per feature) but X has {n_features} features"
                )
            return w
        return np.full(1 if n_features is None else n_features, float(self.sigma))

    def _sigma(self) -> float:
        """The width that ``_scale`` and ``_transform`` use: ``sigma``, or 1 when the widths
        are per feature (then they are folded into the distances)."""
        if isinstance(self.sigma, str):
            if self.sigma == "ard":
                raise ValueError(
                    f"{type(self).__name__}(sigma='ard'): the widths are learned by an "
                    "estimator's fit or kernelpath.learn_widths, not usable as they are"
                )
            if self.sigma in AGOP_NAMES:
                raise ValueError(
                    f"{type(self).__name__}(sigma={self.sigma!r}): the metric is learned by an "
                    "estimator's fit, not usable as it is"
                )
            raise ValueError(
                f"{type(self).__name__}(sigma={self.sigma!r}) must be resolved on data first "
                "(call kernel.resolve(X))"
            )
        if self.per_feature:
            return 1.0
        return float(self.sigma)

    def _feature_weights(self, like: Any) -> Any:
        """1 / sigma_l^2 on ``like``'s backend and dtype (None for one width)."""
        if not self.per_feature:
            return None
        w = 1.0 / self.widths(int(like.shape[1])) ** 2
        return B.astype(B.like_input(w, like), B.dtype_of(like))

    def sq_norms(self, X: Any) -> Any:
        if self.metric is not None:
            return B.sq_norms(self.coordinates(X))
        w = self._feature_weights(X)
        if w is None:
            return row_sq_norms(X)
        if is_sparse(X):
            return np.asarray(X.multiply(X) @ w).ravel()
        if B.is_tensor(X):
            return (X * X) @ w
        # row by row in one order, whatever the rows around it (a matrix-vector product
        # rounds a row by where it falls in the kernel's groups of rows): blocks of rows
        # get the norms the whole array gets
        return np.einsum("ij,j->i", X * X, w)

    def max_feature_weight(self) -> float:
        L = self._L
        if L is not None:
            return float(np.linalg.norm(L, 2) ** 2)
        if not self.per_feature:
            return 1.0
        return float((1.0 / self.widths() ** 2).max())

    def resolve(self, X: np.ndarray, random_state: Any = None) -> Kernel:
        params = self.get_params()
        if self.per_feature:
            self.widths(int(X.shape[1]))  # one per feature of X
            return type(self)(**params)
        if params["sigma"] == "ard":
            raise ValueError(
                f"{type(self).__name__}(sigma='ard') has widths learned from the targets: fit "
                "an estimator with it, or call kernelpath.learn_widths(kernel, X, y)"
            )
        if params["sigma"] in AGOP_NAMES:
            raise ValueError(
                f"{type(self).__name__}(sigma={params['sigma']!r}) has a metric learned from "
                "the targets: fit an estimator with it"
            )
        if params["sigma"] == "auto":
            raise ValueError(
                f"{type(self).__name__}(sigma='auto') is a grid of widths, not one kernel: "
                "use kernel.candidates(X) (estimators search it)"
            )
        if params["sigma"] == "median":
            return self.data_width(median_distance(X, random_state, None, self._L))
        return type(self)(**params)

    def candidates(
        self, X: np.ndarray, random_state: Any = None, scales: Any = None
    ) -> list[Kernel]:
        if scales is None or self.metric is not None:  # a metric carries its own units
            if self.per_feature or self.sigma != "auto":
                return [self.resolve(X, random_state)]
            med = median_distance(X, random_state, None, self._L)
            return [self.data_width(med * f) for f in AUTO_WIDTH_FACTORS]
        # the inputs scaled: widths in the units of X / scales, folded in per feature
        s = np.asarray(scales, dtype=np.float64)
        if self.sigma in LEARNED_WIDTHS:
            self.resolve(X, random_state)  # raises
        if isinstance(self.sigma, str):
            med = median_distance(X, random_state, s)
            factors = AUTO_WIDTH_FACTORS if self.sigma == "auto" else (1.0,)
            return [self.data_width(med * f * s) for f in factors]
        return [self.set_width(self.widths(len(s)) * s)]

    def data_width(self, sigma: Any) -> Kernel:
        """``set_width`` for a width taken from the data (its distances, its spreads): out
        of [SIGMA_MIN, SIGMA_MAX] it is the data's scale that is refused, not a sigma the
        user did not give."""
        w = np.asarray(sigma, dtype=np.float64)
        if not (np.all(w >= SIGMA_MIN) and np.all(w <= SIGMA_MAX)):
            raise ValueError(
                f"X: the widths a fit takes from the data's distances and spreads (up to "
                f"{float(w.max()):.3g}, down to {float(w.min()):.3g}) leave "
                f"[{SIGMA_MIN:g}, {SIGMA_MAX:g}], where 1 / sigma^2 is representable; "
                "rescale the features"
            )
        return self.set_width(sigma)

    def scaled_by(self, scale: bool | str) -> bool:
        if self.metric is not None:  # the metric is in the units of the raw features
            return False
        return scale is True or (scale == "auto" and isinstance(self.sigma, str))

    def set_width(self, sigma: Any) -> Kernel:
        """A copy with the width ``sigma``, a number or one per feature (the other
        parameters unchanged)."""
        params = self.get_params()
        params["sigma"] = (
            np.asarray(sigma, dtype=np.float64).copy() if _is_width_vector(sigma) else float(sigma)
        )
        return type(self)(**params)

    def _diag(self, X: Any) -> Any:
        out = B.empty((int(X.shape[0]),), X)
        out[:] = 1.0
        return out

    def _scale(self, base2: bool = False) -> float:
        """The factor s applied to squared distances before ``_transform`` (``base2``: for a
        transform that takes exponentials in base 2, see ``_backend.base2_exp``)."""
        return 1.0

    def prepare(self, Z: Any, z_sq: np.ndarray | None = None, sparse_rows: bool = False) -> Any:
        """The centers' part of the augmented product, (m, r + 2): [-2 s W z, s, s ||z||^2]
        (W the per-feature weights, s the transform's scale); with ``sparse_rows`` (the
        blocks will be sparse rows) a ``SparseFactor`` instead, whose linear part is laid out
        for the sparse x dense product."""
        if sparse_rows and self.metric is None:
            return self._sparse_factor(Z, z_sq)
        if Z.shape[0]:
            if is_sparse(Z):
                Z = Z.toarray()
            top = Z.abs().amax(dim=0) if B.is_tensor(Z) else np.abs(Z).max(axis=0)
            self.check_data(B.to_numpy(top), "the centers", B.dtype_of(Z))
        dtype = np.float64 if self._uses_distance else B.dtype_of(Z)
        Z = B.astype(Z, dtype)
        keep = z_sq is not None and B.dtype_of(z_sq) == dtype
        Z, z_sq = self._coordinates_and_norms(Z, z_sq if keep else None)
        s = self._scale(B.base2_exp(Z))
        out = B.empty((Z.shape[0], Z.shape[1] + 2), Z, dtype)
        out[:, :-2] = Z
        w = self._feature_weights(Z)
        if w is not None:  # -2 <x, z>_W = -2 <x, W z>
            out[:, :-2] *= w[None, :]
        out[:, :-2] *= -2.0 * s
        out[:, -2] = s
        out[:, -1] = s * z_sq
        return out

    def _sparse_factor(self, Z: Any, z_sq: Any) -> SparseFactor:
        """``prepare`` for sparse rows: (-2 s W Z^T as a (d, m) C-contiguous array, or sparse
        for sparse centers, s, s ||z||^2)."""
        dtype = np.dtype(np.float64) if self._uses_distance else B.dtype_of(Z)
        if Z.shape[0]:
            top = abs(Z).max(axis=0)
            top = top.toarray() if is_sparse(top) else top
            self.check_data(np.asarray(top).ravel(), "the centers", B.dtype_of(Z))
        Z = Z.astype(dtype)
        if z_sq is None or B.dtype_of(z_sq) != dtype:
            z_sq = self.sq_norms(Z)
        s = self._scale(False)
        w = self._feature_weights(Z)
        if is_sparse(Z):
            lin = Z.multiply(w[None, :]) if w is not None else Z
            lin = (lin * (-2.0 * s)).T.tocsr()
        else:
            lin = np.array(Z.T, dtype=dtype, order="C")
            if w is not None:
                lin *= w[:, None]
            lin *= -2.0 * s
        return SparseFactor(lin, s, s * np.asarray(z_sq, dtype=dtype))

    def clip_needed(self, x_sq_max: float, z_sq_max: float, d: int, dtype: Any) -> bool:
        """Whether clipping s d^2 to its sign can change a block by more than
        ``CLIP_TOLERANCE``: the augmented product's rounding is at most
        ``2 (d + 2) eps |s| (max ||x||^2 + max ||z||^2)``. A Gaussian block of data near the
        origin skips the clipping pass (a fifth of a streamed pass); far from it (large
        norms, small sigma) the clip keeps the values in [0, 1]."""
        if self._needs_clip:
            return True
        eps = float(np.finfo(np.dtype(dtype)).eps)
        bound = 2 * (d + 2) * eps * abs(self._scale()) * (x_sq_max + z_sq_max)  # weighted
        return not bound <= self.CLIP_TOLERANCE

    def block(self, X, Z, x_sq=None, z_sq=None, prepared=None, out=None, work=None, clip=None):
        """The block; ``work`` is an optional buffer of shape (len(X), d + 2) for the
        augmented left factor (reused block after block by the operator); ``clip`` whether
        to clip the scaled squared distances to their sign (None: ``clip_needed``)."""
        if self.per_feature:
            self.widths(int(X.shape[1]))  # one per feature
        if is_sparse(X) and self.metric is None:
            return self._sparse_block(X, Z, x_sq, z_sq, prepared, out, clip)
        if is_sparse(X):  # with a metric the block's rows are densified (x L is dense)
            X, x_sq, work = X.toarray(), None, None
        if isinstance(prepared, SparseFactor):  # prepared for sparse rows: dense ones here
            prepared = None
        if is_sparse(Z):
            Z = Z.toarray()
        if prepared is None:
            prepared = self.prepare(Z, z_sq)
        # sqrt(d^2) turns the Gram trick's float32 rounding (~1e-7 ||x||^2) into distance
        # errors of ~3e-4 ||x||: kernels of the distance itself compute it in float64.
        in_dtype = B.dtype_of(X)
        wdt = np.dtype(np.float64) if (self._uses_distance and in_dtype != np.float64) else in_dtype
        keep = x_sq is not None and B.dtype_of(x_sq) == wdt
        Xw, x_sq = self._coordinates_and_norms(B.astype(X, wdt), x_sq if keep else None)
        r = int(Xw.shape[1])
        if (
            work is None
            or B.dtype_of(work) != wdt
            or work.shape[0] < X.shape[0]
            or work.shape[1] < r + 2
        ):
            work = B.empty((X.shape[0], r + 2), Xw, wdt)
        Xa = work[: X.shape[0], : r + 2]
        Xa[:, :-2] = Xw
        Xa[:, -2] = x_sq
        Xa[:, -1] = 1.0
        # a squared distance is never negative: clip the rounding of the Gram trick where it
        # matters (a square root, or a pole); exp(s d^2) of a rounding-level positive s d^2
        # is 1 + 1e-15, harmless, so the Gaussian skips this pass over the block
        if clip is None:
            zmax = float(B.to_numpy(self.sq_norms(B.astype(Z, wdt))).max()) if Z.shape[0] else 0.0
            xmax = float(B.to_numpy(x_sq).max()) if X.shape[0] else 0.0
            clip = self.clip_needed(xmax, zmax, r, wdt)
        sign = 0 if not clip else (-1 if self._scale() < 0 else 1)
        D = None
        if self._fused_exp and B.is_tensor(Xa):  # on CUDA: product, clip and exp in one pass
            D = _fused.exp_block(
                Xa, prepared, sign, B.base2_exp(Xa), out=out if wdt == in_dtype else None
            )
        if D is None:
            D = B.matmul(Xa, prepared.T, out=out if wdt == in_dtype else None)
            if sign < 0:
                B.clamp_(D, high=0.0)
            elif sign > 0:
                B.clamp_(D, low=0.0)
            D = self._transform(D, B.base2_exp(D))
        if B.dtype_of(D) != in_dtype:
            if out is None:
                return B.astype(D, in_dtype)
            out[...] = D
            return out
        return D

    def _sparse_block(self, X, Z, x_sq, z_sq, prepared, out, clip):
        """The block of sparse rows X (CSR): s d^2 = X (-2 s W Z^T) + s ||x||^2 + s ||z||^2,
        one sparse x dense product (a sparse x sparse one for sparse centers), then the
        transform in place."""
        if not isinstance(prepared, SparseFactor):
            prepared = self._sparse_factor(Z, z_sq)
        wdt = np.dtype(np.float64) if self._uses_distance else B.dtype_of(X)
        Xw = X.astype(wdt, copy=False)
        if x_sq is None or B.dtype_of(x_sq) != wdt:
            x_sq = self.sq_norms(Xw)
        D = product(Xw, prepared.lin).astype(wdt, copy=False)
        D += (prepared.scale * x_sq)[:, None]
        D += prepared.center_terms[None, :]
        if clip is None:
            xmax = float(x_sq.max()) if X.shape[0] else 0.0
            zmax = float(prepared.center_terms.max() / prepared.scale) if Z.shape[0] else 0.0
            clip = self.clip_needed(xmax, zmax, int(X.shape[1]), wdt)
        if clip:
            B.clamp_(D, high=0.0) if self._scale() < 0 else B.clamp_(D, low=0.0)
        D = self._transform(D, False)
        in_dtype = B.dtype_of(X)
        if out is not None:
            out[...] = D
            return out
        return D if B.dtype_of(D) == in_dtype else D.astype(in_dtype)

    def _transform(self, D: np.ndarray, base2: bool) -> np.ndarray:
        """phi of the scaled squared distances, in place (``base2``: ``prepare`` scaled them
        for exponentials in base 2)."""
        raise NotImplementedError

    def width_factor(self, R2: np.ndarray) -> np.ndarray:
        """Q = -2 phi'(r^2) from the squared scaled distances ``R2`` (NumPy, in place), where
        k = phi(r^2) at unit width and r^2 = sum_l (x_l - z_l)^2 / sigma_l^2; then
        dk / d log sigma_l = Q (x_l - z_l)^2 / sigma_l^2 (the widths' gradient,
        ``KernelOperator.width_gradient``)."""
        raise NotImplementedError


def _exp_over_r(R2: np.ndarray) -> np.ndarray:
    """Q = e^(-r) / r for phi = e^(-r) (0 where r = 0: there every (x_l - z_l)^2 is 0)."""
    np.sqrt(R2, out=R2)
    zero = R2 == 0
    R2[zero] = 1.0
    Q = np.exp(-R2)
    Q /= R2
    Q[zero] = 0.0
    R2[...] = Q
    return R2


class Gaussian(_RadialKernel):
    """Gaussian kernel ``k(x, z) = exp(-||x - z||^2 / (2 sigma^2))``.

    Parameters
    ----------
    sigma : float, array of shape (n_features,) or str, default="auto"
        Bandwidth: a number; one length scale per feature (an array: ``||x - z||^2``
        becomes ``sum_l (x_l - z_l)^2 / sigma_l^2``); "median", the median pairwise distance
        of the training inputs; "auto" (the default), a fit chooses the width as the
        estimators' default kernel does (the width screen on its hold-out, in the units of
        the scaled inputs; called on data directly, the kernel takes the median distance
        of X); "ard", a fit learns one width per feature
        (``kernelpath.learn_widths``); "agop", a fit learns a metric from its predictor's
        average gradient outer product (Recursive Feature Machine rounds,
        ``kernelpath.fitting.agop``); "agop_diagonal", the same metric's diagonal only.
    metric : array of shape (n_features, r) or None, default=None
        Distances in the coordinates x @ metric (r <= n_features): ``||(x - z) L||^2 /
        sigma^2`` for L = metric, one width ``sigma``. A fit with ``sigma="agop"`` sets it.
    """

    _needs_clip = False  # exp of a rounding-level positive exponent is 1 + 1e-15
    _fused_exp = True  # phi = exp: the fused kernel of ``_fused`` computes its blocks on CUDA

    def _scale(self, base2: bool = False) -> float:
        return -0.5 / self._sigma() ** 2 * (_LOG2E if base2 else 1.0)

    def _transform(self, D, base2):
        return B.exp2_(D) if base2 else B.exp_(D)

    def width_factor(self, R2: np.ndarray) -> np.ndarray:
        R2 *= -0.5  # phi = exp(-r^2 / 2): Q = phi
        return np.exp(R2, out=R2)


class Laplacian(_RadialKernel):
    """Laplacian kernel ``k(x, z) = exp(-||x - z|| / sigma)``.

    Parameters
    ----------
    sigma : float, array of shape (n_features,) or str, default="auto"
        Bandwidth, as for ``Gaussian``.
    metric : array of shape (n_features, r) or None, default=None
        As for ``Gaussian``.
    """

    _uses_distance = True

    def _transform(self, D, base2):
        B.sqrt_(D)
        if base2:
            D *= -_LOG2E / self._sigma()
            return B.exp2_(D)
        D *= -1.0 / self._sigma()
        return B.exp_(D)

    def width_factor(self, R2: np.ndarray) -> np.ndarray:
        return _exp_over_r(R2)


class Cauchy(_RadialKernel):
    """Cauchy kernel ``k(x, z) = 1 / (1 + ||x - z||^2 / sigma^2)``.

    Parameters
    ----------
    sigma : float, array of shape (n_features,) or str, default="auto"
        Bandwidth, as for ``Gaussian``.
    metric : array of shape (n_features, r) or None, default=None
        As for ``Gaussian``.
    """

    def _scale(self, base2: bool = False) -> float:
        return 1.0 / self._sigma() ** 2

    def _transform(self, D, base2):
        D += 1.0
        return B.reciprocal_(D)

    def width_factor(self, R2: np.ndarray) -> np.ndarray:
        R2 += 1.0  # phi = 1 / (1 + r^2): Q = 2 / (1 + r^2)^2
        np.reciprocal(R2, out=R2)
        R2 *= R2
        R2 *= 2.0
        return R2
