"""Problem P at n = 10^6 with tens of thousands of centers inside a 12 GB memory budget,
against FALKON on the CPU (issue 45), every fit in a fresh process.

    python benchmarks/million_p.py run --configs kp20k,falkon20k --runs 1
    python benchmarks/million_p.py run --configs kp50k --runs 1
    python benchmarks/million_p.py run --configs kp50k32 --runs 1
    python benchmarks/million_p.py run --configs kp50klr --runs 1
    python benchmarks/million_p.py table

Problem P (``benchmarks/peers.py``: x ~ N(0, I_20), y = sin<w, x> + 0.1 eps, 50,000 test
points, Gaussian sigma = 5, λ = 1e-6, uniform centers, 20 CG iterations, float64) at
n = 10^6. kernelpath: ``NystromRegressor(solver="cg", max_iter=20, tol=0,
validation_fraction=0, memory_budget="12GB")``, whose budget rule picks the factor's layout
(``krylov.cg_layout``; the layout it took is recorded). FALKON 0.9: ``Falkon`` with
``use_cpu=True``, KeOps off, ``max_cpu_mem=12e9``, the same λ, centers' count, iterations
and precision. Each fit runs in a fresh process (``fresh.py fit``: from the ``fit`` call
to its return) with every core, the configurations alternating round after round; the
table reports the median of the rounds, the test RMSE and the peak resident memory above
the loaded data. Results accumulate in ``results/million_p.json`` (a configuration run
again replaces its row), with this machine's ceilings measured at the start of each run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "million_p.json"
N = 1_000_000
BUDGET = "12GB"
CONFIGS: dict[str, tuple[str, str, int]] = {
    # key: (label, library, m)
    "kp20k": ("kernelpath, m = 20,000, memory_budget=12GB", "kernelpath", 20_000),
    "falkon20k": ("FALKON 0.9 (CPU), m = 20,000, max_cpu_mem=12e9", "falkon", 20_000),
    "kp50k": ("kernelpath, m = 50,000, memory_budget=12GB", "kernelpath", 50_000),
    "kp50k32": (
        "kernelpath, m = 50,000, memory_budget=12GB, factor_layout='compact'",
        "kernelpath",
        50_000,
    ),
    "kp50klr": (
        "kernelpath, m = 50,000, memory_budget=12GB, factor_layout='lowrank'",
        "kernelpath",
        50_000,
    ),
}
#: Options of a configuration beside its m (``fresh.py fit``'s flags): "compact" asked for
#: takes the float32 compact factor, where the float64 one does not fit (``forced_compact``);
#: "lowrank" the low-rank preconditioner, which "auto" took at m = 50,000 until stop 65.
EXTRA: dict[str, list[str]] = {
    "kp50k32": ["--factor-layout", "compact"],
    "kp50klr": ["--factor-layout", "lowrank"],
}


def run(configs: list[str], runs: int, iters: int) -> None:
    sys.path.insert(0, str(HERE))
    from peers import falkon_python, fit_summary, problem, rounds
    from run import machine_info

    info = machine_info()
    data = problem(N)
    falkon = falkon_python()
    methods = []
    for key in configs:
        label, lib, m = CONFIGS[key]
        if lib == "falkon" and falkon is None:
            raise SystemExit("FALKON's venv was not found (../shared/tools/build_falkon_cpu.sh)")
        python = falkon if lib == "falkon" else sys.executable
        args = ["fit", "--data", data, "--lib", lib, "--m", str(m), "--iters", str(iters)]
        args += ["--sigma", "5", "--penalty", "1e-6"]
        args += ["--falkon-mem", "12e9"] if lib == "falkon" else ["--budget", BUDGET]
        args += EXTRA.get(key, [])
        methods.append((label, python, args))
    res = rounds(methods, runs, int(info["cores"]))
    old = json.loads(OUT.read_text()) if OUT.is_file() else {"rows": {}, "runs_info": []}
    stamp = time.strftime("%Y-%m-%d %H:%M")
    old["runs_info"].append({"date": stamp, "configs": configs, "machine": info})
    for key in configs:
        label, lib, m = CONFIGS[key]
        r = res[label]
        old["rows"][key] = {
            "label": label,
            "lib": lib,
            "m": m,
            "iters": iters,
            **fit_summary(r),
            "date": stamp,
            "gemm_gflops_float64": info.get("limits", {}).get("gemm_gflops_float64"),
        }
    old["protocol"] = (
        f"P at n = {N:,}, 50,000 test points, sigma = 5, λ = 1e-6, float64; each fit in a "
        "fresh process with every core, configurations alternating, median of the rounds"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(old, indent=2, default=float) + "\n")
    print(f"wrote {OUT}")


def table() -> str:
    res = json.loads(OUT.read_text())
    rows = res["rows"]
    ref = rows.get("falkon20k")
    out = [
        "| configuration | iterations | runs | fit (s) | test RMSE | peak memory (GB) "
        "| layout | FALKON's time / this |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for key in CONFIGS:
        if key not in rows:
            continue
        r = rows[key]
        kept = (r.get("factor") or {}) if r["lib"] == "kernelpath" else {}
        factor = kept.get("factor", "")
        if kept.get("factor_dtype") not in (None, "float64"):
            factor += f" ({kept['factor_dtype']})"
        ratio = ""
        if ref is not None and r["lib"] == "kernelpath" and r["m"] == ref["m"]:
            ratio = f"{ref['fit_s'] / r['fit_s']:.2f}x"
        out.append(
            f"| {r['label']} | {r['iters']} | {r['runs']} | {r['fit_s']:.0f} | "
            f"{r['test_rmse']:.4f} | {r['peak_mb'] / 1e3:.1f} | {factor} | {ratio} |"
        )
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--configs", default="kp20k,falkon20k")
    r.add_argument("--runs", type=int, default=1)
    r.add_argument("--iters", type=int, default=20)
    sub.add_parser("table")
    a = p.parse_args()
    if a.cmd == "run":
        wanted = [c for c in a.configs.split(",") if c]
        bad = [c for c in wanted if c not in CONFIGS]
        if bad:
            raise SystemExit(f"unknown configs {bad}; known: {sorted(CONFIGS)}")
        run(wanted, a.runs, a.iters)
    print(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
