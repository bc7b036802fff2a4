"""Where the m x m algebra of a Nyström fit runs: its cost on the host as m grows.

    python benchmarks/mm_algebra.py [--sizes 2000,5000,10000]

For each m: the Nyström factor of a Gaussian K_mm (Cholesky, condition estimate, triangular
inverse, L^T L: ``linalg.nystrom_factor``), the preconditioner's Cholesky, and the m x m work
of one CG iteration (R V, R^T U and a preconditioner solve for one column), with LAPACK on
the host in float64 and, for comparison, with torch.linalg on the CPU. The rule it informs
(``linalg.factor_on_device``): on the host below 10,000 centers, on the GPU above.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def best(fn, repeats: int = 3) -> float:
    out = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def measure(m: int) -> dict:
    """The host's m x m costs of a fit with m centers."""
    from kernelpath import Gaussian, KernelOperator
    from kernelpath.linalg import nystrom_factor

    C = np.random.default_rng(0).standard_normal((m, 20))
    K = KernelOperator(C, C, Gaussian(5.0), memory_budget="8GB").center_gram()
    K[np.diag_indices(m)] += 1e-6 * m  # keep it safely positive definite at every m
    fac = nystrom_factor(K)
    pre = fac.preconditioner(1.0 / m, 1e-6)
    V = np.random.default_rng(1).standard_normal((fac.rank, 1))
    row = {
        "m": m,
        "method": fac.method,
        "factor_s": best(lambda: nystrom_factor(K), 2),
        "preconditioner_s": best(lambda: fac.preconditioner(1.0 / m, 1e-6), 2),
        "per_iteration_s": best(lambda: (fac.apply(V), fac.apply_t(V), pre(V)), 5),
    }
    try:
        import torch

        Kt = torch.from_numpy(K)
        row["torch_cpu_cholesky_s"] = best(lambda: torch.linalg.cholesky(Kt), 2)
    except ImportError:
        pass
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2000,5000,10000")
    a = ap.parse_args()
    for m in [int(x) for x in a.sizes.split(",")]:
        print(json.dumps(measure(m)), flush=True)


if __name__ == "__main__":
    main()
