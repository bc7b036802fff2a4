"""EigenPro estimators: preconditioned kernel SGD (or on random features), a path over epochs."""

from __future__ import annotations

from typing import Any

from .._validation import keep_params
from ..fitting import EigenProFamily
from ..fitting.eigenpro import default_subsample_size
from ._base import _KernelPathEstimator
from ._mixins import _ClassifierMixin, _RegressorMixin

__all__ = ["EigenProRegressor", "EigenProClassifier", "default_subsample_size"]


class _EigenProBase(_KernelPathEstimator):
    _family = EigenProFamily()

    def __init__(
        self,
        kernel: Any = "gaussian",
        *,
        n_epochs: int = 30,
        n_components: int = 160,
        subsample_size: int | None = None,
        damping: Any = "auto",
        batch_size: Any = "auto",
        step_size: Any = "auto",
        rule: str = "eigenpro2",
        n_features: int | None = None,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        n_iter_no_change: int | None = 5,
        tol: float = 1e-4,
        refit: bool | str = "auto",
        scale: Any = "auto",
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        keep_params(self, locals())


_EP_DOC = """

    Parameters
    ----------
    kernel : str, Kernel or sequence of them, default="gaussian"
        A sequence, or ``sigma="auto"``, is a path over kernels (see NystromRegressor).
    n_epochs : int, default=30
        Most epochs; the path (validation error after every epoch) stops earlier with
        ``n_iter_no_change``.
    n_components : int, default=160
        q, the top eigendirections the preconditioner flattens (0: plain kernel SGD).
    subsample_size : int or None, default=None
        s, the subsample of the eigensystem; None: 2000 below 100,000 points, else 4000
        (the seed paper's M = 4800 with ``rule="paper"`` or ``"reference"``).
    damping : float in (0, 1] or "auto", default="auto"
        τ: the top directions are flattened to τ λ_{q+1}. "auto": 0.95 with
        ``rule="eigenpro2"``; the seed paper's 1 for kernels and 1/4 for random features
        with ``rule="paper"`` or ``"reference"``.
    batch_size : int or "auto", default="auto"
        "auto": min(β / λ_{q+1} + 1, memory limit, n) (EigenPro 2); 256 (at most n) with
        ``rule="paper"`` or ``"reference"``.
    step_size : float or "auto", default="auto"
        "auto": m / (β + (m - 1) λ_{q+1}) for the batch size m (EigenPro 2); with
        ``rule="paper"``, √(2 m / λ_{q+1}) (the seed paper's η ~ √(m / λ_{k+1}) in this
        solver's scaling, ``solvers.eigenpro.paper_step_rule``); with ``rule="reference"``,
        1.5 / λ_{q+1} (its released code, ``solvers.eigenpro.reference_step_rule``).
        With ``sample_weight`` (or class weights) the rule's step shrinks for the largest
        weight (``solvers.eigenpro.weighted_step``). A fit whose iterates stop being
        finite (a given step too large) raises ``FloatingPointError`` asking for a smaller
        step_size.
    rule : {"eigenpro2", "paper", "reference"}, default="eigenpro2"
        Which paper's step, batch size and damping "auto" means: EigenPro 2's (measured
        better, the default), the seed paper's as printed (Ma & Belkin 2017, Sec. 4 and 6)
        or as its released code sets them (``docs/guide/eigenpro.md``).
    n_features : int or None, default=None
        None: kernel EigenPro (coefficients on the training points). A number D: EigenPro
        on D random Fourier features (primal).
    validation_fraction, cv, n_iter_no_change, tol, refit, memory_budget : as in NystromRegressor
        The refit keeps the chosen number of epochs.
    scale, random_state, device, verbose : as in NystromRegressor
        Feature scaling, seeds, where to compute, and progress reports.

    Attributes
    ----------
    path_ : Path
        Over "n_epochs"; ``path_.info`` has the batch size, step size and eigenvalues.
    best_params_ : dict
    n_epochs_ : int
    coef_ : ndarray
        On ``centers_`` (kernel EigenPro: the training points) or on ``features_``.
    centers_ : ndarray or None
    features_ : RandomFourierFeatures or None
    intercept_ : float or ndarray
    kernel_ : Kernel
"""


class EigenProRegressor(_RegressorMixin, _EigenProBase):
    __doc__ = "EigenPro: kernel SGD preconditioned by the top eigensystem." + _EP_DOC


class EigenProClassifier(_ClassifierMixin, _EigenProBase):
    __doc__ = "EigenPro classifier (one-vs-all ±1 coding, square loss)." + _EP_DOC
    _classifier = True
