"""Rows per streamed kernel block on the CPU at large m (issue 45): the rule against 4 MB.

    python benchmarks/block_rows.py run [--data p|mnist] [--n 200000] [--m 20000]
        [--max-iter 15] [--runs 3]
    python benchmarks/block_rows.py table

One CG fit at a fixed penalty, ``NystromRegressor(kernel, n_centers=m, penalty=1e-6,
max_iter=t, tol=0, validation_fraction=0, n_iter_no_change=None, random_state=0)`` with
every other parameter the default, on

- ``p``: problem P (``fresh.py``'s data: d = 20, y = sin of a projection plus noise 0.1),
  ``Gaussian(5.0)``, n training rows;
- ``mnist``: MNIST's 60,000 training images (d = 784, ``../shared/data``, pixels as they
  are, ``scale=False``), the ten digits one-hot as the targets, ``Gaussian(1000.0)`` (about
  the width the default screens for), n ignored.

Two modes, each fit in a fresh process, the modes alternating:

- ``rule``: the library as it is (``operators.kernel.streamed_block_rows``: at least
  ``MIN_BLOCK_ROWS`` rows within ``NARROW_BLOCK_MAX_BYTES``, ``WIDE_BLOCK_ROWS`` for data
  of ``WIDE_DATA_FEATURES`` or more);
- ``bytes``: the rule before, 4 MB of kernel entries per block (``BLOCK_BYTES``), at
  least 16 rows.

Reported: the median fit time, the test metric (RMSE on P's 50,000 test points, error on
MNIST's 10,000 test images), the operator's rows per block, the share of K_nm the budget
plans to cache and the share each run kept (the cache's fill stops where its page faults
cost more than they save), peak resident memory. Writes ``results/block_rows.json`` (one
entry per data, n and m).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent / "shared"
OUT = HERE / "results" / "block_rows.json"
MODES = ("rule", "bytes")


def _data(kind: str, path: str) -> tuple[np.ndarray, ...]:
    sys.path.insert(0, str(HERE))
    if kind == "p":
        from fresh import _load

        return _load(path, "float64")
    from kernelpath.datasets import load_shared

    d = load_shared("mnist", root=path)
    onehot = np.eye(10)[d["y_train"].astype(int)]
    return d["X_train"].astype(np.float64), onehot, d["X_test"].astype(np.float64), d["y_test"]


def worker(kind: str, path: str, m: str, max_iter: str, mode: str) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from fresh import PeakMemory

    import kernelpath as kp
    from kernelpath.operators import kernel as K

    if mode == "bytes":
        K.streamed_block_rows = lambda row_bytes, d: max(16, K.BLOCK_BYTES // row_bytes)
    seen: list[tuple[int, float]] = []
    make = K.KernelOperator.__init__

    def init(self: Any, *args: Any, **kw: Any) -> None:
        make(self, *args, **kw)
        seen.append((self.block_rows, self.cached_fraction))

    K.KernelOperator.__init__ = init  # type: ignore[method-assign]
    from kernelpath.operators.cache import RowCache

    filled: list[float] = []  # the share of K_nm each filled cache kept (its fill may stop)
    product = RowCache.run

    def run(self: Any, fn: Any, passes: Any) -> Any:
        filling = self.n_cached > 0 and not self.filled
        out = product(self, fn, passes)
        if filling:
            filled.append(self.n_cached / max(1, self.n))
        return out

    RowCache.run = run  # type: ignore[method-assign]
    X, y, Xt, yt = _data(kind, path)
    sigma = 5.0 if kind == "p" else 1000.0
    est = kp.NystromRegressor(
        kp.Gaussian(sigma),
        n_centers=int(m),
        penalty=1e-6,
        max_iter=int(max_iter),
        tol=0.0,
        validation_fraction=0.0,
        n_iter_no_change=None,
        random_state=0,
        **({} if kind == "p" else {"scale": False}),
    )
    with PeakMemory() as mem:
        t = time.perf_counter()
        est.fit(X, y)
        sec = time.perf_counter() - t
    pred = est.predict(Xt)
    if kind == "p":
        metric = float(np.sqrt(np.mean((pred - yt) ** 2)))
    else:
        metric = float(np.mean(pred.argmax(axis=1) != yt))
    rows, cached = max(seen, key=lambda s: s[0]) if seen else (0, 0.0)
    return {
        "fit_s": sec,
        "metric": metric,
        "block_rows": rows,
        "cached_fraction": cached,
        "kept_fraction": max(filled) if filled else 0.0,
        "peak_mb": mem.mb,
    }


def run(kind: str, n: int, m: int, max_iter: int, runs: int) -> None:
    sys.path.insert(0, str(HERE))
    from run import machine_info

    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    machine = machine_info()  # this machine's ceilings, measured in the same run
    got: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "p":
            path = tmp
            cmd = [sys.executable, str(HERE / "fresh.py"), "data", "--n", str(n), "--out", tmp]
            subprocess.run(cmd, check=True)
        else:
            path, n = str(ROOT / "data"), 60_000
        for _ in range(runs):
            for mode in MODES:
                out = subprocess.run(
                    [sys.executable, __file__, "worker", kind, path, str(m), str(max_iter), mode],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                got[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(mode, json.dumps(got[mode][-1], default=float), flush=True)
    entry: dict[str, Any] = {"data": kind, "n": n, "m": m, "max_iter": max_iter}
    for mode, rows in got.items():
        times = [r["fit_s"] for r in rows]
        entry[mode] = {
            "fit_s": statistics.median(times),
            "fit_s_all": times,
            "peak_mb": max(r["peak_mb"] for r in rows),
            **{k: rows[0][k] for k in ("metric", "block_rows", "cached_fraction")},
            "kept_all": [r.get("kept_fraction") for r in rows],
        }
    entry["machine"] = machine
    res[f"{kind}/{n}/{m}"] = entry
    OUT.write_text(json.dumps(res, indent=2, default=float) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "| data | n | m | CG iterations | rows per block: rule / 4 MB | K_nm cached "
        "| fit (s): rule | 4 MB | speed-up | test metric: rule / 4 MB |",
        "|---|---:|---:|---:|---|---|---:|---:|---:|---|",
    ]
    for e in res.values():
        a, b = e["rule"], e["bytes"]
        name = "P (RMSE)" if e["data"] == "p" else "MNIST (error)"
        k = len(a["fit_s_all"])
        how = f" (median of {k})" if k > 1 else ""
        kept = [x for x in a.get("kept_all", []) + b.get("kept_all", []) if x is not None]
        share = f"{a['cached_fraction']:.0%} planned"
        if kept:
            share += f", {min(kept):.0%}–{max(kept):.0%} kept"
        lines.append(
            f"| {name} | {e['n']:,} | {e['m']:,} | {e['max_iter']} "
            f"| {a['block_rows']} / {b['block_rows']} | {share} "
            f"| {a['fit_s']:.1f}{how} | {b['fit_s']:.1f} | {b['fit_s'] / a['fit_s']:.2f}× "
            f"| {a['metric']:.4f} / {b['metric']:.4f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--data", choices=["p", "mnist"], default="p")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--m", type=int, default=20_000)
    ap.add_argument("--max-iter", type=int, default=15)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(*a.args), default=float))
    elif a.mode == "run":
        run(a.data, a.n, a.m, a.max_iter, a.runs)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
