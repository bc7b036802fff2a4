"""float32 fits on the host: the products' sums in float64 (since the MNIST finding, see
docs/design.md "float32 products") against float32 sums (the behaviour before) and float64
data, CG with 20 iterations at λ = 1e-6, each fit in a fresh process, alternating, median of 3.

    python benchmarks/float32_products.py run      # writes results/float32_products.json
    python benchmarks/float32_products.py table

"float32 sums" forces ``KernelOperator.product_dtype`` to the operator's dtype in its
process: the code path of every float32 product before the change.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "float32_products.json"
MODES = ("float32 sums", "float64 sums", "float64 data")
#: (label, n, m, d, cache)
CONFIGS = [
    ("n = 200,000, d = 20, m = 2,000, K_nm cached", 200_000, 2000, 20, "auto"),
    ("n = 200,000, d = 20, m = 2,000, streamed", 200_000, 2000, 20, "no"),
    ("n = 30,000, d = 784, m = 3,000, K_nm cached", 30_000, 3000, 784, "auto"),
]


def fit(mode: str, n: int, m: int, d: int, cache: str) -> dict[str, Any]:
    import kernelpath.operators.kernel as K
    from kernelpath.kernels import Gaussian
    from kernelpath.solvers.iterative import IterativeOptions, iterative_path

    if mode == "float32 sums":
        K.KernelOperator.product_dtype = lambda self, A: self.dtype  # type: ignore[method-assign]
    rng = np.random.default_rng(0)
    dtype = np.float64 if mode == "float64 data" else np.float32
    X = rng.standard_normal((n, d)).astype(dtype)
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    op = K.KernelOperator(
        X, X[:m], Gaussian(sigma=float(np.sqrt(d))), cache="auto" if cache == "auto" else False
    )
    t = time.perf_counter()
    path = iterative_path(op, y, [1e-6], IterativeOptions(method="cg", max_iter=20, tol=0.0))
    return {"fit_s": time.perf_counter() - t, "train_mse": float(path.train_error[0, -1])}


def run() -> None:
    rows: dict[str, Any] = {}
    for label, n, m, d, cache in CONFIGS:
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        mse: dict[str, float] = {}
        for _ in range(3):
            for mode in MODES:
                args = [sys.executable, __file__, "fit", mode, str(n), str(m), str(d), cache]
                res = json.loads(subprocess.run(args, capture_output=True, text=True).stdout)
                times[mode].append(res["fit_s"])
                mse[mode] = res["train_mse"]
                print(label, mode, f"{res['fit_s']:.2f} s", flush=True)
        rows[label] = {
            mode: {"fit_s": float(np.median(t)), "runs": t, "train_mse": mse[mode]}
            for mode, t in times.items()
        }
    when = time.strftime("%Y-%m-%d %H:%M")
    doc = {"date": when, "machine": "this machine, 2 cores", "rows": rows}
    OUT.write_text(json.dumps(doc, indent=1))


def table() -> list[str]:
    doc = json.loads(OUT.read_text())
    lines = [
        "| problem (CG, 20 iterations) | float32, float32 sums (before) | float32, float64 sums "
        "| float64 data |",
        "|---|---:|---:|---:|",
    ]
    for label, row in doc["rows"].items():
        cells = [f"{row[mode]['fit_s']:.1f} s" for mode in MODES]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(f"\nMeasured {doc['date']} on {doc['machine']}; median of 3 fresh processes.")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run")
    sub.add_parser("table")
    f = sub.add_parser("fit")
    f.add_argument("mode", choices=MODES)
    f.add_argument("n", type=int)
    f.add_argument("m", type=int)
    f.add_argument("d", type=int)
    f.add_argument("cache", choices=["auto", "no"])
    a = ap.parse_args()
    if a.cmd == "fit":
        print(json.dumps(fit(a.mode, a.n, a.m, a.d, a.cache)))
    elif a.cmd == "run":
        run()
    else:
        print("\n".join(table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
