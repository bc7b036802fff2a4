"""``kernelpath info``: the version, threads, memory budget and devices, without loading
scikit-learn, Numba or PyArrow."""

from __future__ import annotations

import argparse
from importlib.util import find_spec

from .._backend import available_memory, n_threads
from .._version import __version__
from ..workspace import Workspace


def _info(_: argparse.Namespace) -> int:
    print(f"kernelpath {__version__}")
    print(f"threads for kernel evaluation: {n_threads()}")
    print(
        f"available memory: {available_memory() / 1e9:.1f} GB; "
        f"default memory_budget: {Workspace.of(None).budget / 1e9:.1f} GB"
    )

    print(
        "rank-one Cholesky updates: "
        + ("Numba" if find_spec("numba") else "NumPy loops (install numba for ~10x)")
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
