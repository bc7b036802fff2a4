"""scikit-learn estimators, one module per family: exact KRLS (``krls``), Nyström and NYTRO
(``nystrom``), random features (``random_features``), SGM / SIGM (``sgm``), EigenPro
(``eigenpro``)."""

from __future__ import annotations

from ._mixins import _ClassifierMixin, _RegressorMixin
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
