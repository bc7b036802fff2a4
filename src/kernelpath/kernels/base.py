"""The kernel base class, the widths' names and limits, and the distances every radial
kernel computes (``squared_distances``, ``median_distance``)."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from .. import _backend as B
from .._validation import check_rows
from ..inputs import as_rows, dense_block, is_sparse, product, row_sq_norms, rows_in_memory

_MEDIAN_SUBSAMPLE = 1000
#: ``sigma="auto"``: the widths searched, as multiples of the median pairwise distance:
#: 11 values, a factor sqrt(2) apart, from 1/8 to 4. On the shared data sets the best width
#: on a validation split was 0.3 to 1.5 times the median (ijcnn1 0.31, pumadyn32nh and
#: protein 0.35, kin8nm 0.5, abalone 0.7, cpusmall and adult 1.4); a factor 2 between
#: widths cost up to 20% in validation MSE (cpusmall: 10.6 at 1x, 8.7 at 1.41x, 9.6 at 2x).
AUTO_WIDTH_FACTORS = tuple(2.0 ** (k / 2) for k in range(-6, 5))
_LOG2E = 1.4426950408889634  # exp(x) = exp2(x log2(e))


def squared_distances(
    X: Any,
    Z: Any,
    x_sq: Any = None,
    z_sq: Any = None,
) -> Any:
    """Squared Euclidean distances ``||x_i - z_j||^2``, shape ``(len(X), len(Z))``, never negative.

    ``x_sq`` and ``z_sq`` are the optional precomputed squared row norms. NumPy arrays or
    tensors (the result is on their backend), or sparse rows (the result is dense NumPy).
    """
    if x_sq is None:
        x_sq = row_sq_norms(X)
    if z_sq is None:
        z_sq = row_sq_norms(Z)
    D = product(X, Z.T)  # dense, also for sparse rows
    D *= -2.0
    D += x_sq[:, None]
    D += z_sq[None, :]
    return B.clamp_(D, 0.0)


def median_distance(
    X: Any, random_state: Any = None, scales: Any = None, metric: Any = None
) -> float:
    """Median pairwise Euclidean distance of ``X`` (on a subsample of at most 1000 rows), of
    its columns divided by ``scales`` (shape (n_features,)) when given, or of the rows
    ``X @ metric`` (a kernel's ``metric``, shape (n_features, r)) when given."""
    rng = np.random.default_rng(random_state)
    n = int(X.shape[0])
    idx = rng.choice(n, _MEDIAN_SUBSAMPLE, replace=False) if n > _MEDIAN_SUBSAMPLE else None
    if is_sparse(X) and not as_rows(X).dense_blocks:  # stays sparse (its dense form may not fit)
        X = (X if idx is None else X[idx]).astype(np.float64)
        if scales is not None:
            X = X.multiply(1.0 / np.asarray(scales, dtype=np.float64)[None, :]).tocsr()
        if metric is not None:
            X = np.asarray(X @ np.asarray(metric, dtype=np.float64))
    else:
        X = dense_block(rows_in_memory(X, np.arange(n) if idx is None else idx))
        X = B.to_numpy(X)  # the same numbers whatever the backend of the data
        if scales is not None:
            X = X / np.asarray(scales, dtype=np.float64)
        if metric is not None:
            X = np.asarray(X, dtype=np.float64) @ np.asarray(metric, dtype=np.float64)
    sq = np.asarray(row_sq_norms(X), dtype=np.float64)
    D = squared_distances(X, X, sq, sq)
    iu = np.triu_indices(X.shape[0], k=1)
    d = np.sqrt(D[iu])
    # distances at the rounding level of the norms they are expanded from are 0: identical
    # rows whose mean is inexact (0.3 in three columns) gave widths of 7e-10 (check_data)
    top = float(np.sqrt(sq.max(initial=0.0)))
    d = d[d > top / width_units_limit(X.shape[1])]
    return float(np.median(d)) if d.size else 1.0


#: The narrowest and widest width a radial kernel accepts: sigma^2 and 1 / sigma^2 stay
#: normal float64 numbers (the data-dependent part of the rule is ``check_data``).
SIGMA_MIN = 1e-150
SIGMA_MAX = 1e150


def width_units_limit(d: int, dtype: Any = np.float64) -> float:
    """The largest ||x / sigma|| for which kernel blocks of d features are exact to
    rounding: 1 / sqrt(4 (d + 2) eps) (``_RadialKernel.check_data``); 1.9e7 for one float64
    feature, 840 for one float32 feature."""
    eps = float(np.finfo(np.dtype(dtype)).eps)
    return float(1.0 / np.sqrt(4 * (max(int(d), 1) + 2) * eps))


class SparseFactor:
    """A radial kernel's centers prepared for sparse rows (``_RadialKernel.prepare``): the
    scaled squared distances of a CSR block X are ``X @ lin + scale ||x||^2 +
    center_terms``."""

    def __init__(self, lin: Any, scale: float, center_terms: np.ndarray) -> None:
        self.lin, self.scale, self.center_terms = lin, scale, center_terms


class Kernel:
    """Base class: parameters are the ``__init__`` arguments (scikit-learn style)."""

    #: True for kernels of the form k(x, z) = phi(||x - z||), with k(x, x) = 1.
    distance_based = False
    #: True when the kernel depends on ||x - z|| itself (a square root), not on its square:
    #: its blocks' augmented left factor is float64 (``operators.kernel``).
    _uses_distance = False

    def check_data(self, max_abs: Any, name: str = "X", dtype: Any = np.float64) -> None:
        """Refuse data this kernel's parameters cannot compute on (a radial kernel's width
        too narrow for its magnitude); ``max_abs``: the largest |x_l| of each feature."""
        return None

    def one_width(self) -> float | None:
        """The kernel's one width (None: no width, or one per feature)."""
        return None

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
        if type(self) is not type(other):
            return False
        mine, theirs = self.get_params(), other.get_params()
        return mine.keys() == theirs.keys() and all(_same_param(mine[k], theirs[k]) for k in mine)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(map(repr, self.get_params().values()))))

    def _check(self) -> None:
        """Validate parameters; raise ValueError naming the bad one."""

    def resolve(self, X: np.ndarray, random_state: Any = None) -> Kernel:
        """Return a copy whose data-dependent parameters are fixed using ``X``."""
        return type(self)(**self.get_params())

    def candidates(
        self, X: np.ndarray, random_state: Any = None, scales: Any = None
    ) -> list[Kernel]:
        """The kernels a fit searches for this one: itself resolved on ``X``, or the grid of
        widths of ``sigma="auto"``; with ``scales`` (one per feature) the widths are in the
        units of X / scales, folded into per-feature widths (radial kernels only)."""
        return [self.resolve(X, random_state)]

    def scaled_by(self, scale: bool | str) -> bool:
        """Whether the estimator parameter ``scale`` scales this kernel's inputs: radial
        kernels only; with "auto" only where the fit chooses the width."""
        return False

    def __call__(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Kernel block ``[k(x_i, z_j)]``.

        Parameters
        ----------
        X : array of shape (n, n_features)
            Rows.
        Z : array of shape (m, n_features)
            Columns' points.

        Returns
        -------
        array of shape (n, m)
        """
        X, Z = check_rows(X, "X"), check_rows(Z, "Z")
        if X.shape[1] != Z.shape[1]:
            raise ValueError(
                f"X and Z must have as many features (columns), got {X.shape[1]} and {Z.shape[1]}"
            )
        return self.on_data(X).block(X, Z)

    def on_data(self, X: Any) -> Kernel:
        """The kernel a direct call computes on rows X: itself, or where a width is to be
        chosen by a fit, the one it takes from X (radial kernels: the median distance)."""
        return self

    def block(
        self,
        X: np.ndarray,
        Z: np.ndarray,
        x_sq: np.ndarray | None = None,
        z_sq: np.ndarray | None = None,
        prepared: Any = None,
        out: np.ndarray | None = None,
        work: Any = None,
        clip: bool | None = None,
    ) -> np.ndarray:
        """Kernel block with optional precomputed squared norms, ``prepare(Z)`` output, a
        C-contiguous output buffer ``out`` of shape (len(X), len(Z)), a scratch buffer
        ``work`` (kernel-specific; None allocates) and ``clip`` (radial kernels: whether
        to clip rounding, None decides). NumPy arrays or tensors: the block is on the
        backend and device of X."""
        raise NotImplementedError

    def prepare(
        self, Z: np.ndarray, z_sq: np.ndarray | None = None, sparse_rows: bool = False
    ) -> Any:
        """Precompute what depends on Z alone (reused for every block against Z; with
        ``sparse_rows``, for blocks of sparse rows)."""
        return None

    def clip_needed(self, x_sq_max: float, z_sq_max: float, d: int, dtype: Any) -> bool:
        """Whether blocks need their rounding clipped (radial kernels; see there)."""
        return False

    def diag(self, X: np.ndarray) -> np.ndarray:
        """Diagonal ``[k(x_i, x_i)]``.

        Parameters
        ----------
        X : array of shape (n, n_features)
            Rows: real, finite numbers (an array, a tensor or sparse rows).

        Returns
        -------
        array of shape (n,)
        """
        return self._diag(check_rows(X, "X"))

    def _diag(self, X: Any) -> Any:
        """``diag`` of checked rows."""
        raise NotImplementedError

    @property
    def needs_norms(self) -> bool:
        return self.distance_based

    def sq_norms(self, X: Any) -> Any:
        """The squared row norms a block of X needs (weighted by 1 / sigma_l^2 for a radial
        kernel with one width per feature), shape ``(len(X),)``."""
        return row_sq_norms(X)

    def max_feature_weight(self) -> float:
        """The largest weight ``sq_norms`` gives a feature (a bound of the weighted norms by
        the plain ones)."""
        return 1.0


def _same_param(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if isinstance(a, str) or isinstance(b, str):
            return False
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)


def _is_width_vector(s: Any) -> bool:
    return isinstance(s, (list, tuple, np.ndarray))


#: the widths a radial kernel takes by name (``sigma=...``): the median distance, chosen by
#: the fit, or one learned per feature
#: The widths learned from a fit's predictor's gradients: the AGOP metric, its diagonal.
AGOP_NAMES = ("agop", "agop_diagonal")
#: The widths a fit learns from the targets (not resolvable on X alone).
LEARNED_WIDTHS = ("ard", *AGOP_NAMES)
WIDTH_NAMES = ("auto", "median", *LEARNED_WIDTHS)
