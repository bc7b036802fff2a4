"""One fit in a fresh process, as users run it: the worker of the peer benchmarks.

    python benchmarks/fresh.py data --n 200000 --n-test 50000 --out DIR
    python benchmarks/fresh.py fit --lib kernelpath --data DIR [options]
    /path/to/falkon-venv/bin/python benchmarks/fresh.py fit --lib falkon --data DIR [options]
    python benchmarks/fresh.py mnist --root ../shared/data --m 20000 --device cuda

``data`` writes problem P (x ~ N(0, I_d), y = sin<w, x> + 0.1 eps, ||w|| = 1; test points from
the same w) as .npy files. ``fit`` loads them, waits for the memory to settle, then times the
library's ``fit`` call alone (from the call to its return), predicts the test points and
prints one JSON line: fit seconds, test RMSE, peak resident memory above the process's
memory after loading the data (sampled every 5 ms, plus the kernel's high-water mark where
it is available) and, for torch devices, the peak device memory.

This file imports only NumPy at module level: it also runs in FALKON's own virtual
environment (``../shared/tools/build_falkon_cpu.sh``), where kernelpath is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

import numpy as np


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """Peak resident memory above the baseline at entry, sampled every 5 ms."""

    def __enter__(self) -> PeakMemory:
        self.base = _rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.005)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())

    @property
    def mb(self) -> float:
        return (self.peak - self.base) / 1e6


def make_data(n: int, n_test: int, d: int, seed: int, out: str) -> None:
    """Problem P, the foundation benchmark's (``kernelpath.datasets.make_sin_regression``
    with the same generator calls)."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(n)
    rt = np.random.default_rng(seed + 1)
    Xt = rt.standard_normal((n_test, d))
    yt = np.sin(Xt @ w) + 0.1 * rt.standard_normal(n_test)
    for name, a in (("X", X), ("y", y), ("Xt", Xt), ("yt", yt)):
        np.save(os.path.join(out, f"{name}.npy"), a)


def _load(data: str, dtype: str) -> tuple[np.ndarray, ...]:
    arrays = [np.load(os.path.join(data, f"{k}.npy")) for k in ("X", "y", "Xt", "yt")]
    return tuple(np.ascontiguousarray(a, dtype=dtype) for a in arrays)


def fit_kernelpath(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    from kernelpath import Gaussian, NystromRegressor

    est = NystromRegressor(
        Gaussian(a.sigma),
        penalty=a.penalty if a.path is None else np.geomspace(1e-3, 1e-9, a.path),
        n_centers=a.m,
        solver="cg",
        max_iter=a.iters,
        tol=0.0,
        validation_fraction=0.0 if a.path is None else 0.2,
        memory_budget=a.budget,
        random_state=0,
        factor_layout=getattr(a, "factor_layout", "auto"),
        **({} if a.device is None else {"device": a.device}),
    )
    _sync(a.device)
    t = time.perf_counter()
    est.fit(X, y)
    _sync(a.device)
    sec = time.perf_counter() - t
    extra = {
        "n_iter": est.n_iter_,
        "best_params": est.best_params_,
        "factor": _factor_info(est),
        **_fused_state(),
    }
    return sec, est.predict(Xt), extra


def _factor_info(est: Any) -> dict[str, Any]:
    """The form of the fit's factor of the centers' system (the chosen path's info)."""
    info = getattr(getattr(est, "path_", None), "info", {}) or {}
    keys = (
        "factor",
        "factor_dtype",
        "preconditioners",
        "jitter",
        "precondition_shift",
        "factor_on_device",
    )
    return {k: info.get(k) for k in keys if k in info}


def fit_falkon(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    """FALKON 0.9: ``Falkon`` for host data (on the CPU, or streamed to the GPU with
    ``--device cuda``), ``InCoreFalkon`` for data already on the GPU (``--tensors --device
    cuda``); KeOps off, its other options at their defaults."""
    import falkon
    import torch

    cuda = a.device is not None and a.device.startswith("cuda")
    opts = falkon.FalkonOptions(
        use_cpu=not cuda,
        keops_active="no",
        **({} if cuda else {"max_cpu_mem": float(a.falkon_mem)}),
        debug=False,
    )
    kernel = falkon.kernels.GaussianKernel(sigma=a.sigma, opt=opts)
    in_core = cuda and torch.is_tensor(X) and X.is_cuda
    cls = falkon.InCoreFalkon if in_core else falkon.Falkon
    model = cls(kernel=kernel, penalty=a.penalty, M=a.m, maxiter=a.iters, seed=0, options=opts)
    X_ = X if torch.is_tensor(X) else torch.from_numpy(X)
    y_ = (y if torch.is_tensor(y) else torch.from_numpy(y)).reshape(-1, 1)
    Xt_ = Xt if torch.is_tensor(Xt) else torch.from_numpy(Xt)
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    model.fit(X_, y_)
    if cuda:
        torch.cuda.synchronize()
    sec = time.perf_counter() - t
    pred = model.predict(Xt_).cpu().numpy().ravel()
    return sec, pred, {"threads": torch.get_num_threads(), "falkon_class": cls.__name__}


def fit_sklearn(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    est = make_pipeline(
        Nystroem(kernel="rbf", gamma=1 / (2 * a.sigma**2), n_components=a.m, random_state=0),
        Ridge(alpha=a.penalty * len(X)),
    )
    t = time.perf_counter()
    est.fit(X, y)
    sec = time.perf_counter() - t
    return sec, est.predict(Xt), {}


FITS = {"kernelpath": fit_kernelpath, "falkon": fit_falkon, "sklearn": fit_sklearn}


def _fused_state() -> dict[str, Any]:
    """Whether kernelpath's fused Triton kernel was on, and the dtypes it fell back for."""
    try:
        from kernelpath import _fused
    except ImportError:  # a version without it
        return {}
    return {"fused_kernel": _fused.enabled(), "fused_failed": sorted(map(str, _fused._failed))}


def _sync(device: str | None) -> None:
    """Wait for the GPU's queued work (a fit's time must include it)."""
    if device is not None and device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def warm_up(a: argparse.Namespace, d: int) -> None:
    """One small fit of the same library on the same device before the timed one: CUDA's
    context, the cuBLAS / cuSOLVER handles and any compilation stay out of the timing (the
    protocol of the GPU benchmark). Its m reaches the size from which the m x m algebra runs
    on the device, so the device factor's libraries are loaded too."""
    rng = np.random.default_rng(123)
    m = min(a.m, 10_000)
    n = 2 * m
    dtype = np.dtype(a.dtype)
    Xw = rng.standard_normal((n, d)).astype(dtype)
    yw = np.sin(Xw[:, 0]).astype(dtype)
    small = argparse.Namespace(**{**vars(a), "m": m, "iters": 3, "path": None, "budget": None})
    if a.tensors:
        import torch

        Xw, yw = torch.from_numpy(Xw).to(a.device), torch.from_numpy(yw).to(a.device)
    FITS[a.lib](small, Xw, yw, Xw[:100])


def run_pass(a: argparse.Namespace) -> dict[str, Any]:
    """Seconds of one streamed fused pass K_nm^T (K_nm v) (the median of ``a.repeats``, after
    one to warm up): the operator's kernel work at the machine's limit. On a GPU
    (``--device cuda``) the X tensor lives there, the operator gets ``--budget`` (default
    2GB) and ``--profile`` adds the pass's ten costliest CUDA kernels (torch.profiler)."""
    from kernelpath import Gaussian, KernelOperator

    X, _, _, _ = _load(a.data, a.dtype)
    cuda = a.device is not None and a.device.startswith("cuda")
    if a.tensors or cuda:
        import torch

        X = torch.from_numpy(X).to(a.device or "cpu")
    centers = X[: a.m]
    op = KernelOperator(X, centers, Gaussian(a.sigma), memory_budget=a.budget, cache=False)
    v = np.random.default_rng(0).standard_normal(a.m)
    op.fused(v)
    times = []
    for _ in range(a.repeats):
        _sync(a.device)
        t = time.perf_counter()
        op.fused(v)
        _sync(a.device)
        times.append(time.perf_counter() - t)
    out: dict[str, Any] = {
        "pass_s": float(np.median(times)),
        "passes_s": times,
        "n": len(X),
        "m": a.m,
        "dtype": a.dtype,
        "block_rows": op.block_rows,
        **_fused_state(),
    }
    if cuda and a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            op.fused(v)
            _sync(a.device)
        rows = []
        for e in sorted(prof.key_averages(), key=lambda e: -getattr(e, "device_time_total", 0.0))[
            :10
        ]:
            rows.append(
                {"name": e.key[:90], "calls": e.count, "device_ms": e.device_time_total / 1e3}
            )
        out["profile"] = rows
    return out


def run_fit(a: argparse.Namespace) -> dict[str, Any]:
    X, y, Xt, yt = _load(a.data, a.dtype)
    torch_dev = None
    if a.tensors:  # the data as torch tensors (on a.device, or the CPU)
        import torch

        torch_dev = a.device or "cpu"
        X = torch.from_numpy(X).to(torch_dev)
        y = torch.from_numpy(y).to(torch_dev)
        Xt = torch.from_numpy(Xt).to(torch_dev)
    if a.device is not None and a.device.startswith("cuda"):
        import torch

        warm_up(a, int(X.shape[1]))
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    time.sleep(0.5)  # let the memory of the load settle before the baseline
    with PeakMemory() as mem:
        sec, pred, extra = FITS[a.lib](a, X, y, Xt)
    pred = np.asarray(pred.cpu() if hasattr(pred, "cpu") else pred, dtype=np.float64)
    out: dict[str, Any] = {
        "lib": a.lib,
        "fit_s": sec,
        "test_rmse": float(np.sqrt(np.mean((pred - yt.astype(np.float64)) ** 2))),
        "peak_mb": mem.mb,
        "n": int(len(X)),
        "dtype": a.dtype,
        **extra,
    }
    if a.device is not None and a.device.startswith("cuda"):
        import torch

        out["peak_device_mb"] = torch.cuda.max_memory_allocated() / 1e6
        out["gpu"] = torch.cuda.get_device_name()
    return out


def run_mnist(a: argparse.Namespace) -> dict[str, Any]:
    """MNIST's official split with ``NystromClassifier(scale=False, n_centers=m)`` and its
    other defaults (width screen, λ path on a 20% hold-out, refit), inputs in ``a.dtype``,
    on ``a.device``: the fit alone timed (after a small warm-up fit on the same device)."""
    from kernelpath import NystromClassifier
    from kernelpath.datasets import load_shared

    d = load_shared("mnist", root=a.root)
    X, y = d["X_train"].astype(a.dtype), d["y_train"]
    Xt, yt = d["X_test"].astype(a.dtype), d["y_test"]

    def make(m: int | None, verbose: int = 0) -> Any:
        return NystromClassifier(
            scale=False,
            n_centers=m,
            random_state=0,
            device=a.device,
            verbose=verbose,
            factor_layout=a.factor_layout,
        )

    if a.device is not None and a.device.startswith("cuda"):
        import torch

        make(min(a.m or 10_000, 10_000)).fit(X[:20_000], y[:20_000])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    est = make(a.m, a.verbose)
    with PeakMemory() as mem:
        _sync(a.device)
        t = time.perf_counter()
        est.fit(X, y)
        _sync(a.device)
        sec = time.perf_counter() - t
    err = float(100 * np.mean(est.predict(Xt) != yt))
    out: dict[str, Any] = {
        "lib": "kernelpath",
        "fit_s": sec,
        "test_error_pct": err,
        "m": a.m,
        "centers": int(est.centers_.shape[0]),
        "dtype": a.dtype,
        "best_params": est.best_params_,
        "kernel": repr(est.kernel_),
        "peak_mb": mem.mb,
        "factor": _factor_info(est),
    }
    if a.device is not None and a.device.startswith("cuda"):
        import torch

        out["peak_device_mb"] = torch.cuda.max_memory_allocated() / 1e6
        out["gpu"] = torch.cuda.get_device_name()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--n", type=int, required=True)
    d.add_argument("--n-test", type=int, default=50_000)
    d.add_argument("--d", type=int, default=20)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--lib", choices=sorted(FITS), required=True)
    f.add_argument("--data", required=True)
    f.add_argument("--m", type=int, default=2000)
    f.add_argument("--sigma", type=float, default=5.0)
    f.add_argument("--penalty", type=float, default=1e-6)
    f.add_argument("--iters", type=int, default=20)
    f.add_argument("--dtype", default="float64")
    f.add_argument("--budget", default=None, help="kernelpath memory_budget")
    f.add_argument("--device", default=None, help="kernelpath device / torch device")
    f.add_argument("--tensors", action="store_true", help="pass torch tensors")
    f.add_argument("--path", type=int, default=None, help="kernelpath: a λ path of this size")
    f.add_argument("--falkon-mem", default="1e9", help="FALKON max_cpu_mem (bytes)")
    f.add_argument(
        "--factor-layout",
        default="auto",
        choices=("auto", "cholesky", "eigh", "compact", "lowrank", "disk"),
        help="kernelpath: NystromRegressor(factor_layout=...)",
    )
    q = sub.add_parser("pass")
    q.add_argument("--data", required=True)
    q.add_argument("--m", type=int, default=2000)
    q.add_argument("--sigma", type=float, default=5.0)
    q.add_argument("--dtype", default="float64")
    q.add_argument("--tensors", action="store_true")
    q.add_argument("--repeats", type=int, default=3)
    q.add_argument("--device", default=None, help="torch device of X (cuda: on the GPU)")
    q.add_argument("--budget", default="2GB", help="the operator's memory_budget")
    q.add_argument("--profile", action="store_true", help="CUDA: the top kernels of a pass")
    t = sub.add_parser("mnist")
    t.add_argument("--root", required=True, help="the folder holding mnist/mnist.npz")
    t.add_argument("--m", type=int, default=None, help="n_centers (default: the estimator's)")
    t.add_argument("--dtype", default="float32")
    t.add_argument("--device", default=None)
    t.add_argument("--verbose", type=int, default=0, help="the estimator's progress (stderr)")
    t.add_argument("--factor-layout", default="auto", help="the estimator's factor_layout")
    a = ap.parse_args()
    if a.cmd == "mnist":
        print(json.dumps(run_mnist(a), default=float))
        return 0
    if a.cmd == "pass":
        print(json.dumps(run_pass(a), default=float))
        return 0
    if a.cmd == "data":
        make_data(a.n, a.n_test, a.d, a.seed, a.out)
        return 0
    print(json.dumps(run_fit(a), default=float))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
