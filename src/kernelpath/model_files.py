"""Model files: ``save(model, path)`` and ``load(path)`` without pickle.

A model file is a safetensors file: the arrays of the fitted model (centers, coefficients,
the random features' frequencies, the online learners' Cholesky factors, the path's
errors) as raw tensors, and a JSON header that describes everything else (format version,
library version, the public class name, the parameters, every fitted attribute, the path
summary), with a SHA-256 checksum of the header and of every array.

Loading parses the header with ``json`` and the arrays with safetensors (neither executes
anything), then rebuilds the objects the header names, and only those on an allowlist of
kernelpath's own classes (and scikit-learn's ``LabelBinarizer``): an object is created
without calling its constructor, and its attributes are set to the decoded values. No
class, function or module named by a file outside the allowlist is ever touched, so a
crafted file cannot run code; a damaged one (a flipped byte, a truncated file, an edited
header) fails its checksum or its parse and is refused with ``ModelFileError``.

A scikit-learn ``Pipeline`` whose last step is a kernelpath estimator is stored the same way,
its preprocessors on the allowlist too (``SKLEARN_CLASSES``: ``StandardScaler``,
``MinMaxScaler``, ``MaxAbsScaler``, ``OneHotEncoder``, ``SimpleImputer``,
``ColumnTransformer``): their fitted attributes are arrays, strings and numbers. Their
attributes are scikit-learn's internals, so the file records scikit-learn's version and
``load`` warns when another version reads it.

What is code cannot be stored: a user-defined ``Kernel`` subclass, a callable passed as
``features``, a ``FunctionTransformer``, or any object outside the allowlist is refused at
``save`` with a ``TypeError`` naming the attribute. ``SemiparametricRegressor``'s
``regressor`` (the user's physical model) is left out of the file and passed back to
``load``::

    kp.save(model, "arm.kp")
    model = kp.load("arm.kp", regressor=inverse_dynamics)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import warnings
from collections import UserList
from collections.abc import Callable
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save
from sklearn import __version__ as sklearn_version
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

from . import _backend as B
from ._backend import Device
from ._version import __version__
from .centers import CenterSelection, LeverageCenters, SqueakCenters, UniformCenters
from .data.files import check_destination, check_source, default_mode, temporary
from .estimators import (
    EigenProClassifier,
    EigenProRegressor,
    KRLSClassifier,
    KRLSRegressor,
    NystromClassifier,
    NystromRegressor,
    NYTROClassifier,
    NYTRORegressor,
    RandomFeaturesClassifier,
    RandomFeaturesRegressor,
    SGMClassifier,
    SGMRegressor,
)
from .features import NystromFeatures, RandomFourierFeatures
from .inputs import is_sparse
from .kernels import Cauchy, Gaussian, Kernel, Laplacian, Linear, Matern, Polynomial
from .online import (
    IncrementalRLSClassifier,
    RebalancedRLSClassifier,
    RecursiveRLS,
    SemiparametricRegressor,
    as_feature_map,
)
from .path import Path

__all__ = ["save", "load", "ModelFileError", "FORMAT_VERSION"]

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
    KRLSRegressor,
    KRLSClassifier,
    NystromRegressor,
    NystromClassifier,
    NYTRORegressor,
    NYTROClassifier,
    RandomFeaturesRegressor,
    RandomFeaturesClassifier,
    EigenProRegressor,
    EigenProClassifier,
    SGMRegressor,
    SGMClassifier,
    RandomFourierFeatures,
    NystromFeatures,
    RecursiveRLS,
    IncrementalRLSClassifier,
    RebalancedRLSClassifier,
    SemiparametricRegressor,
    UniformCenters,
    LeverageCenters,
    SqueakCenters,
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
#: Fourier map's ``center``: none, its phases as drawn).
_ADDED_PARAMS: dict[str, Any] = {
    "scale": False,
    "center": None,
    "class_weight": None,
    "loss": "square",
    "stopping_threshold": None,
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
        for k, x in v["state"].items():
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


# --------------------------------------------------------------------------- checksum
def _checksum(header: dict[str, str], tensors: dict[str, np.ndarray]) -> str:
    """SHA-256 of the header's entries (but the checksum) and of every array's name,
    dtype, shape and bytes."""
    h = hashlib.sha256()
    body = {k: v for k, v in header.items() if k not in ("checksum", "signature")}
    h.update(json.dumps(body, sort_keys=True).encode())
    for key in sorted(tensors):
        a = np.ascontiguousarray(tensors[key])
        h.update(f"\0{key}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _signature(checksum: str, key: bytes) -> str:
    """HMAC-SHA256 of the checksum under the user's key."""
    return hmac.new(key, checksum.encode(), hashlib.sha256).hexdigest()


def _key(key: Any) -> bytes | None:
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, (bytes, bytearray)) or len(key) == 0:
        raise TypeError(f"key must be a non-empty str or bytes, got {type(key).__name__}")
    return bytes(key)


def _version() -> str:
    return str(__version__)


def _compatible(written_by: str) -> bool:
    """Files load in the kernelpath release series that wrote them (same major.minor): the
    fitted attributes they describe are those of that series."""
    return written_by.split(".")[:2] == _version().split(".")[:2]


# --------------------------------------------------------------------------- public
def save(model: Any, path: str | os.PathLike[str], *, key: str | bytes | None = None) -> str:
    """Write a fitted (or unfitted) kernelpath estimator or online learner to ``path``.

    Parameters
    ----------
    model : kernelpath estimator, feature map or online learner
    path : path-like
        The file to write (conventionally ``.kp``). Written to a temporary file in the
        same folder and renamed into place: never half-written.
    key : str, bytes or None
        Sign the file with HMAC-SHA256 under this secret key; ``load(path, key=key)`` then
        refuses a file not signed with it. The checksum every file carries detects damage,
        not a forger (anyone can recompute it); the signature detects both.

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    TypeError
        The model holds code (a user-defined ``Kernel`` subclass, a function as
        ``features``) or an object kernelpath cannot store; the message names it.
    """

    secret = _key(key)
    enc = _Encoder()
    name = _class_name(model, enc.registry)
    last = model.steps[-1][1] if isinstance(model, Pipeline) and model.steps else model
    last_name = _class_name(last, enc.registry)
    if (
        name is None
        or name in ("kernelpath.Path", "kernelpath.CenterSelection")
        or (name.startswith("sklearn.") and name != "sklearn.Pipeline")
        or last_name is None
        or not last_name.startswith("kernelpath.")
    ):
        raise TypeError(
            "model must be a kernelpath estimator, feature map or online learner, or a "
            "scikit-learn Pipeline ending in one, got "
            f"{type(model).__module__}.{type(model).__qualname__}"
            + (f" ending in a {type(last).__qualname__}" if last is not model else "")
        )
    tree = enc.value(model, "model")
    params = {}
    if hasattr(model, "get_params"):
        skip = _USER_CODE.get(name, ())
        params = {
            k: enc.value(v, f"model.{k}")
            for k, v in model.get_params(deep=False).items()
            if k not in skip
        }
    header = {
        "format": FORMAT_NAME,
        "format_version": str(FORMAT_VERSION),
        "kernelpath_version": _version(),
        "class": name,
        "params": json.dumps(params, sort_keys=True),
        "summary": json.dumps(_summary(model), sort_keys=True),
        "model": json.dumps(tree, allow_nan=False),  # in encoding order: refs after defs
        "user_code": json.dumps(list(_USER_CODE.get(name, ()))),
    }
    if name == "sklearn.Pipeline":  # the only way preprocessors reach a file
        header["sklearn_version"] = sklearn_version
    header["checksum"] = _checksum(header, enc.tensors)
    if secret is not None:
        header["signature"] = _signature(header["checksum"], secret)
    data = st_save(enc.tensors, metadata=header)
    out = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ValueError(f"path: no folder {folder!r} to write {out!r} in")
    check_destination(out)
    tmp = temporary(folder, suffix=".kp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        default_mode(tmp)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def _summary(model: Any) -> dict[str, Any]:
    """What a reader of the header wants at a glance (informative; ``model`` is what loads)."""
    if isinstance(model, Pipeline):
        steps = [[name, type(step).__name__] for name, step in model.steps]
        return {"steps": steps, "last_step": _summary(model.steps[-1][1])}
    out: dict[str, Any] = {}
    for attr in ("n_features_in_", "n_samples_seen_", "device_"):
        if hasattr(model, attr):
            out[attr] = _plain(getattr(model, attr))
    if hasattr(model, "feature_names_in_"):
        out["feature_names_in_"] = [str(c) for c in model.feature_names_in_]
    if hasattr(model, "classes_"):
        out["classes_"] = [_plain(c) for c in np.asarray(model.classes_).tolist()]
    kernel = getattr(model, "kernel_", None)
    if kernel is not None:
        out["kernel_"] = repr(kernel)
    for attr in ("centers_", "coef_"):
        a = getattr(model, attr, None)
        if a is not None and hasattr(a, "shape"):
            out[f"{attr}shape"] = list(a.shape)
    if hasattr(model, "center_strategy_"):
        out["center_strategy_"] = str(model.center_strategy_)
    path = getattr(model, "path_", None)
    if path is not None:
        out["path"] = {
            "params": list(path.param_names),
            "shape": list(path.shape),
            "scoring": path.scoring,
            "best_index": list(path.best_index),
            "best_params": {k: _plain(v) for k, v in path.best_params.items()},
            "best_val_error": _plain(path.best_val_error),
        }
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return v if isinstance(v, (bool, int, float, str)) or v is None else repr(v)


def load(
    path: str | os.PathLike[str],
    *,
    key: str | bytes | None = None,
    **user_code: Callable[..., Any],
) -> Any:
    """Read a model written by ``save``.

    What a file may claim is bounded before anything is allocated: regular files only, a
    header of at most ``MAX_HEADER_BYTES``, every array's dtype, shape and byte range
    consistent with the file (no dimension larger than the file's size in bytes), text
    arrays within ``MAX_TEXT_ARRAY_BYTES``, the model's arrays finite and its centers,
    coefficients and features consistent. Loading takes at most about twice the file's
    size and 64 MB besides.

    Parameters
    ----------
    path : path-like
    key : str, bytes or None
        The key the file was signed with (``save(..., key=)``): a file without that
        signature is refused. None: the checksum only (damage, not forgery).
    **user_code
        The parts of the model that are code and were left out of the file:
        ``regressor=f`` for a ``SemiparametricRegressor``.

    Returns
    -------
    The model, as it was saved (its predictions are identical, bit for bit, on the same
    machine and library version; an online learner continues its stream).

    Raises
    ------
    ModelFileError
        The file is not a kernelpath model, is damaged (checksum, truncation, parse), claims
        more than it holds, is not signed with ``key``, or was written by an incompatible
        version.
    ValueError
        Code the model needs (``regressor``) was not passed, or was passed for a model
        that has none.
    """

    p = os.fspath(path)
    secret = _key(key)
    data, entries = _read_file(p)
    try:
        tensors = st_load(data)
        header = _metadata(entries)
    except _UNREADABLE as exc:
        raise _unreadable(p, exc) from None
    del data
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{p} is not a kernelpath model file (no 'format' entry)")
    if header.get("checksum") != _checksum(header, tensors):
        raise ModelFileError(
            f"{p} is damaged: its checksum does not match its contents (a changed byte, or "
            "an edited header)"
        )
    if secret is not None:
        signed = header.get("signature")
        if signed is None:
            raise ModelFileError(f"{p} is not signed: it was saved without a key")
        if not signed.isascii() or not hmac.compare_digest(
            signed, _signature(header["checksum"], secret)
        ):
            raise ModelFileError(
                f"{p}: its signature does not match the key (signed with another key, or "
                "changed since)"
            )
    written = header.get("kernelpath_version", "?")
    if header.get("format_version") != str(FORMAT_VERSION) or not _compatible(written):
        raise ModelFileError(
            f"{p} was written by kernelpath {written} (model format "
            f"{header.get('format_version')}); this is kernelpath {_version()} (format "
            f"{FORMAT_VERSION}): load it with kernelpath {'.'.join(written.split('.')[:2])}.x, "
            "or refit"
        )
    needs = _user_code_names(header.get("user_code", "[]"), p)
    extra = set(user_code) - needs
    if extra:
        raise ValueError(
            f"load got {sorted(extra)}, but a {header['class']} file needs "
            + (f"only {sorted(needs)}" if needs else "no code")
        )
    missing = [k for k in sorted(needs) if user_code.get(k) is None]
    if missing:
        raise ValueError(
            f"a {header['class']} keeps its {missing[0]} (the user's code) out of the file: "
            f"pass it back, load(path, {missing[0]}=f)"
        )
    for k in needs:
        if not callable(user_code[k]):
            raise TypeError(f"{k} must be callable, got {type(user_code[k]).__name__}")
    try:
        tree = json.loads(header["model"])
        model = _Decoder(tensors, dict(user_code)).value(tree)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{p}: the model header is not valid: {exc}") from None
    if _class_name(model, _registry()) != header["class"]:
        raise ModelFileError(f"{p}: the header's class and its model differ")
    sklearn_written = header.get("sklearn_version")
    if sklearn_written is not None and sklearn_written != sklearn_version:
        warnings.warn(
            f"{p} holds scikit-learn preprocessors written by scikit-learn {sklearn_written}; this "
            f"is {sklearn_version}, whose fitted attributes may differ: check its "
            "predictions, or refit the pipeline",
            UserWarning,
            stacklevel=2,
        )
    _check_consistent(model.steps[-1][1] if isinstance(model, Pipeline) else model, p)
    return model


def _user_code_names(text: str, p: str) -> set[str]:
    """The header's ``user_code`` entry: a JSON list of parameter names."""
    try:
        names = json.loads(text)
    except (ValueError, RecursionError):
        names = None
    if not isinstance(names, list) or not all(isinstance(k, str) for k in names):
        raise ModelFileError(f"{p}: the header's user_code is not a list of names")
    return set(names)


def _read_file(p: str) -> tuple[bytes, dict[str, Any]]:
    """The bytes of a regular file (not a device, FIFO or folder) and its safetensors
    header (``_check_layout``), which is read and checked against the file's size first:
    the rest is read only when the header's arrays account for every byte of it."""
    st = check_source(p, not_regular=ModelFileError)
    try:
        with open(p, "rb") as fh:
            head = fh.read(9)
            if len(head) == 9 and head[8:9] == b"{":
                n = int.from_bytes(head[:8], "little")
                if n <= MAX_HEADER_BYTES:
                    head += fh.read(n - 1)
            try:
                entries = _check_layout(head, st.st_size)
            except _UNREADABLE as exc:
                raise _unreadable(p, exc) from None
            fh.seek(0)
            return fh.read(st.st_size), entries
    except OSError as exc:
        raise ValueError(f"path: cannot read {p!r}: {exc.strerror or exc}") from None


#: What a file that is not a readable model raises while it is parsed.
_UNREADABLE = (SafetensorError, ValueError, UnicodeDecodeError, OverflowError, RecursionError)


def _unreadable(p: str, exc: Exception) -> ModelFileError:
    """The ``ModelFileError`` for file ``p`` whose parsing raised ``exc``."""
    if isinstance(exc, NotAModelFile):
        return ModelFileError(f"{p}: {exc} (it was not written by kernelpath.save)")
    if isinstance(exc, ModelFileError):
        return ModelFileError(f"{p} is not a readable kernelpath model file: {exc}")
    return ModelFileError(
        f"{p} is not a readable kernelpath model file (damaged or truncated): {exc}"
    )


def _check_layout(head: bytes, size: int) -> dict[str, Any]:
    """What the safetensors header claims, against the file's ``size``, before any array
    is made or the arrays' bytes are read (``head``: the file's first bytes, the header
    among them): the header's length, each dtype, shape and byte range, and that the
    arrays account for every byte after the header. Returns the parsed header."""
    if size < 8 or len(head) < 8:
        raise ModelFileError("too short to be a model file")
    if head[8:9] != b"{":  # a safetensors header is JSON: a CSV, an image, a pickle is not
        raise NotAModelFile("not a kernelpath model file")
    n = int.from_bytes(head[:8], "little")
    if n > MAX_HEADER_BYTES or 8 + n > size or len(head) < 8 + n:
        raise ModelFileError(
            f"its header claims {n} bytes (the file has {size}, the limit is {MAX_HEADER_BYTES})"
        )
    entries = json.loads(head[8 : 8 + n].decode("utf-8"))
    if not isinstance(entries, dict):
        raise ModelFileError("its header is not a table of arrays")
    body = size - 8 - n
    end = 0
    for name, e in entries.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict):
            raise ModelFileError(f"array {name!r}: not described")
        dsize = _DTYPES.get(e.get("dtype"))  # type: ignore[arg-type]
        shape, offsets = e.get("shape"), e.get("data_offsets")
        if dsize is None:
            raise ModelFileError(f"array {name!r}: dtype {e.get('dtype')!r} is not one kept")
        if (
            not isinstance(shape, list)
            or not all(isinstance(d, int) and 0 <= d <= size for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= body
            or offsets[1] - offsets[0] != dsize * math.prod(shape)
        ):
            raise ModelFileError(
                f"array {name!r}: shape {shape} and bytes {offsets} do not fit a file of "
                f"{size} bytes"
            )
        end = max(end, offsets[1])
    if end != body:
        raise ModelFileError(
            f"its arrays hold {end} bytes but {body} follow the header (a file padded, "
            "appended to or cut short)"
        )
    return entries


def _check_consistent(model: Any, p: str) -> None:
    """The fitted arrays agree with each other: centers have the model's features, the
    coefficients one row per center (or per feature of the map)."""
    d = getattr(model, "n_features_in_", None)
    centers = getattr(model, "centers_", None)
    coef = getattr(model, "coef_", None)
    if isinstance(centers, np.ndarray):
        if centers.ndim != 2 or centers.shape[0] == 0 or (d is not None and centers.shape[1] != d):
            raise ModelFileError(
                f"{p}: centers_ of shape {centers.shape} do not fit a model of {d} features"
            )
        if isinstance(coef, np.ndarray) and (coef.ndim == 0 or coef.shape[0] != centers.shape[0]):
            raise ModelFileError(
                f"{p}: coef_ of shape {coef.shape} does not fit {centers.shape[0]} centers"
            )
    classes = getattr(model, "classes_", None)
    if classes is not None and isinstance(coef, np.ndarray) and coef.ndim in (1, 2):
        k = len(classes)
        outputs = 1 if coef.ndim == 1 else coef.shape[1]
        if k < 2 or outputs not in ((1, 2) if k == 2 else (k,)):
            raise ModelFileError(
                f"{p}: {k} classes but coef_ of shape {coef.shape} (one column per class, "
                "or one for two classes)"
            )


def _header(data: bytes) -> dict[str, str]:
    """The metadata of a safetensors buffer (already checked by safetensors' own parser)."""
    n = int.from_bytes(data[:8], "little")
    return _metadata(json.loads(data[8 : 8 + n].decode("utf-8")))


def _metadata(entries: dict[str, Any]) -> dict[str, str]:
    """The ``__metadata__`` table of a parsed safetensors header, as strings."""
    meta = entries.get("__metadata__") or {}
    if not isinstance(meta, dict):
        raise ValueError("no metadata")
    return {str(k): str(v) for k, v in meta.items()}
