"""The estimators' base: ``fit`` (inputs to a ``FitProblem``, the family's settings, the
selection plan), the publishing of fitted attributes, and the decision function.

Estimators hold no numerical code and no search: ``kernelpath.fitting`` does both. The
fitted model is ``coef_`` (coefficients of ``centers_`` or of a feature map) plus
``intercept_``: f(x) = sum_j k(x, c_j) coef_j + intercept_.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._available_if import available_if
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._threads import fit_threads
from .._validation import check_int, check_labels, check_numeric, validate_X
from ..distributed import dask_predict
from ..fitting import Family, NystromFamily, Selection, select
from ..fitting.agop import metric_summary
from ..fitting.family import FittedModel
from ..fitting.problem import FitProblem
from ..inputs import as_rows, host_sparse, is_sparse
from ..kernels import AGOP_NAMES
from ..progress import verbose_reporter
from ..tabular import TabularEncoder, as_frame, check_missing_values, is_frame, needs_encoding
from ..workspace import Workspace
from ._inputs import device_for, fit_problem, gathered
from ._uncertainty import calibrate_posterior

__all__ = ["_KernelPathEstimator"]

#: The fitted attributes of a learned metric (``sigma="agop"``) or learned widths ("ard").
_LEARNED_METRIC = (
    "ard_info_",
    "agop_info_",
    "metric_",
    "feature_relevances_",
    "metric_components_",
    "metric_eigenvalues_",
    "search_results_",
    "encoded_feature_relevances_",
    "conformal_residuals_",
    "noise_variance_",
    "signal_variance_",
)


def _learns_metric(est: Any) -> bool:
    """Whether the estimator's kernel has ``sigma="agop"`` or "agop_diagonal"
    (``transform`` is offered)."""
    sigma = getattr(getattr(est, "kernel", None), "sigma", None)
    return isinstance(sigma, str) and sigma in AGOP_NAMES


class _KernelPathEstimator(BaseEstimator):
    """Base class. Subclasses set ``_family`` (a ``fitting.Family``) and ``_classifier``."""

    _family: Family = NystromFamily()
    _classifier = False

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """Fit the path (over kernels too when ``kernel`` is a sequence or has
        ``sigma="auto"``) and keep its best point.

        Parameters
        ----------
        X : array-like, sparse matrix, tensor or row source of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (class labels for classifiers).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights w_i: the loss is sum_i w_i (y_i - f(x_i))^2 / sum_i w_i.

        Returns
        -------
        self
        """
        verbose = check_int(getattr(self, "verbose", 0), "verbose", 0)
        # BLAS on one thread, but in the large dense factorizations (_threads)
        with verbose_reporter(type(self).__name__, int(verbose or 0)), fit_threads():
            for name in _LEARNED_METRIC:
                self.__dict__.pop(name, None)
            family = self._family
            params = self.get_params(deep=False)
            X, params, encoded = self._encoded_fit(X, y, params)
            problem, settings, classes = fit_problem(
                self, params, family, X, y, sample_weight, self._classifier, encoded
            )
            self.device_ = str(problem.device)
            if classes is not None:
                self.classes_ = classes
            chosen = select(family, problem, settings, params)
            self._publish(problem, chosen)
            if getattr(self, "encoder_", None) is not None:
                self._publish_columns()
        return self

    # --------------------------------------------------------------- tables
    def _encoded_fit(self, X: Any, y: Any, params: dict[str, Any]) -> tuple[Any, dict, int]:
        """(X to fit on, the parameters the fit uses, the bytes of an encoded copy): a
        table with categorical columns or missing values encoded by a ``TabularEncoder``
        kept as ``encoder_`` (its scaling replaces ``scale``, so the fit does not scale
        again); other inputs as they are."""
        self.__dict__.pop("encoder_", None)
        cf = params.get("categorical_features", "from_dtype")
        mv = check_missing_values(params.get("missing_values", "impute"))
        if is_frame(X) and not type(X).__module__.startswith("pandas"):
            X = as_frame(X)  # polars or pyarrow: their pandas frame
        if not needs_encoding(X, cf, mv):
            return X, params, 0
        y = gathered(y)
        if self._classifier:  # named refusals before the encoding reads the targets
            check_labels(y)
        else:
            check_numeric(y, "y")
        seed = params.get("random_state")
        enc = TabularEncoder(
            cf, mv, params.get("scale", "auto") is not False, seed if isinstance(seed, int) else 0
        )
        budget = Workspace.of(self.memory_budget, None).budget
        Xe = enc.fit_transform(X, y, self._classifier, budget // 4)
        self.encoder_ = enc
        held = Xe.data.nbytes if is_sparse(Xe) else Xe.nbytes
        return Xe, dict(params, scale=False), int(held)

    def _publish_columns(self) -> None:
        """The columns of the table as fitted (``n_features_in_``, ``feature_names_in_``),
        and the learned relevances per column (their encoded features' sums)."""
        enc = self.encoder_
        relevances = getattr(self, "feature_relevances_", None)
        if relevances is not None:
            self.encoded_feature_relevances_ = relevances
            self.feature_relevances_ = enc.column_sums(relevances)
        self.n_features_in_ = len(enc.columns_)
        if enc.named_:
            self.feature_names_in_ = np.asarray(enc.columns_, dtype=object)
        else:
            self.__dict__.pop("feature_names_in_", None)

    def _rows(self, X: Any) -> Any:
        """Rows to predict or transform: validated, or encoded by ``encoder_``."""
        enc = getattr(self, "encoder_", None)
        if enc is None:
            return validate_X(self, X, reset=False)
        if B.is_tensor(X) or is_sparse(X) or B.is_dask(X):
            raise TypeError(
                "X: this model encodes its table's columns (categorical or missing values), "
                f"so it predicts a DataFrame or an array, got {type(X).__name__}"
            )
        budget = Workspace.of(self.memory_budget, None).budget
        return enc.transform(X, budget // 4)

    def _publish(self, problem: FitProblem, chosen: Selection) -> None:
        """Set the fitted attributes of the chosen model."""
        self.kernel_ = chosen.model.kernel
        self.train_indices_ = chosen.train
        self.validation_indices_ = chosen.validation
        attrs = self._family.model(chosen.model, chosen.coef)
        coef, intercept = np.asarray(attrs.pop("coef")), attrs.pop("intercept")
        if problem.y_scale != 1.0:  # the targets were fitted divided by it
            coef = coef * problem.y_scale
            intercept = np.asarray(intercept) * problem.y_scale
        # 1-D for one output (or a binary classifier); coef_ on the device the fit ran on
        out = coef[:, 0] if problem.single_output else coef
        self.coef_ = B.to_device(out, problem.device, out.dtype)
        inter = np.asarray(intercept, dtype=coef.dtype)
        self.intercept_ = inter[0] if problem.single_output else inter
        for name, value in attrs.items():
            setattr(self, name, value)
        if self._family.grows_centers and getattr(self, "centers_", None) is not None:
            self.n_centers_ = int(self.centers_.shape[0])
        if chosen.search_info is not None:
            self.search_results_ = [dict(row) for row in chosen.search_info]
        self.n_fit_rows_ = int(chosen.model.rows)
        path = chosen.path.in_units(problem.y_scale)
        self.path_ = path
        if chosen.ard_info is not None:
            self.ard_info_ = dict(chosen.ard_info)
        if chosen.agop_info is not None:
            self.agop_info_ = dict(chosen.agop_info)
            scales = chosen.agop_info.get("feature_scales")
            summary = metric_summary(self.kernel_, self.n_features_in_, scales)
            self.metric_ = summary["metric"]
            self.feature_relevances_ = summary["relevances"]
            self.metric_components_ = summary["components"]
            self.metric_eigenvalues_ = summary["eigenvalues"]
        if problem.classifier:
            self.calibration_ = chosen.calibration
        self.best_params_ = path.best_params
        if chosen.n_kernels > 1:
            self.best_params_["kernel"] = self.kernel_
        best = self.best_params_
        self.penalty_ = float(best.get("penalty", 0.0))
        self.n_iter_ = int(best["n_iter"]) if "n_iter" in best else 1
        if chosen.residuals is not None and not problem.classifier:
            R = chosen.residuals * problem.y_scale  # in y's units
            self.conformal_residuals_ = np.sort(np.abs(R), axis=0)
            self.noise_variance_ = np.mean(R**2, axis=0)
            if chosen.residual_rows is not None:  # the posterior's two variances, where it has one
                fitted = calibrate_posterior(
                    self, problem.X, chosen.residual_rows, R, len(chosen.train)
                )
                if fitted is not None:
                    self.signal_variance_, self.noise_variance_ = fitted
        self._warn_if_rounding(path)

    #: the share of the solution's norm in unresolved directions that makes it rounding
    ROUNDING_SHARE = 0.9

    def _warn_if_rounding(self, path: Any) -> None:
        """Warn when the direct solver's solution at the chosen penalty lies mostly in
        directions whose eigenvalues are below the rounding level of its normal equations
        (``solvers.nystrom.nystrom_direct_path``: ``rounding_floor``, ``rounding_share``)."""
        share = path.info.get("rounding_share")
        if share is None or "penalty" not in path.params:
            return
        share = np.ravel(share)
        pens = np.asarray(path.params["penalty"], dtype=float)
        pens = pens[:, 0] if pens.ndim == 2 else np.ravel(pens)
        if len(pens) != len(share) or not len(pens):
            return
        i = int(np.argmin(np.abs(pens - self.penalty_)))
        if share[i] > self.ROUNDING_SHARE:
            floor = float(path.info.get("rounding_floor", 0.0))
            why = path.info.get("qr_unavailable")
            qr = f" (the QR route that resolves them was not taken: {why})" if why else ""
            warnings.warn(
                f"penalty={self.penalty_:.3g} is far below the rounding level of the direct "
                f"solver's normal equations ({floor:.2g}, the size of the most negative "
                "computed eigenvalue of a positive semi-definite matrix): "
                f"{100 * share[i]:.0f}% of the solution lies in directions that rounding "
                f"decides{qr}. Use a larger penalty, a larger memory_budget, or "
                'solver="cg".',
                UserWarning,
                stacklevel=4,
            )

    # --------------------------------------------------------------- learned metric
    @available_if(_learns_metric)
    def transform(self, X: Any) -> np.ndarray:
        """X in the learned coordinates of ``sigma="agop"``: X A, where the fitted kernel is
        phi(||x A - z A||^2) (A = L / sigma for its metric L, ``metric_`` = A A^T); the
        coordinates of its model in which distances are Euclidean at unit width.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, r), r the rank of the metric (the features themselves,
        divided by their widths, where round 0 was chosen).
        """
        check_is_fitted(self, "metric_")
        Xv = self._rows(X)
        Xv = Xv.toarray() if is_sparse(Xv) else B.to_numpy(Xv, np.float64)
        return Xv @ self.kernel_.coordinate_matrix(Xv.shape[1])  # type: ignore[attr-defined]

    # --------------------------------------------------------------- predict
    def _predict_input(self, X: Any) -> Any:
        """X validated and on the device predictions compute on: ``device`` when it is
        set, else where X lives (a model fitted on a GPU predicts NumPy inputs with NumPy
        unless ``device`` says otherwise)."""
        X = host_sparse(X)  # a torch sparse tensor: its rows as scipy CSR, on the host
        dev = B.resolve_device(device_for(self, X), {"X": X})
        Xv = self._rows(X)
        return as_rows(Xv).to(dev, B.dtype_of(Xv))

    def _decision(self, X: Any) -> Any:
        """f(X) on the prediction device (NumPy or a tensor there), within the model's
        ``memory_budget`` (resolved once, here: the entry point of the prediction)."""
        check_is_fitted(self, "coef_")
        Xp = self._predict_input(X)
        workspace = Workspace.of(self.memory_budget, B.array_device(Xp))
        return self._family.decision(FittedModel.of(vars(self)), Xp, workspace)

    def _dask_predict(self, X: Any, method: str) -> Any:
        """``method`` of a dask array, lazily, chunk by chunk on the workers (a dask array
        out, chunked like X's rows)."""
        check_is_fitted(self)
        self._rows(X)
        return dask_predict(self, X, method, None)

    def _on_host(self) -> bool:
        """Whether the fit computes with NumPy (no torch ``device`` given)."""
        try:
            dev = B.check_device(getattr(self, "device", None))
        except (TypeError, ValueError):
            return True  # a bad device is named at fit
        return dev is None or dev == "auto" or (isinstance(dev, B.Device) and not dev.is_torch)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # sparse rows are computed with NumPy on the host: not with a torch device
        tags.input_tags.sparse = self._family.takes_sparse and self._on_host()
        # missing values are imputed inside the model (``tabular``); text columns of a table are
        # encoded too, but the ``categorical`` and ``string`` tags are left off as gradient
        # boosting leaves them: they declare estimators that take only codes or only text
        tags.input_tags.allow_nan = getattr(self, "missing_values", "impute") == "impute"
        tags.target_tags.required = True
        return tags
