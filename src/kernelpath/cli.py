"""The ``kernelpath`` command.

    kernelpath demo [--n-train N] [--n-test N] [--solver cg|direct|nytro] [--seed S]
                    [--device auto|cpu|cuda|cuda:N]
    kernelpath info

``demo`` fits the foundation benchmark's problem (x ~ N(0, I_20), y = sin(<w, x>) + 0.1 eps)
on generated data: the whole (λ, iteration) path on a 20% hold-out, then prints the path's
best point, its validation error and the test RMSE (``--device`` computes with PyTorch
there). ``info`` prints the version, threads, default memory budget and the PyTorch devices.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from . import Gaussian, NystromRegressor, NYTRORegressor, __version__
from ._backend import available_memory, n_threads, resolve_memory_budget
from .datasets import make_sin_regression


def _demo(args: argparse.Namespace) -> int:
    X, y, w = make_sin_regression(args.n_train, 20, 0.1, random_state=args.seed)
    Xt, yt, _ = make_sin_regression(args.n_test, 20, 0.1, random_state=args.seed + 1, w=w)
    kernel = Gaussian(sigma=5.0)
    if args.solver == "nytro":
        est = NYTRORegressor(
            kernel,
            n_centers=args.n_centers,
            solver="nu",
            n_iter_no_change=30,
            random_state=args.seed,
            device=args.device,
        )
    else:
        est = NystromRegressor(
            kernel,
            n_centers=args.n_centers,
            solver=args.solver,
            random_state=args.seed,
            device=args.device,
        )
    print(
        f"kernelpath {__version__} demo: n_train={args.n_train}, n_test={args.n_test}, d=20, "
        f"Gaussian sigma=5, {args.n_centers} centers, solver={args.solver}"
        + ("" if args.device is None else f", device={args.device}")
    )
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    rmse = float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))
    path = est.path_
    print(
        f"path: shape {path.shape} over {', '.join(path.param_names)}; fit {fit_s:.2f} s "
        f"(computed on {est.device_})"
    )
    best = ", ".join(f"{k}={v:.3g}" for k, v in est.best_params_.items())
    print(f"best point: {best}  (validation MSE {path.best_val_error:.4f})")
    print(f"test RMSE: {rmse:.4f}  (noise level 0.1)")
    return 0


def _info(_: argparse.Namespace) -> int:
    print(f"kernelpath {__version__}")
    print(f"threads for kernel evaluation: {n_threads()}")
    print(
        f"available memory: {available_memory() / 1e9:.1f} GB; "
        f"default memory_budget: {resolve_memory_budget(None) / 1e9:.1f} GB"
    )
    from ._kernels import HAVE_NUMBA

    print(
        "rank-one Cholesky updates: "
        + ("compiled (Numba)" if HAVE_NUMBA else "NumPy loops (install numba for ~10x)")
    )
    try:
        import torch
    except ImportError:
        print("PyTorch: not installed (pip install 'kernelpath[torch]' for device=...)")
        return 0
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print(
        f"PyTorch {torch.__version__}: device='cpu'"
        + "".join(f", 'cuda:{i}' ({name})" for i, name in enumerate(gpus))
        + ("" if gpus else "; no CUDA device")
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernelpath`` command."""
    parser = argparse.ArgumentParser(prog="kernelpath", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
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
    args = parser.parse_args(argv)
    for name in ("n_train", "n_test", "n_centers"):
        if getattr(args, name, 2) < 2:
            parser.error(f"--{name.replace('_', '-')} must be at least 2")
    if getattr(args, "device", None) is not None:
        from ._backend import check_device

        try:
            check_device(args.device, "--device")
        except (ValueError, TypeError) as exc:
            parser.error(str(exc))
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
