"""The ``kernelpath`` command's parser and entry point."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .._backend import check_device
from .._version import __version__
from ..model_files import ModelFileError
from .commands import _demo, _evaluate, _fit, _info, _inspect, _predict
from .files import UserError
from .models import _model_classes, help_texts


# --------------------------------------------------------------------------- main
def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", help="CSV, Parquet, LIBSVM, .npy or .npz file")
    p.add_argument("--target", help="the target column (or .npz array)")
    p.add_argument("--target-file", help="the target in its own file (.npy or .csv)")


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="print only the output's name")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show a progress bar (default: when stderr is a terminal)",
    )
    bar.add_argument("--no-progress", dest="progress", action="store_false")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelpath", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"kernelpath {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    helps = help_texts()
    fit = sub.add_parser("fit", help="fit a model on a data file and write a model file")
    _data_options(fit)
    fit.add_argument("--output", "-o", help="the model file (default: DATA's name with .kp)")
    fit.add_argument("--columns", help="feature columns, comma-separated (default: all)")
    fit.add_argument(
        "--model", choices=list(_model_classes()), default="nystrom", help=helps["model"]
    )
    fit.add_argument(
        "--task",
        choices=["auto", "regression", "classification"],
        default="auto",
        help="auto: classification for text, boolean or at most 20 integer target values",
    )
    fit.add_argument("--kernel", default="gaussian", help=helps["kernel"])
    fit.add_argument("--sigma", help=helps["sigma"])
    fit.add_argument(
        "--scale",
        choices=["auto", "on", "off"],
        help="scale each feature by its spread (folded into the kernel's widths); auto "
        "(default): where the fit chooses the width",
    )
    fit.add_argument("--penalty", help="λ: a number, a comma-separated grid, or 'auto'")
    fit.add_argument("--n-centers", help="Nyström centers: a number or 'auto'")
    fit.add_argument("--n-features", type=int, help="random features (rf, sgm)")
    fit.add_argument("--max-iter", type=int)
    fit.add_argument("--solver", help=helps["solver"])
    fit.add_argument("--validation-fraction", type=float)
    fit.add_argument("--memory-budget", help="e.g. 2GB (default: half the free memory)")
    fit.add_argument(
        "--class-weight",
        choices=["balanced"],
        help="classification: weigh each class by n / (classes x its count) (a dict of "
        "weights: --set class_weight='{\"label\": 2.0}')",
    )
    fit.add_argument(
        "--loss",
        choices=["square", "logistic", "squared_hinge"],
        help="classification: the loss (default square; logistic and squared_hinge by "
        "Newton's method: nystrom, krls, rf)",
    )
    fit.add_argument("--seed", type=int, help="random_state")
    fit.add_argument("--device", help="compute with PyTorch there (cpu, cuda, cuda:N)")
    fit.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="any other parameter (repeatable)"
    )
    _output_options(fit)
    fit.set_defaults(func=_fit)

    pred = sub.add_parser("predict", help="predict a data file with a model file")
    pred.add_argument("model", help="a model file written by fit (or kernelpath.save)")
    pred.add_argument("data", help="CSV, Parquet, LIBSVM, .npy or .npz file")
    pred.add_argument("--output", "-o", required=True, help=".csv, .npy, .h5 or .zarr")
    pred.add_argument(
        "--method",
        choices=["predict", "decision_function", "predict_proba"],
        default="predict",
        help="predict (default): values or labels; decision_function: a classifier's scores; "
        "predict_proba: its class probabilities, one column per class",
    )
    _output_options(pred)
    pred.set_defaults(func=_predict)

    ev = sub.add_parser("evaluate", help="scores of a model file on labelled data")
    ev.add_argument("model")
    _data_options(ev)
    ev.add_argument("--json", action="store_true", help="one JSON line")
    _output_options(ev)
    ev.set_defaults(func=_evaluate)

    ins = sub.add_parser("inspect", help="what a model file holds")
    ins.add_argument("model")
    ins.add_argument("--plot", help="write the validation error along the path as PNG")
    ins.set_defaults(func=_inspect)

    demo = sub.add_parser("demo", help="fit a regularization path on generated data")
    demo.add_argument("--n-train", type=int, default=20000)
    demo.add_argument("--n-test", type=int, default=5000)
    demo.add_argument("--n-centers", type=int, default=1000)
    demo.add_argument("--solver", choices=["cg", "direct", "nytro"], default="cg")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument(
        "--device", default=None, help="compute with PyTorch there (auto, cpu, cuda, cuda:N)"
    )
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="version, threads and memory budget")
    info.set_defaults(func=_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernelpath`` command."""
    from sklearn.exceptions import NotFittedError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        for name in ("n_train", "n_test", "n_centers"):
            if getattr(args, name) < 2:
                parser.error(f"--{name.replace('_', '-')} must be at least 2")
        if args.seed < 0:
            parser.error(f"--seed must be a non-negative integer, got {args.seed}")
    if getattr(args, "device", None) is not None:
        try:
            check_device(args.device, "--device")
        except (ValueError, TypeError) as exc:
            parser.error(str(exc))
    previous = _on_sigterm()
    try:
        return int(args.func(args))
    except _Terminated:
        print(f"kernelpath {args.command}: terminated", file=sys.stderr)
        return 143
    except (UserError, ModelFileError, ValueError, TypeError, NotFittedError, OSError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"kernelpath {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"kernelpath {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the writers' cleanup runs (their
    temporary files are removed, as on Ctrl-C)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def _on_sigterm() -> Any:
    """Route SIGTERM to ``_Terminated`` while a command runs (main thread only); the
    handler it replaces, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_terminated)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
