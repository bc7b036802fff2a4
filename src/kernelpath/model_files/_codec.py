"""The model tree of a model file: the allowlist of classes a file may name, and the
encoding of a fitted model into JSON and arrays and back (nothing is imported or run that
the allowlist does not name)."""

from __future__ import annotations

import math
from collections import UserList
from typing import Any

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    LabelBinarizer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    StandardScaler,
)

from .. import _backend as B
from .._backend import Device
from ..centers import CenterSelection, LeverageCenters, SqueakCenters, UniformCenters
from ..estimators import BATCH_ESTIMATORS
from ..features import NystromFeatures, RandomFourierFeatures
from ..inputs import is_sparse
from ..kernels import Cauchy, Gaussian, Kernel, Laplacian, Linear, Matern, Polynomial
from ..online import (
    IncrementalRLSClassifier,
    RebalancedRLSClassifier,
    RecursiveRLS,
    SemiparametricRegressor,
    as_feature_map,
)
from ..path import Path
from ..tabular import TabularEncoder

#: The layout of the header; a file of another format version is refused.
FORMAT_VERSION = 1
#: What the header's ``format`` entry says.
FORMAT_NAME = "kernelpath-model"


#: The most bytes a file's header (its JSON: the model's description, not its arrays) may
#: hold. Parsed JSON takes up to about 25 times its text (a small dict per three bytes), so
#: this keeps a header's objects inside the 64 MB ``load`` allows beyond twice the file.
MAX_HEADER_BYTES = 2 * 1024**2
#: The most bytes the strings of one stored text array (``$items``) may take in memory.
MAX_TEXT_ARRAY_BYTES = 64 * 1024**2
#: safetensors dtypes a model file may hold, with their sizes.
_DTYPES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
}


class ModelFileError(ValueError):
    """A file that is not a kernelpath model file, is damaged, or comes from an
    incompatible version.
    """


# --------------------------------------------------------------------------- the allowlist
#: The public classes a model file may name, as "kernelpath.<name>".
_PUBLIC_CLASSES: tuple[type, ...] = (
    Gaussian,
    Laplacian,
    Matern,
    Cauchy,
    Polynomial,
    Linear,
    Path,
    *BATCH_ESTIMATORS,
    RandomFourierFeatures,
    NystromFeatures,
    RecursiveRLS,
    IncrementalRLSClassifier,
    RebalancedRLSClassifier,
    SemiparametricRegressor,
    UniformCenters,
    LeverageCenters,
    SqueakCenters,
    TabularEncoder,
)


class NotAModelFile(ModelFileError):
    """A file that is no safetensors file at all (a CSV given where a model goes)."""


def _registry() -> dict[str, type]:
    """The classes a model file may name, by the name the file uses."""
    out = {f"kernelpath.{cls.__name__}": cls for cls in _PUBLIC_CLASSES}
    out["kernelpath.Device"] = Device
    out["kernelpath.CenterSelection"] = CenterSelection
    out["sklearn.preprocessing.LabelBinarizer"] = LabelBinarizer
    out.update({f"sklearn.{cls.__name__}": cls for cls in SKLEARN_CLASSES})
    return out


#: scikit-learn's classes a model file may hold besides ``LabelBinarizer``: a ``Pipeline``
#: ending in a kernelpath estimator and the preprocessors before it.
SKLEARN_CLASSES: tuple[type, ...] = (
    Pipeline,
    ColumnTransformer,
    StandardScaler,
    MinMaxScaler,
    MaxAbsScaler,
    OneHotEncoder,
    SimpleImputer,
)
#: Python's own types a preprocessor's ``dtype`` may name (NumPy's are stored by dtype).
_BUILTIN_TYPES = {"float": float, "int": int, "bool": bool, "str": str, "object": object}


def _class_name(obj: Any, registry: dict[str, type]) -> str | None:
    cls = type(obj)
    for name, c in registry.items():
        if c is cls:
            return name
    return None


#: Attributes that are caches or handles of a live fit: not stored, reset on load.
_TRANSIENT: dict[str, dict[str, Any]] = {
    "kernelpath.Path": {"_coef_fn": None},
    **{f"kernelpath.{k}": {"_axes": None} for k in ("Gaussian", "Laplacian", "Matern", "Cauchy")},
    "kernelpath.RandomFourierFeatures": {"_on_device": dict},
    "kernelpath.IncrementalRLSClassifier": {"_W_cache": dict, "_proba_cache": dict},
    "kernelpath.RebalancedRLSClassifier": {"_coef_cache": dict, "_proba_cache": dict},
    "kernelpath.RecursiveRLS": {"_W_cache": dict},
}
#: Caches of files written before they were held in dicts: dropped on load.
_OLD_CACHES = ("_coef", "_W")
#: Parameters added since files were first written, with the value that loads an older
#: file as it was fitted (``scale``: files written before it existed had unscaled inputs;
#: ``class_weight``: none; ``stopping_threshold``: the stopping rule's default; a random
#: Fourier map's ``center``: none, its phases as drawn; ``factor_layout`` and
#: ``preconditioner_rank``: the budget's layout and the default rank; ``search``: none, the
#: model as fitted before the search; ``categorical_features`` and ``missing_values``: their
#: defaults, which leave numeric arrays as they are).
_ADDED_PARAMS: dict[str, Any] = {
    "scale": False,
    "center": None,
    "class_weight": None,
    "loss": "square",
    "stopping_threshold": None,
    "factor_layout": "auto",
    "preconditioner_rank": None,
    "search": "none",
    "categorical_features": "from_dtype",
    "missing_values": "impute",
}
#: Attributes rebuilt after loading from what was stored (the map of the online learners'
#: ``features``).
_REBUILT = ("_map",)
#: Parameters that hold the user's code: left out of the file, passed back to ``load``.
_USER_CODE = {"kernelpath.SemiparametricRegressor": ("regressor",)}


# --------------------------------------------------------------------------- encoding
class _Encoder:
    """Turns a model into a JSON-able tree and a dict of arrays."""

    def __init__(self) -> None:
        self.registry = _registry()
        self.tensors: dict[str, np.ndarray] = {}
        self._array_keys: dict[int, str] = {}
        self._objects: dict[int, int] = {}
        self._keep: list[Any] = []  # keeps ids unique while encoding

    def array(self, a: np.ndarray, where: str) -> Any:
        if a.dtype.kind in "biuf" and a.dtype.byteorder in "=<|":
            key = self._array_keys.get(id(a))
            if key is None:
                key = f"a{len(self.tensors)}"
                self._array_keys[id(a)] = key
                self._keep.append(a)
                self.tensors[key] = np.ascontiguousarray(a)
            return {"$array": key}
        if a.dtype.kind in "biuf":
            return self.array(a.astype(a.dtype.newbyteorder("=")), where)
        if a.dtype.kind in "UO":
            items = [self.value(v, f"{where}[{i}]") for i, v in enumerate(a.ravel().tolist())]
            return {"$items": items, "kind": a.dtype.kind, "shape": list(a.shape)}
        raise TypeError(f"{where}: arrays of dtype {a.dtype} cannot be stored in a model file")

    def value(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.generic):
            if v.dtype.kind not in "biufU":
                raise TypeError(f"{where}: a {v.dtype} scalar cannot be stored in a model file")
            return {"$scalar": v.dtype.str, "value": self.value(v.item(), where)}
        if isinstance(v, np.ndarray):
            return self.array(v, where)
        if is_sparse(v):  # sparse centers: CSR's three arrays and its shape
            C = v.tocsr()
            parts = [self.array(a, where) for a in (C.data, C.indices, C.indptr)]
            return {"$csr": parts, "shape": [int(C.shape[0]), int(C.shape[1])]}
        if B.is_tensor(v):
            return self.array(B.to_numpy(v), where)
        if isinstance(v, (list, UserList)):  # scikit-learn 1.6 keeps a remainder's columns
            # in a UserList that warns of a future change: stored as the list it holds
            return [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, tuple):
            return {"$tuple": [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if isinstance(v, slice):  # a ColumnTransformer's output_indices_
            return {"$slice": [self.value(x, where) for x in (v.start, v.stop, v.step)]}
        if isinstance(v, np.dtype):  # a SimpleImputer's _fit_dtype
            return {"$dtype": v.str} if v.kind in "biufUSO" else self.obj(v, where)
        if isinstance(v, type) and issubclass(v, np.generic):  # OneHotEncoder(dtype=np.float64)
            return {"$type": np.dtype(v).str}
        if isinstance(v, type) and _BUILTIN_TYPES.get(v.__name__) is v:
            return {"$type": v.__name__}
        if isinstance(v, dict):
            if all(isinstance(k, str) for k in v):
                return {"$dict": {k: self.value(x, f"{where}[{k!r}]") for k, x in v.items()}}
            return {
                "$pairs": [
                    [self.value(k, f"{where} key"), self.value(x, f"{where}[{k!r}]")]
                    for k, x in v.items()
                ]
            }
        return self.obj(v, where)

    def obj(self, v: Any, where: str) -> Any:
        name = _class_name(v, self.registry)
        if name is None:
            if isinstance(v, Kernel):
                raise TypeError(
                    f"{where} is a user-defined Kernel subclass ({type(v).__name__}): a model "
                    "file keeps no code; use one of kernelpath's kernels (Gaussian, "
                    "Laplacian, Matern, Cauchy, Polynomial, Linear)"
                )
            if type(v).__name__ == "FunctionTransformer":
                raise TypeError(
                    f"{where} is a FunctionTransformer: it carries code (its func), which a "
                    "model file keeps none of; use one of the preprocessors it stores "
                    f"({', '.join(c.__name__ for c in SKLEARN_CLASSES[1:])}) or pickle"
                )
            if callable(v):
                raise TypeError(
                    f"{where} is a function ({getattr(v, '__name__', type(v).__name__)}): a "
                    "model file keeps no code; use a kernelpath feature map or transformer"
                )
            raise TypeError(
                f"{where}: a {type(v).__module__}.{type(v).__qualname__} cannot be stored in "
                "a model file (only kernelpath's own classes and scikit-learn's "
                f"{', '.join(c.__name__ for c in SKLEARN_CLASSES)} can)"
            )
        ref = self._objects.get(id(v))
        if ref is not None:
            return {"$ref": ref}
        ref = len(self._objects)
        self._objects[id(v)] = ref
        self._keep.append(v)
        skip = set(_TRANSIENT.get(name, {})) | set(_USER_CODE.get(name, ())) | set(_REBUILT)
        attrs = dict(vars(v))
        if name == "kernelpath.Path":  # the chosen point's coefficients travel with the path
            stored = dict(v._stored)
            try:
                stored[v.best_index] = _host_array(v.coef())
            except IndexError:  # a k-fold path has none: its model was refit on all the data
                pass
            attrs["_stored"] = stored
        state = {k: self.value(x, f"{where}.{k}") for k, x in attrs.items() if k not in skip}
        return {"$object": name, "id": ref, "state": state}


class _Decoder:
    """Rebuilds a model from the JSON tree and the arrays, naming only allowlisted classes."""

    def __init__(self, tensors: dict[str, np.ndarray], user_code: dict[str, Any]) -> None:
        self.registry = _registry()
        self.tensors = tensors
        self.user_code = user_code
        self.objects: dict[int, Any] = {}
        self.used_code: set[str] = set()
        self.lenient = False  # inside a Path's scores (NaN marks a point not scored)

    def value(self, v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):  # a NaN literal: only as $float
            raise ModelFileError("a non-finite number written as a JSON literal in the header")
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict) or len(v) == 0:
            raise ModelFileError(f"unexpected entry in the model header: {str(v)[:80]}")
        if "$array" in v:
            key = v["$array"]
            if key not in self.tensors:
                raise ModelFileError(f"the header names an array {key!r} the file does not hold")
            a = self.tensors[key]
            if not self.lenient and a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                raise ModelFileError(f"array {key!r} of the model holds NaN or infinity")
            return a
        if "$csr" in v:
            return self.csr(v)
        if "$float" in v:
            if v["$float"] not in ("nan", "inf", "-inf"):
                raise ModelFileError(f"bad float {v['$float']!r} in the model header")
            if not self.lenient:  # as for arrays: NaN and infinity only in a Path's scores
                raise ModelFileError(f"a number of the model is {v['$float']}")
            return float(v["$float"])
        if "$scalar" in v:
            dtype = np.dtype(str(v["$scalar"]))
            if dtype.kind not in "biufU":
                raise ModelFileError(f"bad scalar type {v['$scalar']!r} in the model header")
            return dtype.type(self.value(v["value"]))
        if "$items" in v:
            kind = "U" if v.get("kind") == "U" else "O"
            items = [self.value(x) for x in v["$items"]]
            shape = tuple(int(s) for s in v["shape"])
            if any(d < 0 for d in shape) or math.prod(shape) != len(items):
                raise ModelFileError(f"a text array of shape {shape} holds {len(items)} items")
            longest = max((len(x) for x in items if isinstance(x, str)), default=1)
            if kind == "U" and 4 * longest * len(items) > MAX_TEXT_ARRAY_BYTES:
                raise ModelFileError(
                    f"a text array of {len(items)} items up to {longest} characters long would "
                    f"take more than {MAX_TEXT_ARRAY_BYTES >> 20} MB"
                )
            if kind == "U":
                return np.asarray(items, dtype=str).reshape(shape)
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out.reshape(shape)
        if "$tuple" in v:
            return tuple(self.value(x) for x in v["$tuple"])
        if "$slice" in v:
            start, stop, step = (self.value(x) for x in v["$slice"])
            if not all(x is None or isinstance(x, int) for x in (start, stop, step)):
                raise ModelFileError(f"bad slice {v['$slice']!r} in the model header")
            return slice(start, stop, step)
        if "$dtype" in v or "$type" in v:
            return _decode_type(v)
        if "$dict" in v:
            return {str(k): self.value(x) for k, x in v["$dict"].items()}
        if "$pairs" in v:
            return {_hashable(self.value(k)): self.value(x) for k, x in v["$pairs"]}
        if "$ref" in v:
            ref = v["$ref"]
            if ref not in self.objects:
                raise ModelFileError(f"the header refers to object {ref!r} before defining it")
            return self.objects[ref]
        if "$object" in v:
            return self.obj(v)
        raise ModelFileError(f"unexpected entry in the model header: {str(v)[:80]}")

    def csr(self, v: dict[str, Any]) -> Any:
        """A CSR matrix from its three arrays and shape, checked as scipy checks a matrix
        it did not build (``check_format(full_check=True)``: sorted, in-range indices)."""
        import scipy.sparse

        parts, shape = v["$csr"], v.get("shape")
        if not (isinstance(parts, list) and len(parts) == 3 and isinstance(shape, list)):
            raise ModelFileError("a sparse matrix of the model header lacks its parts")
        data, indices, indptr = (self.value(x) for x in parts)
        if not all(isinstance(a, np.ndarray) and a.ndim == 1 for a in (data, indices, indptr)):
            raise ModelFileError("a sparse matrix of the model header has parts that are not 1-D")
        if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu":
            raise ModelFileError("a sparse matrix of the model header has non-integer indices")
        if len(shape) != 2 or not all(isinstance(x, int) and 0 <= x < 2**62 for x in shape):
            raise ModelFileError(f"bad sparse matrix shape {shape!r} in the model header")
        try:
            C = scipy.sparse.csr_matrix((data, indices, indptr), shape=tuple(shape))
            C.check_format(full_check=True)
        except (ValueError, TypeError, IndexError) as exc:
            raise ModelFileError(
                f"a sparse matrix of the model header is malformed: {exc}"
            ) from None
        return C

    def obj(self, v: dict[str, Any]) -> Any:
        name = v["$object"]
        cls = self.registry.get(name)
        if cls is None:
            raise ModelFileError(
                f"the model file names the class {name!r}, which is not one kernelpath loads"
            )
        out: Any = object.__new__(cls)  # no constructor runs
        self.objects[int(v["id"])] = out
        outer = self.lenient
        state = {}
        foreign = name.startswith("sklearn.")  # its own NaN: missing_values=np.nan
        if not isinstance(v["state"], dict):
            raise ModelFileError(f"the state of a {name} is not a table of attributes")
        for k, x in v["state"].items():
            if not k.isidentifier():
                raise ModelFileError(f"a {name} has an attribute named {k[:40]!r}")
            # a path's errors may be NaN (points not scored); its coefficients may not
            self.lenient = outer or foreign or (cls is Path and k != "_stored")
            state[str(k)] = self.value(x)
        self.lenient = outer
        for attr, default in _TRANSIENT.get(name, {}).items():
            state[attr] = default() if callable(default) else default
        if name in ("kernelpath.RecursiveRLS", "kernelpath.RebalancedRLSClassifier"):
            for attr in _OLD_CACHES:
                state.pop(attr, None)
        init = getattr(cls, "_get_param_names", None)
        if init is not None:
            names = init()
            for attr, old in _ADDED_PARAMS.items():
                if attr in names and attr not in state:
                    state[attr] = old
        for attr in _USER_CODE.get(name, ()):
            state[attr] = self.user_code.get(attr)
            self.used_code.add(attr)
        out.__dict__.update(state)
        if isinstance(out, Kernel):
            _check_kernel(out, name)
        if "_map" in _rebuilt_by(cls) and "features" in state and "n_features_in_" in state:
            # the fitted map (features_); files written before it: the parameter, fitted
            fmap = state.get("features_", state["features"])
            out._map = as_feature_map(fmap, None)  # type: ignore[arg-type]
        return out


def _check_kernel(kernel: Kernel, name: str) -> None:
    """A kernel restored without its constructor: every parameter present and valid (the
    checks ``__init__`` would run), else ``ModelFileError``."""
    # a parameter added later has a class-level default (``metric``) for older files
    missing = [p for p in kernel._param_names() if not hasattr(kernel, p)]  # noqa: SLF001
    if missing:
        raise ModelFileError(f"the model file's {name} lacks its parameter(s) {missing}")
    try:
        kernel._check()  # noqa: SLF001
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"the model file's {name} has a bad parameter: {exc}") from None


def _decode_type(v: dict[str, Any]) -> Any:
    """A stored dtype (``$dtype``) or type (``$type``): NumPy's by dtype, Python's by name
    from ``_BUILTIN_TYPES``; nothing else is named."""
    text = str(v.get("$dtype", v.get("$type")))
    if "$type" in v and text in _BUILTIN_TYPES:
        return _BUILTIN_TYPES[text]
    try:
        dtype = np.dtype(text)
    except TypeError:
        raise ModelFileError(f"bad type {text!r} in the model header") from None
    if dtype.kind not in "biufUSO" or dtype.str != text:
        raise ModelFileError(f"bad type {text!r} in the model header")
    return dtype if "$dtype" in v else dtype.type


def _host_array(a: Any) -> np.ndarray:
    return np.asarray(B.to_numpy(a))


def _rebuilt_by(cls: type) -> tuple[str, ...]:
    online = (RecursiveRLS, IncrementalRLSClassifier, RebalancedRLSClassifier)
    return ("_map",) if issubclass(cls, online) else ()


def _hashable(k: Any) -> Any:
    if isinstance(k, list):
        return tuple(_hashable(x) for x in k)
    return k
