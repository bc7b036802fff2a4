"""Rows of a product's pieces at large m: one operator product against the rows of its widened
pieces and cached blocks (``operators.kernel.PRODUCT_MIN_ROWS``, stop 68; issue 45).

    python benchmarks/product_pieces.py run [--ms 20000,40000,5000] [--cs 3,10,30]
        [--rows before,now,32,64,128] [--dtypes float32,float64] [--n-entries 240000000]
    python benchmarks/product_pieces.py table

A ``KernelOperator`` over random data (d = 784, uniform on [0, 1), ``Gaussian(28)``) with
``n = n-entries / m`` rows, all of K_nm cached (the cache filled by a first product), the
default workers (one per core); its products with a float64 right side of c columns, the
way CG's passes make them: ``fused`` (K_nm^T (K_nm B)) and ``matvec`` (K_nm B), each the
best of 3. A float32 operator widens its blocks into float64 pieces; a float64 one reads
its cached blocks as they are. ``rows``:

- ``before``: the rule before stop 68: pieces of ``WIDE_BLOCK_BYTES`` (1 MB, at least one
  row), cached blocks of 2 MB for products of more than 6 columns and 8 MB up to 6, at
  least 16 rows;
- ``now``: the library's rule: pieces of 1 MB and cached blocks of 2 MB / 8 MB, each at
  least ``PRODUCT_MIN_ROWS`` = 64 rows (a piece at most a block's rows);
- a number: pieces and cached blocks of exactly that many rows.

Every (m, dtype, rows) runs in a fresh process, in turn. Writes
``results/product_pieces.json``.
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

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "product_pieces.json"


def worker(m: int, dtype: str, rows: str, cs: list[int], n_entries: int) -> dict[str, Any]:
    """The products of one operator with the pieces' rows set to ``rows``."""
    from kernelpath import Gaussian
    from kernelpath.operators import kernel as K
    from kernelpath.workspace import Workspace

    if rows == "now":
        pass  # the library's rule
    elif rows == "before":
        K.PRODUCT_MIN_ROWS = 16  # the cached blocks' floor before
        K.wide_piece_rows = lambda m_, block_rows: max(1, K.WIDE_BLOCK_BYTES // (8 * m_))
    else:
        r = int(rows)
        K.PRODUCT_MIN_ROWS = r
        K.WIDE_BLOCK_BYTES = K.CACHED_GEMM_BLOCK_BYTES = K.CACHED_GEMV_BLOCK_BYTES = 1
    rng = np.random.default_rng(0)
    n = max(1, n_entries // m)
    X = rng.random((n, 784)).astype(dtype)
    C = rng.random((m, 784)).astype(dtype)
    op = Workspace.of("16GB").operator(X, C, Gaussian(28.0), cache=True)
    out: dict[str, Any] = {"n": n, "piece_rows": op._piece_rows, "workers": op.n_jobs}
    for c in cs:
        B = rng.random((m, c))
        op.fused(B)  # fills the cache (and warms the pieces)
        fused, matvec = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            op.fused(B)
            t1 = time.perf_counter()
            op.matvec(B)
            matvec.append(time.perf_counter() - t1)
            fused.append(t1 - t0)
        out[str(c)] = {"fused_s": min(fused), "matvec_s": min(matvec)}
    return out


def run(ms: list[int], cs: list[int], rows: list[str], dtypes: list[str], n_entries: int) -> None:
    sys.path.insert(0, str(HERE))
    from run import machine_info

    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    res["machine"] = machine_info()
    for m in ms:
        for dtype in dtypes:
            for r in rows:
                cmd = [sys.executable, __file__, "worker", str(m), dtype, r]
                cmd += [",".join(map(str, cs)), str(n_entries)]
                done = subprocess.run(cmd, capture_output=True, text=True, check=True)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                res[f"{m}/{dtype}/{r}"] = {"m": m, "dtype": dtype, "rows": r, **got}
                print(m, dtype, r, json.dumps(got), flush=True)
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    entries = [v for k, v in res.items() if k != "machine"]
    cs = sorted({int(c) for e in entries for c in e if c.isdigit()})
    head = "| m | dtype | rows | " + " | ".join(f"fused, c = {c}" for c in cs)
    head += " | " + " | ".join(f"matvec, c = {c}" for c in cs) + " |"
    lines = [head, "|---:|---|---|" + "---:|" * (2 * len(cs))]

    def cell(e: dict[str, Any], c: int, key: str) -> str:
        return f"{e[str(c)][key]:.3f}" if str(c) in e else ""

    def order(e: dict[str, Any]) -> tuple[int, str, int]:
        named = {"before": -2, "now": -1}
        return (e["m"], e["dtype"], named.get(e["rows"], 0) or int(e["rows"]))

    for e in sorted(entries, key=order):
        names = {"before": "before (1 MB / 2 MB)", "now": "**now** (at least 64)"}
        rows = names.get(e["rows"], e["rows"])
        rows += f" ({e['piece_rows']})" if e["dtype"] == "float32" else ""
        line = f"| {e['m']:,} | {e['dtype']} | {rows} | "
        line += " | ".join(cell(e, c, "fused_s") for c in cs) + " | "
        line += " | ".join(cell(e, c, "matvec_s") for c in cs) + " |"
        lines.append(line)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--ms", default="20000,40000,5000")
    ap.add_argument("--cs", default="3,10,30")
    ap.add_argument("--rows", default="before,now,32,64,128")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--n-entries", type=int, default=240_000_000)
    a = ap.parse_args()
    if a.mode == "worker":
        m, dtype, rows, cs, n_entries = a.args
        got = worker(int(m), dtype, rows, [int(c) for c in cs.split(",")], int(n_entries))
        print(json.dumps(got))
    elif a.mode == "run":
        ms = [int(m) for m in a.ms.split(",")]
        cs = [int(c) for c in a.cs.split(",")]
        run(ms, cs, a.rows.split(","), a.dtypes.split(","), a.n_entries)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
