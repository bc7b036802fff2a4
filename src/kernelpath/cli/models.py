"""The command line's models: the estimator a command names, with its options, and how a
fitted model is described."""

from __future__ import annotations

import argparse
import inspect
import json
from typing import Any

from ..estimators import (
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
from ..fitting.nystrom import NystromFamily, NYTROFamily
from ..kernels import make_kernel
from .names import UserError


# --------------------------------------------------------------------------- models
def _model_classes() -> dict[str, tuple[type, type]]:
    return {
        "nystrom": (NystromRegressor, NystromClassifier),
        "nytro": (NYTRORegressor, NYTROClassifier),
        "krls": (KRLSRegressor, KRLSClassifier),
        "rf": (RandomFeaturesRegressor, RandomFeaturesClassifier),
        "sgm": (SGMRegressor, SGMClassifier),
        "eigenpro": (EigenProRegressor, EigenProClassifier),
    }


def solver_choices() -> dict[str, tuple[str, ...]]:
    """``--solver`` per ``--model`` (the others have one solver), the default first."""
    out = {}
    for model, family in (("nystrom", NystromFamily), ("nytro", NYTROFamily)):
        default = inspect.signature(_model_classes()[model][0]).parameters["solver"].default
        out[model] = (default, *(s for s in family._solvers if s != default))
    return out


def _number_or_name(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _kernel(name: str, sigma: str | None) -> Any:
    """``--kernel`` (a name of ``kernels.make_kernel``) with ``--sigma`` for the radial ones."""

    try:
        kernel = make_kernel(name)
    except ValueError as exc:
        raise UserError(f"--{exc}") from None
    if sigma is None:
        return name
    if not hasattr(kernel, "sigma"):
        raise UserError(f"--sigma: the {name} kernel has no width")
    radial: Any = type(kernel)  # Gaussian, Laplacian, Matern or Cauchy: they take sigma
    return radial(sigma=_number_or_name(sigma))


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _estimator(args: argparse.Namespace, task: str) -> Any:
    reg, clf = _model_classes()[args.model]
    cls = clf if task == "classification" else reg
    valid = set(cls().get_params())
    params: dict[str, Any] = {"kernel": _kernel(args.kernel, args.sigma)}
    if args.penalty is not None:
        values = [_number_or_name(v) for v in args.penalty.split(",")]
        params["penalty"] = values[0] if len(values) == 1 else values
    if args.n_centers is not None:
        params["n_centers"] = _number_or_name(args.n_centers)
        if isinstance(params["n_centers"], float) and params["n_centers"].is_integer():
            params["n_centers"] = int(params["n_centers"])
    for opt in ("max_iter", "n_features", "solver", "validation_fraction", "memory_budget"):
        value = getattr(args, opt)
        if value is not None:
            params[opt] = value
    if getattr(args, "search", None) is not None:
        params["search"] = args.search
    if getattr(args, "categorical", None) is not None:
        names = [c for c in args.categorical.split(",") if c]
        params["categorical_features"] = "from_dtype" if names == ["auto"] else names
    if getattr(args, "scale", None) is not None:
        params["scale"] = {"auto": "auto", "on": True, "off": False}[args.scale]
    if getattr(args, "class_weight", None) is not None:
        if task != "classification":
            raise UserError("--class-weight: the target is numeric (regression), not classes")
        params["class_weight"] = args.class_weight
    if getattr(args, "loss", None) is not None:
        if task != "classification":
            raise UserError("--loss: the target is numeric (regression), not classes")
        params["loss"] = args.loss
    if args.seed is not None:
        params["random_state"] = args.seed
    if args.device is not None:
        params["device"] = args.device
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set takes NAME=VALUE, got {item!r}")
        params[key.replace("-", "_")] = _parse_value(value)
    unknown = sorted(set(params) - valid)
    if unknown:
        flag = unknown[0].replace("_", "-")
        raise UserError(
            f"--{flag}: {cls.__name__} has no parameter {unknown[0]!r} "
            f"(its parameters: {', '.join(sorted(valid))})"
        )
    return cls(**params)


def _rows_x_cols(X: Any) -> str:
    return f"{X.shape[0]:,} rows x {X.shape[1]} features"


def _best(model: Any) -> str:
    if not hasattr(model, "best_params_"):
        return ""
    parts = []
    for k, v in model.best_params_.items():
        parts.append(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts)
