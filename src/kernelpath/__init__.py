"""kernelpath: kernel learning at scale, with whole regularization paths.

The number of Nyström centers, the iterations and the Tikhonov penalty each index a
regularization path; kernelpath computes whole paths for about the price of one fit and
picks the best point on validation data.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use
    from .ard import learn_widths
    from .centers import LeverageCenters, SqueakCenters, UniformCenters
    from .data import read_table, write_predictions
    from .estimators import (
        EigenProClassifier,
        EigenProRegressor,
        KRLSClassifier,
        KRLSRegressor,
        NystromClassifier,
        NystromRegressor,
        NYTROClassifier,
        NYTRORegressor,
        RandomFeaturesClassifier,
        RandomFeaturesRegressor,
        SGMClassifier,
        SGMRegressor,
    )
    from .features import NystromFeatures, RandomFourierFeatures
    from .kernels import Cauchy, Gaussian, Kernel, Laplacian, Linear, Matern, Polynomial
    from .leverage import effective_dimension, leverage_scores
    from .model_files import ModelFileError, load, save
    from .online import (
        IncrementalRLSClassifier,
        RebalancedRLSClassifier,
        RecursiveRLS,
        SemiparametricRegressor,
    )
    from .operators import KernelOperator
    from .path import Path

#: Each public name and the module that defines it: ``import kernelpath`` loads none of
#: them (scikit-learn, SciPy's optimizers, Numba and PyArrow load with the first name used).
_LAZY = {
    "learn_widths": ".ard",
    "LeverageCenters": ".centers",
    "SqueakCenters": ".centers",
    "UniformCenters": ".centers",
    "read_table": ".data",
    "write_predictions": ".data",
    "EigenProClassifier": ".estimators",
    "EigenProRegressor": ".estimators",
    "KRLSClassifier": ".estimators",
    "KRLSRegressor": ".estimators",
    "NystromClassifier": ".estimators",
    "NystromRegressor": ".estimators",
    "NYTROClassifier": ".estimators",
    "NYTRORegressor": ".estimators",
    "RandomFeaturesClassifier": ".estimators",
    "RandomFeaturesRegressor": ".estimators",
    "SGMClassifier": ".estimators",
    "SGMRegressor": ".estimators",
    "NystromFeatures": ".features",
    "RandomFourierFeatures": ".features",
    "Cauchy": ".kernels",
    "Gaussian": ".kernels",
    "Kernel": ".kernels",
    "Laplacian": ".kernels",
    "Linear": ".kernels",
    "Matern": ".kernels",
    "Polynomial": ".kernels",
    "effective_dimension": ".leverage",
    "leverage_scores": ".leverage",
    "ModelFileError": ".model_files",
    "load": ".model_files",
    "save": ".model_files",
    "IncrementalRLSClassifier": ".online",
    "RebalancedRLSClassifier": ".online",
    "RecursiveRLS": ".online",
    "SemiparametricRegressor": ".online",
    "KernelOperator": ".operators",
    "Path": ".path",
}

__all__ = [
    "Kernel",
    "Gaussian",
    "Laplacian",
    "Matern",
    "Cauchy",
    "Polynomial",
    "Linear",
    "KernelOperator",
    "Path",
    "KRLSRegressor",
    "KRLSClassifier",
    "NystromRegressor",
    "NystromClassifier",
    "NYTRORegressor",
    "NYTROClassifier",
    "RandomFourierFeatures",
    "RandomFeaturesRegressor",
    "RandomFeaturesClassifier",
    "EigenProRegressor",
    "EigenProClassifier",
    "SGMRegressor",
    "SGMClassifier",
    "NystromFeatures",
    "RecursiveRLS",
    "IncrementalRLSClassifier",
    "RebalancedRLSClassifier",
    "SemiparametricRegressor",
    "leverage_scores",
    "effective_dimension",
    "learn_widths",
    "UniformCenters",
    "LeverageCenters",
    "SqueakCenters",
    "read_table",
    "save",
    "load",
    "ModelFileError",
    "write_predictions",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:  # a submodule used as an attribute (kernelpath.datasets)
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'kernelpath' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
