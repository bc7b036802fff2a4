"""Nyström kernel ridge regression (direct or CG) and NYTRO, Nyström gradient descent
regularized by early stopping (``docs/guide/nystrom.md``)."""

from __future__ import annotations

from typing import Any

from .._validation import keep_params
from ..fitting import NystromFamily, NYTROFamily
from ._base import _KernelPathEstimator
from ._mixins import _ATTR_DOC, _COMMON_DOC, _ClassifierMixin, _RegressorMixin, _with_params

__all__ = ["NystromRegressor", "NystromClassifier", "NYTRORegressor", "NYTROClassifier"]


class _NystromBase(_KernelPathEstimator):
    _family = NystromFamily()

    def __init__(
        self,
        kernel: Any = "auto",
        *,
        search: str = "auto",
        penalty: Any = "auto",
        n_centers: int | None = None,
        centers: Any = "uniform",
        solver: str = "cg",
        max_iter: int | None = None,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        n_iter_no_change: int | None = 10,
        tol: float = 1e-4,
        refit: bool | str = "auto",
        scale: Any = "auto",
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        keep_params(self, locals())


class _NYTROBase(_NystromBase):
    _family = NYTROFamily()

    def __init__(
        self,
        kernel: Any = "gaussian",
        *,
        penalty: Any = 0.0,
        n_centers: int | None = None,
        centers: Any = "uniform",
        solver: str = "gd",
        max_iter: int | None = None,
        nu: float = 1.0,
        step: Any = "auto",
        stopping: str = "window",
        stopping_threshold: float | None = None,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        n_iter_no_change: int | None = 10,
        tol: float = 1e-4,
        refit: bool | str = "auto",
        scale: Any = "auto",
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        keep_params(self, locals())


#: CG's factor, asked for by name (Nyström KRLS only: NYTRO's gradient solvers keep the full
#: factor), keyword-only after the common parameters (``_mixins._with_params``).
_CG_FACTOR_PARAMS = (
    (
        "factor_layout",
        "auto",
        """    factor_layout : {"auto", "cholesky", "eigh", "compact", "lowrank", "disk"}, \
default="auto"
        The form of CG's preconditioner (``solver="cg"``, square loss, one number of
        centers): "cholesky", K_mm's Cholesky factor with a float64 Cholesky factor of the
        preconditioned system per anchor penalty (about (2 + anchors) m^2 float64 numbers);
        "eigh", one eigendecomposition serving every penalty (4 m^2); "compact", T = chol(K_mm
        + jitter) and the anchors' preconditioners in the data's precision ((anchors + 2) // 2
        buffers of m^2: for float32 data or a tight budget); "lowrank", a rank-r randomized
        Nyström preconditioner of K_mm (O(m r) memory, no m x m matrix; slower to converge);
        "disk", the compact factor in float32 with one anchor in a temporary file
        (in the folder ``TMPDIR`` names, refused when it cannot be written; 4 m^2 bytes there),
        read by panels of rows, so that memory holds three panels of it (for m whose m x m
        buffer the budget cannot hold). "auto" never writes to disk; it takes the first of
        the others that fits ``memory_budget`` (the compact factor first for float32 data,
        and in place of the eigendecomposition from 8,000 centers where K_mm is not safely
        positive definite). A layout asked for is refused before any work
        where the budget cannot hold it (``BudgetError``).
""",
    ),
    (
        "preconditioner_rank",
        None,
        """    preconditioner_rank : int or None, default=None
        r, the rank of the low-rank preconditioner's sketch (at most m), where CG takes it;
        None: 1,000.
""",
    ),
)

_NYSTROM_PARAMS = (
    """

    Parameters
    ----------
    search : {"none", "auto", "full"}, default="auto"
        How much the fit tries on its hold-out beyond the λ path and the screened width
        (``fitting.choice``, ``fitting.growth``); each step starts from the model before
        it, so the hold-out never scores the result worse than "none"'s. "none": the
        kernel as given (``kernel="auto"``: the Gaussian), m as ``n_centers`` says.
        "auto": ``kernel="auto"`` screens the widths of the Gaussian and Matérn 5/2
        kernels on the same rows and keeps the Gaussian unless Matérn's per-row
        validation losses are clearly lower (by more than one standard error); a radial
        kernel whose width the fit chooses then gets learned-metric rounds
        (``sigma="agop"``, the metric's diagonal past 256 features) where the training
        part has at most 12,000 rows, stopping at the first round that does not pay; and
        with ``n_centers=None`` and uniform centers m doubles from sqrt(n) log(n), at most
        twice, while the validation error falls by more than 2% (and the memory budget
        holds the fit). "full": also the Matérn 3/2 and Laplacian kernels, and the metric
        rounds at every size with their own patience. Only the hold-out (``cv="holdout"``)
        searches. ``search_results_`` lists what was tried and what was chosen.
    penalty : float, sequence of floats or "auto", default="auto"
        λ in (1/n) sum_i (y_i - f(x_i))^2 + λ ||f||^2. A sequence is a path (the direct
        solver gets all of it from one eigendecomposition; CG runs the values side by side,
        sharing every kernel pass); "auto": 20 values geometric over 9 decades below the top
        eigenvalue of K / n.
    n_centers : int, sequence of int, "auto" or None, default=None
        Number m of Nyström centers; None: sqrt(n) log(n), at least 100 and no cap (for
        ``centers="squeak"``: the size of SQUEAK's dictionary). Larger than the training set:
        clipped with a warning. A sequence of m values, or "auto" (20 values geometric from 1
        to the default), fits the incremental Nyström path over (m, λ) (thesis Algorithm
        4.1, closed form whatever ``solver``) and chooses m with λ on the validation split;
        the model keeps the first m centers drawn. With one m and uniform centers, a drawn
        row whose values repeat an earlier center's is kept once (the same model: it adds
        nothing to the centers' span), so ``centers_`` can have fewer than m rows on data
        with repeated rows.
    centers : str, strategy object or array-like of shape (m, n_features), default="uniform"
        "uniform"; "leverage" (exact ridge leverage scores, n up to ~20,000);
        "approximate-leverage" (Alaoui & Mahoney's two-pass estimate); "squeak" (SQUEAK's
        dictionary); "rpcholesky" (randomly pivoted Cholesky: each center drawn in
        proportion to what the centers before it leave unexplained, ``centers.RPCholeskyCenters``);
        a ``LeverageCenters`` / ``SqueakCenters`` object to set the scores' λ
        and options; or the centers themselves. The scores' λ defaults to ``penalty`` when
        it is one number, else 1e-4 max k(x, x).
    solver : {"direct", "cg"}, default="cg"
        Closed form (O(n m^2), exact λ path) or conjugate gradient with the Nyström
        (FALKON) preconditioner, a path over iterations and λ. With ``loss="logistic"`` or
        ``"squared_hinge"`` (classifiers): how Newton's systems are solved, factored from a
        weighted Gram matrix, or by CG preconditioned with the centers' own Hessian and then
        a lagged exact Hessian.
    max_iter : int or None, default=None
        Iterations of CG (default 100; the Newton losses: per Newton step).
    n_iter_no_change : int or None, default=10
        Early stopping: a penalty stops after this many iterations without its validation
        error improving by more than ``tol`` (relative). The Newton losses' λ path stops
        after 3 penalties without a better validation loss (None: every penalty).
    tol : float, default=1e-4
        Tolerance of early stopping and of CG convergence (relative residual); the Newton
        losses stop when half the squared Newton decrement is at most tol^2 times the
        objective.
"""
    + _COMMON_DOC
    + _ATTR_DOC
)

_NYTRO_PARAMS = (
    """

    Parameters
    ----------
    penalty : float, sequence of floats or "auto", default=0.0
        λ added to the gradient iteration; NYTRO's regularization is the iteration count,
        so the default is 0. A sequence runs several λ side by side.
    n_centers : int or None, default=None
        Number m of Nyström centers (see NystromRegressor; a path over m needs the Nyström
        estimators).
    centers : str, strategy object or array-like, default="uniform"
        See NystromRegressor.
    solver : {"gd", "nu"}, default="gd"
        Gradient descent (NYTRO eq. 17-19) with the step from the largest eigenvalue of the
        preconditioned system, or its ν-method acceleration.
    max_iter : int or None, default=None
        Iterations (default 500 for gd, 100 for nu).
    nu : float > 0, default=1.0
        Order (qualification) ν of the ν-method (``solver="nu"``).
    step : "auto", "reference", "paper" or float, default="auto"
        The step γ of beta_t = beta_{t-1} - γ ((H0 + λ) beta_{t-1} - b): "auto" 1 / (L + λ)
        with L the top eigenvalue of H0 (power iteration); "reference" the NYTRO code's
        1 / ||K_nm R^-1||^2, whose K_nm has the hold-out rows too (1 / L without a
        hold-out); "paper" the paper's γ = 1 / κ², κ² = max k(x, x) (for
        radial kernels 1: safe, up to ~1 / L times slower); a number is γ itself.
    stopping : {"window", "paper", "reference"}, default="window"
        Early stopping on the validation error: "window" stops after ``n_iter_no_change``
        iterations without a relative improvement of ``tol``; "paper" is NYTRO's rule (stop
        at the first iteration whose validation RMSE is not 5% below the previous one);
        "reference" the reference code's (stop when a line fitted to the last
        ``n_iter_no_change`` (10) validation RMSEs falls by less than
        ``stopping_threshold`` over them; by default, when it no longer slopes down).
    stopping_threshold : float or None, default=None
        The threshold of ``stopping``: for "paper" the fraction (default 0.05); for
        "reference" the fall of the fitted line over the window, in units of the validation
        RMSE (default 0, the reference code's default; its Table 2 runs used 0.0069 on adult
        and 0.000835 on ijcnn1). Unused by "window".
    n_iter_no_change : int or None, default=10
        Early-stopping window on the validation error (the NYTRO reference uses 10). The
        ν-method's validation curve can plateau for tens of iterations before improving
        again: a wider window (e.g. 30) often finds a better point.
    tol : float, default=1e-4
        Relative improvement that counts for early stopping; relative step for convergence.
"""
    + _COMMON_DOC
    + _ATTR_DOC
)


class NystromRegressor(_RegressorMixin, _NystromBase):
    __doc__ = (
        "Nyström kernel ridge regression with the whole λ (and iteration) path." + _NYSTROM_PARAMS
    )


class NystromClassifier(_ClassifierMixin, _NystromBase):
    __doc__ = "Nyström kernel RLS classifier (one-vs-all ±1 coding)." + _NYSTROM_PARAMS
    _classifier = True


class NYTRORegressor(_RegressorMixin, _NYTROBase):
    __doc__ = "NYTRO: Nyström gradient descent regularized by early stopping." + _NYTRO_PARAMS


class NYTROClassifier(_ClassifierMixin, _NYTROBase):
    __doc__ = (
        "NYTRO classifier (one-vs-all ±1 coding), regularized by early stopping." + _NYTRO_PARAMS
    )
    _classifier = True


for _cls in (NystromRegressor, NystromClassifier):
    _with_params(_cls, _CG_FACTOR_PARAMS)
