"""What a fit holds against its ``memory_budget`` (issue 25, item 2: the measurement before
the fix).

    python benchmarks/memory_budget.py [--n 200000] [--d 20]

For m = 1000, 2000, budgets 100MB / 300MB / 1GB and the CG and direct solvers, one fresh
process per fit: ``NystromRegressor(Gaussian(5.0), n_centers=m, scale=False)`` on n x d
Gaussian rows made in the process (its λ path, hold-out of 20%). Reported: the fit's peak
of traced allocations (tracemalloc: every NumPy array it makes) above the data, and the
operator's planned share (its cached rows of K_nm and the blocks its workers stream, from
the operators it built); the rest is the solver's (the m x m algebra, bases, copies).
Writes ``results/memory_budget.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "memory_budget.json"


def worker(n: int, d: int, m: int, budget: str, solver: str) -> dict:
    import tracemalloc

    import numpy as np

    import kernelpath as kp
    from kernelpath.operators import kernel as opmod

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    planned: list[int] = []
    init = opmod.KernelOperator.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        row = self.m * np.dtype(self.dtype).itemsize
        blocks = self.block_rows * (row * 2 + (self.X.shape[1] + 2) * 8) * self.n_jobs
        planned.append(int(self.n_cached * row + blocks))

    opmod.KernelOperator.__init__ = spy  # type: ignore[method-assign]
    est = kp.NystromRegressor(
        kp.Gaussian(5.0), n_centers=m, scale=False, solver=solver, memory_budget=budget,
        random_state=0,
    )  # fmt: skip
    tracemalloc.start()
    est.fit(X, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "n": n, "d": d, "m": m, "budget": budget, "solver": solver,
        "budget_mb": kp._backend.resolve_memory_budget(budget, est.device_) / 1e6,
        "peak_mb": peak / 1e6, "operator_mb": max(planned) / 1e6 if planned else 0.0,
        "solver_mb": (peak - (max(planned) if planned else 0)) / 1e6,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="run", choices=["run", "worker"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=20)
    a = ap.parse_args()
    if a.mode == "worker":
        n, d, m, budget, solver = a.args
        print(json.dumps(worker(int(n), int(d), int(m), budget, solver)))
        return 0
    rows = []
    print("| m | budget | solver | peak above data | operator | rest (solver) | over budget |")
    print("|---|---|---|---|---|---|---|")
    for m in (1000, 2000):
        for budget in ("100MB", "300MB", "1GB"):
            for solver in ("cg", "direct"):
                cmd = [sys.executable, __file__, "worker", str(a.n), str(a.d), str(m), budget]
                p = subprocess.run(cmd + [solver], capture_output=True, text=True, check=True)
                r = json.loads(p.stdout.strip().splitlines()[-1])
                rows.append(r)
                over = r["peak_mb"] / r["budget_mb"]
                print(
                    f"| {m} | {budget} | {solver} | {r['peak_mb']:.0f} MB | "
                    f"{r['operator_mb']:.0f} MB | {r['solver_mb']:.0f} MB | {over:.2f}x |",
                    flush=True,
                )
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
