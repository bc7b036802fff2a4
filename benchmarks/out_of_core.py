"""Data beyond memory: problem P read from HDF5, Parquet and a Dask cluster against the same
fit in memory, and sparse rows against the same rows dense; every measurement in a fresh
process.

    python benchmarks/run.py out_of_core run [--n 1000000] [--rounds 3] [--modes memory,dask]
    python benchmarks/run.py out_of_core sparse [--parts adult,wide,peaks] [--runs 3]
    python benchmarks/run.py out_of_core table          # results/out_of_core.json
    python benchmarks/run.py out_of_core sparse-table   # results/sparse.json
    python benchmarks/run.py out_of_core kills-table    # results/dask_kills.json

``run``: P (x ~ N(0, I_20), y = sin<w, x> + 0.1 eps), Nyström CG with m = 2000 uniform
centers, λ = 1e-6, 20 iterations, σ = 5, no hold-out. The data are written once (zarr with
125,000-row chunks, HDF5, Parquet with 65,536-row groups); the modes alternate for
``--rounds`` rounds, and the median fit time, the peak resident memory (the cluster's
workers: their memory at the end) and the largest coefficient difference from the
in-memory fit are recorded. Modes: ``memory`` (X loaded from .npy, ``memory_budget="2GB"``),
``hdf5`` and ``parquet`` (X read in row blocks, ``"2GB"``), ``dask``
(``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB")``, X a dask array of
the zarr chunks, ``memory_budget="256MB"`` per worker).

``sparse``:

- ``adult``: the default ``NystromClassifier`` on adult (32,561 x 123, 11% of the entries
  stored) from CSR and from the same rows dense, alternating, median of ``--runs``; the test
  error of each and the largest difference of their scores;
- ``wide``: 100,000 rows x 1,000,000 features, 50 word counts a row drawn from one of 200
  topics (its dense form: 800 GB): ``NystromRegressor(n_centers=1000,
  memory_budget="2GB")`` fitted on 90,000 rows, predicting the other 10,000, its peak
  resident memory, and one operator pass (K_nm v, 1,000 CSR centers) against a pass over
  100,000 dense rows of 50 features (the same stored entries a row);
- ``peaks``: every batch estimator (defaults, ``random_state=0``) fitted on adult's first
  8,000 rows as CSR (exact KRLS: 2,500) with ``memory_budget="200MB"``: the traced peak
  (tracemalloc) against the budget plus the CSR arrays, and the dense X it never builds.

The worker-loss check on a Dask cluster is a test (``tests/test_slow_dask_kills.py``);
``kills-table`` tabulates its recorded run.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import fresh as h
import numpy as np

D = 20
BLOCK = 125_000
ADULT = h.SHARED / "data" / "adult"
# worker log lines that report memory pressure (spilling, pausing, restarts)
WORKER_MEMORY_WORDS = ("spill", "paus", "unmanaged memory", "memory limit", "terminat", "restart")
#: how each mode is described in the table, and its target
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
PEAK_ESTIMATORS = [
    f"{family}{task}"
    for family in ("Nystrom", "NYTRO", "KRLS", "RandomFeatures", "SGM", "EigenPro")
    for task in ("Regressor", "Classifier")
]


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
            pw.write_table(pa.table({**cols, "y": y}, schema=schema), row_group_size=65_536)
    Xm.flush()
    ym.flush()
    (folder / "done").write_text("ok")


def _worker_memory(dask_worker: Any) -> dict[str, int]:
    """A worker's resident memory and the bytes it has spilled to disk in all."""
    import psutil

    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    written = sum(
        v for (label, unit), v in metrics.items() if "disk-write" in str(label) and unit == "bytes"
    )
    return {"rss": psutil.Process().memory_info().rss, "spilled": int(written)}


def _cluster_report(client: Any) -> dict[str, Any]:
    logs = client.run(_worker_memory)
    lines = [msg for w in client.get_worker_logs().values() for _, msg in w]
    return {
        "worker_rss_end_mb": [v["rss"] / 1e6 for v in logs.values()],
        "worker_spilled_mb": [v["spilled"] / 1e6 for v in logs.values()],
        "workers_at_end": len(logs),
        "worker_paused": "paused" in " ".join(lines).lower(),
        "worker_memory_log_lines": [
            msg[:200] for msg in lines if any(k in msg.lower() for k in WORKER_MEMORY_WORDS)
        ][:4],
    }


def fit_mode(mode: str, folder: str) -> dict[str, Any]:
    """One fit of P with X read the way ``mode`` says; its coefficients saved beside."""
    from kernelpath import Gaussian, NystromRegressor

    where, cluster, client = Path(folder), None, None
    budget = "256MB" if mode == "dask" else "2GB"
    if mode == "memory":
        X, y = np.load(where / "X.npy"), np.load(where / "y.npy")
    elif mode == "hdf5":
        import h5py

        h5 = h5py.File(where / "P.h5", "r")
        X, y = h5["X"], h5["y"]
    elif mode == "parquet":
        from kernelpath import read_table

        X, y = read_table(where / "P.parquet", target="y")
    else:
        import dask.array as da
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit="1GB", dashboard_address=None
        )
        client = Client(cluster)
        X, y = da.from_zarr(str(where / "X.zarr")), np.load(where / "y.npy")
    est = NystromRegressor(
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
    with h.PeakMemory() as mem:  # from after the data are open and the cluster is up
        _, sec, _ = h.timed(lambda: est.fit(X, y))
    extra = {}
    if client is not None:
        extra = _cluster_report(client)
        client.close()
        cluster.close()
    np.save(where / f"coef_{mode}.npy", np.asarray(est.coef_))
    out = {"mode": mode, "time": sec, "peak_rss_mb": mem.mb}
    return {**out, "peak_rss_total_mb": mem.peak / 1e6, **extra}


def run(
    n: int = 1_000_000,
    rounds: int = 3,
    data_dir: str = "/tmp/kernelpath-ooc",
    modes: str = "memory,hdf5,parquet,dask",
) -> str:
    """The modes alternating in fresh processes; results/out_of_core.json keeps each n."""
    folder = Path(data_dir) / f"n{n}"
    write_data(folder, n)
    jobs = {
        m: (lambda _, m=m: h.call("out_of_core", "fit_mode", mode=m, folder=str(folder)))
        for m in h.names(modes)
    }
    runs = h.rounds(jobs, rounds)
    ref = np.load(folder / "coef_memory.npy") if "memory" in runs else None
    result: dict[str, Any] = {"n": n, "d": D, "m": 2000, "iterations": 20, "modes": {}}
    for m, rs in runs.items():
        entry = h.median_round(rs, "time")
        if ref is not None:
            c = np.load(folder / f"coef_{m}.npy")
            entry["max_rel_coef_diff_vs_memory"] = float(np.abs(c - ref).max() / np.abs(ref).max())
        result["modes"][m] = entry
    for entry in result["modes"].values():
        if "memory" in result["modes"]:
            entry["time_ratio_vs_memory"] = entry["time"] / result["modes"]["memory"]["time"]
    h.record("out_of_core", f"n={n}", result)
    return table()


def table() -> str:
    """One table per n: each way of reading X, its time, memory and coefficients."""
    parts = []
    for r in sorted(h.load("out_of_core").values(), key=lambda r: r["n"]):
        modes = r["modes"]
        rounds = max(len(e["times"]) for e in modes.values())
        parts += [
            f"n = {r['n']:,} ({8 * r['n'] * r['d'] / 1e9:.2g} GB of float64 X), "
            f"{'median of ' + str(rounds) if rounds > 1 else 'one round'}:",
            "",
        ]
        cells = []
        for mode, e in modes.items():
            what, target = MODE_ROWS[mode]
            rss = f"{e['peak_rss_total_mb'] / 1e3:.2f} GB"
            if "worker_rss_end_mb" in e:
                rss += f" (workers ~{max(e['worker_rss_end_mb']):.0f} MB each)"
                spilled = sum(e.get("worker_spilled_mb", [0.0]))
                target += f"; spilled {spilled:.0f} MB" + (", paused" if e["worker_paused"] else "")
            diff = e["max_rel_coef_diff_vs_memory"]
            same = "—" if mode == "memory" else "identical" if diff == 0 else f"{diff:.0e} relative"
            ratio = e["time_ratio_vs_memory"]
            cells.append(
                [
                    what,
                    f"{e['time']:.0f} s",
                    "1" if mode == "memory" else f"{ratio:.2f}×",
                    rss,
                    same,
                    target,
                ]
            )
        header = [
            "X read from",
            "fit time",
            "vs in memory",
            "peak RSS",
            "coefficients vs in memory",
        ]
        parts += [h.markdown([*header, "target"], cells, "lrrrll"), ""]
    return "\n".join(parts).rstrip()


# ------------------------------------------------------------------ sparse rows
def _adult() -> tuple[Any, np.ndarray, Any, np.ndarray]:
    from sklearn.datasets import load_svmlight_file

    Xtr, ytr = load_svmlight_file(str(ADULT / "adult.trn.bz2"), n_features=123)
    Xte, yte = load_svmlight_file(str(ADULT / "adult.tst.bz2"), n_features=123)
    return Xtr.tocsr(), ytr, Xte.tocsr(), yte


def sparse_adult(kind: str, scores_out: str) -> dict[str, Any]:
    import kernelpath as kp

    Xtr, ytr, Xte, yte = _adult()
    if kind == "dense":
        Xtr, Xte = Xtr.toarray(), Xte.toarray()
    est, fit_s, _ = h.timed(lambda: kp.NystromClassifier(random_state=0).fit(Xtr, ytr))
    np.save(scores_out, est.decision_function(Xte))
    return {
        "fit_s": fit_s,
        "test_error": float(np.mean(est.predict(Xte) != yte)),
        "params": {k: float(v) for k, v in est.best_params_.items()},
    }


def _wide(n: int = 100_000, d: int = 1_000_000, k: int = 50) -> tuple[Any, np.ndarray]:
    """Documents of ``k`` word counts each over ``d`` words: 200 topics of 5,000 words (a
    word's weight within its topic ~ 1 / rank), a row draws its words from one topic; y is
    its topic's value plus noise (a kernel learns it from the words rows share)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    topics, vocab = 200, d // 200
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    t = rng.integers(0, topics, n)
    words = t[:, None] * vocab + rng.choice(vocab, size=(n, k), p=p)
    X = sp.csr_matrix((np.ones(n * k), (np.repeat(np.arange(n), k), words.ravel())), shape=(n, d))
    X.sum_duplicates()  # counts
    y = rng.standard_normal(topics)[t] + 0.1 * rng.standard_normal(n)
    return X, y


def sparse_wide_fit() -> dict[str, Any]:
    import kernelpath as kp

    X, y = _wide()
    est = kp.NystromRegressor(n_centers=1000, memory_budget="2GB", random_state=0)
    with h.PeakMemory() as mem:
        _, fit_s, _ = h.timed(lambda: est.fit(X[:90_000], y[:90_000]))
        pred, predict_s, _ = h.timed(lambda: est.predict(X[90_000:]))
    return {
        "fit_s": fit_s,
        "predict_10k_s": predict_s,
        "peak_mb": mem.mb,
        "test_rmse": h.rmse(pred, y[90_000:]),
        "y_std": float(np.std(y[90_000:])),
        "centers_sparse": bool(hasattr(est.centers_, "nnz")),
        "params": {k: float(v) for k, v in est.best_params_.items()},
    }


def sparse_pass(kind: str) -> dict[str, Any]:
    """Seconds of one K_nm v (median of 5 after one warm-up), 1,000 centers, no cache."""
    import kernelpath as kp
    from kernelpath.operators import KernelOperator

    if kind == "sparse":
        X = _wide()[0]
        C = X[:1000]
    else:
        X = np.random.default_rng(0).random((100_000, 50))
        C = X[:1000].copy()
    op = KernelOperator(X, C, kp.Gaussian(1.0), "2GB", cache=False)
    v = np.ones((1000, 1))
    op.matvec(v)
    return {"pass_s": statistics.median(h.timed(lambda: op.matvec(v))[1] for _ in range(5))}


def sparse_peak(name: str) -> dict[str, Any]:
    """An estimator's traced peak fitting adult's first rows as CSR within 200 MB."""
    import tracemalloc

    import kernelpath as kp

    X, y, _, _ = _adult()
    n = 2500 if name.startswith("KRLS") else 8000
    X, y = X[:n], y[:n]
    est = getattr(kp, name)(memory_budget="200MB", random_state=0)
    tracemalloc.start()
    _, seconds, _ = h.timed(lambda: est.fit(X, y))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "rows": n,
        "peak_mb": peak / 1e6,
        "budget_mb": 200,
        "csr_mb": (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 1e6,
        "dense_x_mb": X.shape[0] * X.shape[1] * 8 / 1e6,
        "fit_s_traced": seconds,
    }


def sparse(parts: str = "adult,wide,peaks", runs: int = 3) -> str:
    """The parts' measurements; each part replaces its entry of results/sparse.json."""
    import tempfile

    res, parts_run = h.load("sparse", {}), h.names(parts)
    if "adult" in parts_run:
        with tempfile.TemporaryDirectory() as tmp:
            jobs = {
                kind: (
                    lambda _, kind=kind: h.call(
                        "out_of_core", "sparse_adult", kind=kind, scores_out=f"{tmp}/{kind}.npy"
                    )
                )
                for kind in ("csr", "dense")
            }
            got = h.rounds(jobs, runs)
            diff = float(np.abs(np.load(f"{tmp}/csr.npy") - np.load(f"{tmp}/dense.npy")).max())
        res["adult"] = {
            kind: {**h.summary(rows, first=("test_error", "params"))} for kind, rows in got.items()
        }
        res["adult"].update(max_score_difference=diff, runs=runs)
    if "wide" in parts_run:
        fits = [h.call("out_of_core", "sparse_wide_fit") for _ in range(runs)]
        jobs = {
            k: (lambda _, k=k: h.call("out_of_core", "sparse_pass", kind=k))
            for k in ("sparse", "dense")
        }
        passes = h.rounds(jobs, runs)
        res["wide"] = {
            **h.summary(
                fits,
                median=("predict_10k_s",),
                first=("test_rmse", "y_std", "centers_sparse", "params"),
            ),
            "pass_sparse_s": statistics.median(r["pass_s"] for r in passes["sparse"]),
            "pass_dense_s": statistics.median(r["pass_s"] for r in passes["dense"]),
        }
    if "peaks" in parts_run:
        res["peaks"] = {
            name: h.call("out_of_core", "sparse_peak", name=name) for name in PEAK_ESTIMATORS
        }
    res["machine"] = h.machine()
    h.save("sparse", res)
    return sparse_table()


def sparse_table() -> str:
    """CSR against dense on adult, the wide synthetic set, and the estimators' traced peaks."""
    res, lines = h.load("sparse"), []
    if "adult" in res:
        a = res["adult"]
        c, d = a["csr"], a["dense"]
        cells = [
            [
                kind,
                f"{r['fit_s']:.2f}",
                f"{100 * r['test_error']:.2f}%",
                f"{r['params']['penalty']:.3g}",
            ]
            for kind, r in (("CSR", c), ("dense", d))
        ]
        lines += [
            h.markdown(
                ["adult, default NystromClassifier", "fit (s)", "test error", "penalty"],
                cells,
                "lrrl",
            ),
            "",
            f"CSR / dense fit time: {c['fit_s'] / d['fit_s']:.2f}; largest difference of the test "
            f"scores: {a['max_score_difference']:.2g} (median of {a['runs']} fresh processes each, "
            "alternating).",
        ]
    if "wide" in res:
        w = res["wide"]
        cells = [
            ["fit on 90,000 rows, n_centers=1000, memory_budget=2GB (s)", f"{w['fit_s']:.1f}"],
            ["predict 10,000 rows (s)", f"{w['predict_10k_s']:.2f}"],
            ["fit's peak resident memory above start (MB)", f"{w['peak_mb']:.0f}"],
            ["test RMSE / std of y (noise 0.1)", f"{w['test_rmse']:.3g} / {w['y_std']:.3g}"],
            ["one pass K_nm v, 1,000 CSR centers (s)", f"{w['pass_sparse_s']:.3f}"],
            ["one pass, 100,000 x 50 dense, 1,000 centers (s)", f"{w['pass_dense_s']:.3f}"],
            ["sparse / dense pass", f"{w['pass_sparse_s'] / w['pass_dense_s']:.2f}"],
        ]
        lines += ["", h.markdown(["100,000 x 1,000,000, 50 stored a row", "value"], cells)]
    if "peaks" in res:
        cells = []
        for name, r in res["peaks"].items():
            cap = r["budget_mb"] + r["csr_mb"]
            cells.append(
                [
                    name,
                    f"{r['rows']:,}",
                    f"{r['peak_mb']:.1f}",
                    f"{cap:.1f}",
                    f"{r['peak_mb'] / cap:.2f}",
                    f"{r['dense_x_mb']:.1f}",
                ]
            )
        header = ["adult as CSR, memory_budget=200MB", "rows", "traced peak (MB)"]
        header += ["budget + CSR (MB)", "peak / (budget + CSR)", "dense X (MB)"]
        lines += ["", h.markdown(header, cells)]
    return "\n".join(lines).strip()


def kills_table() -> str:
    """The recorded worker-loss run: kills during fits, failures, fit times."""
    doc = h.load("dask_kills")
    cells = [
        [name, f["kills_during_fit"], f["failures"], f["in_memory_fit_s"], f["cluster_fit_s"]]
        for name, f in doc["families"].items()
    ]
    header = [
        "family",
        "kills during the fit",
        "failures",
        "fit in memory (s)",
        "on the cluster (s)",
    ]
    return (
        f"Worker loss on a 2-process LocalCluster, n = {doc['n']:,} "
        f"({', '.join(doc.get('runs', [doc['date']]))}): {doc['kills_during_fit']} kills during "
        f"fits, {doc['failures']} failures.\n\n" + h.markdown(header, cells)
    )


if __name__ == "__main__":
    commands = {"run": run, "sparse": sparse, "table": table, "sparse-table": sparse_table}
    commands["kills-table"] = kills_table
    sys.exit(h.cli(__doc__, commands))
