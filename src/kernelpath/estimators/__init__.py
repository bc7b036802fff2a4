"""scikit-learn estimators: exact KRLS, Nyström KRLS (direct or CG) and NYTRO (GD or ν)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score

from .. import _backend as B
from .._validation import check_choice
from ..linalg import FILTERS
from ..solvers.spectral import ITERATION_FILTERS
from ._base import _KernelPathEstimator

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
]

_COMMON_DOC = """
    kernel : str, Kernel or sequence of them, default="gaussian"
        A Kernel instance (``kernelpath.Gaussian(sigma=2.0)``) or a name ("gaussian",
        "laplacian", "matern", "cauchy" with ``sigma="median"``; "polynomial", "linear").
        A sequence is a path over kernels (widths or families), searched with the other
        parameters; a radial kernel with ``sigma="auto"`` is the 11 widths
        ``kernels.AUTO_WIDTH_FACTORS`` x the median distance. With the hold-out, widths are
        screened on subsamples first (successive halving).
    validation_fraction : float in [0, 1), default=0.2
        Fraction of the data held out to score the path and choose its best point
        (``cv="holdout"``). 0 turns selection off and fits on all the data (then
        ``penalty`` must be a number).
    cv : "holdout", "loo", "gcv", int or splitter, default="holdout"
        How the path is scored. "holdout": the ``validation_fraction`` split. "loo": exact
        leave-one-out in closed form (λn fixed, intercept re-estimated; exact KRLS with the
        Tikhonov filter, Nyström ``solver="direct"`` with its centers fixed, random
        features at one D). "gcv": generalized cross-validation (the same, and the linear
        spectral filters). An int k: k-fold (stratified for classifiers); or a
        scikit-learn splitter (every solver). With any mode but "holdout" the model is fit
        on all the data at the chosen point.
    refit : bool, default=False
        Refit on all the data at the chosen point (like GridSearchCV); by default the model
        trained on the training part is kept (like scikit-learn's early stopping). The
        refit keeps the chosen penalty, and the chosen iteration count for gradient descent,
        Landweber and the ν-method (their regularization); CG runs to convergence (``tol``)
        when the chosen point had converged, else it keeps the chosen iteration count.
    memory_budget : int, str or None, default=None
        Bytes the kernel blocks may take ("2GB" works); None: half of the available memory.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the validation split, the centers and the median heuristic.
    device : None, "auto", "cpu", "cuda", "cuda:N" or torch.device, default=None
        Where to compute. None: where the inputs live (NumPy arrays with NumPy, torch
        tensors with PyTorch on their device); "cpu" / "cuda" / "cuda:N": PyTorch on that
        device, NumPy inputs moved there for the call; "auto": CUDA when PyTorch sees a
        GPU, else as None. Outputs follow the input: a tensor in gives a tensor on its
        device, NumPy in gives NumPy. PyTorch is optional (``pip install
        "kernelpath[torch]"``). On CUDA ``memory_budget`` is device memory.
    verbose : int, default=0
        0: silent. 1: a line on stderr per stage of the fit (iterations, epochs or passes,
        at about every tenth step) with the best validation error so far and the time;
        2: a line per step. The same reports go to the ``kernelpath`` logger at DEBUG
        level whatever ``verbose`` is.
"""

_ATTR_DOC = """
    Attributes
    ----------
    path_ : Path
        The regularization path with training and validation errors at every point; with
        several kernels a leading "sigma" (one family) or "kernel" axis. k-fold:
        ``path_.fold_errors`` and ``path_.cv_results``.
    best_params_ : dict
        Parameters of the chosen point (with several kernels, "kernel": the chosen one).
    penalty_ : float
        Chosen λ.
    n_iter_ : int
        Iterations of the chosen point (1 for closed forms).
    centers_ : ndarray of shape (m, n_features)
        Centers of the model (the training points for exact KRLS).
    coef_ : ndarray of shape (m,) or (m, n_outputs)
        Coefficients: f(x) = sum_j k(x, centers_j) coef_j + intercept_.
    intercept_ : float or ndarray of shape (n_outputs,)
        Mean of the training targets (regression) or 0 (classification).
    kernel_ : Kernel
        The kernel with data-dependent parameters resolved.
    center_strategy_ : str
        How the centers were chosen.
    center_indices_ : ndarray of int or None
        Rows of the training part (``X[train_indices_]``) used as centers, in draw order.
    center_scores_ : ndarray of shape (n_train,) or None
        The leverage scores the strategy sampled by (None for uniform or given centers).
    center_weights_ : ndarray of shape (m,) or None
        Sketch weights of the centers (1 / sqrt(m p_i); SQUEAK: sqrt(q_i / (q̄ p_i))).
        Recorded only: rescaling the centers' columns does not change a Nyström model.
    center_penalty_ : float or None
        λ of the leverage scores.
    train_indices_, validation_indices_ : ndarray of int
        Rows of X used to train the path and to score it (empty without selection).
    device_ : str
        Where the fit computed ("numpy", "cpu" for torch-CPU, "cuda:0", ...); ``coef_``
        and ``centers_`` live there (NumPy arrays or tensors).
"""


class _RegressorMixin(RegressorMixin):
    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def predict(self, X: Any) -> Any:
        """Predict targets.

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)

        Returns
        -------
        ndarray or tensor of shape (n_samples,) or (n_samples, n_outputs)
            Like X: a tensor on X's device for a tensor, else a NumPy array.
        """
        if B.is_dask(X):
            return self._dask_predict(X, "predict")  # type: ignore[attr-defined]
        return B.like_input(self._decision(X), X)  # type: ignore[attr-defined]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of the predictions (scikit-learn's ``r2_score``; tensors accepted)."""
        pred = B.to_numpy(self.predict(X))
        return float(r2_score(B.to_numpy(y), pred, sample_weight=_host(sample_weight)))


def _host(a: Any) -> Any:
    return None if a is None else B.to_numpy(a)


class _ClassifierMixin(ClassifierMixin):
    def decision_function(self, X: Any) -> Any:
        """One-vs-all scores.

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, n_features)

        Returns
        -------
        ndarray or tensor of shape (n_samples,) for two classes (positive: ``classes_[1]``),
        else (n_samples, n_classes); like X (a dask array for a dask array).
        """
        if B.is_dask(X):
            return self._dask_predict(X, "decision_function")  # type: ignore[attr-defined]
        return B.like_input(self._decision(X), X)  # type: ignore[attr-defined]

    def predict(self, X: Any) -> Any:
        """Predict class labels, shape (n_samples,); a tensor on X's device for a tensor X
        (when the labels are numbers); a dask array for a dask array."""
        if B.is_dask(X):
            return self._dask_predict(X, "predict")  # type: ignore[attr-defined]
        scores = B.to_numpy(self._decision(X))  # type: ignore[attr-defined]
        classes = self.classes_  # type: ignore[attr-defined]
        if scores.ndim == 1:
            labels = classes[(scores > 0).astype(int)]
        else:
            labels = classes[np.argmax(scores, axis=1)]
        return B.like_input(labels, X)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy (scikit-learn's ``accuracy_score``; tensors accepted)."""
        pred = B.to_numpy(self.predict(X))
        return float(accuracy_score(B.to_numpy(y), pred, sample_weight=_host(sample_weight)))


class _KRLSBase(_KernelPathEstimator):
    _family = "exact"

    def __init__(
        self,
        kernel: Any = "gaussian",
        penalty: Any = "auto",
        filter: str = "tikhonov",
        max_iter: int | None = None,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        refit: bool = False,
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kernel = kernel
        self.penalty = penalty
        self.filter = filter
        self.max_iter = max_iter
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.refit = refit
        self.memory_budget = memory_budget
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _method(self) -> str:
        return check_choice(self.filter, "filter", FILTERS)


class _NystromBase(_KernelPathEstimator):
    _family = "nystrom"
    _takes_dask = True

    def __init__(
        self,
        kernel: Any = "gaussian",
        penalty: Any = "auto",
        n_centers: int | None = None,
        centers: Any = "uniform",
        solver: str = "cg",
        max_iter: int | None = None,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        n_iter_no_change: int | None = 10,
        tol: float = 1e-4,
        refit: bool = False,
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kernel = kernel
        self.penalty = penalty
        self.n_centers = n_centers
        self.centers = centers
        self.solver = solver
        self.max_iter = max_iter
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.refit = refit
        self.memory_budget = memory_budget
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _method(self) -> str:
        return check_choice(self.solver, "solver", ("direct", "cg"))


class _NYTROBase(_NystromBase):
    _family = "nytro"

    def __init__(
        self,
        kernel: Any = "gaussian",
        penalty: Any = 0.0,
        n_centers: int | None = None,
        centers: Any = "uniform",
        solver: str = "gd",
        max_iter: int | None = None,
        validation_fraction: float = 0.2,
        cv: Any = "holdout",
        n_iter_no_change: int | None = 10,
        tol: float = 1e-4,
        refit: bool = False,
        memory_budget: Any = None,
        random_state: Any = None,
        device: Any = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(
            kernel=kernel,
            penalty=penalty,
            n_centers=n_centers,
            centers=centers,
            solver=solver,
            max_iter=max_iter,
            validation_fraction=validation_fraction,
            cv=cv,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            refit=refit,
            memory_budget=memory_budget,
            random_state=random_state,
            device=device,
            verbose=verbose,
        )

    def _method(self) -> str:
        return check_choice(self.solver, "solver", ("gd", "nu"))


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
"""
    + _COMMON_DOC
    + _ATTR_DOC
)

_NYSTROM_PARAMS = (
    """
    Parameters
    ----------
    penalty : float, sequence of floats or "auto", default="auto"
        λ in (1/n) sum_i (y_i - f(x_i))^2 + λ ||f||^2. A sequence is a path (the direct
        solver gets all of it from one eigendecomposition; CG runs the values side by side,
        sharing every kernel pass); "auto": 20 values geometric over 9 decades below the top
        eigenvalue of K / n.
    n_centers : int, sequence of int, "auto" or None, default=None
        Number m of Nyström centers; None: sqrt(n) log(n), within [100, 5000] (for
        ``centers="squeak"``: the size of SQUEAK's dictionary). Larger than the training set:
        clipped with a warning. A sequence of m values, or "auto" (20 values geometric from 1
        to the default), fits the incremental Nyström path over (m, λ) (thesis Algorithm
        4.1, closed form whatever ``solver``) and chooses m with λ on the validation split;
        the model keeps the first m centers drawn.
    centers : str, strategy object or array-like of shape (m, n_features), default="uniform"
        "uniform"; "leverage" (exact ridge leverage scores, n up to ~20,000);
        "approximate-leverage" (Alaoui & Mahoney's two-pass estimate); "squeak" (SQUEAK's
        dictionary); a ``LeverageCenters`` / ``SqueakCenters`` object to set the scores' λ
        and options; or the centers themselves. The scores' λ defaults to ``penalty`` when
        it is one number, else 1e-4 max k(x, x).
    solver : {"direct", "cg"}, default="cg"
        Closed form (O(n m^2), exact λ path) or conjugate gradient with the Nyström
        (FALKON) preconditioner, a path over iterations and λ.
    max_iter : int or None, default=None
        Iterations of CG (default 100).
    n_iter_no_change : int or None, default=10
        Early stopping: a penalty stops after this many iterations without its validation
        error improving by more than ``tol`` (relative).
    tol : float, default=1e-4
        Tolerance of early stopping and of CG convergence (relative residual).
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


assert set(ITERATION_FILTERS) <= set(FILTERS)

# after the mixins they use
from .eigenpro import EigenProClassifier, EigenProRegressor  # noqa: E402
from .random_features import RandomFeaturesClassifier, RandomFeaturesRegressor  # noqa: E402
from .sgm import SGMClassifier, SGMRegressor  # noqa: E402
