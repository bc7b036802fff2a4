"""The compact factor's m x m algebra inside a fit, part by part, against an earlier source tree.

    python benchmarks/compact_algebra.py run --before SRC [--m 20000] [--rounds 3] [--cols 30]
        [--anchors 1]
    python benchmarks/compact_algebra.py table [--anchors 1]

MNIST's training rows in float32 (``../shared/data/mnist``), m of them drawn uniformly as
centers, the Gaussian of width 1021.5 (what ``NystromClassifier(scale=False)`` chooses at
m = 20,000). Inside ``_threads.fit_threads`` (BLAS on one thread, as in a fit, with
``dense_threads`` lending the cores), one fresh process per configuration, "this tree" and
"before" (``--before``: the ``src`` folder of an earlier checkout, e.g. a ``git worktree``)
alternating for ``--rounds`` rounds, times:

- ``factor``: ``compact_factor(op, slots=max(2, anchors))`` (K_mm, its jitter and T's
  Cholesky factor);
- ``preconditioner``: ``--anchors`` preconditioners formed (T T^T by blocks) and factored,
  at shifts 1e-3, 1e-4, ... (MNIST's fit at m = 20,000 has 3 anchors);
- ``apply``: 5 products R V and 5 R^T V with V of ``--cols`` columns (the float64
  refinement: two float32 triangular solves and one float64 triangle product each).

Writes ``results/compact_algebra.json`` (``compact_algebra_anchorsN.json`` for N > 1
anchors); ``table`` prints the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
DATA = HERE.parent.parent / "shared" / "data"
PARTS = ("factor", "preconditioner", "apply")


def out_path(anchors: int) -> Path:
    """The results file of a run with ``anchors`` preconditioners."""
    suffix = "" if anchors == 1 else f"_anchors{anchors}"
    return HERE / "results" / f"compact_algebra{suffix}.json"


def one(m: int, cols: int, anchors: int) -> dict[str, float]:
    """The parts' seconds in this process (its ``kernelpath`` is the one on sys.path)."""
    import numpy as np

    from kernelpath._threads import fit_threads
    from kernelpath.datasets import load_shared
    from kernelpath.kernels import Gaussian
    from kernelpath.solvers.compact import compact_factor
    from kernelpath.workspace import Workspace

    X = load_shared("mnist", root=str(DATA))["X_train"].astype(np.float32)
    rng = np.random.default_rng(0)
    C = X[rng.choice(len(X), m, replace=False)]
    op = Workspace.of(None, None).operator(X, C, Gaussian(1021.5))
    V = rng.standard_normal((m, cols))
    out: dict[str, float] = {}
    with fit_threads():
        t = time.perf_counter()
        fac = compact_factor(op, slots=max(2, anchors))
        out["factor"] = time.perf_counter() - t
        t = time.perf_counter()
        for k in range(anchors):
            fac.preconditioner(1.0 / m, 10.0 ** (-3 - k))
        out["preconditioner"] = time.perf_counter() - t
        out["apply"] = timed_applies(fac, V)
    return out


def timed_applies(fac: Any, V: Any, times: int = 5) -> float:
    """Seconds of ``times`` products R V and as many R^T V with the factor ``fac``."""
    t = time.perf_counter()
    for _ in range(times):
        fac.apply(V)
        fac.apply_t(V)
    return time.perf_counter() - t


def run(before: str, m: int, rounds: int, cols: int, anchors: int) -> None:
    trees = {"this tree": str(SRC), "before": before}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for r in range(rounds):
        for name, src in trees.items():
            env = dict(os.environ, PYTHONPATH=src)
            args = [sys.executable, __file__, "one", "--m", str(m), "--cols", str(cols)]
            args += ["--anchors", str(anchors)]
            proc = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[name].append(res)
            print(f"round {r + 1} {name}: {res}", flush=True)
    doc = {
        "m": m,
        "cols": cols,
        "anchors": anchors,
        "rounds": rounds,
        "before": before,
        "runs": runs,
        "median_s": {
            name: {p: statistics.median(x[p] for x in rs) for p in PARTS}
            for name, rs in runs.items()
        },
    }
    out_path(anchors).write_text(json.dumps(doc, indent=1))
    print("\n".join(table(anchors)))


def table(anchors: int = 1) -> list[str]:
    doc = json.loads(out_path(anchors).read_text())
    med = doc["median_s"]
    n = doc.get("anchors", 1)
    lines = [
        f"MNIST centers m = {doc['m']:,}, float32, V of {doc['cols']} columns, "
        f"{n} preconditioner{'s' if n > 1 else ''}; median of "
        f"{doc['rounds']} fresh processes each, alternating (seconds):",
        "",
        "| part | before | this tree | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for p in PARTS:
        b, n = med["before"][p], med["this tree"][p]
        lines.append(f"| {p} | {b:.1f} | {n:.1f} | {b / n:.2f}x |")
    whole = doc.get("whole_fit")  # recorded by hand from fresh.py's runs
    if whole:
        t = {k: statistics.median(v) for k, v in whole["fit_s"].items()}
        err = whole["test_error_pct"]
        runs = ", ".join(f"{x:.0f}" for x in whole["fit_s"]["this tree"])
        lines += [
            "",
            f"The whole fit (`{whole['command']}`, {whole['protocol']}): this tree "
            f"{t['this tree']:.0f} s (runs {runs}), before {t['before']:.0f} s, "
            f"{t['before'] / t['this tree']:.2f}x; test error {err['this tree']}% and "
            f"{err['before']}%.",
        ]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "one", "table"])
    ap.add_argument("--before", help="the src folder of the earlier tree")
    ap.add_argument("--m", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cols", type=int, default=30)
    ap.add_argument("--anchors", type=int, default=1, help="preconditioners formed")
    a = ap.parse_args()
    if a.mode == "one":
        print(json.dumps(one(a.m, a.cols, a.anchors)))
    elif a.mode == "run":
        if not a.before:
            ap.error("run needs --before SRC")
        run(a.before, a.m, a.rounds, a.cols, a.anchors)
    else:
        print("\n".join(table(a.anchors)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
