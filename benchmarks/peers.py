"""Problem P against FALKON and scikit-learn on the CPU, every fit in a fresh process.

    python benchmarks/run.py peers run [--sizes 200k,1M,10M] [--runs 3] [--quick]
    python benchmarks/run.py peers table        # the documents' table, from results/peers.json

Problem P: x ~ N(0, I_20), y = sin<w, x> + 0.1 eps with ||w|| = 1, 50,000 test points,
Gaussian sigma = 5, λ = 1e-6, m = 2000 uniform centers, 20 CG iterations, float64. Each fit
runs in a fresh process (``fresh.py fit``: from the ``fit`` call to its return, after the
data are loaded), the methods alternate round after round, and the median of the rounds is
kept with the test RMSE and the peak resident memory above the loaded data.

The peers: FALKON 0.9 (built from its source into its own virtual environment by
``../shared/tools/build_falkon_cpu.sh``; run with every core and ``max_cpu_mem=1e9``, its
fastest setting here) where that venv is found, and scikit-learn's ``Nystroem + Ridge`` at
200,000 points. At that size kernelpath also runs on torch-CPU tensors, in float32, inside
FALKON's memory bound and with a λ path of 20 values on a 20% hold-out.

The streamed pass K_nm^T (K_nm v) at n = 10^6 is timed in a fresh process too, against
this machine's limit measured in the same run: the 2nmd flops of the distances at the
measured matrix-multiply rate plus the nm exponentials at the measured exp rate.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import fresh as h

SIZES = {"200k": 200_000, "1M": 1_000_000, "10M": 10_000_000}
FALKON = "FALKON 0.9 (CPU)"
SKLEARN = "scikit-learn Nystroem + Ridge"
#: the rows of the README's headline table
HEADLINE = ("kernelpath", "kernelpath, λ path (20 values, 20% validation)", FALKON, SKLEARN)


def limit_seconds(info: dict[str, Any], n: int, m: int, d: int = 20) -> float | None:
    """The machine's limit for one pass: 2nmd flops at the GEMM rate plus nm exponentials at
    the all-core exp rate (both measured at the start of this run)."""
    lim = info.get("limits")
    if not lim:
        return None
    gemm = 2 * n * m * d / (lim["gemm_gflops_float64"] * 1e9)
    return gemm + n * m / (lim["exp_gelem_allcores_float64"] * 1e9)


def _methods(key: str, data: str, m: int, falkon: str | None) -> dict[str, Any]:
    """The fresh-process jobs of one size, in the order they alternate."""
    threads = {"OMP_NUM_THREADS": str(os.cpu_count() or 1)}
    fit = ["fit", "--data", data, "--m", str(m), "--sigma", "5", "--penalty", "1e-6"]
    fit += ["--iters", "20"]
    configs: list[tuple[str, str | None, list[str]]] = [
        ("kernelpath", None, ["--lib", "kernelpath"])
    ]
    if key == "200k":
        kp = ["--lib", "kernelpath"]
        configs += [
            ("kernelpath, torch-CPU tensors", None, [*kp, "--tensors"]),
            (
                "kernelpath, float32 torch-CPU tensors",
                None,
                [*kp, "--tensors", "--dtype", "float32"],
            ),
            ("kernelpath, memory_budget=1GB (FALKON's)", None, [*kp, "--budget", "1GB"]),
            (HEADLINE[1], None, [*kp, "--path", "20"]),
        ]
    if falkon and key != "10M":
        configs.append((FALKON, falkon, ["--lib", "falkon"]))
    if key == "200k":
        configs.append((SKLEARN, None, ["--lib", "sklearn"]))
    return {
        label: lambda _, py=py, extra=extra: h.run_fresh([*fit, *extra], python=py, env=threads)
        for label, py, extra in configs
    }


def run(sizes: str = "200k,1M,10M", runs: int = 3, quick: bool = False) -> str:
    """Each size's methods alternating for ``runs`` rounds, then the streamed pass; sizes
    not run keep their recorded rows (``--quick``: 20,000 and 50,000 points, m = 500,
    written to results/peers-quick.json)."""
    info = h.machine()
    falkon = h.falkon_python()
    ns = {"200k": 20_000, "1M": 50_000} if quick else SIZES
    m = 500 if quick else 2000
    name = "peers-quick" if quick else "peers"
    doc = h.load(name, {"result": {"problems": {}}})
    result = doc["result"]
    result["protocol"] = (
        f"each fit in a fresh process, methods alternating, median of {runs} rounds; peak "
        "memory above the loaded data (the largest of the rounds)"
    )
    result["falkon"] = falkon or "not run: its venv was not found"
    for key in [s for s in h.names(sizes) if s in ns]:
        got = h.rounds(_methods(key, h.problem(ns[key]), m, falkon), runs, pause=1.0)
        rows = {label: _row(rs) for label, rs in got.items()}
        ref = rows.get(FALKON)
        for label, r in rows.items():
            if ref and label != FALKON:
                r["speedup_vs_falkon"] = ref["fit_s"] / r["fit_s"]
                r["rmse_vs_falkon"] = r["test_rmse"] / ref["test_rmse"] - 1
        result["problems"][key] = {
            "n_train": ns[key],
            "n_test": 50_000,
            "rows": rows,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": info,
        }
    result["problems"] = dict(sorted(result["problems"].items(), key=lambda kv: kv[1]["n_train"]))
    data = h.problem(ns["1M"])
    passes = {}
    for label, extra in (("numpy", []), ("torch-CPU", ["--tensors"])):
        r = h.run_fresh(["pass", "--data", data, "--m", str(m), *extra])
        r["limit_s"] = limit_seconds(info, ns["1M"], m)
        r["fraction_of_limit"] = None if r["limit_s"] is None else r["limit_s"] / r["pass_s"]
        passes[label] = r
    result["streamed_pass"] = passes
    h.save(name, {"machine": info, "result": result})
    return table(name)


def _row(results: list[dict[str, Any]]) -> dict[str, Any]:
    s = h.summary(results, median=("test_rmse",))
    extra = {k: v for k, v in results[-1].items() if k not in ("fit_s", "test_rmse")}
    return {**s, "extra": extra}


def _rows(name: str) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    doc = h.load(name)
    return [
        (p, label, r) for p in doc["result"]["problems"].values() for label, r in p["rows"].items()
    ]


def _cells(p: dict[str, Any], label: str, r: dict[str, Any]) -> list[str]:
    speed = r.get("speedup_vs_falkon")
    return [
        f"{p['n_train']:,}",
        label,
        f"{r['fit_s']:.1f}",
        f"{r['test_rmse']:.4f}",
        f"{r['peak_mb']:.0f}",
        "—" if speed is None else f"{speed:.1f}×",
    ]


HEADER = ["n", "method", "fit (s)", "test RMSE", "peak memory (MB)", "FALKON's time / this"]


def headline(name: str = "peers") -> str:
    """The README's table: kernelpath, its λ path, FALKON and scikit-learn."""
    rows = [_cells(p, label, r) for p, label, r in _rows(name) if label in HEADLINE]
    info = h.load(name)["machine"]
    note = f"{h.host(info)}, {info['cores']} cores, float64; every fit in a fresh process"
    return h.markdown(HEADER, rows, "rlrrrr") + f"\n\n{note}, alternating, median of 3."


def table(name: str = "peers") -> str:
    """Every row of ``results/peers.json``, the runs' dates and the streamed pass."""
    doc = h.load(name)
    res, info = doc["result"], doc["machine"]
    out = [h.markdown(HEADER, [_cells(*row) for row in _rows(name)], "rlrrrr"), ""]
    dates = {k: p.get("date") for k, p in res["problems"].items()}
    out.append(
        f"{h.host(info)}, {info['cores']} cores; {res['protocol']}. Runs: "
        + "; ".join(f"n = {k} on {v}" for k, v in dates.items())
        + "."
    )
    lim = info.get("limits", {})
    for label, r in res.get("streamed_pass", {}).items():
        if r.get("fraction_of_limit") is not None:
            out.append(
                f"\nStreamed pass K_nm^T (K_nm v) at n = {r['n']:,}, m = {r['m']} ({label}): "
                f"{r['pass_s']:.2f} s, {100 * r['fraction_of_limit']:.0f}% of this machine's "
                f"limit ({r['limit_s']:.2f} s: the 2nmd distance flops at "
                f"{lim.get('gemm_gflops_float64')} GFLOP/s plus nm exponentials at "
                f"{lim.get('exp_gelem_allcores_float64')} G/s, both measured in the same run)."
            )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table, "headline": headline}))
