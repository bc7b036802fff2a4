"""CG with the low-rank preconditioner against the full factor (issue 45): iterations, time,
test RMSE and peak memory at equal problem, in fresh processes.

    python benchmarks/lowrank_preconditioner.py run     # writes results/lowrank_preconditioner.json
    python benchmarks/lowrank_preconditioner.py table

Problem P (``benchmarks/run.py``: x ~ N(0, I_20), y = sin(<w, x>) + 0.1 eps, |w| ~ 1,
Gaussian σ = 5), the same rows and centers (uniform, seed 0) for every fit, λ = 1e-6, CG
without validation (tol = 0), test RMSE against the noiseless target on 20,000 held-out rows
at iterations 10, 20, 40 and 60 of the same path (the Krylov path keeps every iterate).
Each configuration runs ``--runs`` times, the configurations alternating, each fit in a fresh
process; the table reports the median time. ``full``: ``factor_layout="cholesky"`` (the
full float64 factor: one Cholesky factor per anchor, or K_mm's eigendecomposition where K_mm
fails its Cholesky form's test; what ``"auto"`` took before ``krylov.compact_over_eigh``);
``auto``: the layout rule's choice (``krylov.cg_layout``, no memory limit, and
``compact_over_eigh``); ``compact float64``:
``factor_layout="compact"`` (FALKON's two triangles in one buffer, T of K_mm + j I with the
float64 jitter j, ``solvers/compact.py``); ``lowrank r``: ``factor_layout="lowrank"``,
``preconditioner_rank=r``. ``--layouts`` picks the configurations (``full,lowrank`` by
default); rows already recorded for the same problem and other configurations are kept.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "lowrank_preconditioner.json"
CHECKPOINTS = (10, 20, 40, 60)


def fit(n: int, m: int, layout: str, rank: int, iters: int) -> dict[str, Any]:
    """One fit in this process; its measurements."""
    from run import sine_problem

    from kernelpath.kernels import Gaussian
    from kernelpath.progress import listening
    from kernelpath.solvers.iterative import IterativeOptions, iterative_path
    from kernelpath.workspace import Workspace

    X, y, Xt, yt, C = sine_problem(n, 20, m, np.sqrt(20))
    ws = Workspace.of(None, None)
    kernel = Gaussian(5.0)
    op = ws.operator(X, C, kernel)
    t = time.perf_counter()
    stamps: dict[int, float] = {}  # seconds from the start at the end of each iteration

    def listen(stage: str, done: int, total: Any, info: dict[str, Any]) -> None:
        if stage == "cg":
            stamps[done] = time.perf_counter() - t

    with listening(listen):
        path = iterative_path(
            op,
            y,
            1e-6,
            IterativeOptions(
                method="cg",
                max_iter=iters,
                tol=0.0,
                n_iter_no_change=None,
                factor_layout=layout,
                preconditioner_rank=max(rank, 1),
            ),
        )
    sec = time.perf_counter() - t
    test = ws.operator(Xt, C, kernel)
    errs, at = {}, {}
    for it in CHECKPOINTS:
        if it <= path.train_error.shape[1]:
            pred = np.ravel(test.matvec(np.asarray(path.coef((0, it - 1)), dtype=float)))
            errs[str(it)] = float(np.sqrt(np.mean((pred - yt) ** 2)))
            at[str(it)] = stamps.get(it)
    return {
        "fit_s": sec,
        "test_rmse": errs,
        "seconds_at": at,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "factor": path.info["factor"],
        "preconditioners": path.info["preconditioners"],
        "krylov_dim": path.info["krylov_dim"],
    }


def configs(layouts: list[str], ranks: list[int]) -> list[tuple[str, str, int]]:
    """(row name, factor_layout, rank) of each configuration asked for: "full" (the full float64
    factor: one Cholesky factor per anchor, or the eigendecomposition), "auto" (the layout rule's
    choice), "compact" (the compact factor in float64, one anchor) and "lowrank" (one row
    per rank)."""
    out: list[tuple[str, str, int]] = []
    for layout in layouts:
        if layout == "full":
            out.append(("full", "cholesky", 0))
        elif layout == "auto":
            out.append(("auto", "auto", 0))
        elif layout == "compact":
            out.append(("compact float64", "compact", 0))
        elif layout == "lowrank":
            out += [(f"lowrank {r}", "lowrank", r) for r in ranks]
        else:
            raise SystemExit(f"unknown layout {layout!r}: full, auto, compact or lowrank")
    return out


def run(
    n: int, m: int, layouts: list[str], ranks: list[int], runs: int, iters: int
) -> dict[str, Any]:
    """Run the configurations; rows of other configurations already recorded for the same
    problem are kept (each row keeps its own machine's ceilings)."""
    sys.path.insert(0, str(HERE))
    from run import machine_info

    every = json.loads(OUT.read_text()) if OUT.is_file() else {"problems": {}}
    key = f"n = {n:,}, m = {m:,}"
    machine = machine_info()
    doc: dict[str, Any] = every["problems"].get(key) or {"n": n, "m": m, "rows": {}}
    if doc.get("iterations", iters) != iters:
        doc = {"n": n, "m": m, "rows": {}}  # another count of iterations: start again
    doc["iterations"] = iters
    doc.setdefault("machine", machine)
    doc.setdefault("machines", {})
    rows: dict[str, list[dict[str, Any]]] = doc.setdefault("rows", {})
    for name, _, _ in configs(layouts, ranks):
        rows[name] = []
        doc["machines"][name] = machine
    for i in range(runs):
        for name, layout, rank in configs(layouts, ranks):
            args = [str(n), str(m), layout, str(rank), str(iters)]
            cmd = [sys.executable, __file__, "one", *args]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(i, name, rows[name][-1], flush=True)
            doc["rows"] = rows
            every["problems"][f"n = {n:,}, m = {m:,}"] = doc
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_text(json.dumps(every, indent=1) + "\n")
    return doc


def table(every: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    counts = []
    for label, doc in every["problems"].items():
        lines += problem_table(doc) + [""]
        runs = len(next(iter(doc["rows"].values())))
        counts.append(f"{'median of ' + str(runs) if runs > 1 else 'one run'} at {label}")
    lines.append(
        "Test RMSE of the same path after each count of iterations, and the seconds from "
        f"the fit's start to the end of that iteration, each fit in a fresh process "
        f"({'; '.join(counts)})."
    )
    return lines


def problem_table(doc: dict[str, Any]) -> list[str]:
    cols = [
        c for c in map(str, CHECKPOINTS) if c in next(iter(doc["rows"].values()))[0]["test_rmse"]
    ]
    head = " | ".join(f"after {c} iterations" for c in cols)
    lines = [
        f"| preconditioner (n = {doc['n']:,}, m = {doc['m']:,}) | {head} | peak memory |",
        "|---|" + "---:|" * len(cols) + "---:|",
    ]
    for name, runs in doc["rows"].items():
        cells = []
        for c in cols:
            sec = statistics.median(r["seconds_at"][c] for r in runs)
            cells.append(f"{runs[0]['test_rmse'][c]:.4f} in {sec:.0f} s")
        peak = max(r["peak_rss_gb"] for r in runs)
        label = f"{name} ({runs[0]['factor']})" if name in ("full", "auto") else name
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {peak:.1f} GB |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["run", "table", "one"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--ranks", default="1000,3000")
    ap.add_argument("--layouts", default="full,lowrank", help="full, auto, compact, lowrank")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=60)
    a = ap.parse_args()
    if a.cmd == "one":
        n, m, layout, rank, iters = a.args
        print(json.dumps(fit(int(n), int(m), layout, int(rank), int(iters))))
        return 0
    if a.cmd == "run":
        ranks = [int(r) for r in a.ranks.split(",")]
        run(a.n, a.m, a.layouts.split(","), ranks, a.runs, a.iterations)
    print("\n".join(table(json.loads(OUT.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
