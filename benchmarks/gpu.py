"""Problem P at n = 10^7 and MNIST on one CUDA device, against FALKON on the same GPU, every
fit in a fresh process inside a fixed time budget; it skips cleanly without a GPU.

    python benchmarks/run.py gpu run [--deadline 540] [--rounds 3] [--save]
        [--falkon-python PYTHON]
    python benchmarks/run.py gpu table     # the latest run of each configuration

``run`` measures the GPU's ceilings (device copy bandwidth, float32 and float64
matrix-multiply rates without TF32), writes problem P (x ~ N(0, I_20), y = sin<w, x> +
0.1 eps; 10^7 training and 10^6 test rows), then runs its jobs in this order, each in a
fresh process (``fresh.py``: CUDA's start-up and a small warm-up fit on the device left out
of the timing, the fit synchronized at both ends), Gaussian sigma = 5, λ = 1e-6, 20 CG
iterations, no validation split, no early stop, X on the device:

1. kernelpath float32 and FALKON 0.9's ``InCoreFalkon`` float32 (KeOps off, its defaults;
   where FALKON imports in ``--falkon-python``), alternating, the peer first, ``--rounds``
   rounds, m = 20,000;
2. kernelpath float64, m = 20,000;
3. MNIST's official split with ``NystromClassifier(scale=False)``, float32: m = 20,000 and
   the estimator's default m (where ``--mnist-root`` holds mnist/mnist.npz).

A job starts only when its time limit fits before ``--deadline`` (seconds from the start);
the summary (medians per configuration) is rewritten after each job into ``--out``, so a
run cut short keeps what it measured, and ``--save`` appends it to ``results/gpu.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fresh as h
import numpy as np

PROTOCOL = (
    "each fit in a fresh process after a small warm-up fit on the device (CUDA start-up "
    "excluded), synchronized at both ends; Gaussian sigma = 5, λ = 1e-6, 20 CG iterations, "
    "no validation split, tol = 0; test RMSE on 10^6 held-out rows; median over the rounds"
)
#: the labels of the earlier runs in results/gpu.json, so that the table's rows continue
P_LABEL = "kernelpath {dtype}, X on the GPU, n=10^7, m=20,000"
FALKON_LABEL = "FALKON 0.9 {dtype} (InCoreFalkon), X on the GPU, n=10^7, m=20,000"
MNIST_LABEL = "MNIST, NystromClassifier(scale=False) float32, {m}"


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def ceilings() -> dict[str, Any]:
    """The device's measured ceilings: copy bandwidth (bytes read + written), matrix-multiply
    rates in float32 (TF32 off, as kernelpath computes) and float64."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False

    def timed(fn: Any, reps: int = 10) -> float:
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return float(np.median(times))

    a = torch.empty(2**30, dtype=torch.float32, device="cuda").uniform_()
    b = torch.empty_like(a)
    copy = timed(lambda a=a, b=b: b.copy_(a))
    out: dict[str, Any] = {"copy_GBps": 2 * a.numel() * 4 / copy / 1e9}
    del a, b
    for dt in (torch.float32, torch.float64):
        x = torch.randn(8192, 8192, dtype=dt, device="cuda")
        out[f"gemm_tflops_{str(dt).split('.')[-1]}"] = 2 * 8192**3 / timed(lambda x=x: x @ x) / 1e12
    return out


def gpu_info() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": torch.cuda.get_device_name(0),
        "memory_GB": props.total_memory / 1e9,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }


class Runner:
    """Jobs in fresh processes against a deadline; the summary rewritten after each."""

    def __init__(self, out: Path, deadline: float, summary: dict[str, Any]) -> None:
        self.out, self.deadline, self.t0 = out, deadline, time.monotonic()
        self.summary = summary
        self.runs: list[dict[str, Any]] = []

    def job(self, label: str, args: list[str], limit: float, python: str | None = None) -> None:
        left = self.deadline - (time.monotonic() - self.t0)
        if left < min(limit, 60):
            res: dict[str, Any] = {"skipped": f"{left:.0f} s left before the deadline"}
        else:
            res = h.run_fresh(args, python=python, timeout=min(limit, left), tolerate=True)
        self.runs.append({"label": label, **res})
        print(label, {k: res.get(k) for k in ("fit_s", "test_rmse", "test_error_pct")}, flush=True)
        self.write()

    def document(self) -> dict[str, Any]:
        rows, failed = {}, {}
        labels = dict.fromkeys(r["label"] for r in self.runs)
        for label in labels:
            rs = [r for r in self.runs if r["label"] == label]
            err = "test_error_pct" if any("test_error_pct" in r for r in rs) else "test_rmse"
            s = h.summary(rs, median=(err,))
            if "fit_s" in s:
                peak = max(r.get("peak_device_mb", 0.0) for r in rs)
                rows[label] = {**s, "peak_device_mb": peak}
            else:
                why = [rs[-1].get(k) for k in ("failed", "timed_out", "skipped")]
                failed[label] = str(next((w for w in why if w is not None), ""))
        return {**self.summary, "rows": rows, "not_measured": failed}

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu.json").write_text(json.dumps(self.document(), indent=1, default=float))


def run(
    out: str = "/tmp/kernelpath-gpu-run",
    deadline: float = 540.0,
    rounds: int = 3,
    falkon_python: str = sys.executable,
    mnist_root: str = str(h.SHARED / "data"),
    save: bool = False,
) -> str:
    """The jobs in order inside ``deadline`` seconds (nothing without CUDA)."""
    if not cuda_available():
        return "skipped: no CUDA device here (PyTorch with CUDA is needed)"
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": gpu_info(),
        "ceilings": ceilings(),
        "protocol": PROTOCOL,
    }
    r = Runner(Path(out), deadline, summary)
    data = h.problem(10_000_000, n_test=1_000_000)
    fit = ["fit", "--data", data, "--m", "20000", "--sigma", "5", "--penalty", "1e-6"]
    fit += ["--iters", "20", "--tensors", "--device", "cuda"]
    peer = subprocess.run([falkon_python, "-c", "import falkon"], capture_output=True)
    for _ in range(rounds):
        if peer.returncode == 0:
            args = [*fit, "--lib", "falkon", "--dtype", "float32"]
            r.job(
                FALKON_LABEL.format(dtype="float32"),
                args,
                200,
                falkon_python,
            )
        r.job(
            P_LABEL.format(dtype="float32"),
            [*fit, "--lib", "kernelpath", "--dtype", "float32"],
            150,
        )
    r.job(P_LABEL.format(dtype="float64"), [*fit, "--lib", "kernelpath"], 150)
    if (Path(mnist_root) / "mnist" / "mnist.npz").is_file():
        mnist = ["mnist", "--root", mnist_root, "--device", "cuda"]
        r.job(MNIST_LABEL.format(m="m=20,000"), [*mnist, "--m", "20000"], 150)
        r.job(MNIST_LABEL.format(m="default m"), mnist, 90)
    doc = r.document()
    if save:
        saved = h.load("gpu", {"runs": []})
        h.save("gpu", {"runs": [*saved["runs"], doc]})
    return _table([doc])


def _latest(runs: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each configuration's row from the latest run that measured it (labels that differ
    only by a note on how the run was made count as one)."""
    latest: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for doc in runs:
        for label, row in doc["rows"].items():
            key = label.split(", fused kernel")[0].split(", compact factor")[0]
            latest[key] = (doc, row)
    return latest


def table() -> str:
    """The latest run of each configuration in ``results/gpu.json``."""
    return _table(h.load("gpu", {"runs": []})["runs"])


def _table(runs: list[dict[str, Any]]) -> str:
    cells = []
    latest = _latest(runs)
    for label in sorted(latest, key=lambda k: (k.startswith("MNIST"), k)):
        run_doc, row = latest[label]
        err = (
            f"{row['test_error_pct']:.2f}%"
            if "test_error_pct" in row
            else f"RMSE {row['test_rmse']:.4f}"
        )
        times = ", ".join(f"{t:.1f}" for t in row["fit_s_runs"])
        cells.append(
            [
                label,
                run_doc["machine"]["gpu"].replace("NVIDIA ", ""),
                run_doc["date"][:10],
                f"{row['fit_s']:.1f} ({times})",
                err,
                f"{row['peak_device_mb'] / 1e3:.1f}",
            ]
        )
    header = ["configuration", "GPU", "date", "fit (s), median (rounds)", "test error"]
    header.append("peak device memory (GB)")
    note = f"\n\nProtocol: {runs[-1]['protocol']}." if runs else ""
    return h.markdown(header, cells, "lllrrr") + note


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table}))
