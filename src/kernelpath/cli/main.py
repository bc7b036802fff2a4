"""The ``kernelpath`` command's parser and entry point. It imports only the parser's names
(``cli.names``): a command loads the library when it runs, so ``--help`` and ``info`` start
at once."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .._version import __version__
from .names import MODELS, UserError, help_texts

DESCRIPTION = (
    "Kernel ridge regression and classification at scale, with whole regularization "
    "paths: fit a model on a data file, predict, evaluate, inspect a model file."
)
DATA_HELP = (
    "a CSV or TSV file with a header row (also .csv.gz, .tsv.bz2, ...), Parquet, LIBSVM "
    "(.svm, .libsvm, .svmlight), .npy or .npz (arrays X and y)"
)


# --------------------------------------------------------------------------- main
def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", help=DATA_HELP)
    p.add_argument("--target", help="the target column (or .npz array)")
    p.add_argument("--target-file", help="the target in its own file (.npy, .csv or .tsv)")
    _delimiter_option(p)
    _na_option(p)


def _na_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--na-values",
        help="the texts that mark a missing value in a table, comma-separated (e.g. '?,NA'); "
        "the table is then read with its text columns and missing values kept for the "
        "model to encode",
    )


def _delimiter_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--delimiter",
        help="a text table's field separator, one character (default: a tab for .tsv, "
        "else a comma; write a tab as $'\\t')",
    )


def _subparser(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=help[0].upper() + help[1:] + ".", allow_abbrev=False
    )
    return parser


def _output_options(
    p: argparse.ArgumentParser, quiet: str = "print only the output's name"
) -> None:
    p.add_argument("--quiet", action="store_true", help=quiet)
    bar = p.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show a progress bar (default: when stderr is a terminal)",
    )
    bar.add_argument(
        "--no-progress", dest="progress", action="store_false", help="show no progress bar"
    )


def _fit_options(fit: argparse.ArgumentParser) -> None:
    """The options of ``kernelpath fit`` beyond the data's: the model and its parameters."""
    helps = help_texts()
    fit.add_argument("--output", "-o", help="the model file (default: DATA's name with .kp)")
    fit.add_argument("--columns", help="feature columns, comma-separated (default: all)")
    fit.add_argument("--model", choices=list(MODELS), default="nystrom", help=helps["model"])
    fit.add_argument(
        "--task",
        choices=["auto", "regression", "classification"],
        default="auto",
        help="auto: classification for text, boolean or at most 20 integer target values",
    )
    fit.add_argument("--kernel", default="auto", help=helps["kernel"])
    fit.add_argument(
        "--search",
        choices=["none", "auto", "full"],
        help="nystrom: how much the fit tries on its hold-out (the kernel family, a learned "
        "metric, more centers); default auto, none for the plain Gaussian",
    )
    fit.add_argument(
        "--categorical",
        help="a table's categorical columns, comma-separated, or 'auto' for its text "
        "columns; the table is then read with its text columns for the model to encode",
    )
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
    fit.add_argument(
        "--max-iter",
        type=int,
        help="the iterations of an iterative solver (cg, nytro, krls with "
        "--set filter=landweber): the path's last point (default: the estimator's)",
    )
    fit.add_argument("--solver", help=helps["solver"])
    fit.add_argument(
        "--validation-fraction",
        type=float,
        help="the share of the rows held out to choose the path's best point (default 0.2)",
    )
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelpath",
        description=DESCRIPTION,
        epilog="'kernelpath COMMAND --help' describes each command's options.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"kernelpath {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fit = _subparser(sub, "fit", "fit a model on a data file and write a model file")
    _data_options(fit)
    _fit_options(fit)
    _output_options(fit)
    fit.set_defaults(func="_fit")

    pred = _subparser(sub, "predict", "predict a data file with a model file")
    pred.add_argument("model", help=MODEL_HELP)
    pred.add_argument("data", help=DATA_HELP)
    _delimiter_option(pred)
    _na_option(pred)
    pred.add_argument("--output", "-o", required=True, help=".csv, .npy, .h5 or .zarr")
    pred.add_argument(
        "--method",
        choices=["predict", "decision_function", "predict_proba"],
        default="predict",
        help="predict (default): values or labels; decision_function: a classifier's scores; "
        "predict_proba: its class probabilities, one column per class",
    )
    _output_options(pred)
    pred.set_defaults(func="_predict")

    ev = _subparser(sub, "evaluate", "scores of a model file on labelled data")
    ev.add_argument("model", help=MODEL_HELP)
    _data_options(ev)
    ev.add_argument("--json", action="store_true", help="one JSON line")
    _output_options(
        ev,
        quiet="print only the first score's value (accuracy for a classifier, RMSE for a "
        "regressor)",
    )
    ev.set_defaults(func="_evaluate")

    ins = _subparser(sub, "inspect", "what a model file holds")
    ins.add_argument("model", help=MODEL_HELP)
    ins.add_argument("--plot", help="write the validation error along the path as PNG")
    ins.set_defaults(func="_inspect")

    demo = _subparser(sub, "demo", "fit a regularization path on generated data")
    demo.add_argument("--n-train", type=int, default=20000, help="training rows (default: 20000)")
    demo.add_argument("--n-test", type=int, default=5000, help="test rows (default: 5000)")
    demo.add_argument("--n-centers", type=int, default=1000, help="Nyström centers (default: 1000)")
    demo.add_argument(
        "--solver",
        choices=["cg", "direct", "nytro"],
        default="cg",
        help="cg (default): the (λ, iteration) path by conjugate gradients; direct: the "
        "exact λ path; nytro: early-stopped gradient descent",
    )
    demo.add_argument("--seed", type=int, default=0, help="the data's and the fit's seed")
    demo.add_argument(
        "--device", default=None, help="compute with PyTorch there (auto, cpu, cuda, cuda:N)"
    )
    demo.set_defaults(func="_demo")
    info = _subparser(sub, "info", "version, threads, memory budget and devices")
    info.set_defaults(func="_info")
    return parser


MODEL_HELP = "a model file written by 'kernelpath fit' (or kernelpath.save)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernelpath`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        for name in ("n_train", "n_test", "n_centers"):
            if getattr(args, name) < 2:
                parser.error(f"--{name.replace('_', '-')} must be at least 2")
        if args.seed < 0:
            parser.error(f"--seed must be a non-negative integer, got {args.seed}")
    if getattr(args, "device", None) is not None:
        from .._backend import check_device

        try:
            check_device(args.device, "--device")
        except (ValueError, TypeError) as exc:
            parser.error(str(exc))
    previous = _on_sigterm()
    try:
        # info is the one command that loads nothing of the library
        name = "info" if args.command == "info" else "commands"
        module = importlib.import_module(f".{name}", __package__)
        return int(getattr(module, args.func)(args))
    except _Terminated:
        print(f"kernelpath {args.command}: terminated", file=sys.stderr)
        _exit_if_lapack_runs(143)
        return 143
    # a model file's errors and scikit-learn's NotFittedError are ValueErrors
    except (UserError, ValueError, TypeError, OSError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"kernelpath {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"kernelpath {args.command}: interrupted", file=sys.stderr)
        _exit_if_lapack_runs(130)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _exit_if_lapack_runs(code: int) -> None:
    """After an interrupt (the writers' temporary files already removed on the way out):
    when a factorization the interrupt left is still running in its helper thread, end the
    process now rather than wait for it (the interpreter's exit would: it must not tear
    OpenBLAS down under a running call, ``_kernels.interruptible``)."""
    kernels = sys.modules.get("kernelpath._kernels")
    if kernels is not None and kernels.helpers_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


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
