"""Exact KRLS's cost against its estimate: the time and peak memory of a default
``KRLSRegressor().fit`` at several n, each fit in a fresh process, beside the estimate the
fit announces (``ExactFamily.cost``: ``EXACT_SECONDS_PER_N3`` n^3 per eigendecomposition,
K and ``EXACT_MATRICES`` n x n matrices at the peak).

    python benchmarks/krls_cost.py run [--sizes 2000,4000,6000,8000] [--runs 3]
    python benchmarks/krls_cost.py table

Data: the foundation benchmark's problem P with d = 8 (``benchmarks/fresh.py``). Results
go to ``benchmarks/results/krls_cost.json``; the constant is the median over the sizes of
measured seconds / (sum of the decompositions' n^3).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "krls_cost.json"


def worker(n: int) -> dict[str, float]:
    """One default fit of n rows in this process: seconds, peak MB above the start, and
    the fit's own estimate."""
    sys.path.insert(0, str(HERE))
    from fresh import PeakMemory

    from kernelpath import KRLSRegressor
    from kernelpath.fitting.exact import EXACT_MATRICES, EXACT_SECONDS_PER_N3

    rng = np.random.default_rng(0)
    w = rng.standard_normal(8)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, 8))
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(n)
    est = KRLSRegressor(random_state=0)
    with PeakMemory() as peak:
        t0 = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - t0
    n_tr = len(est.train_indices_)
    sizes = [n_tr] + ([n] if len(est.coef_) == n else [])
    return {
        "n": n,
        "fit_s": seconds,
        "peak_mb": peak.mb,
        "sizes": sizes,
        "estimate_s": EXACT_SECONDS_PER_N3 * sum(float(s) ** 3 for s in sizes),
        "estimate_mb": 8 * (1 + EXACT_MATRICES) * max(sizes) ** 2 / 1e6,
        "seconds_per_n3": seconds / sum(float(s) ** 3 for s in sizes),
    }


def run(sizes: list[int], runs: int) -> None:
    rows = []
    for n in sizes:
        got = []
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, __file__, "worker", str(n)],
                capture_output=True,
                text=True,
                check=True,
            )
            got.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(got[-1]), flush=True)
        med = sorted(got, key=lambda r: r["fit_s"])[len(got) // 2]
        rows.append(med)
    constant = float(np.median([r["seconds_per_n3"] for r in rows]))
    OUT.write_text(
        json.dumps({"runs": runs, "seconds_per_n3": constant, "fits": rows}, indent=2) + "\n"
    )
    print(table())


def table() -> str:
    from kernelpath.fitting.exact import EXACT_SECONDS_PER_N3

    res = json.loads(OUT.read_text())
    lines = [
        "| n | fit (s) | estimate (s) | peak memory (MB) | estimate (MB) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in res["fits"]:
        lines.append(
            f"| {r['n']:,} | {r['fit_s']:.1f} "
            f"| {EXACT_SECONDS_PER_N3 * sum(float(s) ** 3 for s in r['sizes']):.1f} "
            f"| {r['peak_mb']:.0f} "
            f"| {r['estimate_mb']:.0f} |"
        )
    lines.append("")
    lines.append(
        f"Median of {res['runs']} fresh processes per n; measured seconds per n^3 "
        f"{res['seconds_per_n3']:.3g}; the estimates use the library's "
        f"`EXACT_SECONDS_PER_N3` = {EXACT_SECONDS_PER_N3:.3g}."
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("n", nargs="?", type=int)
    ap.add_argument("--sizes", default="2000,4000,6000,8000")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(a.n)))
    elif a.mode == "run":
        run([int(s) for s in a.sizes.split(",")], a.runs)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
