"""Kernel functions.

Every kernel is a small parameter object with

- ``K(X, Z)`` -> the block ``[k(x_i, z_j)]`` of shape ``(len(X), len(Z))``, in the inputs' dtype;
- ``K.diag(X)`` -> ``[k(x_i, x_i)]`` of shape ``(len(X),)``;
- ``K.resolve(X, random_state)`` -> a copy with data-dependent parameters (``sigma="median"``)
  replaced by numbers computed on ``X``;
- ``K.candidates(X, random_state)`` -> the kernels a fit searches: ``[K.resolve(X)]``, or for
  ``sigma="auto"`` the grid of widths ``AUTO_WIDTH_FACTORS`` times the median distance.

Radial kernels take one width ``sigma`` or one per feature (a 1-D array, the ecosystem's
"ARD" convention): then ``r^2 = sum_l (x_l - z_l)^2 / sigma_l^2`` and the kernel is its unit-width
form of ``r``. The per-feature weights ``1 / sigma_l^2`` are folded into the prepared centers
and into the squared norms of the rows (``K.sq_norms``), so the data are never rescaled.

A radial kernel may also carry a ``metric``: a matrix L of shape (d, r), r <= d, with
``r^2 = ||(x - z) L||^2 / sigma^2`` (the Mahalanobis distance of M = L L^T). The learned
coordinates x L are computed block by block (the centers' once, when they are prepared), so a
block costs n m r instead of n m d. ``sigma="agop"`` asks a fit to learn L from the average
gradient outer product of its predictor (``kernelpath.fitting.agop``); ``"agop_diagonal"``
keeps only its diagonal (a learned width per feature, features of no weight dropped).

Distance-based kernels compute ``||x - z||^2 = ||x||^2 + ||z||^2 - 2 <x, z>`` with one matrix
product and clip it at zero, so rounding never produces a negative squared distance. The
transforms are applied in place on the distance block, so a block costs one n x m buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import (
    AGOP_NAMES,
    AUTO_WIDTH_FACTORS,
    LEARNED_WIDTHS,
    SIGMA_MAX,
    SIGMA_MIN,
    WIDTH_NAMES,
    Kernel,
    SparseFactor,
    median_distance,
    squared_distances,
    width_units_limit,
)
from .dot import MAX_DEGREE, Linear, Polynomial
from .matern import Matern
from .radial import Cauchy, Gaussian, Laplacian, NarrowWidthError, _RadialKernel

__all__ = [
    "Kernel",
    "NarrowWidthError",
    "Gaussian",
    "Laplacian",
    "Matern",
    "Cauchy",
    "Polynomial",
    "Linear",
    "make_kernel",
    "median_distance",
    "squared_distances",
    "kernel_candidates",
    "AUTO_WIDTH_FACTORS",
    "AGOP_NAMES",
    "LEARNED_WIDTHS",
    "WIDTH_NAMES",
    "SIGMA_MIN",
    "SIGMA_MAX",
    "MAX_DEGREE",
    "SparseFactor",
    "width_units_limit",
    "kernel_names",
    "kernel_items",
]

_BY_NAME: dict[str, type[Kernel]] = {
    "auto": Gaussian,
    "gaussian": Gaussian,
    "rbf": Gaussian,
    "laplacian": Laplacian,
    "matern": Matern,
    "cauchy": Cauchy,
    "polynomial": Polynomial,
    "linear": Linear,
}


def kernel_names() -> list[str]:
    """The names ``make_kernel`` (and an estimator's ``kernel``) takes."""
    return list(_BY_NAME)


def make_kernel(kernel: Any, width: str = "median") -> Kernel:
    """Turn a kernel argument (a Kernel or a name) into a Kernel instance.

    Names: "gaussian" (alias "rbf"), "laplacian", "matern", "cauchy" (these four with
    ``sigma=width``: "median" here, "auto" in an estimator's fit), "polynomial", "linear";
    "auto" is the Gaussian here (the estimators with a ``search`` parameter choose the
    family on their hold-out, ``fitting.choice``).
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
            return cls(sigma=width)
        return cls()
    raise TypeError(f"kernel must be a Kernel instance or a name, got {type(kernel).__name__}")


def kernel_items(kernel: Any, width: str = "median") -> list[Kernel]:
    """The kernel argument of an estimator as a list of Kernels (one, or a sequence).

    Raises
    ------
    ValueError, TypeError
        An empty sequence, or an item that is not a kernel (naming ``kernel``).
    """
    if isinstance(kernel, (Kernel, str)):
        return [make_kernel(kernel, width)]
    if isinstance(kernel, (list, tuple)):
        if not kernel:
            raise ValueError("kernel: an empty sequence of kernels; give at least one kernel")
        for item in kernel:
            if not isinstance(item, (Kernel, str)):
                raise TypeError(
                    f"kernel: every item of the sequence must be a Kernel or a name, got "
                    f"{type(item).__name__}"
                )
        return [make_kernel(k, width) for k in kernel]
    raise TypeError(
        "kernel must be a Kernel instance, a name, or a sequence of them, got "
        f"{type(kernel).__name__}"
    )


def kernel_candidates(
    kernel: Any,
    X: Any,
    random_state: Any = None,
    scales: Any = None,
    scale: bool | str = False,
    width: str = "median",
) -> list[Kernel]:
    """The kernels a fit searches: one kernel (a Kernel or a name) resolved on ``X``, the
    widths of ``sigma="auto"``, or a sequence of those (a path over kernels), in order,
    duplicates removed. ``scales`` are the feature scales folded into the widths of the
    kernels that ``scale`` scales (``Kernel.scaled_by``); ``width`` is the ``sigma`` of a
    radial kernel given by name.

    Raises
    ------
    ValueError
        An empty sequence (naming ``kernel``).
    """
    items = kernel_items(kernel, width)
    out: list[Kernel] = []
    rs = np.random.default_rng(random_state).integers(2**63) if len(items) > 1 else random_state
    for k in items:
        # the same median for every item: the same subsample of X
        use = scales if scales is not None and k.scaled_by(scale) else None
        for cand in k.candidates(X, rs, use):
            if cand not in out:
                out.append(cand)
    return out
