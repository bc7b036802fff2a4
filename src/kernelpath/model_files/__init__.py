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
from collections.abc import Callable
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save
from sklearn import __version__ as sklearn_version
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._version import __version__
from ..data.files import check_destination, check_source, default_mode, temporary
from ..inputs import dense_block
from ..online import SemiparametricRegressor
from ._codec import (
    _DTYPES,
    _USER_CODE,
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_HEADER_BYTES,
    ModelFileError,
    NotAModelFile,
    _class_name,
    _Decoder,
    _Encoder,
    _registry,
)

__all__ = ["save", "load", "ModelFileError", "FORMAT_VERSION"]


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
    coefficients and features consistent. A fitted model is then probed: its prediction
    methods on a row of zeros and its first centers must return finite values. Anything
    that fails while the file is read, decoded or probed is a ``ModelFileError`` naming
    the file. Loading takes at most about twice the file's size and 64 MB besides.

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
        more than it holds, is not signed with ``key``, was written by an incompatible
        version, or describes a model that is not valid (inconsistent arrays, coefficients
        whose predictions overflow, a probe prediction that fails).
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
        model = _decoded(header, tensors, dict(user_code))
    except ModelFileError as exc:
        raise ModelFileError(exc.args[0] if p in str(exc) else f"{p}: {exc}") from None
    except MemoryError:
        raise
    except Exception as exc:  # any other failure is the file's: what it describes is not a model
        raise ModelFileError(
            f"{p}: the model it describes is not valid ({type(exc).__name__}: {exc})"
        ) from None
    sklearn_written = header.get("sklearn_version")
    if sklearn_written is not None and sklearn_written != sklearn_version:
        warnings.warn(
            f"{p} holds scikit-learn preprocessors written by scikit-learn {sklearn_written}; this "
            f"is {sklearn_version}, whose fitted attributes may differ: check its "
            "predictions, or refit the pipeline",
            UserWarning,
            stacklevel=2,
        )
    return model


def _decoded(header: dict[str, str], tensors: dict[str, np.ndarray], user_code: dict) -> Any:
    """The model the header describes, checked: its class, its arrays against each other,
    and a fitted model's predictions on a probe (``_check_predictions``)."""
    model = _Decoder(tensors, user_code).value(json.loads(header["model"]))
    if _class_name(model, _registry()) != header["class"]:
        raise ModelFileError("the header's class and its model differ")
    last = model.steps[-1][1] if isinstance(model, Pipeline) else model
    _check_consistent(last)
    _check_predictions(last)
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


def _check_consistent(model: Any) -> None:
    """The fitted arrays agree with each other: centers have the model's features, the
    coefficients one row per center (or per feature of the map) and a finite sum of
    magnitudes (a prediction is at most that sum times the kernel's largest value)."""
    d = getattr(model, "n_features_in_", None)
    encoder = getattr(model, "encoder_", None)
    if encoder is not None:  # the centers have the encoded features
        d = _check_encoder(encoder, d)
    centers = getattr(model, "centers_", None)
    coef = getattr(model, "coef_", None)
    if B.is_tensor(coef):
        coef = B.to_numpy(coef)
    if isinstance(centers, np.ndarray):
        if centers.ndim != 2 or centers.shape[0] == 0 or (d is not None and centers.shape[1] != d):
            raise ModelFileError(
                f"centers_ of shape {centers.shape} do not fit a model of {d} features"
            )
        if isinstance(coef, np.ndarray) and (coef.ndim == 0 or coef.shape[0] != centers.shape[0]):
            raise ModelFileError(
                f"coef_ of shape {coef.shape} does not fit {centers.shape[0]} centers"
            )
    if isinstance(coef, np.ndarray) and coef.dtype.kind == "f" and coef.size:
        with np.errstate(over="ignore"):
            total = np.abs(coef.astype(np.float64)).sum(axis=0)
        if not np.all(np.isfinite(total)):
            raise ModelFileError(
                "coef_ holds coefficients whose sum overflows: its predictions would not be finite"
            )
    classes = getattr(model, "classes_", None)
    if classes is not None and isinstance(coef, np.ndarray) and coef.ndim in (1, 2):
        k = len(classes)
        outputs = 1 if coef.ndim == 1 else coef.shape[1]
        if k < 2 or outputs not in ((1, 2) if k == 2 else (k,)):
            raise ModelFileError(
                f"{k} classes but coef_ of shape {coef.shape} (one column per class, "
                "or one for two classes)"
            )


def _check_encoder(enc: Any, d: Any) -> int:
    """A table encoder's lists and arrays agree with each other and with the model's
    ``n_features_in_`` columns: the number of features it makes."""
    n_cols = len(enc.columns_)
    lists = (enc.kinds_, enc.fill_, enc.indicator_, enc.categories_, enc.encodings_)
    if n_cols != d or any(len(v) != n_cols for v in lists):
        raise ModelFileError(f"encoder_ does not describe the model's {d} columns")
    out = len(enc.feature_roles_)
    arrays = (enc.offsets_, enc.spreads_, enc.feature_columns_)
    if any(np.shape(a) != (out,) for a in arrays) or len(enc.feature_names_out_) != out:
        raise ModelFileError("encoder_'s features disagree in number")
    if not (np.all(np.isfinite(enc.offsets_)) and np.all(np.abs(enc.spreads_) > 0)):
        raise ModelFileError("encoder_ holds a scaling that is not finite")
    return out


#: The prediction methods a loaded model is probed with, where it has them.
_PROBED = ("predict", "predict_proba", "decision_function", "transform")


def _check_predictions(model: Any) -> None:
    """A fitted model (but a semiparametric one, whose physical model is the user's code)
    predicts finite values on a probe: a row of zeros and its first centers. What a
    tampered file breaks shows here, as ``ModelFileError``, not at the user's first
    prediction."""
    if isinstance(model, SemiparametricRegressor) or not _is_fitted(model):
        return
    d = getattr(model, "n_features_in_", None)
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not 0 < d <= 2**31:
        raise ModelFileError(f"n_features_in_ is not a number of features: {d!r}")
    probe = np.zeros((1, int(d)))
    centers = getattr(model, "centers_", None)
    if centers is not None and getattr(model, "encoder_", None) is None:
        first = dense_block(centers[:3])
        probe = np.vstack([probe, np.asarray(B.to_numpy(first), dtype=np.float64)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # feature names, rounding notes
        for name in _PROBED:
            method = getattr(model, name, None)
            if method is None or (name == "predict_proba" and _uncalibrated(model)):
                continue
            out = np.asarray(B.to_numpy(method(probe)))
            if out.dtype.kind in "fc" and not np.all(np.isfinite(out)):
                raise ModelFileError(f"its {name} gives values that are not finite")


def _uncalibrated(model: Any) -> bool:
    """A classifier whose fit held no rows out has no probabilities (its ``predict_proba``
    says so; files written before probabilities hold no ``calibration_``)."""
    return hasattr(model, "_probability_map") and getattr(model, "calibration_", None) is None


def _is_fitted(model: Any) -> bool:
    try:
        check_is_fitted(model)
    except NotFittedError:
        return False
    except TypeError:  # not an estimator: a feature map without fit state
        return False
    return True


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
