"""float32 CG: the compact factor's jitter against the full factor's cut at float32's rounding,
and the float32 factor of float64 data against the low-rank preconditioner (issue 45), test
RMSE against the float64 fit on the same centers.

    python benchmarks/compact_float32.py run      # writes results/compact_float32.json
    python benchmarks/compact_float32.py table

Each row fits ``iterative_path`` (CG, 20 iterations, λ = 1e-6, no validation) three times on
the same rows and centers: float64 with the full factor, float32 with the full factor (its
float64 factor of the float32 K_mm keeps eigenvalues above eps_32 sqrt(m) s_max:
``factor_layout="eigh"``, what ``auto`` picks there) and float32 with the compact factor
(``factor_layout="compact"``, jitter eps_32 sqrt(m) mean K_ii, grown tenfold until it
factors). Problems: ``tests/test_compact.py``'s (x ~ N(0, I_10), y = sin<w, x> + 0.1 eps,
|w| ~ 1) at three widths, and problem P (``benchmarks/run.py``: x ~ N(0, I_20)) at three
sizes. The GPU row of docs/design.md's table is ``benchmarks/gpu.py``'s.

Two more fits on the float64 data: the compact factor in float32 (``factor_layout="compact"``
with ``memory_limit`` the float32 buffer's size, where the layout rule takes it: no float64
buffer fits) and the low-rank preconditioner (rank 1,000, what the rule took there before),
each with the same 20 iterations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "compact_float32.json"

#: (label, n, d, m, sigma, w scale)
PROBLEMS = [
    ("n = 20,000, d = 10, m = 2,000, σ = 3", 20_000, 10, 2000, 3.0, "third"),
    ("n = 20,000, d = 10, m = 2,000, σ = 10", 20_000, 10, 2000, 10.0, "third"),
    ("n = 20,000, d = 10, m = 2,000, σ = 30", 20_000, 10, 2000, 30.0, "third"),
    ("P, n = 60,000, m = 6,000, σ = 12", 60_000, 20, 6000, 12.0, "sqrt"),
    ("P, n = 100,000, m = 3,000, σ = 5", 100_000, 20, 3000, 5.0, "sqrt"),
    ("P, n = 100,000, m = 8,000, σ = 5", 100_000, 20, 8000, 5.0, "sqrt"),
]


def row(n: int, d: int, m: int, sigma: float, scale: str) -> dict[str, Any]:
    from run import sine_problem

    from kernelpath.kernels import Gaussian
    from kernelpath.solvers.iterative import IterativeOptions, cg_memory, iterative_path
    from kernelpath.workspace import Workspace

    X, y, Xt, yt, C = sine_problem(n, d, m, 3.0 if scale == "third" else np.sqrt(d))
    ws = Workspace.of(None, None)
    kernel = Gaussian(sigma)
    test = ws.operator(Xt, C, kernel)
    out: dict[str, Any] = {}
    buffer32 = cg_memory(m, 1, 1e-6, 20, 0, True, "compact", 4, 1)  # float32, one anchor
    for name, dtype, layout, limit in (
        ("float64", np.float64, "cholesky", None),
        ("float32_full", np.float32, "eigh", None),
        ("float32_compact", np.float32, "compact", None),
        ("float64_compact32", np.float64, "compact", buffer32),
        ("float64_lowrank", np.float64, "lowrank", None),
    ):
        op = ws.operator(X.astype(dtype), C.astype(dtype), kernel)
        t = time.perf_counter()
        path = iterative_path(
            op,
            y,
            1e-6,
            IterativeOptions(
                method="cg",
                max_iter=20,
                tol=0.0,
                n_iter_no_change=None,
                factor_layout=layout,
                memory_limit=limit,
            ),
        )
        sec = time.perf_counter() - t
        pred = np.ravel(test.matvec(np.asarray(path.coef(path.best_index), dtype=float)))
        out[name] = {
            "test_rmse": float(np.sqrt(np.mean((pred - yt) ** 2))),
            "fit_s": sec,
            "rank": path.info.get("rank"),
            "jitter": path.info.get("jitter"),
            "factor_dtype": path.info.get("factor_dtype"),
        }
        print(name, out[name], flush=True)
    return out


#: The columns after float64's: (key, heading).
COLUMNS = (
    ("float32_full", "float32, full factor (cut)"),
    ("float32_compact", "float32, compact (jitter)"),
    ("float64_compact32", "float64 data, float32 compact factor"),
    ("float64_lowrank", "float64 data, low-rank (r = 1,000)"),
)


def table(doc: dict[str, Any]) -> list[str]:
    lines = [
        "| problem | float64 (s) | " + " | ".join(h for _, h in COLUMNS) + " | jitter |",
        "|---|---:|" + "---:|" * len(COLUMNS) + "---:|",
    ]
    for label, r in doc["rows"].items():
        ref = r["float64"]["test_rmse"]
        cells = [f"{ref:.4f} ({r['float64']['fit_s']:.0f} s)"]
        for key, _ in COLUMNS:
            if key not in r:  # a row measured before the column existed
                cells.append("—")
                continue
            v = r[key]["test_rmse"]
            cells.append(f"{v:.4f} ({100 * (v / ref - 1):+.1f}%, {r[key]['fit_s']:.0f} s)")
        cells.append(f"{r['float32_compact']['jitter']:.1e}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["run", "table"])
    a = ap.parse_args()
    if a.cmd == "run":
        rows = {}
        for label, *args in PROBLEMS:
            print(label, flush=True)
            rows[label] = row(*args)
            OUT.write_text(json.dumps({"rows": rows}, indent=1))
    print("\n".join(table(json.loads(OUT.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
