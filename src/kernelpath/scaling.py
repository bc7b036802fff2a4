"""Scaled inputs: each feature's spread s_l, folded into the widths of a radial kernel
(sigma_l = sigma * s_l on the raw features is sigma on x_l / s_l), so no copy of X is made and
``predict`` takes the inputs as they are.

The rule (docs/design.md, "Scaled inputs"): s_l is the column's standard deviation
(scikit-learn's ``StandardScaler``), 1 where the column is constant up to rounding (a spread
below sqrt(eps) = 1.5e-8 of its largest magnitude; it adds nothing to any distance). The
interquartile range was measured against it and lost (yacht +35%, cpusmall +8% test RMSE,
where a few columns are mostly one value with far outliers; it won on airfoil and concrete
by 8% and 2.5%). A heavy-tailed column (a Cauchy column) is therefore scaled by its largest
values and its bulk counts for little: transform such a column (log, ranks) where its bulk
matters. A column of two values a < b (an indicator) gets at least (b - a) / 2, the standard
deviation of a balanced one: by its standard deviation alone, sqrt(p (1 - p)) (b - a) with
a fraction p of b, a rare indicator (adult's one-hot columns, p down to 0.0006) was magnified
into the largest distance and cost adult 0.26 points of test error; with the floor, every
indicator of a one-hot block weighs what one category change weighs, whatever its coding
(0/1 or standardized: adult's default fit is the same on both). The statistics
are taken on at most ``SCALE_ROWS`` rows drawn at random (all rows below that), one read of
those rows for data out of core or on Dask.

Inputs that share one unit (``scale="auto"``): pixels, spectra, histograms, sensor arrays.
Standardizing each of their columns magnifies the nearly constant ones (MNIST's border
pixels, a few of them rarely above 0: 5.08% test error against 2.81% unscaled at the same
m; USPS 6.33% against 5.83%). The rule (``shares_unit``): at least ``SHARED_MIN_FEATURES``
columns that vary, at least ``SHARED_FRACTION`` of which span ``SHARED_SPAN`` of the range
of all of them; then every column gets one spread, the root mean square of the varying
columns' standard deviations. Of the shared sets it holds for MNIST, USPS and adult (whose
0/1 columns get the indicator floor of 0.5 either way); the tabular sets with columns of one
range are narrower (kin8nm, abalone: 8 columns). ``scale=True`` standardizes every column.

The same read gives the columns' means: a random Fourier map draws its phases relative to
them (``RandomFourierFeatures(center=...)``), so that the map a fit draws on raw inputs is
the one it draws on standardized inputs (a kernel's blocks do not depend on a shift, a
random map's draw does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .inputs import as_rows

__all__ = [
    "SCALE_ROWS",
    "SHARED_MIN_FEATURES",
    "SHARED_FRACTION",
    "SHARED_SPAN",
    "check_scale",
    "feature_scales",
    "feature_statistics",
    "shares_unit",
]

#: Rows the column statistics are taken on (at random above that; the standard deviation
#: of 100,000 rows of a normal column is within about 0.5% of the population's).
SCALE_ROWS = 100_000
#: The rule of inputs that share one unit (``shares_unit``): the fewest varying columns,
#: the fraction of them that span ``SHARED_SPAN`` of the common range.
SHARED_MIN_FEATURES = 64
SHARED_FRACTION = 0.5
SHARED_SPAN = 0.95


def check_scale(scale: Any) -> bool | str:
    """``scale`` checked: "auto", True or False.

    Raises
    ------
    ValueError, TypeError
        Naming ``scale``.
    """
    if isinstance(scale, str):
        if scale != "auto":
            raise ValueError(f"scale must be 'auto', True or False, got {scale!r}")
        return scale
    if isinstance(scale, (bool, np.bool_)):
        return bool(scale)
    raise TypeError(f"scale must be 'auto', True or False, got {type(scale).__name__}")


def feature_scales(X: Any, rng: np.random.Generator) -> np.ndarray:
    """The spread of each column of ``X`` (shape (d,), positive, float64): the standard
    deviation, else 1 (see the module's rule). Draws the rows from ``rng`` only when X has
    more than ``SCALE_ROWS`` rows."""
    return feature_statistics(X, rng)[1]


def shares_unit(lo: np.ndarray, hi: np.ndarray, varies: np.ndarray) -> bool:
    """Whether columns of minima ``lo`` and maxima ``hi`` share one unit: at least
    ``SHARED_MIN_FEATURES`` of them vary (``varies``) and at least ``SHARED_FRACTION`` of
    those span ``SHARED_SPAN`` of the range of all of them."""
    n_vary = int(np.count_nonzero(varies))
    if n_vary < SHARED_MIN_FEATURES:
        return False
    width = float(hi[varies].max() - lo[varies].min())
    spans = (hi[varies] - lo[varies]) >= SHARED_SPAN * width
    return bool(np.count_nonzero(spans) >= SHARED_FRACTION * n_vary)


def feature_statistics(
    X: Any, rng: np.random.Generator, common_units: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(means, spreads) of the columns of ``X``, each of shape (d,) and float64, from one
    read of the same rows (the spreads as ``feature_scales``; with ``common_units``, one
    spread for every column where the columns share one unit, ``shares_unit``)."""
    n = int(X.shape[0])
    rows = np.sort(rng.choice(n, SCALE_ROWS, replace=False)) if n > SCALE_ROWS else None
    center, s, lo, hi, two_valued = as_rows(X).column_moments(rows)
    # constant up to rounding: a spread below sqrt(eps) of the column's magnitude cannot be
    # resolved by the fold (its squared differences are below the rounding of the squared
    # norms the kernel blocks expand; naval has columns of 0.998 with a spread of 2e-13)
    size = np.maximum(np.abs(lo), np.abs(hi))
    varies = np.isfinite(s) & (s > np.sqrt(np.finfo(np.float64).eps) * size)
    # two values: at least half their gap (an indicator; see the module's rule)
    two = varies & two_valued
    s = np.where(two, np.maximum(s, (hi - lo) / 2), s)
    if common_units and shares_unit(lo, hi, varies):
        return center, np.full(len(s), float(np.sqrt(np.mean(s[varies] ** 2))))
    return center, np.where(varies, s, 1.0)
