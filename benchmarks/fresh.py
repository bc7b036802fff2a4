"""One fit in a fresh process, as users run it: the worker of the peer benchmarks.

    python benchmarks/fresh.py data --n 200000 --n-test 50000 --out DIR
    python benchmarks/fresh.py fit --lib kernelpath --data DIR [options]
    /path/to/falkon-venv/bin/python benchmarks/fresh.py fit --lib falkon --data DIR [options]

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
        **({} if a.device is None else {"device": a.device}),
    )
    t = time.perf_counter()
    est.fit(X, y)
    sec = time.perf_counter() - t
    extra = {"n_iter": est.n_iter_, "best_params": est.best_params_}
    return sec, est.predict(Xt), extra


def fit_falkon(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    import falkon
    import torch

    opts = falkon.FalkonOptions(
        use_cpu=a.device in (None, "cpu"),
        keops_active="no",
        max_cpu_mem=float(a.falkon_mem),
        debug=False,
    )
    kernel = falkon.kernels.GaussianKernel(sigma=a.sigma, opt=opts)
    model = falkon.Falkon(
        kernel=kernel, penalty=a.penalty, M=a.m, maxiter=a.iters, seed=0, options=opts
    )
    Xt_, yt_ = torch.from_numpy(X), torch.from_numpy(y).reshape(-1, 1)
    t = time.perf_counter()
    model.fit(Xt_, yt_)
    sec = time.perf_counter() - t
    pred = model.predict(torch.from_numpy(Xt)).numpy().ravel()
    return sec, pred, {"threads": torch.get_num_threads()}


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


def run_pass(a: argparse.Namespace) -> dict[str, Any]:
    """Seconds of one streamed fused pass K_nm^T (K_nm v) (the median of ``a.repeats``, after
    one to warm up): the operator's kernel work at the machine's limit."""
    from kernelpath import Gaussian, KernelOperator

    X, _, _, _ = _load(a.data, a.dtype)
    if a.tensors:
        import torch

        X = torch.from_numpy(X)
    centers = X[: a.m]
    op = KernelOperator(X, centers, Gaussian(a.sigma), memory_budget="2GB", cache=False)
    v = np.random.default_rng(0).standard_normal(a.m)
    op.fused(v)
    times = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        op.fused(v)
        times.append(time.perf_counter() - t)
    return {"pass_s": float(np.median(times)), "passes_s": times, "n": len(X), "m": a.m}


def run_fit(a: argparse.Namespace) -> dict[str, Any]:
    X, y, Xt, yt = _load(a.data, a.dtype)
    torch_dev = None
    if a.tensors:  # the data as torch tensors (on a.device, or the CPU)
        import torch

        torch_dev = a.device or "cpu"
        X = torch.from_numpy(X).to(torch_dev)
        y = torch.from_numpy(y).to(torch_dev)
        Xt = torch.from_numpy(Xt).to(torch_dev)
    if torch_dev is not None and torch_dev.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
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
    if torch_dev is not None and torch_dev.startswith("cuda"):
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
    q = sub.add_parser("pass")
    q.add_argument("--data", required=True)
    q.add_argument("--m", type=int, default=2000)
    q.add_argument("--sigma", type=float, default=5.0)
    q.add_argument("--dtype", default="float64")
    q.add_argument("--tensors", action="store_true")
    q.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
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
