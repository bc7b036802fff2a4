"""A fit at scale holds what its ``memory_budget`` allows: ``NystromRegressor`` on 200,000 x 20
Gaussian rows with m = 1,000 and 2,000 centers, budgets of 100 MB, 300 MB and 1 GB, the CG
and direct solvers, each fit in a fresh process; the peak of its traced allocations
(tracemalloc: every NumPy array the fit makes, the hold-out's copies of the rows included)
above the data stays within the budget, or the fit refuses the budget by name before any
work. The tests of ``tests/test_memory.py`` check the same rule on small data.

Slow (about ten minutes on two cores): marked ``slow`` and run only where the environment
sets ``KERNELPATH_SLOW=1``. The recorded run is ``benchmarks/results/memory_budget.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("KERNELPATH_SLOW") != "1", reason="set KERNELPATH_SLOW=1"),
]

N, D = 200_000, 20
FIT = """
import json, sys, tracemalloc
import numpy as np
import kernelpath as kp

n, d, m, budget, solver = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
X = rng.standard_normal((n, d))
y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
make = lambda m, **kw: kp.NystromRegressor(
    kp.Gaussian(5.0), n_centers=m, scale=False, solver=solver, random_state=0, **kw
)
make(50).fit(X[:500], y[:500])  # the modules a fit imports, loaded before the count
tracemalloc.start()
try:
    make(m, memory_budget=budget).fit(X, y)
    out = {"peak_mb": tracemalloc.get_traced_memory()[1] / 1e6}
except ValueError as exc:
    out = {"refused": str(exc)}
out["budget_mb"] = kp._backend.resolve_memory_budget(budget) / 1e6
print(json.dumps(out))
"""


@pytest.mark.parametrize("solver", ["cg", "direct"])
@pytest.mark.parametrize("budget", ["100MB", "300MB", "1GB"])
@pytest.mark.parametrize("m", [1000, 2000])
def test_a_fit_at_scale_stays_within_its_budget(m, budget, solver):
    args = json.dumps([N, D, m, budget, solver])
    done = subprocess.run(
        [sys.executable, "-c", FIT, args], capture_output=True, text=True, check=True
    )
    res = json.loads(done.stdout.strip().splitlines()[-1])
    if "refused" in res:
        assert "memory_budget" in res["refused"] or "budget" in res["refused"]
        return
    assert res["peak_mb"] <= res["budget_mb"], res
