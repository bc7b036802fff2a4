"""Exact kernel regularized least squares with a spectral-filter path (``docs/guide/exact.md``)."""

from __future__ import annotations

from typing import Any

from .._validation import keep_params
from ..fitting import ExactFamily
from ..linalg import FILTERS
from ..solvers.spectral import ITERATION_FILTERS
from ._base import _KernelPathEstimator
from ._mixins import _ATTR_DOC, _COMMON_DOC, _ClassifierMixin, _RegressorMixin

__all__ = ["KRLSRegressor", "KRLSClassifier"]


class _KRLSBase(_KernelPathEstimator):
    _family = ExactFamily()

    def __init__(
        self,
        kernel: Any = "gaussian",
        *,
        penalty: Any = "auto",
        filter: str = "tikhonov",
        max_iter: int | None = None,
        nu: float = 1.0,
        step: Any = "auto",
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        refit: bool | str = "auto",
        scale: Any = "auto",
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        keep_params(self, locals())


_KRLS_PARAMS = (
    """

    Parameters
    ----------
    penalty : float, sequence of floats or "auto", default="auto"
        λ in (1/n) sum_i (y_i - f(x_i))^2 + λ ||f||^2 (tikhonov; for tsvd the eigenvalue
        threshold on K / n). A sequence is a path; "auto": 20 values geometric from the top
        eigenvalue of K / n down 9 decades. Not used by the kols, landweber and nu filters.
    filter : {"tikhonov", "kols", "tsvd", "landweber", "nu"}, default="tikhonov"
        Spectral filter; landweber and nu give a path over the iteration count t.
    max_iter : int or None, default=None
        Length of the landweber / nu path (default 500 / 100).
    nu : float > 0, default=1.0
        Order (qualification) ν of the ν-method (``filter="nu"``; Engl, Hanke & Neubauer
        §6.3): higher ν reaches smoother targets, in fewer iterations.
    step : "auto", "thesis" or float, default="auto"
        Landweber's step η in alpha_t = alpha_{t-1} + η (y - K alpha_{t-1}): "auto" is
        1 / ||K|| (the fastest safe step); "thesis" is the thesis's η = 2 / n, stable only
        while ||K|| < n (checked: a ValueError otherwise); a number is η itself.
"""
    + _COMMON_DOC
    + _ATTR_DOC
)


class KRLSRegressor(_RegressorMixin, _KRLSBase):
    __doc__ = (
        "Exact kernel regularized least squares with a spectral-filter path (n up to ~20,000)."
        + _KRLS_PARAMS
    )


class KRLSClassifier(_ClassifierMixin, _KRLSBase):
    __doc__ = (
        "Exact kernel RLS classifier (one-vs-all ±1 coding) with a spectral-filter path."
        + _KRLS_PARAMS
    )
    _classifier = True


assert set(ITERATION_FILTERS) <= set(FILTERS)
