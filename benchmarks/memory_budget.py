"""What a fit holds against its ``memory_budget`` (issue 25, item 2).

    python benchmarks/memory_budget.py [--n 200000] [--d 20]

For m = 1000, 2000, budgets 100MB / 300MB / 1GB and the CG and direct solvers, one fresh
process per fit: ``NystromRegressor(Gaussian(5.0), n_centers=m, scale=False)`` on n x d
Gaussian rows made in the process (its λ path, hold-out of 20%). Reported: the fit's peak
of traced allocations (tracemalloc: every NumPy array it makes, the hold-out's copies of
the rows included) above the data, against the budget; the operators' planned share
(their cached rows of K_nm and the blocks their workers stream, from the operators the
fit built, the largest training and validation pair: an upper bound, their
cache-or-stream decision may allocate less); and the peak resident memory above the data
(ru_maxrss less the process's peak before the fit, after a first fit on 500 rows has
loaded the modules a fit imports; it also sees LAPACK's own workspace, tracemalloc's
records and what the allocator keeps after a free).
A budget the fit refuses is reported with its message.
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
    import resource
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
    row = {
        "n": n, "d": d, "m": m, "budget": budget, "solver": solver,
        "budget_mb": kp._backend.resolve_memory_budget(budget) / 1e6,
    }  # fmt: skip
    # a first fit on a few rows loads the modules a fit imports, so that RSS counts the fit
    kp.NystromRegressor(kp.Gaussian(5.0), n_centers=50, solver=solver).fit(X[:500], y[:500])
    planned.clear()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    try:
        est.fit(X, y)
    except ValueError as exc:
        tracemalloc.stop()
        return {**row, "refused": str(exc)}
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    # the operators alive together: a training operator and its validation operator
    ops = max(
        planned[i] + (planned[i + 1] if i + 1 < len(planned) else 0) for i in range(len(planned))
    )
    return {
        **row, "peak_mb": peak / 1e6, "operator_mb": ops / 1e6,
        "rest_mb": (peak - ops) / 1e6, "rss_above_mb": rss / 1e6,
        "preconditioners": est.path_.info.get("preconditioners"),
        "val_rmse": float(np.sqrt(np.nanmin(est.path_.val_error))),
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
    print(
        "| m | budget | solver | traced peak | operators | rest | RSS above data | peak / budget |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for m in (1000, 2000):
        for budget in ("100MB", "300MB", "1GB"):
            for solver in ("cg", "direct"):
                cmd = [sys.executable, __file__, "worker", str(a.n), str(a.d), str(m), budget]
                p = subprocess.run(cmd + [solver], capture_output=True, text=True, check=True)
                r = json.loads(p.stdout.strip().splitlines()[-1])
                rows.append(r)
                if "refused" in r:
                    print(f"| {m} | {budget} | {solver} | refused: {r['refused']} |||||")
                    continue
                print(
                    f"| {m} | {budget} | {solver} | {r['peak_mb']:.0f} MB | "
                    f"{r['operator_mb']:.0f} MB | {r['rest_mb']:.0f} MB | "
                    f"{r['rss_above_mb']:.0f} MB | {r['peak_mb'] / r['budget_mb']:.2f} |",
                    flush=True,
                )
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
