"""Online learners, one per module: recursive RLS with rank-one Cholesky updates (``rls``),
incremental classification with class extension and recoding (``incremental``), the
rebalanced RLS baseline (``rebalanced``), the semiparametric learner and its protocol
(``semiparametric``); what they share is in ``common``."""

from __future__ import annotations

from .common import FeatureMap, as_feature_map
from .incremental import SELECTION_RULES, IncrementalRLSClassifier
from .rebalanced import RebalancedRLSClassifier
from .rls import RecursiveRLS
from .semiparametric import SemiparametricRegressor, semiparametric_protocol

__all__ = [
    "RecursiveRLS",
    "IncrementalRLSClassifier",
    "RebalancedRLSClassifier",
    "SELECTION_RULES",
    "SemiparametricRegressor",
    "semiparametric_protocol",
    "FeatureMap",
    "as_feature_map",
]
