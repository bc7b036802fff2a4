"""How a batch fit is made, below the estimators: the fit as data (``problem``), one class
per solver family (``family``, ``kernel_models``, ``random_features``, ``sgm``,
``eigenpro``), the searches over kernels (``search``) and the selection plan (``plan``)."""

from __future__ import annotations

from .eigenpro import EigenProFamily
from .exact import ExactFamily
from .family import Family
from .nystrom import NystromFamily, NYTROFamily
from .plan import Selection, select
from .problem import CandidateFit, FitProblem, FitSettings
from .random_features import RandomFeaturesFamily
from .sgm import SGMFamily

__all__ = [
    "FitProblem",
    "FitSettings",
    "CandidateFit",
    "Family",
    "ExactFamily",
    "NystromFamily",
    "NYTROFamily",
    "RandomFeaturesFamily",
    "SGMFamily",
    "EigenProFamily",
    "Selection",
    "select",
]
