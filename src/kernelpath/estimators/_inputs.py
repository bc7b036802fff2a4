"""An estimator's fit inputs checked and turned into a ``FitProblem``: X on its device,
targets coded (centering is the family's; ±1 one-vs-all codes for classifiers), weights
rescaled, the memory budget resolved."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_array, column_or_1d
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from .. import _backend as B
from .._backend import hold_to_budget
from .._validation import (
    check_class_weight,
    check_labels,
    check_magnitude,
    check_numeric,
    check_sparse_rows,
    check_weights,
    validate_X,
)
from ..data.sources import is_lazy_array
from ..fitting.family import Family, in_memory
from ..fitting.memory import copied_bytes
from ..fitting.problem import FitProblem, target_scale
from ..inputs import as_rows, check_feature_count, host_sparse, is_sparse, is_torch_sparse
from ..workspace import Workspace

__all__ = ["fit_problem", "gathered"]


def gathered(a: Any) -> Any:
    """Targets or weights as a NumPy array (O(n): gathered from a tensor, a row source or a
    dask array)."""
    if a is None:
        return None
    if B.is_tensor(a):
        return B.to_numpy(a)
    if is_lazy_array(a):
        return np.asarray(a[:]) if not hasattr(a, "read") else np.asarray(a)
    if B.is_dask(a):
        return a.compute()
    return a


def device_for(est: Any, X: Any) -> Any:
    """The estimator's ``device`` parameter for inputs X: "auto" stays on the host for
    sparse rows (they are computed with NumPy)."""
    device = getattr(est, "device", None)
    if is_sparse(X) and isinstance(device, str) and device == "auto":
        return None
    return device


def check_fit_input(
    est: Any, X: Any, y: Any, sample_weight: Any, classifier: bool
) -> tuple[Any, Any, Any, B.Device]:
    """(X on the compute device, y and sample_weight as NumPy arrays, the device). NumPy
    inputs go through scikit-learn's ``validate_data`` (which sets ``n_features_in_`` and
    ``feature_names_in_`` on ``est``); a tensor X is checked where it lives (its targets and
    weights may be tensors on the same device or NumPy arrays when it is on the CPU)."""
    X = host_sparse(X)  # a torch sparse tensor: its rows as scipy CSR, on the host
    dev = B.resolve_device(device_for(est, X), {"X": X, "y": y, "sample_weight": sample_weight})
    for name, a in (("y", y), ("sample_weight", sample_weight)):
        if is_torch_sparse(a):
            raise TypeError(
                f"{name}: a torch sparse tensor ({a.layout}) is not taken: {name} must be a "
                f"dense 1-D array (or 2-D for several regression targets); pass {name}.to_dense()"
            )
    y, sample_weight = gathered(y), gathered(sample_weight)
    if not classifier:
        check_numeric(y, "y")
    elif y is not None and not B.is_tensor(y):
        check_labels(y)  # before scikit-learn's check, which fails on pandas' NA
    for name, a in (("y", y), ("sample_weight", sample_weight)):
        if is_sparse(a):
            raise TypeError(
                f"{name} must be a dense 1-D array (or 2-D for several regression targets), "
                f"got a sparse {type(a).__name__}: pass {name}.toarray()"
            )
    if is_sparse(X):
        X, y = check_sparse_rows(est, X, True, y)
    elif B.is_tensor(X) or is_lazy_array(X) or B.is_dask(X):
        X = validate_X(est, X, reset=True)
        if classifier:
            y = column_or_1d(y, warn=True)
        else:
            y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        if len(y) != X.shape[0]:
            raise ValueError(
                f"Found input variables with inconsistent numbers of samples: "
                f"[{X.shape[0]}, {len(y)}]"
            )
    else:
        check_numeric(X, "X")
        X, y = validate_data(
            est,
            X,
            y,
            dtype=[np.float64, np.float32],
            multi_output=not classifier,
            y_numeric=not classifier,
        )
        check_magnitude(X)
    if classifier:
        check_labels(y)
    elif not np.all(np.isfinite(y)):  # an object column's None becomes NaN past the check
        bad = int(np.count_nonzero(~np.isfinite(y)))
        raise ValueError(
            f"y must be finite: it has {bad} NaN or infinite value(s) (a missing value, such "
            "as None in an object column, converts to NaN); drop or impute those rows"
        )
    else:
        top = float(np.abs(np.asarray(y, dtype=np.float64)).max(initial=0.0))
        if B.dtype_of(X) == np.float32 and top > Y_MAX_FLOAT32:
            raise ValueError(
                f"y has values up to {top:.3g}: X is float32, so the model predicts in float32 "
                f"(finite up to {float(np.finfo(np.float32).max):.3g}), and targets past "
                f"{Y_MAX_FLOAT32:.3g} leave no room for its rounding; pass X as float64, or "
                f"rescale the targets (e.g. divide by {2.0 ** round(np.log2(top)):.3g} and "
                "multiply the predictions back)"
            )
        if top > Y_MAX:
            raise ValueError(
                f"y has values up to {top:.3g}: the squared errors that choose the model "
                f"(and their squares, in the width screen) overflow float64 beyond "
                f"{Y_MAX:.3g}; rescale the targets (e.g. divide by {2.0 ** round(np.log2(top)):.3g}"
                " and multiply the predictions back)"
            )
    return as_rows(X).to(dev, B.dtype_of(X)), y, sample_weight, dev


#: Why a family without Dask products gathers a dask X (``in_memory``), and what fits on a
#: cluster instead when X does not fit.
DASK_GATHERED = "reads its minibatches in this process, so a dask X is gathered"
DASK_INSTEAD = (
    "for a dask array larger than memory use NystromRegressor / NystromClassifier, NYTRO "
    "or RandomFeatures, whose products run on the cluster"
)

#: The largest |y| of a regression fit: the screen's tie rule sums squared per-row squared
#: losses, (y^2)^2 n, which must stay finite in float64 for n up to 10^20.
Y_MAX = 1e60
#: The largest |y| of a regression fit on float32 X, which predicts in float32 (finite to
#: 3.4e38): eight orders of magnitude below, for the predictions' overshoot and rounding.
Y_MAX_FLOAT32 = 1e30


def _coded(y: np.ndarray, classifier: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(Y of shape (n, k), the classes or None): ±1 one-vs-all codes for classifiers, the
    targets as columns for regression."""
    if classifier:
        check_classification_targets(y)
        binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
        Y = binarizer.fit_transform(y).astype(np.float64)
        classes = binarizer.classes_
        if len(classes) < 2:
            raise ValueError(
                f"y must contain at least two classes, got 1 class: {classes.tolist()!r}"
            )
        return Y, classes
    y = np.asarray(y, dtype=np.float64)
    return (y[:, None] if y.ndim == 1 else y), None


def _check_codes_fit(y: np.ndarray, budget: int) -> None:
    """Refuse, before they are made, one-vs-all codes (n x k float64: 20,000 classes of
    20,000 rows are 3 GiB) beyond the memory budget."""
    n, k = len(y), len(np.unique(np.asarray(y)))
    need = 8 * n * k
    if need > budget:
        raise ValueError(
            f"y has {k} classes: their one-vs-all codes for {n} rows take "
            f"{need / 2**20:.0f} MiB, beyond memory_budget ({budget / 2**20:.0f} MiB). Give a "
            "larger memory_budget, or group rare classes"
        )


def _class_weighted(
    class_weight: Any, y: np.ndarray, sample_weight: np.ndarray | None
) -> np.ndarray | None:
    """The checked ``sample_weight`` times each sample's class weight (scikit-learn's
    meaning of ``class_weight``), rescaled to sum to n; unchanged for None."""
    if check_class_weight(class_weight) is None:
        return sample_weight
    try:
        cw = compute_sample_weight(class_weight, y)
    except ValueError as exc:
        raise ValueError(f"class_weight: {exc}") from exc
    w = cw if sample_weight is None else sample_weight * cw
    if not np.any(w > 0):
        raise ValueError("class_weight and sample_weight leave no sample a positive weight")
    return check_weights(w, len(w), "class_weight")


def _weights(sample_weight: Any, X: Any) -> np.ndarray | None:
    """``check_weights``: non-negative, at least one positive, rescaled to sum to n."""
    if sample_weight is None:
        return None
    return check_weights(sample_weight, int(X.shape[0]))


def fit_problem(
    est: Any,
    params: dict[str, Any],
    family: Family,
    X: Any,
    y: Any,
    sample_weight: Any,
    classifier: bool,
    encoded: int = 0,
) -> tuple[FitProblem, Any, np.ndarray | None]:
    """(the problem, the family's checked settings, the classes or None) of ``est.fit(X, y,
    sample_weight)`` with the estimator's ``params``: inputs checked first, then the
    parameters, then the targets. ``encoded``: bytes of an encoded copy of the user's table
    X is (``tabular``), which the budget holds too."""
    given = X
    X, y, sample_weight, dev = check_fit_input(est, X, y, sample_weight, classifier)
    settings = family.settings(params)
    workspace = Workspace.of(est.memory_budget, dev)
    budget = workspace.budget
    if est.memory_budget is not None:  # resident memory too, not only the arrays
        hold_to_budget()
    name = type(est).__name__
    check_feature_count(int(X.shape[1]), budget)
    if family.in_memory is not None:  # the n x n kernel matrix is in memory anyway
        X = in_memory(X, budget, name, family.in_memory)
    elif B.is_dask(X) and not family.takes_dask:  # minibatches: gathered when X fits
        X = in_memory(X, budget, name, DASK_GATHERED, DASK_INSTEAD)
    if classifier:
        _check_codes_fit(y, budget)
    Y, classes = _coded(y, classifier)
    y_scale = 1.0 if classifier else target_scale(Y)
    if y_scale != 1.0:
        Y = Y / y_scale
    w = _weights(sample_weight, X)
    if classifier:
        w = _class_weighted(getattr(est, "class_weight", None), y, w)
    single = Y.shape[1] == 1 if classifier else np.ndim(y) == 1
    problem = FitProblem(
        X,
        Y,
        w,
        y if classifier else None,
        workspace,
        bool(single),
        estimator=name,
        held=encoded + copied_bytes(given, X),  # a dtype or layout conversion counts too
        y_scale=y_scale,
    )
    return problem, settings, classes
