"""CG's factor on disk (``factor_layout="disk"``, issue 45) against the layouts kept in
memory, on problem P, every fit in a fresh process.

    python benchmarks/disk_factor.py run --n 200000 --m 60000 --layouts disk,lowrank
    python benchmarks/disk_factor.py run --n 200000 --m 20000 --layouts disk,compact --runs 3
    python benchmarks/disk_factor.py run --n 100000 --m 40000 --layouts disk --budget 4GB \
        --note "beside 19 GB held by another process"
    python benchmarks/disk_factor.py algebra --m 20000 --rounds 3
    python benchmarks/disk_factor.py table

Problem P (``benchmarks/peers.py``: x ~ N(0, I_20), y = sin<w, x> + 0.1 eps, 50,000 test
points, Gaussian sigma = 5, λ = 1e-6, uniform centers, 20 CG iterations, float64) with
``NystromRegressor(solver="cg", max_iter=20, tol=0, validation_fraction=0,
memory_budget=BUDGET, factor_layout=LAYOUT)`` (``fresh.py fit``: from the ``fit`` call to its
return, every core). At an m whose float32 buffer (4 m^2 bytes) the budget cannot hold,
"auto" takes the low-rank preconditioner and "disk" the compact factor in a file; at an m
both fit, "disk" against "compact" is the price of the file. The layouts alternate round
after round; the table gives the median fit, the test RMSE, the peak resident memory above
the loaded data, and the memory the system had available at the start of the run (what
the page cache can hold of the file beside the fit). Results accumulate in
``results/disk_factor.json``, one row per n, m, layout, budget and ``--note`` (how the run
was made, e.g. beside a process holding memory).

``algebra``: the factor's own steps in the two layouts, as ``compact_algebra.py`` times
them (MNIST's training rows in float32, m of them as centers, the Gaussian of width
1021.5, inside ``fit_threads``), one fresh process per layout, alternating for
``--rounds`` rounds: ``factor`` (K_mm and T), ``preconditioner`` (one, formed and
factored), ``apply`` (5 R V and 5 R^T V, V of 30 columns), ``solve`` (5 preconditioner
solves), and the process's peak resident memory (``ru_maxrss``, the disk layout's mapped
pages included while a panel holds them). Medians in ``results/disk_algebra.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "disk_factor.json"
ALGEBRA = HERE / "results" / "disk_algebra.json"
DATA = HERE.parent.parent / "shared" / "data"
STEPS = ("factor", "preconditioner", "apply", "solve")


def run(
    n: int, m: int, layouts: list[str], runs: int, budget: str, iters: int, note: str = ""
) -> None:
    sys.path.insert(0, str(HERE))
    import psutil
    from peers import fit_summary, problem, rounds
    from run import machine_info

    info = machine_info()
    available = psutil.virtual_memory().available
    data = problem(n)
    methods = []
    for layout in layouts:
        args = ["fit", "--data", data, "--lib", "kernelpath", "--m", str(m)]
        args += ["--iters", str(iters), "--sigma", "5", "--penalty", "1e-6"]
        args += ["--budget", budget, "--factor-layout", layout]
        methods.append((layout, sys.executable, args))
    res = rounds(methods, runs, int(info["cores"]))
    old = json.loads(OUT.read_text()) if OUT.is_file() else {"rows": {}}
    stamp = time.strftime("%Y-%m-%d %H:%M")
    for layout in layouts:
        r = res[layout]
        old["rows"][f"{n}/{m}/{layout}/{budget}" + (f"/{note}" if note else "")] = {
            "n": n,
            "m": m,
            "layout": layout,
            "budget": budget,
            "note": note,
            "iters": iters,
            **fit_summary(r),
            "available_gb": available / 1e9,
            "buffer_gb": 4 * (m + 1) * m / 1e9,
            "date": stamp,
            "machine": info,
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(old, indent=2, default=float) + "\n")
    print(table())


def algebra_one(m: int, layout: str) -> dict[str, float]:
    """The steps' seconds and the peak resident memory in this process."""
    import resource

    import numpy as np
    from compact_algebra import timed_applies

    from kernelpath._threads import fit_threads
    from kernelpath.datasets import load_shared
    from kernelpath.kernels import Gaussian
    from kernelpath.solvers.compact import compact_factor
    from kernelpath.solvers.disk import disk_factor
    from kernelpath.workspace import Workspace

    X = load_shared("mnist", root=str(DATA))["X_train"].astype(np.float32)
    rng = np.random.default_rng(0)
    C = X[rng.choice(len(X), m, replace=False)]
    del X
    op = Workspace.of(None, None).operator(C, C, Gaussian(1021.5))
    V = rng.standard_normal((m, 30))
    out: dict[str, float] = {}
    with fit_threads():
        t = time.perf_counter()
        fac = disk_factor(op) if layout == "disk" else compact_factor(op, dtype=np.float32)
        out["factor"] = time.perf_counter() - t
        t = time.perf_counter()
        solve = fac.preconditioner(1.0 / m, 1e-3)
        out["preconditioner"] = time.perf_counter() - t
        out["apply"] = timed_applies(fac, V)
        t = time.perf_counter()
        for _ in range(5):
            solve(V)
        out["solve"] = time.perf_counter() - t
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def algebra(m: int, rounds: int) -> None:
    import statistics
    import subprocess

    runs: dict[str, list[dict[str, float]]] = {"compact": [], "disk": []}
    for r in range(rounds):
        for layout in runs:
            args = [sys.executable, __file__, "algebra-one", "--m", str(m), "--layouts", layout]
            proc = subprocess.run(args, capture_output=True, text=True, check=True)
            runs[layout].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {layout}: {runs[layout][-1]}", flush=True)
    keys = (*STEPS, "peak_rss_gb")
    doc = {
        "m": m,
        "rounds": rounds,
        "runs": runs,
        "median": {
            k: {p: statistics.median(x[p] for x in v) for p in keys} for k, v in runs.items()
        },
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    ALGEBRA.write_text(json.dumps(doc, indent=1) + "\n")
    print(algebra_table())


def algebra_table() -> str:
    doc = json.loads(ALGEBRA.read_text())
    med = doc["median"]
    lines = [
        f"MNIST centers m = {doc['m']:,}, float32, one preconditioner, V of 30 columns; "
        f"median of {doc['rounds']} fresh processes each, alternating (seconds; the peak "
        "resident memory in GB):",
        "",
        "| step | compact (in memory) | disk | disk / compact |",
        "|---|---:|---:|---:|",
    ]
    for p in (*STEPS, "peak_rss_gb"):
        c, d = med["compact"][p], med["disk"][p]
        name = "peak resident memory (GB)" if p == "peak_rss_gb" else p
        lines.append(f"| {name} | {c:.2f} | {d:.2f} | {d / c:.2f} |")
    return "\n".join(lines)


def table() -> str:
    rows = json.loads(OUT.read_text())["rows"] if OUT.is_file() else {}
    out = [
        "| n | m | factor_layout | budget | runs | fit (s) | test RMSE | peak memory (GB) "
        "| float32 buffer (GB) | memory available (GB) | factor taken | note |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in sorted(rows.values(), key=lambda r: (r["n"], r["m"], r["layout"], r.get("note", ""))):
        kept = r.get("factor") or {}
        factor = kept.get("factor", "")
        if kept.get("factor_dtype") not in (None, "float64"):
            factor += f" ({kept['factor_dtype']})"
        out.append(
            f"| {r['n']:,} | {r['m']:,} | {r['layout']} | {r['budget']} | {r['runs']} | "
            f"{r['fit_s']:.0f} | {r['test_rmse']:.4f} | {r['peak_mb'] / 1e3:.2f} | "
            f"{r['buffer_gb']:.1f} | {r['available_gb']:.1f} | {factor} | {r.get('note', '')} |"
        )
    if ALGEBRA.is_file():
        out += ["", algebra_table()]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "algebra", "algebra-one", "table"])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--m", type=int, default=60_000)
    ap.add_argument("--layouts", default="disk,lowrank")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--budget", default="12GB")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--note", default="", help="a row's note (and key): how it was run")
    a = ap.parse_args()
    if a.mode == "algebra-one":
        print(json.dumps(algebra_one(a.m, a.layouts)))
    elif a.mode == "algebra":
        algebra(a.m, a.rounds)
    elif a.mode == "run":
        run(a.n, a.m, a.layouts.split(","), a.runs, a.budget, a.iters, a.note)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
