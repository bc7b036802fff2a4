"""The Matérn kernels (smoothness 1/2, 3/2 and 5/2) on the radial kernels' base."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _backend as B
from .base import _LOG2E
from .radial import _exp_over_r, _RadialKernel

#: The slices of rows a Matérn block's polynomial is computed in (``Matern._transform``).
MATERN_SLICES = 8


class Matern(_RadialKernel):
    """Matern kernel with smoothness ``nu`` in {0.5, 1.5, 2.5}; ``r = ||x - z|| / sigma``.

    - nu = 0.5: ``exp(-r)`` (the Laplacian kernel);
    - nu = 1.5: ``(1 + sqrt(3) r) exp(-sqrt(3) r)``;
    - nu = 2.5: ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``.

    Parameters
    ----------
    sigma : float, array of shape (n_features,) or str, default="auto"
        Bandwidth, as for ``Gaussian``.
    nu : {0.5, 1.5, 2.5}, default=1.5
        Smoothness.
    metric : array of shape (n_features, r) or None, default=None
        As for ``Gaussian``.
    """

    _uses_distance = True

    def __init__(self, sigma: float | str = "auto", nu: float = 1.5, metric: Any = None) -> None:
        self.nu = nu
        super().__init__(sigma, metric)

    def _check(self) -> None:
        super()._check()
        if self.nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"nu must be one of 0.5, 1.5, 2.5, got {self.nu!r}")

    def _transform(self, D, base2):
        B.sqrt_(D)
        if self.nu == 0.5:
            D *= -(_LOG2E if base2 else 1.0) / self._sigma()
            return B.exp2_(D) if base2 else B.exp_(D)
        c = (3.0 if self.nu == 1.5 else 5.0) ** 0.5 / self._sigma()
        # by slices of rows: the polynomial's temporaries are a slice, not a block (a block
        # is what the memory budget sizes; two block-sized temporaries took a direct fit
        # 8% past its budget, tests/test_memory.py)
        step = max(1, -(-int(D.shape[0]) // MATERN_SLICES))
        for s in range(0, int(D.shape[0]), step):
            part = D[s : s + step]
            part *= c  # c * ||x - z||
            if self.nu == 2.5:
                poly = part * part
                poly *= 1.0 / 3.0
                poly += part
            else:
                poly = part.clone() if B.is_tensor(part) else part.copy()
            poly += 1.0
            part *= -(_LOG2E if base2 else 1.0)
            if base2:
                B.exp2_(part)
            else:
                B.exp_(part)
            part *= poly
        return D

    def width_factor(self, R2: np.ndarray) -> np.ndarray:
        if self.nu == 0.5:
            return _exp_over_r(R2)
        np.sqrt(R2, out=R2)
        if self.nu == 1.5:  # phi = (1 + a r) e^(-a r), a^2 = 3: Q = 3 e^(-a r)
            R2 *= -(3.0**0.5)
            np.exp(R2, out=R2)
            R2 *= 3.0
            return R2
        a = 5.0**0.5  # phi = (1 + a r + a^2 r^2 / 3) e^(-a r): Q = (5 / 3)(1 + a r) e^(-a r)
        R2 *= a
        poly = 1.0 + R2
        R2 *= -1.0
        np.exp(R2, out=R2)
        R2 *= poly
        R2 *= 5.0 / 3.0
        return R2
