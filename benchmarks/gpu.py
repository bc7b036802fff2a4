"""The GPU benchmark (issue 48): problem P at scale and MNIST on one CUDA device, against
FALKON on the same GPU, every fit in a fresh process, inside a fixed time budget.

    python benchmarks/gpu.py run --out DIR [--deadline 540] [--mnist-root ROOT] [--plan peer]
        [--save]
    python benchmarks/gpu.py table          # the markdown table of results/gpu.json

``run`` is written for a lent device machine with minutes to spend: it measures the GPU's
ceilings (device copy bandwidth, float32 and float64 matrix-multiply rates), writes problem
P (x ~ N(0, I_20), y = sin<w, x> + 0.1 eps; 10^6 test rows), then runs its jobs in priority
order, each fit in a fresh process (``fresh.py``: CUDA's start-up and a small warm-up fit
excluded from the timing, the fit synchronized at both ends), Gaussian sigma = 5,
λ = 1e-6, 20 CG iterations, no validation split, no early stop:

1. kernelpath float32 and float64, n = 10^7, m = 20,000, X on the device;
2. FALKON 0.9 (``InCoreFalkon``, KeOps off, its defaults) float32 on the same problem,
   alternating with kernelpath float32 for three rounds, when FALKON imports (its build
   runs beside, ``benchmarks/gpu_device.sh``);
3. the fused pass alone with its ten costliest CUDA kernels (torch.profiler);
4. kernelpath float32 with X on the host; MNIST's official split with m = 20,000 (the
   defaults of ``NystromClassifier(scale=False)``); m = 50,000 at n = 10^7; m = 100,000 at
   n = 10^6 with an explicit ``memory_budget``; FALKON float64.

A job starts only when its time limit fits before ``--deadline`` (seconds from the start);
every result is appended to ``DIR/gpu_runs.jsonl`` as it comes and the summary
``DIR/gpu.json`` (medians per configuration) is rewritten after each job, so a run cut short
keeps what it measured. A job that fails or times out is recorded with its error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path as FsPath
from typing import Any

import numpy as np

HERE = FsPath(__file__).resolve().parent
FRESH = HERE / "fresh.py"
RESULTS = HERE / "results"
COMMON = ["--sigma", "5", "--penalty", "1e-6", "--iters", "20"]


#: The device sessions' plans (``--plan``): ``plan_<name>`` below, ``mnist`` inline.
PLANS = ("full", "peer", "large", "final", "median", "mnist", "recheck", "precision", "profile")


def ceilings() -> dict[str, Any]:
    """The device's measured ceilings: copy bandwidth (bytes read + written), matrix-multiply
    rates in float32 (TF32 off, as kernelpath computes) and float64."""
    import torch

    dev = torch.device("cuda")
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

    a = torch.empty(2**30, dtype=torch.float32, device=dev).uniform_()
    b = torch.empty_like(a)
    copy = 2 * a.numel() * 4 / timed(lambda a=a, b=b: b.copy_(a))
    del a, b
    out: dict[str, Any] = {"copy_GBps": copy / 1e9}
    for dt in (torch.float32, torch.float64):
        n = 8192
        x = torch.randn(n, n, dtype=dt, device=dev)
        y = torch.randn(n, n, dtype=dt, device=dev)
        out[f"gemm_tflops_{str(dt).split('.')[-1]}"] = (
            2 * n**3 / timed(lambda x=x, y=y: x @ y) / 1e12
        )
    x = torch.randn(2**28, dtype=torch.float32, device=dev)
    out["exp_inplace_gelem_s_float32"] = x.numel() / timed(lambda: x.exp_().neg_()) / 1e9
    return out


def gpu_info() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(0)
    info = {
        "gpu": torch.cuda.get_device_name(0),
        "memory_GB": props.total_memory / 1e9,
        "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        smi = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=driver_version,clocks.max.sm,power.limit",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
        info["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def write_problem(out: FsPath, n: int, n_test: int) -> str:
    if not (out / "yt.npy").is_file():
        subprocess.run(
            [
                sys.executable,
                str(FRESH),
                "data",
                "--n",
                str(n),
                "--n-test",
                str(n_test),
                "--out",
                str(out),
            ],
            check=True,
        )
    return str(out)


class Runner:
    """Jobs in fresh processes against a deadline; every result saved as it comes."""

    def __init__(self, out: FsPath, deadline: float, falkon_python: str) -> None:
        self.out = out
        self.t0 = time.monotonic()
        self.deadline = deadline
        self.falkon_python = falkon_python
        self.runs: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.t0)

    def wait_for_falkon(self, status: str | None, wait: float) -> bool:
        """Whether FALKON imports, waiting up to ``wait`` seconds for its build to write
        ``ok`` or ``failed`` into the file ``status``."""
        t = time.monotonic()
        while status and not FsPath(status).is_file() and time.monotonic() - t < wait:
            if self.left() < 300:
                break
            time.sleep(5)
        proc = subprocess.run(
            [self.falkon_python, "-c", "import falkon"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            why = proc.stderr.strip().splitlines()[-1:] or ["?"]
            self.record("FALKON 0.9 on the GPU", {"skipped": f"does not import: {why[0]}"})
        return proc.returncode == 0

    def job(self, label: str, args: list[str], limit: float, python: str | None = None) -> bool:
        """Run one fresh process if ``limit`` seconds fit before the deadline."""
        left = self.left()
        if left < min(limit, 60):
            print(f"skip {label}: {left:.0f} s left", flush=True)
            self.record(label, {"skipped": f"{left:.0f} s left before the deadline"})
            return False
        limit = min(limit, left)
        t = time.monotonic()
        env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")
        try:
            proc = subprocess.run(
                [python or sys.executable, str(FRESH), *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=limit,
                check=False,
            )
            wall = time.monotonic() - t
            if proc.returncode != 0:
                res: dict[str, Any] = {"error": proc.stderr[-2500:], "wall_s": wall}
            else:
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                res["wall_s"] = wall
        except subprocess.TimeoutExpired as exc:  # its progress so far, where it printed any
            said = exc.stderr or b""
            said = said.decode(errors="replace") if isinstance(said, bytes) else said
            res = {"error": f"timed out after {limit:.0f} s", "stderr_tail": said[-2500:]}
        self.record(label, res)
        brief = {k: res.get(k) for k in ("fit_s", "test_rmse", "test_error_pct", "pass_s")}
        print(f"{label}: {brief} {res.get('error', '')[-400:]}", flush=True)
        return "error" not in res

    def record(self, label: str, res: dict[str, Any]) -> None:
        res = {"label": label, "at_s": round(time.monotonic() - self.t0, 1), **res}
        self.runs.append(res)
        with open(self.out / "gpu_runs.jsonl", "a") as fh:
            fh.write(json.dumps(res, default=float) + "\n")
        self.save()

    def save(self) -> None:
        rows: dict[str, Any] = {}
        for r in self.runs:
            if "fit_s" not in r:
                continue
            rows.setdefault(r["label"], []).append(r)
        table = {}
        for label, rs in rows.items():
            fits = [r["fit_s"] for r in rs]
            err = "test_error_pct" if "test_error_pct" in rs[0] else "test_rmse"
            table[label] = {
                "fit_s": float(np.median(fits)),
                "fit_s_runs": fits,
                err: float(np.median([r[err] for r in rs])),
                "peak_device_mb": max(r.get("peak_device_mb", 0.0) for r in rs),
                "peak_host_mb": max(r.get("peak_mb", 0.0) for r in rs),
                "runs": len(rs),
            }
        failed = {
            r["label"]: r.get("error", r.get("skipped"))
            for r in self.runs
            if "fit_s" not in r and "pass_s" not in r
        }
        passes = {r["label"]: r for r in self.runs if "pass_s" in r}
        doc = {**self.summary, "rows": table, "passes": passes, "not_measured": failed}
        (self.out / "gpu.json").write_text(json.dumps(doc, indent=1, default=float))


def run(a: argparse.Namespace) -> int:
    out = FsPath(a.out)
    out.mkdir(parents=True, exist_ok=True)
    r = Runner(out, a.deadline, a.falkon_python)
    info = gpu_info()
    print(info, flush=True)
    lim = ceilings()
    print(lim, flush=True)
    r.summary = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": info,
        "ceilings": lim,
        "protocol": "each fit in a fresh process after a small warm-up fit on the device "
        "(CUDA start-up excluded), synchronized at both ends; Gaussian sigma = 5, "
        "lambda = 1e-6, 20 CG iterations, validation_fraction = 0, tol = 0; test RMSE on "
        "10^6 held-out rows; median over the rounds that ran",
    }
    r.save()
    data = FsPath(a.data)
    p10 = write_problem(data / "P10M", 10_000_000, 1_000_000)
    fit = ["fit", "--data", p10, *COMMON]
    dev = ["--tensors", "--device", "cuda"]

    def kp(dtype: str, m: int = 20_000, extra: list[str] | None = None) -> list[str]:
        return [
            *fit,
            "--lib",
            "kernelpath",
            "--m",
            str(m),
            "--dtype",
            dtype,
            *(extra if extra is not None else dev),
        ]

    def fk(dtype: str, m: int = 20_000) -> list[str]:
        return [*fit, "--lib", "falkon", "--m", str(m), "--dtype", dtype, *dev]

    if a.plan == "peer":
        plan_peer(r, a, p10, kp, fk)
    elif a.plan == "large":
        plan_large(r, a, data, p10, kp, fk)
    elif a.plan == "final":
        plan_final(r, a, kp)
    elif a.plan == "median":
        plan_median(r, a, kp, fk)
    elif a.plan == "recheck":
        plan_recheck(r, a, kp)
    elif a.plan == "precision":
        plan_precision(r, a, kp)
    elif a.plan == "profile":
        plan_profile(r, a, p10, kp)
    elif a.plan == "mnist":  # MNIST with m = 50,000 as often as the deadline allows
        while r.left() > 70:
            mnist_job(r, a, 50_000, max(60.0, r.left() - 5), "--verbose", "2")
    else:
        plan_full(r, a, data, p10, kp, fk)
    doc = json.loads((out / "gpu.json").read_text())
    print(json.dumps(doc["rows"], indent=1))
    if a.save:  # appended to the saved runs, oldest first
        saved = RESULTS / "gpu.json"
        runs = json.loads(saved.read_text())["runs"] if saved.is_file() else []
        saved.write_text(json.dumps({"runs": [*runs, doc]}, indent=1, default=float))
    return 0


def mnist_job(
    r: Runner,
    a: argparse.Namespace,
    m: int | None,
    limit: float,
    *extra: str,
    dtype: str = "float32",
) -> None:
    """MNIST's official split with ``NystromClassifier(scale=False, n_centers=m)`` (None:
    the estimator's default m) in ``dtype`` on the GPU (nothing without ``--mnist-root``)."""
    if a.mnist_root:
        centers = "default m" if m is None else f"m={m:,}"
        label = f"MNIST, NystromClassifier(scale=False) {dtype}, {centers}"
        args = ["mnist", "--root", a.mnist_root, "--device", "cuda"]
        args += ([] if m is None else ["--m", str(m)]) + (
            [] if dtype == "float32" else ["--dtype", dtype]
        )
        r.job(label, [*args, *extra], limit)


def plan_full(r: Runner, a: argparse.Namespace, data: FsPath, p10: str, kp: Any, fk: Any) -> None:
    """Every measurement of the issue, most important first (the first device session)."""
    dev = ["--tensors", "--device", "cuda"]
    kp32 = "kernelpath float32, X on the GPU, n=10^7, m=20,000"
    fk32 = "FALKON 0.9 float32 (InCoreFalkon), X on the GPU, n=10^7, m=20,000"
    r.job(kp32, kp("float32"), 150)
    r.job("kernelpath float64, X on the GPU, n=10^7, m=20,000", kp("float64"), 200)
    r.job(
        "pass K_nm^T (K_nm v), float32, n=10^7, m=20,000",
        [
            "pass",
            "--data",
            p10,
            "--m",
            "20000",
            "--dtype",
            "float32",
            "--device",
            "cuda",
            "--budget",
            "16GB",
            "--profile",
            "--repeats",
            "3",
        ],
        90,
    )
    mnist_job(r, a, 20_000, 150)
    r.job(
        "kernelpath float32, X on the host, n=10^7, m=20,000",
        kp("float32", extra=["--device", "cuda"]),
        150,
    )
    # FALKON builds beside (gpu_device.sh): alternate with kernelpath once it imports
    falkon = r.wait_for_falkon(a.falkon_status, a.falkon_wait)
    for _ in range(2 if falkon else 0):
        r.job(fk32, fk("float32"), 200, a.falkon_python)
        r.job(kp32, kp("float32"), 150)
    if falkon:
        r.job(fk32, fk("float32"), 200, a.falkon_python)
    else:
        r.job(kp32, kp("float32"), 150)
    r.job("kernelpath float32, X on the GPU, n=10^7, m=50,000", kp("float32", 50_000), 200)
    p1 = write_problem(data / "P1M", 1_000_000, 1_000_000)
    r.job(
        "kernelpath float32, X on the GPU, n=10^6, m=100,000, memory_budget=120GB",
        [
            "fit",
            "--data",
            p1,
            *COMMON,
            "--lib",
            "kernelpath",
            "--m",
            "100000",
            "--dtype",
            "float32",
            "--budget",
            "120GB",
            *dev,
        ],
        200,
    )
    if falkon:
        r.job(
            "FALKON 0.9 float64 (InCoreFalkon), X on the GPU, n=10^7, m=20,000",
            fk("float64"),
            200,
            a.falkon_python,
        )
    mnist_job(r, a, 50_000, 200)


def plan_peer(r: Runner, a: argparse.Namespace, p10: str, kp: Any, fk: Any) -> None:
    """The fused kernel against the unfused pass, then kernelpath alternating with FALKON
    (its wheel carried, so no build), float32, n = 10^7, m = 20,000."""
    pass_args = ["pass", "--data", p10, "--m", "20000", "--dtype", "float32", "--device", "cuda"]
    pass_args += ["--budget", "16GB", "--repeats", "3"]
    os.environ["KERNELPATH_TRITON"] = "0"
    r.job("pass K_nm^T (K_nm v), float32, n=10^7, m=20,000, unfused", pass_args, 60)
    os.environ.pop("KERNELPATH_TRITON")
    r.job("pass K_nm^T (K_nm v), float32, n=10^7, m=20,000, fused", [*pass_args, "--profile"], 60)
    kp32 = "kernelpath float32, X on the GPU, n=10^7, m=20,000, fused kernel"
    fk32 = "FALKON 0.9 float32 (InCoreFalkon), X on the GPU, n=10^7, m=20,000"
    falkon = r.wait_for_falkon(a.falkon_status, 30)
    for _ in range(2):
        r.job(kp32, kp("float32"), 120)
        if falkon:
            r.job(fk32, fk("float32"), 150, a.falkon_python)
    r.job("kernelpath float64, X on the GPU, n=10^7, m=20,000, fused kernel", kp("float64"), 120)


def plan_large(r: Runner, a: argparse.Namespace, data: FsPath, p10: str, kp: Any, fk: Any) -> None:
    """The third device session (an H100 where one is lent): problem P at m = 20,000
    alternating with FALKON (its wheel carried) for the median of 3, then the compact
    float32 factor (issue 45) at m = 100,000 (n = 10^6, ``--large-budget``) and on MNIST
    with m = 50,000, then float64 and m = 50,000 at n = 10^7."""
    dev = ["--tensors", "--device", "cuda"]
    kp32 = "kernelpath float32, X on the GPU, n=10^7, m=20,000"
    fk32 = "FALKON 0.9 float32 (InCoreFalkon), X on the GPU, n=10^7, m=20,000"
    falkon = r.wait_for_falkon(a.falkon_status, 30)
    r.job(kp32, kp("float32"), 120)
    if falkon:
        r.job(fk32, fk("float32"), 200, a.falkon_python)
    p1 = write_problem(data / "P1M", 1_000_000, 1_000_000)
    big = ["--m", "100000", "--dtype", "float32", "--budget", a.large_budget]
    r.job(
        f"kernelpath float32, X on the GPU, n=10^6, m=100,000, memory_budget={a.large_budget}",
        ["fit", "--data", p1, *COMMON, "--lib", "kernelpath", *big, *dev],
        200,
    )
    mnist_job(r, a, 50_000, 150)
    for _ in range(2):
        r.job(kp32, kp("float32"), 120)
        if falkon:
            r.job(fk32, fk("float32"), 200, a.falkon_python)
    r.job("kernelpath float64, X on the GPU, n=10^7, m=20,000", kp("float64"), 120)
    r.job("kernelpath float32, X on the GPU, n=10^7, m=50,000", kp("float32", 50_000), 150)


def plan_final(r: Runner, a: argparse.Namespace, kp: Any) -> None:
    """A short session: P at m = 20,000 in float32 with the compact factor (float32's CG
    factor since the large session), then MNIST with m = 50,000 for the time left, its
    progress printed (the large session's MNIST fit timed out at 150 s without a word)."""
    r.job("kernelpath float32, X on the GPU, n=10^7, m=20,000, compact factor", kp("float32"), 100)
    mnist_job(r, a, 50_000, max(60.0, r.left() - 5), "--verbose", "2")


def plan_recheck(r: Runner, a: argparse.Namespace, kp: Any) -> None:
    """The seventh device session (issue 45 on CUDA, after the CPU's layout, precision and
    block changes): MNIST at m = 20,000 in float32 and float64 (the GPU's float32 path sums
    and solves in float32, the host's in float64: does MNIST lose to it?), P at n = 10^7
    with m = 20,000 (against the earlier runs) and m = 50,000 (never measured), then
    MNIST with the estimator's default m."""
    mnist_job(r, a, 20_000, 80)
    mnist_job(r, a, 20_000, 120, dtype="float64")
    r.job("kernelpath float32, X on the GPU, n=10^7, m=20,000", kp("float32"), 90)
    r.job("kernelpath float32, X on the GPU, n=10^7, m=50,000", kp("float32", 50_000), 150)
    mnist_job(r, a, None, 60)


def plan_precision(r: Runner, a: argparse.Namespace, kp: Any) -> None:
    """The eighth device session, after float32 on CUDA took the host's rule (float64 sums,
    the compact factor first, its triangle refined in float64): the two MNIST fits that were
    wrong (the default m: 21.25%; m = 20,000: 1.94% against the host's 1.62%), P at n = 10^7
    with m = 20,000 (what the widened sums cost a pass: 35.1 s before), MNIST at m = 40,000
    (the issue's sweep) and P with m = 50,000 (RMSE 0.1180 before)."""
    mnist_job(r, a, None, 60)
    mnist_job(r, a, 20_000, 90)
    r.job("kernelpath float32, X on the GPU, n=10^7, m=20,000", kp("float32"), 100)
    mnist_job(r, a, 40_000, 110)
    r.job("kernelpath float32, X on the GPU, n=10^7, m=50,000", kp("float32", 50_000), 160)


def plan_profile(r: Runner, a: argparse.Namespace, p10: str, kp: Any) -> None:
    """The ninth device session: where float32's 20.6 s went (P at n = 10^7, m = 20,000 took
    55.7 s in float32 after the float64 sums and the compact factor, 35.1 s before, 39.0 s
    in float64). One pass K_nm^T (K_nm v) with a float64 v (the widened sums) in float32
    and in float64, each with its ten costliest CUDA kernels, against the fused float32
    pass of the second session (1.43 s); then the float32 fit with the full float64 factor
    (``factor_layout="cholesky"``: the compact factor's share), the float32 fit as it is,
    and float64. Last, where time is left: float64 data at m = 50,000 with
    ``factor_layout="compact"`` in 16 GB of device memory, where the float64 buffer (20 GB)
    would be refused and the factor is float32 (stop 64; on the host, P at n = 10^6 reached
    0.1100 that way), its blocked Cholesky factors on the device."""
    pass_args = ["pass", "--data", p10, "--m", "20000", "--device", "cuda"]
    pass_args += ["--budget", "16GB", "--repeats", "3", "--profile"]
    for dtype in ("float32", "float64"):
        label = f"pass K_nm^T (K_nm v), {dtype}, float64 v, n=10^7, m=20,000"
        r.job(label, [*pass_args, "--dtype", dtype], 60)
    full = [*kp("float32"), "--factor-layout", "cholesky"]
    r.job("kernelpath float32, full factor, X on the GPU, n=10^7, m=20,000", full, 100)
    r.job("kernelpath float32, X on the GPU, n=10^7, m=20,000", kp("float32"), 100)
    r.job("kernelpath float64, X on the GPU, n=10^7, m=20,000", kp("float64"), 90)
    on_gpu = ["--tensors", "--device", "cuda", "--budget", "16GB"]
    f32 = kp("float64", 50_000, [*on_gpu, "--factor-layout", "compact"])
    label = "kernelpath float64, float32 compact factor in 16GB, X on the GPU, n=10^7, m=50,000"
    r.job(label, f32, 150)


def plan_median(r: Runner, a: argparse.Namespace, kp: Any, fk: Any) -> None:
    """The fifth device session: FALKON's median of 3 against kernelpath's in the same run
    (problem P, float32, n = 10^7, m = 20,000, the peer first in each round), then
    kernelpath in float64 for the time left."""
    kp32 = "kernelpath float32, X on the GPU, n=10^7, m=20,000"
    fk32 = "FALKON 0.9 float32 (InCoreFalkon), X on the GPU, n=10^7, m=20,000"
    falkon = r.wait_for_falkon(a.falkon_status, 30)
    for _ in range(3):
        if falkon:
            r.job(fk32, fk("float32"), 160, a.falkon_python)
        r.job(kp32, kp("float32"), 90)
    r.job("kernelpath float64, X on the GPU, n=10^7, m=20,000", kp("float64"), 90)


def table(path: FsPath) -> list[str]:
    """The markdown tables of the saved GPU runs (``results/gpu.json``: ``{"runs": [...]}``,
    one document per device session, oldest first)."""
    doc = json.loads(path.read_text())
    lines: list[str] = []
    for g in doc.get("runs", [doc]):
        mach, lim = g["machine"], g.get("ceilings", {})
        lines += [
            f"**{g['date']}, one {mach['gpu']}** (PyTorch {mach['torch']}, CUDA {mach['cuda']}; "
            f"measured in the same run: device copy {lim.get('copy_GBps', 0) / 1e3:.2f} TB/s, "
            f"float32 GEMM {lim.get('gemm_tflops_float32', 0):.1f} TFLOP/s without TF32, "
            f"float64 {lim.get('gemm_tflops_float64', 0):.1f}). {g.get('session', '')}.",
            "",
            "| run | fit (s) | test error | peak device memory (GB) | rounds |",
            "|---|---:|---:|---:|---:|",
        ]
        for label, row in g["rows"].items():
            err = (
                f"{row['test_error_pct']:.2f}%"
                if "test_error_pct" in row
                else f"RMSE {row['test_rmse']:.4f}"
            )
            runs = ", ".join(f"{t:.1f}" for t in row["fit_s_runs"])
            lines.append(
                f"| {label} | {row['fit_s']:.1f} ({runs}) | {err} | "
                f"{row['peak_device_mb'] / 1e3:.1f} | {row['runs']} |"
            )
        cut = []
        for label, why in g.get("not_measured", {}).items():
            last = str(why).strip().splitlines()[-1][:200] if why else "?"
            if label in g["rows"]:  # a later round of a measured configuration
                cut.append(f"{label}: a round not measured ({last})")
            else:
                lines.append(f"| {label} | not measured: {last} | | | |")
        lines += [f"\n{c}" for c in cut]
        for label, p in g.get("passes", {}).items():
            top = ", ".join(
                f"{e['name'][:40]} {e['device_ms']:.0f} ms"
                for e in p.get("profile", [])
                if not e["name"].startswith(("aten::", "cuda", "cuLaunch", "Command"))
            )
            lines.append(
                f"\n{label}: {p['pass_s']:.3f} s (median of {len(p['passes_s'])})"
                + (f"; its CUDA kernels: {top}" if top else "")
            )
        lines.append("")
    lines.append(f"Protocol: {doc['runs'][-1]['protocol']}.")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--data", default="/tmp/kernelpath-gpu")
    r.add_argument("--deadline", type=float, default=540.0, help="seconds from the start")
    r.add_argument("--falkon-python", default=sys.executable)
    r.add_argument("--falkon-status", default=None, help="file the FALKON build writes at its end")
    r.add_argument("--falkon-wait", type=float, default=150.0)
    r.add_argument(
        "--plan",
        choices=PLANS,
        default="full",
    )
    r.add_argument("--large-budget", default="72GB", help="memory_budget of the m=100,000 fit")
    r.add_argument("--save", action="store_true", help="append the run to results/gpu.json")
    r.add_argument("--mnist-root", default=None, help="the folder holding mnist/mnist.npz")
    t = sub.add_parser("table")
    t.add_argument("--path", default=str(RESULTS / "gpu.json"))
    a = ap.parse_args()
    if a.cmd == "run":
        return run(a)
    print("\n".join(table(FsPath(a.path))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
