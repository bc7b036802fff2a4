"""kernelpath: kernel learning at scale, with whole regularization paths.

The number of Nyström centers, the iterations and the Tikhonov penalty each index a
regularization path; kernelpath computes whole paths for about the price of one fit and
picks the best point on validation data.
"""

from ._version import __version__
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
