"""Problem P beyond memory: the same fit with X in memory, read from HDF5 / Parquet in row
blocks, and on a Dask ``LocalCluster`` reading zarr chunks.

    python benchmarks/out_of_core.py [--n 1000000] [--rounds 3] [--dir DIR]
    python benchmarks/out_of_core.py --table     # the tables (Markdown) from the results

P (the foundation benchmark): x ~ N(0, I_20), y = sin<w, x> + 0.1 eps; Nyström CG with
m = 2000 uniform centers, λ = 1e-6, 20 iterations, σ = 5, no hold-out. The data are written
once (zarr with 125,000-row chunks, HDF5, Parquet with 65,536-row groups). Each fit runs in
a fresh process, the modes alternating, ``--rounds`` times; the median fit time, the peak
resident memory of the process above its start (the cluster's workers: their peak, read
from the scheduler) and the largest coefficient difference from the in-memory fit are
recorded in ``results/out_of_core.json``.

Modes:
- ``memory``: X loaded from .npy, ``memory_budget="2GB"`` (the in-process streamed fit);
- ``hdf5`` / ``parquet``: X read in blocks (``kernelpath.data``), ``memory_budget="2GB"``;
- ``dask``: ``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB")``, X a
  dask array of the zarr chunks, ``memory_budget="256MB"`` per worker.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "out_of_core.json"
D = 20
BLOCK = 125_000
# worker log lines that report memory pressure (spilling, pausing, restarts)
WORKER_MEMORY_WORDS = ("spill", "paus", "unmanaged memory", "memory limit", "terminat", "restart")


def write_data(folder: Path, n: int) -> None:
    """P's data in every format, written block by block."""
    import h5py
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zarr

    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "done").exists():
        return
    rng = np.random.default_rng(0)
    w = rng.standard_normal(D)
    w /= np.linalg.norm(w)
    Xm = np.lib.format.open_memmap(folder / "X.npy", "w+", np.float64, (n, D))
    ym = np.lib.format.open_memmap(folder / "y.npy", "w+", np.float64, (n,))
    z = zarr.open_array(folder / "X.zarr", mode="w", shape=(n, D), chunks=(BLOCK, D), dtype="f8")
    zy = zarr.open_array(folder / "y.zarr", mode="w", shape=(n,), chunks=(BLOCK,), dtype="f8")
    names = [f"x{j}" for j in range(D)]
    schema = pa.schema([(c, pa.float64()) for c in names] + [("y", pa.float64())])
    with (
        h5py.File(folder / "P.h5", "w") as h5,
        pq.ParquetWriter(folder / "P.parquet", schema) as pw,
    ):
        hx = h5.create_dataset("X", (n, D), "f8")
        hy = h5.create_dataset("y", (n,), "f8")
        for s in range(0, n, BLOCK):
            e = min(n, s + BLOCK)
            X = rng.standard_normal((e - s, D))
            y = np.sin(X @ w) + 0.1 * rng.standard_normal(e - s)
            Xm[s:e], ym[s:e], z[s:e], zy[s:e], hx[s:e], hy[s:e] = X, y, X, y, X, y
            cols = {c: X[:, j] for j, c in enumerate(names)}
            table = pa.table({**cols, "y": y}, schema=schema)
            pw.write_table(table, row_group_size=65_536)
    Xm.flush()
    ym.flush()
    (folder / "done").write_text("ok")


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _estimator(budget: str) -> Any:
    from kernelpath import Gaussian, NystromRegressor

    return NystromRegressor(
        Gaussian(5.0),
        penalty=1e-6,
        n_centers=2000,
        solver="cg",
        max_iter=20,
        tol=0.0,
        n_iter_no_change=None,
        validation_fraction=0.0,
        memory_budget=budget,
        random_state=0,
    )


def _worker_memory(dask_worker: Any) -> dict[str, int]:
    """A worker's resident memory and the bytes it has spilled to disk in all."""
    import psutil

    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    written = sum(
        v for (label, unit), v in metrics.items() if "disk-write" in str(label) and unit == "bytes"
    )
    return {"rss": psutil.Process().memory_info().rss, "spilled": int(written)}


def worker(mode: str, folder: Path) -> dict[str, Any]:
    """One fit; returns time, peak memory and the coefficients' file."""
    base = _rss()
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.01)

    extra: dict[str, Any] = {}
    cluster = client = None
    if mode == "memory":
        X, y = np.load(folder / "X.npy"), np.load(folder / "y.npy")
        budget = "2GB"
    elif mode == "hdf5":
        import h5py

        h5 = h5py.File(folder / "P.h5", "r")
        X, y = h5["X"], h5["y"]
        budget = "2GB"
    elif mode == "parquet":
        from kernelpath import read_table

        X, y = read_table(folder / "P.parquet", target="y")
        budget = "2GB"
    else:
        import dask.array as da
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit="1GB", dashboard_address=None
        )
        client = Client(cluster)
        X = da.from_zarr(str(folder / "X.zarr"))
        y = np.load(folder / "y.npy")
        budget = "256MB"
    base = _rss()  # after loading (memory) or opening the data and starting the cluster
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    est = _estimator(budget)
    t0 = time.perf_counter()
    est.fit(X, y)
    sec = time.perf_counter() - t0
    stop.set()
    t.join()
    if client is not None:
        logs = client.run(_worker_memory)
        extra["worker_rss_end_mb"] = [v["rss"] / 1e6 for v in logs.values()]
        extra["worker_spilled_mb"] = [v["spilled"] / 1e6 for v in logs.values()]
        extra["workers_at_end"] = len(logs)
        text = " ".join(msg for w in client.get_worker_logs().values() for _, msg in w)
        extra["worker_paused"] = "paused" in text.lower()
        extra["worker_memory_log_lines"] = [
            msg[:200]
            for w in client.get_worker_logs().values()
            for _, msg in w
            if any(k in msg.lower() for k in WORKER_MEMORY_WORDS)
        ][:4]
        client.close()
        cluster.close()
    coef = np.asarray(est.coef_)
    np.save(folder / f"coef_{mode}.npy", coef)
    return {
        "mode": mode,
        "time": sec,
        "peak_rss_mb": (peak[0] - base) / 1e6,
        "peak_rss_total_mb": peak[0] / 1e6,
        **extra,
    }


def summarize(runs: dict[str, list[dict[str, Any]]], folder: Path, n: int) -> dict[str, Any]:
    """Medians of the fits so far, written to ``results/out_of_core.json``."""
    modes = [m for m, rs in runs.items() if rs]
    ref = np.load(folder / "coef_memory.npy") if "memory" in modes else None
    result: dict[str, Any] = {"n": n, "d": D, "m": 2000, "iterations": 20, "modes": {}}
    for m in modes:
        rs = runs[m]
        times = [r["time"] for r in rs]
        med = rs[int(np.argsort(times)[len(times) // 2])]
        entry = {**med, "times": times}
        if ref is not None:
            c = np.load(folder / f"coef_{m}.npy")
            entry["max_rel_coef_diff_vs_memory"] = float(np.abs(c - ref).max() / np.abs(ref).max())
        result["modes"][m] = entry
    if "memory" in result["modes"]:
        tm = result["modes"]["memory"]["time"]
        for m in result["modes"]:
            result["modes"][m]["time_ratio_vs_memory"] = result["modes"][m]["time"] / tm
    OUT.parent.mkdir(exist_ok=True)
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    old[f"n={n}"] = result
    OUT.write_text(json.dumps(old, indent=2) + "\n")
    return result


#: how each mode is described in the table, and its target where the issue set one
MODE_ROWS = {
    "memory": ('`.npy` in memory, `memory_budget="2GB"`', ""),
    "hdf5": ('HDF5 file, `memory_budget="2GB"`', "≤ 3 GB"),
    "parquet": ('Parquet (row groups of 65,536), `"2GB"`', "≤ 3 GB"),
    "dask": (
        f"zarr as a dask array ({BLOCK:,}-row chunks), `LocalCluster(n_workers=2, "
        'threads_per_worker=1, memory_limit="1GB")`, 256 MB per worker',
        "≤ 1.5×, no spilling",
    ),
}


def table() -> str:
    """One Markdown table per size in ``results/out_of_core.json``."""
    parts = []
    for r in sorted(json.loads(OUT.read_text()).values(), key=lambda r: r["n"]):
        modes = r["modes"]
        rounds = max(len(e["times"]) for e in modes.values())
        parts += [
            f"n = {r['n']:,} ({8 * r['n'] * r['d'] / 1e9:.2g} GB of float64 X), "
            f"{'median of ' + str(rounds) if rounds > 1 else 'one round'}:",
            "",
            "| X read from | fit time | vs in memory | peak RSS | coefficients vs in memory "
            "| target |",
            "|---|---|---|---|---|---|",
        ]
        for mode, e in modes.items():
            what, target = MODE_ROWS[mode]
            rss = f"{e['peak_rss_total_mb'] / 1e3:.2f} GB"
            if "worker_rss_end_mb" in e:
                each = max(e["worker_rss_end_mb"])
                rss += f" (workers ~{each:.0f} MB each)"
                spilled = sum(e.get("worker_spilled_mb", [0.0]))
                target += f"; spilled {spilled:.0f} MB" + (", paused" if e["worker_paused"] else "")
            diff = e["max_rel_coef_diff_vs_memory"]
            diff_s = "identical" if diff == 0 else f"{diff:.0e} relative"
            diff_s = "—" if mode == "memory" else diff_s
            ratio = e["time_ratio_vs_memory"]
            rows = f"| {what} | {e['time']:.0f} s | {ratio:.2f}× | {rss} | {diff_s} | {target} |"
            parts.append(rows.replace("| 1.00× |", "| 1 |"))
        parts.append("")
    return "\n".join(parts).rstrip()


def main() -> int:
    if sys.argv[1:] == ["--table"]:
        print(table())
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kernelpath-ooc")
    ap.add_argument("--modes", default="memory,hdf5,parquet,dask")
    ap.add_argument("--worker", default=None)
    a = ap.parse_args()
    folder = Path(a.dir) / f"n{a.n}"
    if a.worker:
        print(json.dumps(worker(a.worker, folder)), flush=True)
        return 0
    t = time.perf_counter()
    write_data(folder, a.n)
    print(f"data ready ({time.perf_counter() - t:.0f} s)", flush=True)
    modes = a.modes.split(",")
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m in modes:
            cmd = [sys.executable, __file__, "--n", str(a.n), "--dir", a.dir, "--worker", m]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True)
            runs[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(m, runs[m][-1], flush=True)
            summarize(runs, folder, a.n)  # kept after every fit: a stopped run leaves its rounds
    result = summarize(runs, folder, a.n)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
