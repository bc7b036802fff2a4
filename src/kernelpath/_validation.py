"""Validation of user parameters: clear errors that name the argument and the bad value."""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal, overload

import numpy as np

from ._backend import check_real, is_dask, is_tensor, to_numpy
from .data.sources import as_source, is_lazy_array, magnitude_limit
from .inputs import host_sparse, is_sparse


def check_penalty(penalty: Any, name: str = "penalty") -> float | np.ndarray | str:
    """A non-negative finite float, a non-empty 1-D sequence of them (a path), or "auto"."""
    if isinstance(penalty, str):
        if penalty != "auto":
            raise ValueError(
                f"{name} must be a number, a sequence of numbers or 'auto', got {penalty!r}"
            )
        return penalty
    if isinstance(penalty, bool):
        raise TypeError(
            f"{name} must be a number, a sequence of numbers or 'auto', got {penalty!r}"
        )
    if isinstance(penalty, numbers.Real):
        value = float(penalty)
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a non-negative finite number, got {penalty!r}")
        return value
    try:
        arr = np.asarray(penalty)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(
            f"{name} must be a number, a sequence of numbers or 'auto', got {penalty!r}"
        ) from exc
    if arr.dtype.kind not in "iuf" or arr.dtype == bool:
        raise TypeError(
            f"{name} must be a number, a sequence of numbers or 'auto', got {penalty!r}"
        )
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {arr.shape}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} values must be non-negative and finite, got {penalty!r}")
    return np.sort(arr)[::-1].copy()  # from the most to the least regularized


@overload
def check_int(
    value: Any, name: str, minimum: int = 1, allow_none: Literal[False] = False
) -> int: ...
@overload
def check_int(value: Any, name: str, minimum: int = 1, *, allow_none: bool) -> int | None: ...
def check_int(value: Any, name: str, minimum: int = 1, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_float(
    value: Any, name: str, low: float, high: float, low_open: bool = False, high_open: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    v = float(value)
    ok = (
        np.isfinite(v)
        and (v > low if low_open else v >= low)
        and (v < high if high_open else v <= high)
    )
    if not ok:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lb}{low}, {high}{hb}, got {value!r}")
    return v


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def make_rng(random_state: Any) -> np.random.Generator:
    """A NumPy Generator from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if random_state is None or (
        isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
    ):
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state!r}")
        return np.random.default_rng(None if random_state is None else int(random_state))
    raise TypeError(
        f"random_state must be None, an integer, a Generator or a RandomState, got {random_state!r}"
    )


def check_rows(X: Any, name: str = "X", one_sample: bool = False) -> np.ndarray:
    """A finite numeric 2-D array of rows, float64 (float32 kept), contiguous.

    With ``one_sample=True`` a 1-D array is one row (the online learners' single sample).
    A torch tensor is checked where it lives and returned as a tensor
    (``check_tensor_rows``).
    """

    if is_tensor(X):
        return check_tensor_rows(X[None, :] if one_sample and X.ndim == 1 else X, name)
    if is_sparse(X):
        return _check_sparse(X, name)
    try:
        A = np.asarray(X)
        if A.dtype.kind == "c":
            raise TypeError(f"dtype {A.dtype} (real numbers only: the imaginary part is lost)")
        if A.dtype.kind in "OUSV" or A.dtype == bool:
            raise TypeError(f"dtype {A.dtype}")
        A = A.astype(np.float32 if A.dtype == np.float32 else np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must contain numbers only: {exc}") from exc
    if one_sample and A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        kind = (
            "one sample (1-D) or a non-empty 2-D batch" if one_sample else "a non-empty 2-D array"
        )
        raise ValueError(f"{name} must be {kind}, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or infinity")
    check_magnitude(A, name)
    return np.ascontiguousarray(A)


def _check_sparse(X: Any, name: str) -> Any:
    """``check_rows`` of a scipy.sparse matrix: CSR of real numbers (float32 kept, others
    float64), finite stored entries, not empty, within the magnitude rule."""
    _check_sparse_numbers(X, name)
    A = X.tocsr().astype(np.float32 if X.dtype == np.float32 else np.float64, copy=False)
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {A.shape}")
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"{name} contains NaN or infinity")
    check_magnitude(A, name)
    return A


def _check_sparse_numbers(X: Any, name: str) -> None:
    """A scipy.sparse matrix of real numbers (complex values and objects refused)."""
    check_real(X, name)
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} must contain numbers only: dtype {X.dtype}")


def check_labels(y: Any, name: str = "y", known: Any = None) -> None:
    """Class labels: no missing values (None, NaN, pandas' NA) and not a mix of text and
    numbers (which cannot be sorted into ``classes_``), also with the ``known`` classes
    of a stream; a float label must be a whole number (a continuous target is not
    classes: use a regressor)."""
    a = np.asarray(y)
    if a.dtype.kind == "f":
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains a missing label (NaN or infinity)")
        if known is None:
            return  # a batch: scikit-learn's target check names a continuous target
    elif a.dtype.kind != "O" and known is None:
        return
    kinds = set()
    for i, v in enumerate(a.ravel()):
        if _is_missing(v):
            raise ValueError(f"{name} contains a missing label ({v!r} at position {i})")
        if isinstance(v, (float, np.floating)) and known is not None and v != round(v):
            raise ValueError(
                f"{name}: label {v!r} (position {i}) is not a class: a continuous target "
                "(use a regressor, or give the classes as whole numbers or names)"
            )
        kinds.add(_label_kind(v))
    if len(kinds) > 1:
        raise TypeError(f"{name} mixes text and numeric labels: use one type for the classes")
    if known is not None and len(known) and kinds:
        before = _label_kind(np.asarray(known, dtype=object).ravel()[0])
        if kinds != {before}:
            raise TypeError(
                f"{name}: {next(iter(kinds))} labels, but the classes seen so far are "
                f"{before} ({list(known)[:5]}): use one type for the classes"
            )


def _label_kind(v: Any) -> str:
    return "text" if isinstance(v, (str, bytes, np.str_, np.bytes_)) else "number"


def _is_missing(v: Any) -> bool:
    """None, a non-finite float, or a value not equal to itself (pandas' NA, NaT)."""
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return not np.isfinite(v)
    try:
        return bool(v != v)
    except (TypeError, ValueError):  # pandas' NA: its comparisons are NA
        return True


def check_magnitude(A: Any, name: str = "X") -> None:
    """Refuse values so large that squared norms and distances of rows overflow the
    dtype (kernel blocks would hold NaN): |x| <= sqrt(max / (4 d))."""

    if A.shape[0] == 0 or A.shape[1] == 0:
        return
    if is_sparse(A):
        big = float(np.abs(A.data).max(initial=0.0))
    else:
        big = float(to_numpy(abs(A).max())) if is_tensor(A) else float(np.abs(A).max())
    dtype = np.dtype(str(A.dtype).replace("torch.", ""))
    limit = magnitude_limit(A.shape[1], dtype)
    if big > limit:
        raise ValueError(
            f"{name} has values up to {big:.3g}: squared distances of rows overflow {dtype} "
            f"(|x| must stay below {limit:.3g}); rescale the features"
        )


def check_size(value: Any, name: str) -> int | str | np.ndarray:
    """A model size (number of centers or features): an integer >= 1, "auto", or a
    non-empty sequence of integers >= 1 (a path; returned sorted and deduplicated)."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(
                f"{name} must be an integer, a sequence of integers or 'auto', got {value!r}"
            )
        return value
    if np.ndim(value) == 1:
        arr = np.asarray(value)
        if arr.size == 0 or arr.dtype.kind not in "iu":
            raise TypeError(
                f"{name} as a path must be a non-empty sequence of integers, got {value!r}"
            )
        if arr.min() < 1:
            raise ValueError(f"{name} values must be >= 1, got {value!r}")
        return np.unique(arr.astype(np.int64))
    checked = check_int(value, name, 1)
    assert checked is not None
    return checked


def check_tensor_rows(X: Any, name: str = "X") -> Any:
    """The checks ``check_rows`` / scikit-learn's ``check_array`` make, on a torch tensor,
    without leaving its device: 2-D, non-empty, finite, floating (float64 and float32 kept,
    other floating types as float32, integers and booleans as float64), contiguous,
    detached from autograd."""
    import torch

    if X.is_complex():
        raise TypeError(f"{name} must contain real numbers, got a {X.dtype} tensor")
    if X.layout != torch.strided:  # rows reach here dense (``host_sparse``); targets too
        raise TypeError(f"{name}: a torch sparse tensor ({X.layout}) is not taken here")
    X = X.detach()
    if not X.is_floating_point():
        X = X.to(torch.float64)
    elif X.dtype not in (torch.float32, torch.float64):
        X = X.to(torch.float32)
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2D tensor for {name}, got a {X.ndim}D tensor of shape "
            f"{tuple(X.shape)}: reshape it with .reshape(-1, 1) for one feature or "
            ".reshape(1, -1) for one sample"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty, got shape {tuple(X.shape)}")
    if not bool(torch.isfinite(X).all()):
        raise ValueError(f"Input {name} contains NaN or infinity")
    return X.contiguous()


def validate_X(estimator: Any, X: Any, reset: bool) -> Any:
    """Validate the input rows of ``fit`` (``reset=True``), ``predict`` or ``transform``:
    scikit-learn's ``validate_data`` for NumPy arrays and array-likes (float64, float32
    kept), ``check_tensor_rows`` for torch tensors, which stay on their device. Records (or
    checks) ``n_features_in_`` either way."""
    from sklearn.utils.validation import validate_data

    X = host_sparse(X)  # a torch sparse tensor: its rows as scipy CSR
    lazy = is_lazy_array(X)
    if lazy or is_dask(X):
        X = check_dask_rows(X) if not lazy else as_source(X, "X")
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X must be a non-empty 2-D array, got shape {tuple(X.shape)}")
        _record_features(estimator, int(X.shape[1]), reset)
        names = getattr(X, "feature_names", None)
        if names is not None:
            _record_names(estimator, names, reset)
        return X
    if is_sparse(X):
        return check_sparse_rows(estimator, X, reset)
    if not is_tensor(X):
        check_numeric(X, "X")
        X = validate_data(estimator, X, reset=reset, dtype=[np.float64, np.float32])
        check_magnitude(X)
        return X
    X = check_tensor_rows(X, "X")
    check_magnitude(X)
    _record_features(estimator, int(X.shape[1]), reset)
    return X


def check_sparse_rows(estimator: Any, X: Any, reset: bool, y: Any = None) -> Any:
    """A ``scipy.sparse`` X checked for ``estimator`` (its tag ``input_tags.sparse`` says
    whether it takes one): real numbers, finite stored entries, converted to CSR in float64
    or float32 (COO, CSC, LIL, ... are converted; indices of 64 bits are kept). With ``y``
    (fit) returns (X, y) checked together, as ``validate_data`` does."""
    from sklearn.utils.validation import validate_data

    if not estimator.__sklearn_tags__().input_tags.sparse:
        who = f"X: a scipy.sparse matrix ({type(X).__name__}) is not taken by"
        device = getattr(estimator, "device", None)
        if device is not None:
            raise TypeError(
                f"{who} {type(estimator).__name__} with device={device!r}: sparse rows are "
                "computed with NumPy on the host; pass X.toarray(), or leave device unset"
            )
        raise TypeError(
            f"{who} {type(estimator).__name__}: it does not take them; pass X.toarray()"
        )
    _check_sparse_numbers(X, "X")
    kw: dict[str, Any] = {
        "accept_sparse": "csr",
        "accept_large_sparse": True,
        "dtype": [np.float64, np.float32],
    }
    if y is None:
        X = validate_data(estimator, X, reset=reset, **kw)
    else:
        X, y = validate_data(estimator, X, y, **kw, **_xy_options(estimator))
    check_magnitude(X)
    return X if y is None else (X, y)


def _xy_options(estimator: Any) -> dict[str, Any]:
    from sklearn.base import is_classifier

    return {"multi_output": not is_classifier(estimator), "y_numeric": not is_classifier(estimator)}


def _record_features(estimator: Any, d: int, reset: bool) -> None:
    """Record (fit) or check (predict) ``n_features_in_``."""
    if reset:
        estimator.n_features_in_ = d
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    elif d != estimator.n_features_in_:
        raise ValueError(
            f"X has {d} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )


def _record_names(estimator: Any, names: list[str], reset: bool) -> None:
    """Record (fit) or check (predict) ``feature_names_in_`` of a table's columns."""
    if reset:
        estimator.feature_names_in_ = np.asarray(names, dtype=object)
        return
    fitted = getattr(estimator, "feature_names_in_", None)
    if fitted is not None and list(fitted) != list(names):
        raise ValueError(
            f"X's columns {list(names)} differ from those seen at fit, "
            f"{list(fitted)} (names and order must match)"
        )


def check_dask_rows(X: Any, name: str = "X") -> Any:
    """A dask array of rows: 2-D, numeric, chunked along rows only (a chunk holds whole
    rows: the kernel blocks need every feature of a row)."""
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D dask array, got {X.ndim} dimensions")
    if np.dtype(X.dtype).kind not in "biuf":
        raise TypeError(f"{name} must contain numbers only, got dtype {X.dtype}")
    if len(X.chunks[1]) != 1:
        raise ValueError(
            f"{name} is a dask array chunked along features ({len(X.chunks[1])} column "
            f"chunks {X.chunks[1]}): kernelpath needs whole rows in every chunk; use "
            f"{name}.rechunk({{1: -1}})"
        )
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes (NaN): call {name}.compute_chunk_sizes() first"
        )
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    return X


def check_numeric(a: Any, name: str) -> None:
    """Name the argument when an array of strings or objects does not convert to numbers."""
    if hasattr(a, "dtype") and getattr(a.dtype, "kind", "O") not in "USOV":
        return
    try:
        np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name} must contain numbers only: {exc}") from exc


def check_weights(weights: Any, n: int, name: str = "sample_weight") -> np.ndarray:
    """``n`` real, finite, non-negative weights with at least one positive, float64, rescaled
    to sum to ``n`` (the penalty means the same with or without them; an integer weight is
    the same as repeating the point). The rescaling divides by the largest weight first, so
    weights at the ends of the float range (all 1e308, all 5e-324) neither overflow nor
    vanish. The one check of sample weights (batch fits, ``learn_widths``) and, through
    ``class_weighted``, of class weights."""
    if is_tensor(weights):
        weights = to_numpy(weights)
    a = np.asarray(weights)
    check_real(a, name)
    if a.dtype.kind not in "biuf" or a.dtype == bool:
        check_numeric(a, name)
        if a.dtype == bool:
            raise TypeError(f"{name} must be numbers, got booleans")
    w = np.asarray(a, dtype=np.float64).reshape(-1) if a.ndim else np.full(n, float(a))
    if a.ndim > 1 or len(w) != n:
        raise ValueError(f"{name} must have one weight per sample ({n}), got shape {a.shape}")
    if not np.isfinite(w).all():
        raise ValueError(f"{name} contains NaN or infinity")
    if (w < 0).any():
        raise ValueError(f"{name} must be non-negative, got {w[w < 0][0]!r}")
    top = float(w.max()) if n else 0.0
    if not top > 0:
        raise ValueError(f"{name}: every weight is zero; at least one must be positive")
    w = w / top
    return w * (n / w.sum())


def check_class_weight(class_weight: Any, balanced: bool = True) -> Any:
    """``class_weight``: None, "balanced" (where ``balanced``) or a dict of real, finite,
    non-negative weights, not all 0, each at most ``MAX_CLASS_WEIGHT`` (its products with
    squared features must stay finite in a stream's running sums). Returns it."""
    if class_weight is None:
        return None
    if isinstance(class_weight, str) and class_weight == "balanced" and balanced:
        return class_weight
    if not isinstance(class_weight, dict):
        kinds = "None, 'balanced' or a dict" if balanced else "None or a dict"
        raise ValueError(f"class_weight must be {kinds}, got {class_weight!r}")
    for label, value in class_weight.items():
        class_weight_value(label, value)
    if class_weight and not any(v > 0 for v in class_weight.values()):
        raise ValueError("class_weight: every weight given is 0 (their samples would not count)")
    return class_weight


def class_weight_value(label: Any, value: Any) -> float:
    """One class's weight, checked: a real number in [0, ``MAX_CLASS_WEIGHT``]."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating)):
        raise TypeError(f"class_weight[{label!r}] must be a real number, got {value!r}")
    if not (math.isfinite(float(value)) and 0 <= float(value) <= MAX_CLASS_WEIGHT):
        raise ValueError(
            f"class_weight[{label!r}] must be >= 0, finite and at most "
            f"{MAX_CLASS_WEIGHT:g}, got {value!r}"
        )
    return float(value)


#: The largest class weight: an online learner adds c z z^T for each sample, which must stay
#: finite (only the weights' ratio to the penalty matters: scale the penalty instead).
MAX_CLASS_WEIGHT = 1e100


def keep_params(est: Any, given: dict[str, Any]) -> None:
    """Store an estimator's ``__init__`` arguments as they are (scikit-learn's contract:
    neither checked nor converted there; ``fit`` checks them). ``given``: the
    ``__init__``'s ``locals()``."""
    for name, value in given.items():
        if name not in ("self", "__class__"):
            setattr(est, name, value)
