"""Exact KRLS's cost against its estimate: the time and peak memory of a default
``KRLSRegressor().fit`` at several n, each fit in a fresh process, beside the estimate the
fit announces (``ExactFamily.cost``: ``EXACT_SECONDS_PER_N3`` n^3 per eigendecomposition,
K and ``EXACT_MATRICES`` n x n matrices at the peak).

    python benchmarks/run.py krls_cost run [--sizes 2000,4000,6000,8000] [--runs 3]
    python benchmarks/run.py krls_cost table

Data: problem P with d = 8 (x ~ N(0, I_8), y = sin<w, x> + 0.1 eps). Each size's fits run
in fresh processes, the median kept. Results go to ``results/krls_cost.json``; the constant
is the median over the sizes of measured seconds / (sum of the decompositions' n^3).
"""

from __future__ import annotations

import sys
from typing import Any

import fresh as h
import numpy as np


def fit_one(n: int) -> dict[str, Any]:
    """One default fit of n rows in this process: seconds, peak MB above the start, and
    the fit's own estimate."""
    from kernelpath import KRLSRegressor
    from kernelpath.fitting.exact import EXACT_MATRICES, EXACT_SECONDS_PER_N3

    rng = np.random.default_rng(0)
    w = rng.standard_normal(8)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, 8))
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(n)
    est, seconds, peak = h.timed(lambda: KRLSRegressor(random_state=0).fit(X, y))
    sizes = [len(est.train_indices_)] + ([n] if len(est.coef_) == n else [])
    cubes = sum(float(s) ** 3 for s in sizes)
    return {
        "n": n,
        "fit_s": seconds,
        "peak_mb": peak,
        "sizes": sizes,
        "estimate_s": EXACT_SECONDS_PER_N3 * cubes,
        "estimate_mb": 8 * (1 + EXACT_MATRICES) * max(sizes) ** 2 / 1e6,
        "seconds_per_n3": seconds / cubes,
    }


def run(sizes: str = "2000,4000,6000,8000", runs: int = 3) -> str:
    """Each size ``runs`` times in fresh processes; the median fit of each size."""
    rows = []
    for n in map(int, h.names(sizes)):
        got = h.rounds({str(n): lambda _, n=n: h.call("krls_cost", "fit_one", n=n)}, runs)[str(n)]
        rows.append(h.median_round(got, "fit_s"))
    constant = float(np.median([r["seconds_per_n3"] for r in rows]))
    doc = {"runs": runs, "seconds_per_n3": constant, "fits": rows, "machine": h.machine()}
    h.save("krls_cost", doc)
    return table()


def table() -> str:
    """Measured time and memory against the library's estimates."""
    from kernelpath.fitting.exact import EXACT_SECONDS_PER_N3

    res = h.load("krls_cost")
    cells = [
        [
            f"{r['n']:,}",
            f"{r['fit_s']:.1f}",
            f"{EXACT_SECONDS_PER_N3 * sum(float(s) ** 3 for s in r['sizes']):.1f}",
            f"{r['peak_mb']:.0f}",
            f"{r['estimate_mb']:.0f}",
        ]
        for r in res["fits"]
    ]
    header = ["n", "fit (s)", "estimate (s)", "peak memory (MB)", "estimate (MB)"]
    return h.markdown(header, cells, "rrrrr") + (
        f"\n\nMedian of {res['runs']} fresh processes per n; measured seconds per n^3 "
        f"{res['seconds_per_n3']:.3g}; the estimates use the library's "
        f"`EXACT_SECONDS_PER_N3` = {EXACT_SECONDS_PER_N3:.3g}."
    )


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table}))
