"""RF-KRLS estimators: primal ridge on random Fourier features, with the λ path and the path
over the number of features D."""

from __future__ import annotations

from typing import Any

from .._validation import keep_params
from ..fitting import RandomFeaturesFamily
from ._base import _KernelPathEstimator
from ._mixins import _ClassifierMixin, _RegressorMixin

__all__ = ["RandomFeaturesRegressor", "RandomFeaturesClassifier"]


class _RandomFeaturesBase(_KernelPathEstimator):
    _family = RandomFeaturesFamily()

    def __init__(
        self,
        kernel: Any = "gaussian",
        *,
        penalty: Any = "auto",
        n_features: Any = 1000,
        orthogonal: bool = False,
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


_RF_DOC = """

    Parameters
    ----------
    kernel : str, Kernel or sequence of them, default="gaussian"
        A sequence, or ``sigma="auto"``, is a path over kernels (see NystromRegressor).
        Gaussian, Laplacian, Cauchy or Matern. A name has its width chosen by the fit
        (``sigma="auto"``: the width screen, with this estimator's own model) where there
        is a hold-out, else the median heuristic.
    penalty : float, sequence of floats or "auto", default="auto"
        λ in (1/n) sum_i (y_i - φ(x_i)^T w)^2 + λ ||w||^2 with the normalized map
        φ = sqrt(2/D) cos(W x + b). A sequence is a path (one eigendecomposition of
        Φ^T Φ gives all of it); "auto": 20 values over 9 decades below the top eigenvalue of
        Φ^T Φ / n. With a path over D, the penalty per unnormalized weight μ = λ n D_max is
        held fixed, so a point with D features has λ D_max / D (``path_.params["penalty"]``).
    n_features : int, sequence of int or "auto", default=1000
        Number D of random features. A sequence, or "auto" (20 values geometric from 1 to
        min(2000, n)), fits the path over (D, λ) from one Cholesky factor per penalty
        (features added in blocks, the factor reused) and chooses D on the validation split.
    orthogonal : bool, default=False
        Orthogonal random features (Gaussian kernel).
    validation_fraction : float in [0, 1), default=0.2
    cv : "holdout", "loo", "gcv", int or splitter, default="holdout"
        See NystromRegressor; "loo" and "gcv" in closed form at one D.
    refit : "auto", True or False, default="auto"
        Refit on all the data at the chosen (D, λ) with the same features ("auto" does: a
        closed form at its λ; see NystromRegressor).
    memory_budget : int, str or None, default=None
    random_state : int, Generator or None, default=None
        Seeds the split, the bandwidth heuristic and the features.
    scale, device, verbose : as in NystromRegressor
        Feature scaling, where to compute, and progress reports. With ``scale`` on, the
        random phases are drawn about the training columns' means
        (``RandomFourierFeatures(center=...)``): the fit on raw features draws the map it
        draws on standardized ones.

    Attributes
    ----------
    path_ : Path
    best_params_ : dict
    penalty_ : float
    n_features_ : int
        D of the model.
    features_ : RandomFourierFeatures
        The feature map of the model (``features_.transform(X) @ coef_ + intercept_``).
    coef_ : ndarray of shape (D,) or (D, n_outputs)
    intercept_ : float or ndarray
    kernel_ : Kernel
    train_indices_, validation_indices_ : ndarray of int
"""


class RandomFeaturesRegressor(_RegressorMixin, _RandomFeaturesBase):
    __doc__ = (
        "RF-KRLS: ridge regression on random Fourier features, with the λ and D paths." + _RF_DOC
    )


class RandomFeaturesClassifier(_ClassifierMixin, _RandomFeaturesBase):
    __doc__ = "RF-KRLS classifier (one-vs-all ±1 coding) on random Fourier features." + _RF_DOC
    _classifier = True
