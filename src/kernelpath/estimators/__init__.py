"""scikit-learn estimators, one module per family: exact KRLS (``krls``), Nyström and NYTRO
(``nystrom``), random features (``random_features``), SGM / SIGM (``sgm``), EigenPro
(``eigenpro``)."""

from __future__ import annotations

from ._mixins import _TABLE_PARAMS, _ClassifierMixin, _RegressorMixin, _with_params
from .eigenpro import EigenProClassifier, EigenProRegressor
from .krls import KRLSClassifier, KRLSRegressor
from .nystrom import NystromClassifier, NystromRegressor, NYTROClassifier, NYTRORegressor
from .random_features import RandomFeaturesClassifier, RandomFeaturesRegressor
from .sgm import SGMClassifier, SGMRegressor

__all__ = [
    "KRLSRegressor",
    "KRLSClassifier",
    "NystromRegressor",
    "NystromClassifier",
    "NYTRORegressor",
    "NYTROClassifier",
    "RandomFeaturesRegressor",
    "RandomFeaturesClassifier",
    "EigenProRegressor",
    "EigenProClassifier",
    "SGMRegressor",
    "SGMClassifier",
    "_ClassifierMixin",
    "_RegressorMixin",
]

#: The batch estimators: each fits a whole data set (the online learners are in ``online``).
BATCH_ESTIMATORS: tuple[type, ...] = (
    KRLSRegressor,
    KRLSClassifier,
    NystromRegressor,
    NystromClassifier,
    NYTRORegressor,
    NYTROClassifier,
    RandomFeaturesRegressor,
    RandomFeaturesClassifier,
    EigenProRegressor,
    EigenProClassifier,
    SGMRegressor,
    SGMClassifier,
)

for _cls in BATCH_ESTIMATORS:
    _with_params(_cls, _TABLE_PARAMS)
