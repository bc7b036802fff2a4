"""Problem P against the peers, every fit in a fresh process (``python benchmarks/run.py
--suite peers``; the GPU's runner is ``benchmarks/gpu.py``).

Problem P (the foundation benchmark): x ~ N(0, I_20), y = sin<w, x> + 0.1 eps, ||w|| = 1,
50,000 test points, Gaussian sigma = 5, λ = 1e-6, m = 2000 uniform centers, 20 CG iterations,
float64. Each method's fit runs in a fresh process (``fresh.py``: from the ``fit`` call to
its return), the methods alternate round after round, and the median of the rounds is
reported with the test RMSE and the peak resident memory above the loaded data.

Peers: FALKON (built by ``../shared/tools/build_falkon_cpu.sh`` into its own virtual
environment, run with 2 threads and ``max_cpu_mem=1e9``, its fastest setting here) when its
venv is found, and scikit-learn's ``Nystroem + Ridge`` at 200,000 points. Where FALKON's venv
is missing the results say so.

The streamed pass K_nm^T (K_nm v) at n = 10^6 is timed in a fresh process too and reported as
a fraction of this machine's limit, measured at the start of the same run: the 2nmd flops of
the distances at the measured matrix-multiply rate plus the nm exponentials at the measured
all-core exp rate.
"""

from __future__ import annotations

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
DATA_ROOT = FsPath(os.environ.get("KERNELPATH_BENCH_DATA", "/tmp/kernelpath-bench"))


def falkon_python() -> str | None:
    """The python of FALKON's venv: $KERNELPATH_FALKON_PYTHON, else the build script's
    default places (../../falkon-venv beside the checkout, $TMPDIR or /tmp)."""
    candidates = [
        os.environ.get("KERNELPATH_FALKON_PYTHON"),
        str(HERE.parent.parent / "falkon-venv" / "bin" / "python"),
        str(FsPath(os.environ.get("TMPDIR", "/tmp")) / "falkon-venv" / "bin" / "python"),
        "/tmp/falkon-venv/bin/python",
    ]
    for c in candidates:
        if c and FsPath(c).is_file():
            ok = subprocess.run([c, "-c", "import falkon"], capture_output=True).returncode == 0
            if ok:
                return c
    return None


def problem(n: int, n_test: int = 50_000) -> str:
    """The folder of problem P with n training points (written once)."""
    out = DATA_ROOT / f"P{n}"
    if not (out / "yt.npy").is_file():
        cmd = [sys.executable, str(FRESH), "data", "--n", str(n), "--n-test", str(n_test)]
        subprocess.run([*cmd, "--out", str(out)], check=True)
    return str(out)


def fresh(python: str, args: list[str], threads: int) -> dict[str, Any]:
    """One fresh process running ``fresh.py`` with ``args``; its JSON line."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [python, str(FRESH), *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rounds(methods: list[tuple[str, str, list[str]]], runs: int, threads: int) -> dict:
    """Run every method once per round, alternating, ``runs`` rounds; the median fit."""
    raw: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in methods}
    for r in range(runs):
        for label, python, args in methods:
            res = fresh(python, args, threads)
            raw[label].append(res)
            print(
                f"  round {r + 1}: {label:55s} {res['fit_s']:8.2f} s  "
                f"RMSE {res['test_rmse']:.5f}  peak {res['peak_mb']:7.0f} MB",
                flush=True,
            )
            time.sleep(1.0)
    out = {}
    for label, res in raw.items():
        fits = [x["fit_s"] for x in res]
        out[label] = {
            "fit_s": float(np.median(fits)),
            "fit_s_runs": fits,
            "test_rmse": float(np.median([x["test_rmse"] for x in res])),
            "peak_mb": float(max(x["peak_mb"] for x in res)),
            "extra": {k: v for k, v in res[-1].items() if k not in ("fit_s", "test_rmse")},
        }
    return out


def fit_summary(r: dict[str, Any]) -> dict[str, Any]:
    """A configuration's row from ``rounds``' result: its runs, the median fit, the test RMSE,
    the peak memory and the factor the fit took."""
    return {
        "runs": len(r["fit_s_runs"]),
        "fit_s": r["fit_s"],
        "fit_s_runs": r["fit_s_runs"],
        "test_rmse": r["test_rmse"],
        "peak_mb": r["peak_mb"],
        "factor": r["extra"].get("factor"),
    }


def limit_seconds(info: dict[str, Any], n: int, m: int, d: int = 20) -> float | None:
    """The machine's limit for one pass: 2nmd flops at the GEMM rate plus nm exponentials at
    the all-core exp rate (both measured at the start of this run)."""
    lim = info.get("limits")
    if not lim:
        return None
    gemm = 2 * n * m * d / (lim["gemm_gflops_float64"] * 1e9)
    return gemm + n * m / (lim["exp_gelem_allcores_float64"] * 1e9)


def suite_peers(quick: bool, info: dict[str, Any], runs: int = 3, sizes: str = "all") -> dict:
    threads = int(info.get("cores", os.cpu_count() or 1))
    py = sys.executable
    falkon = falkon_python()
    common = ["--m", "2000", "--sigma", "5", "--penalty", "1e-6", "--iters", "20"]
    ns = {"200k": 200_000, "1M": 1_000_000, "10M": 10_000_000}
    if quick:
        ns = {"200k": 20_000, "1M": 50_000}
        common[1] = "500"
    wanted = list(ns) if sizes == "all" else [s for s in sizes.split(",") if s in ns]
    result: dict[str, Any] = {
        "protocol": f"each fit in a fresh process, methods alternating, median of {runs} "
        "rounds; peak memory above the loaded data (max over rounds)",
        "falkon": falkon
        or "not run: FALKON's venv was not found "
        "(../shared/tools/build_falkon_cpu.sh builds it; KERNELPATH_FALKON_PYTHON names it)",
        "problems": {},
    }
    for key in wanted:
        n = ns[key]
        data = problem(n)
        print(f"P, n={n:,}", flush=True)
        fit = ["fit", "--data", data, *common]
        methods: list[tuple[str, str, list[str]]] = [
            ("kernelpath", py, [*fit, "--lib", "kernelpath"])
        ]
        if key == "200k":
            methods += [
                ("kernelpath, torch-CPU tensors", py, [*fit, "--lib", "kernelpath", "--tensors"]),
                (
                    "kernelpath, float32 torch-CPU tensors",
                    py,
                    [*fit, "--lib", "kernelpath", "--tensors", "--dtype", "float32"],
                ),
                (
                    "kernelpath, memory_budget=1GB (FALKON's)",
                    py,
                    [*fit, "--lib", "kernelpath", "--budget", "1GB"],
                ),
                (
                    "kernelpath, λ path (20 values, 20% validation)",
                    py,
                    [*fit, "--lib", "kernelpath", "--path", "20"],
                ),
            ]
        if falkon and key != "10M":
            methods.append(("FALKON 0.9 (CPU)", falkon, [*fit, "--lib", "falkon"]))
        if key == "200k":
            methods.append(("scikit-learn Nystroem + Ridge", py, [*fit, "--lib", "sklearn"]))
        res = rounds(methods, runs, threads)
        ref = res.get("FALKON 0.9 (CPU)")
        for label, r in res.items():
            if ref and label != "FALKON 0.9 (CPU)":
                r["speedup_vs_falkon"] = ref["fit_s"] / r["fit_s"]
                r["rmse_vs_falkon"] = r["test_rmse"] / ref["test_rmse"] - 1
        if "kernelpath, torch-CPU tensors" in res:
            res["kernelpath, torch-CPU tensors"]["ratio_to_numpy"] = (
                res["kernelpath, torch-CPU tensors"]["fit_s"] / res["kernelpath"]["fit_s"]
            )
        result["problems"][key] = {
            "n_train": n,
            "n_test": 50_000,
            "rows": res,
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
    # the streamed pass against the machine's limit, at the largest n of the suite up to 1e6
    pass_n = ns["1M"]
    data = problem(pass_n)
    passes = {}
    for label, extra in (("numpy", []), ("torch-CPU", ["--tensors"])):
        r = fresh(py, ["pass", "--data", data, "--m", common[1], *extra], threads)
        limit = limit_seconds(info, pass_n, int(common[1]))
        r["limit_s"] = limit
        r["fraction_of_limit"] = None if limit is None else limit / r["pass_s"]
        passes[label] = r
        print(f"  streamed pass ({label}) at n={pass_n:,}: {r['pass_s']:.3f} s", flush=True)
    result["streamed_pass"] = passes
    return result
