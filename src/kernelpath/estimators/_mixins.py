"""What every batch estimator shares: the regressor and classifier mixins (predict,
decision_function, score) and the docstring parts of the common parameters."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from ..calibration import log_probabilities
from ._uncertainty import check_posterior, conformal_half_width, posterior_std

_COMMON_DOC = """
    kernel : str, Kernel or sequence of them, default="gaussian" (Nyström: "auto")
        A Kernel instance (``kernelpath.Gaussian(sigma=2.0)``) or a name ("gaussian",
        "laplacian", "matern", "cauchy" with ``sigma="auto"``; "polynomial", "linear";
        "auto", the Gaussian, whose family the Nyström estimators' ``search`` chooses).
        ``sigma="auto"`` has the fit choose the width: with the hold-out (the default) a
        1-D search over log sigma scored by Nyström KRLS's closed-form λ path on a
        subsample of at most 4,000 training rows, corrected for the number of rows
        (``fitting.widths``), then one fit at that width; with k-fold, LOO or GCV the 11
        widths ``kernels.AUTO_WIDTH_FACTORS`` x the median distance, each fit in full.
        Without a validation split (``validation_fraction=0``) a name takes the median
        heuristic. A sequence is a path over kernels (widths or families), searched with
        the other parameters; with the hold-out, several candidates are screened on
        subsamples first (successive halving).
    scale : "auto", True or False, default="auto"
        Scale the inputs of a radial kernel: each feature's standard deviation s_l (1 for a
        constant column: ``kernelpath.scaling``) is folded into the widths (sigma_l =
        sigma * s_l), so X is not copied and ``predict`` takes raw inputs. "auto": where
        the fit chooses the width (a name, ``sigma`` "auto", "median" or "ard"); a width
        given as a number is in the units of X as passed. True: every radial kernel, a
        numeric width then in the units of the scaled inputs (an error without a radial
        kernel). False: never. ``kernel_`` holds the widths on the raw inputs (one per
        feature when scaled).
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
    refit : "auto", True or False, default="auto"
        Refit on all the data at the chosen point (like GridSearchCV). "auto": where the
        chosen point is a closed form at its λ (Nyström ``solver="direct"``, exact KRLS with
        the Tikhonov, kOLS or TSVD filter, random features) and X is in memory; the
        iterative solvers keep the model trained on the training part (an early-stopped
        iterate refit on more rows is another model: CG on cpusmall went from test RMSE 3.7
        to 16.5), as does data read from disk or Dask (one more pass). The refit keeps the
        chosen penalty, and the chosen iteration count for gradient descent, Landweber and
        the ν-method (their regularization); CG runs to convergence (``tol``) when the
        chosen point had converged, else it keeps the chosen iteration count.
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
    n_centers_ : int
        m, the number of centers of the model (Nyström estimators).
    encoder_ : TabularEncoder
        The encoding of a table's categorical columns and missing values (only where X
        had them, ``categorical_features``); ``feature_relevances_`` are then per column of
        the table, ``encoded_feature_relevances_`` per encoded feature.
    search_results_ : list of dict
        What ``search`` tried, in order (Nyström estimators, ``search`` not "none"): each
        with "step" ("family", "metric" or "centers"), what it tried ("kernel", "round",
        "n_centers"), its "val_error" and whether it was "chosen".
    conformal_residuals_ : ndarray of shape (n_held_out, n_outputs)
        Regression: the sorted absolute residuals of the chosen point on the rows it did
        not train on, which ``predict_interval`` takes its quantiles from.
    noise_variance_, signal_variance_ : ndarray of shape (n_outputs,)
        Regression: sigma^2 and s^2 of ``predict(X, return_std=True)``, fitted to those
        residuals (``signal_variance_`` only where the model has the posterior).
    n_fit_rows_ : int
        The rows the final model was fitted on.
    coef_ : ndarray of shape (m,) or (m, n_outputs)
        Coefficients: ``f(x) = sum_j k(x, centers_j) coef_j + intercept_``.
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
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def predict(self, X: Any, return_std: bool = False) -> Any:
        """Predict targets.

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of y at each row: the Gaussian-process
            posterior's under the fitted λ plus the noise, the two variances fitted to the
            held-out residuals (``estimators._uncertainty``: the exact posterior's shape for
            KRLSRegressor, conditioned on the centers for NystromRegressor; O(m^2) memory
            and O(m^3 + n m^2) time).

        Returns
        -------
        ndarray or tensor of shape (n_samples,) or (n_samples, n_outputs)
            Like X: a tensor on X's device for a tensor, else a NumPy array.
        std : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            With ``return_std``.
        """
        if not isinstance(return_std, (bool, np.bool_)):
            raise TypeError(f"return_std must be True or False, got {return_std!r}")
        if B.is_dask(X):
            if return_std:
                raise TypeError("return_std: give X in memory (a NumPy array or a frame)")
            return self._dask_predict(X, "predict")
        pred = B.like_input(self._decision(X), X)
        if not return_std:
            return pred
        check_posterior(self)
        return pred, posterior_std(self, X)

    def predict_interval(self, X: Any, coverage: float = 0.9) -> np.ndarray:
        """Prediction intervals with a coverage guarantee (split conformal prediction from
        the residuals of the rows the fit held out, ``estimators._uncertainty``).

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)
        coverage : float in (0, 1), default=0.9
            The probability that the interval of a new row holds its y (at least this, at
            most this plus 1 / (n_held_out + 1), for rows exchangeable with the held-out
            ones).

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, n_outputs)
            [lower, upper] per row (and output).
        """
        check_is_fitted(self, "coef_")
        residuals = getattr(self, "conformal_residuals_", None)
        if residuals is None:
            raise ValueError(
                f"{type(self).__name__}: predict_interval needs the residuals of rows the "
                "fit did not train on, and this fit held none out (cv='loo', 'gcv' or "
                "validation_fraction=0): fit with cv='holdout' or an int k"
            )
        q = conformal_half_width(residuals, coverage)
        pred = np.asarray(B.to_numpy(self.predict(X)), dtype=np.float64)
        P = pred[:, None] if pred.ndim == 1 else pred
        out = np.stack([P - q, P + q], axis=1)
        return out[:, :, 0] if pred.ndim == 1 else out

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of the predictions (scikit-learn's ``r2_score``; tensors accepted).

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)
            Rows.
        y : array-like or tensor of shape (n_samples,) or (n_samples, n_outputs)
            Their targets.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Row weights.

        Returns
        -------
        float
        """
        pred = B.to_numpy(self.predict(X))
        return float(r2_score(B.to_numpy(y), pred, sample_weight=_host(sample_weight)))


def _host(a: Any) -> Any:
    return None if a is None else B.to_numpy(a)


LOSS_DOC = """    loss : {"square", "logistic", "squared_hinge"}, default="square"
        The loss fit to the classes: "square" (least squares on ±1 one-vs-all codes, the
        closed forms and solvers above); "logistic" (binary, or multinomial softmax for
        more than two classes) and "squared_hinge" (as scikit-learn's LinearSVC, one-vs-all)
        are fit by Newton's method along the λ path, the intercept unpenalized
        (``solvers.newton``; NystromClassifier, KRLSClassifier with the Tikhonov filter and
        RandomFeaturesClassifier; NYTRO and EigenPro take "square" only). The logistic
        loss chooses λ by the hold-out log-loss, the squared hinge by error rate.
"""

CLASS_WEIGHT_DOC = """    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, with scikit-learn's meaning: each sample's weight is
        multiplied by its class's (``sklearn.utils.class_weight.compute_sample_weight``);
        "balanced": n_samples / (n_classes * count of the class). A dict may leave classes
        out (weight 1) but may not name a class that ``y`` does not hold.
"""

CATEGORICAL_DOC = """    categorical_features : "from_dtype", None, names, indices or bool mask, \
default="from_dtype"
        The categorical columns of a table X (a pandas DataFrame, or a polars or pyarrow
        table): "from_dtype", its text (object, string), category and boolean columns;
        None, none (a text column is then refused); or the columns by name, by index, or
        as a boolean mask. They are encoded inside the model (``kernelpath.tabular``):
        one-hot up to 32 categories, else target encoding with cross fitting; a category
        seen only at predict time has no column of its own. ``encoder_`` holds the
        encoding; ``kernel_``'s widths are in its units.
"""

MISSING_DOC = """    missing_values : {"impute", "error"}, default="impute"
        Missing values (NaN, None, pandas' NA) in a table or a float array: "impute" fills
        a numeric column's with its training median and adds a missing indicator beside
        it, and makes a categorical column's a category of its own; "error" refuses them,
        naming the column. Sparse rows, tensors and row sources are taken as they are.
"""

#: The parameters every batch estimator adds after its family's (``estimators``).
_TABLE_PARAMS = (
    ("categorical_features", "from_dtype", CATEGORICAL_DOC),
    ("missing_values", "impute", MISSING_DOC),
)

#: The parameters every batch classifier adds after its family's: (name, default, doc).
_CLASSIFIER_PARAMS = (("loss", "square", LOSS_DOC), ("class_weight", None, CLASS_WEIGHT_DOC))


def _with_classifier_params(cls: type) -> None:
    """Give the classifier ``cls`` the parameters ``loss`` (unless its family has its own)
    and ``class_weight`` (``_with_params``)."""
    _with_params(cls, _CLASSIFIER_PARAMS)


def _with_params(cls: type, params: tuple[tuple[str, Any, str], ...]) -> None:
    """Give the estimator ``cls`` the keyword-only parameters ``params`` ((name, default,
    docstring entry) each; those its ``__init__`` already has are skipped) after those of
    the ``__init__`` it inherits (its signature extended, for ``get_params``), and their
    docstring entries before its Attributes."""
    init = cls.__init__  # type: ignore[misc]
    sig = inspect.signature(init)
    added = [(n, d, doc) for n, d, doc in params if n not in sig.parameters]
    if not added:
        return
    defaults = {n: d for n, d, _ in added}

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        own = {n: kwargs.pop(n, d) for n, d in defaults.items()}
        init(self, *args, **kwargs)
        for name, value in own.items():
            setattr(self, name, value)

    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d, _ in added]
    __init__.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[*sig.parameters.values(), *extra]
    )
    __init__.__doc__ = init.__doc__
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"  # where tools look it up
    __init__.__module__ = cls.__module__
    cls.__init__ = __init__  # type: ignore[misc]
    if cls.__doc__ and "\n    Attributes\n" in cls.__doc__:
        docs = "".join(doc for _, _, doc in added)
        cls.__doc__ = cls.__doc__.replace(
            "\n    Attributes\n", "\n" + docs + "\n    Attributes\n", 1
        )


class _ClassifierMixin(ClassifierMixin):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__ and not cls.__name__.startswith("_"):
            _with_classifier_params(cls)

    def decision_function(self, X: Any) -> Any:
        """One-vs-all scores.

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)

        Returns
        -------
        ndarray or tensor of shape (n_samples,) for two classes (positive: ``classes_[1]``),
        else (n_samples, n_classes); like X (a dask array for a dask array).
        """
        if B.is_dask(X):
            return self._dask_predict(X, "decision_function")
        return B.like_input(self._decision(X), X)

    def predict(self, X: Any) -> Any:
        """Predict class labels: the largest probability's class (``predict_proba``'s arg
        max; without probabilities, the largest score's).

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)
            Rows to label.

        Returns
        -------
        ndarray or tensor of shape (n_samples,)
            A tensor on X's device for a tensor X (when the labels are numbers); a dask
            array for a dask array.
        """
        if B.is_dask(X):
            return self._dask_predict(X, "predict")
        scores = B.to_numpy(self._decision(X))
        return B.like_input(self.classes_[self._winners(scores)], X)

    def _winners(self, scores: np.ndarray) -> np.ndarray:
        """The column of each row's predicted class: the one tie-break rule of ``predict``
        and ``predict_proba``. With probabilities (a calibration map or the logistic loss),
        the largest probability's class, the first in ``classes_`` on an exact tie (NumPy's
        arg max), so that ``predict`` is ``predict_proba``'s arg max even where the map
        rounds distinct scores (~1e-23 apart) to one probability; without (cv='loo' or
        'gcv', old model files), the largest score's class (two classes: score > 0)."""
        if getattr(self, "calibration_", None) is not None:
            winners: np.ndarray = np.argmax(
                log_probabilities(scores, self._probability_map()), axis=1
            )
            return winners
        if scores.ndim == 1:
            return (scores > 0).astype(int)
        return np.asarray(np.argmax(scores, axis=1))

    def predict_log_proba(self, X: Any) -> Any:
        """Log-probabilities of the classes (``predict_proba``'s logarithm, computed
        without underflow).

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; a dask array for a dask array.
        """
        if B.is_dask(X):
            return self._dask_predict(X, "predict_log_proba")
        return log_probabilities(B.to_numpy(self._decision(X)), self._probability_map())

    def predict_proba(self, X: Any) -> Any:
        """Probabilities of the classes.

        The logistic loss's own (sigmoid or softmax of ``decision_function``); for the
        other losses the calibration map ``calibration_`` fit on the hold-out scores of
        the model before any refit (k-fold: its out-of-fold scores), which keeps ``predict``
        the probabilities' arg max (``kernelpath.calibration``).

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1; columns in the order of ``classes_``; a dask array for a dask
            array.
        """
        if B.is_dask(X):
            return self._dask_predict(X, "predict_proba")
        return np.exp(self.predict_log_proba(X))

    def _probability_map(self) -> dict[str, Any] | None:
        check_is_fitted(self, "coef_")
        cal = getattr(self, "calibration_", None)
        if cal is None:
            raise ValueError(
                f"{type(self).__name__}: predict_proba calibrates the scores on rows the model "
                "did not see, and this fit held none out (cv='loo' or 'gcv', "
                "validation_fraction=0, or a model file written before probabilities): "
                "fit with cv='holdout' (validation_fraction > 0) or an int k, or "
                "loss='logistic'"
            )
        return None if cal.get("method") == "logistic" else cal

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy (scikit-learn's ``accuracy_score``; tensors accepted).

        Parameters
        ----------
        X : array-like, sparse matrix or tensor of shape (n_samples, n_features)
            Rows.
        y : array-like or tensor of shape (n_samples,)
            Their labels.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Row weights.

        Returns
        -------
        float
        """
        pred = B.to_numpy(self.predict(X))
        return float(accuracy_score(B.to_numpy(y), pred, sample_weight=_host(sample_weight)))
