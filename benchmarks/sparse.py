"""Sparse rows (scipy CSR) against dense rows, each measurement in a fresh process.

    python benchmarks/sparse.py run [--runs 3] [--parts adult,wide,peaks]
    python benchmarks/sparse.py table

- ``adult``: the default ``NystromClassifier`` on adult (``../shared/data/adult``, 32,561 x
  123, 11% of the entries stored) from CSR and from the same rows dense, alternating, median
  of ``--runs`` fit times; test error of each and the largest difference of their scores.
- ``wide``: 100,000 rows x 1,000,000 features, 50 word counts a row drawn from one of 200
  topics (its dense form: 800 GB): ``NystromRegressor(n_centers=1000, memory_budget="2GB")``
  fit on 90,000 rows and predict the other 10,000 (test RMSE against the spread of y), the
  fit's peak resident memory above the process's start, and the time of one pass of the
  operator (K_nm v, 1,000 CSR centers, 100,000 rows) against a pass over 100,000 dense rows
  of 50 features (the same stored entries a row) with 1,000 dense centers.
- ``peaks``: every batch estimator (defaults, ``random_state=0``) fitted on the first
  8,000 rows of adult as CSR (exact KRLS: 2,500, its n x n matrix) with
  ``memory_budget="200MB"``: the traced peak (tracemalloc, fresh process) against the budget
  plus the CSR arrays, and the size of the dense X it never builds.

Writes ``results/sparse.json``; ``table`` prints the tables of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "sparse.json"
ADULT = HERE.parent.parent / "shared" / "data" / "adult"


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _adult() -> tuple[Any, np.ndarray, Any, np.ndarray]:
    from sklearn.datasets import load_svmlight_file

    Xtr, ytr = load_svmlight_file(str(ADULT / "adult.trn.bz2"), n_features=123)
    Xte, yte = load_svmlight_file(str(ADULT / "adult.tst.bz2"), n_features=123)
    return Xtr.tocsr(), ytr, Xte.tocsr(), yte


def worker_adult(kind: str, scores_out: str) -> dict[str, Any]:
    import kernelpath as kp

    Xtr, ytr, Xte, yte = _adult()
    if kind == "dense":
        Xtr, Xte = Xtr.toarray(), Xte.toarray()
    est = kp.NystromClassifier(random_state=0)
    t = time.perf_counter()
    est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t
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


def worker_wide_fit() -> dict[str, Any]:
    import kernelpath as kp

    X, y = _wide()
    base = peak = _rss()
    done = False

    def watch() -> None:
        nonlocal peak
        while not done:
            peak = max(peak, _rss())
            time.sleep(0.01)

    th = threading.Thread(target=watch)
    th.start()
    est = kp.NystromRegressor(n_centers=1000, memory_budget="2GB", random_state=0)
    t = time.perf_counter()
    est.fit(X[:90_000], y[:90_000])
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    pred = est.predict(X[90_000:])
    predict_s = time.perf_counter() - t
    done = True
    th.join()
    rmse = float(np.sqrt(np.mean((pred - y[90_000:]) ** 2)))
    return {
        "fit_s": fit_s,
        "predict_10k_s": predict_s,
        "peak_mb": (peak - base) / 1e6,
        "test_rmse": rmse,
        "y_std": float(np.std(y[90_000:])),
        "centers_sparse": bool(hasattr(est.centers_, "nnz")),
        "params": {k: float(v) for k, v in est.best_params_.items()},
    }


def worker_pass(kind: str) -> dict[str, Any]:
    """Seconds of one K_nm v (median of 5 after one warm-up), 1,000 centers, no cache."""
    import kernelpath as kp
    from kernelpath.operators import KernelOperator

    if kind == "sparse":
        X, _ = _wide()
        C = X[:1000]
    else:
        rng = np.random.default_rng(0)
        X = rng.random((100_000, 50))
        C = X[:1000].copy()
    op = KernelOperator(X, C, kp.Gaussian(1.0), "2GB", cache=False)
    v = np.ones((1000, 1))
    op.matvec(v)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        op.matvec(v)
        times.append(time.perf_counter() - t)
    return {"pass_s": statistics.median(times)}


PEAK_ESTIMATORS = [
    f"{family}{task}"
    for family in ("Nystrom", "NYTRO", "KRLS", "RandomFeatures", "SGM", "EigenPro")
    for task in ("Regressor", "Classifier")
]
PEAK_ROWS, PEAK_KRLS_ROWS, PEAK_BUDGET_MB = 8000, 2500, 200


def worker_peak(name: str) -> dict[str, Any]:
    import tracemalloc

    import kernelpath as kp

    X, y, _, _ = _adult()
    n = PEAK_KRLS_ROWS if name.startswith("KRLS") else PEAK_ROWS
    X, y = X[:n], y[:n]
    csr = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    est = getattr(kp, name)(memory_budget=f"{PEAK_BUDGET_MB}MB", random_state=0)
    tracemalloc.start()
    t = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "rows": n,
        "peak_mb": peak / 1e6,
        "budget_mb": PEAK_BUDGET_MB,
        "csr_mb": csr / 1e6,
        "dense_x_mb": X.shape[0] * X.shape[1] * 8 / 1e6,
        "fit_s_traced": seconds,
    }


def _call(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "worker", *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(parts: list[str], runs: int) -> None:
    import tempfile

    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    if "adult" in parts:
        with tempfile.TemporaryDirectory() as folder:
            got: dict[str, list[dict[str, Any]]] = {"csr": [], "dense": []}
            for _ in range(runs):
                for kind in got:
                    got[kind].append(_call("adult", kind, f"{folder}/{kind}.npy"))
            diff = float(
                np.abs(np.load(f"{folder}/csr.npy") - np.load(f"{folder}/dense.npy")).max()
            )
        res["adult"] = {
            kind: {
                "fit_s": statistics.median(r["fit_s"] for r in rows),
                "test_error": rows[0]["test_error"],
                "params": rows[0]["params"],
            }
            for kind, rows in got.items()
        }
        res["adult"]["max_score_difference"] = diff
        res["adult"]["runs"] = runs
        print("adult", json.dumps(res["adult"]), flush=True)
    if "wide" in parts:
        fits = [_call("wide_fit") for _ in range(runs)]
        passes: dict[str, list[float]] = {"sparse": [], "dense": []}
        for _ in range(runs):
            for kind in passes:
                passes[kind].append(_call("pass", kind)["pass_s"])
        res["wide"] = {
            "fit_s": statistics.median(f["fit_s"] for f in fits),
            "predict_10k_s": statistics.median(f["predict_10k_s"] for f in fits),
            "peak_mb": max(f["peak_mb"] for f in fits),
            "test_rmse": fits[0]["test_rmse"],
            "y_std": fits[0]["y_std"],
            "centers_sparse": fits[0]["centers_sparse"],
            "params": fits[0]["params"],
            "pass_sparse_s": statistics.median(passes["sparse"]),
            "pass_dense_s": statistics.median(passes["dense"]),
            "runs": runs,
        }
        print("wide", json.dumps(res["wide"]), flush=True)
    if "peaks" in parts:
        res["peaks"] = {name: _call("peak", name) for name in PEAK_ESTIMATORS}
        print("peaks", json.dumps(res["peaks"]), flush=True)
    res["machine"] = f"{os.cpu_count()} cores"
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = []
    if "adult" in res:
        a = res["adult"]
        c, d = a["csr"], a["dense"]
        lines += [
            "| adult, default NystromClassifier | fit (s) | test error | penalty |",
            "|---|---:|---:|---|",
            f"| CSR | {c['fit_s']:.2f} | {100 * c['test_error']:.2f}% "
            f"| {c['params']['penalty']:.3g} |",
            f"| dense | {d['fit_s']:.2f} | {100 * d['test_error']:.2f}% "
            f"| {d['params']['penalty']:.3g} |",
            "",
            f"CSR / dense fit time: {c['fit_s'] / d['fit_s']:.2f}; largest difference of the "
            f"test scores: {a['max_score_difference']:.2g} (median of {a['runs']} fresh "
            "processes each, alternating).",
        ]
    if "wide" in res:
        w = res["wide"]
        if lines:
            lines.append("")
        lines += [
            "| 100,000 x 1,000,000, 50 stored a row | value |",
            "|---|---:|",
            f"| fit on 90,000 rows, n_centers=1000, memory_budget=2GB (s) | {w['fit_s']:.1f} |",
            f"| predict 10,000 rows (s) | {w['predict_10k_s']:.2f} |",
            f"| fit's peak resident memory above start (MB) | {w['peak_mb']:.0f} |",
            f"| test RMSE / std of y (noise 0.1) | {w['test_rmse']:.3g} / {w['y_std']:.3g} |",
            f"| one pass K_nm v, 1,000 CSR centers (s) | {w['pass_sparse_s']:.3f} |",
            f"| one pass, 100,000 x 50 dense, 1,000 centers (s) | {w['pass_dense_s']:.3f} |",
            f"| sparse / dense pass | {w['pass_sparse_s'] / w['pass_dense_s']:.2f} |",
        ]
    if "peaks" in res:
        if lines:
            lines.append("")
        lines += [
            "| adult as CSR, memory_budget=200MB | rows | traced peak (MB) | budget + CSR (MB) "
            "| peak / (budget + CSR) | dense X (MB) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, r in res["peaks"].items():
            cap = r["budget_mb"] + r["csr_mb"]
            lines.append(
                f"| {name} | {r['rows']:,} | {r['peak_mb']:.1f} | {cap:.1f} "
                f"| {r['peak_mb'] / cap:.2f} | {r['dense_x_mb']:.1f} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--parts", default="adult,wide,peaks")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.mode == "worker":
        kind, *rest = a.args
        fn = {
            "adult": worker_adult,
            "wide_fit": worker_wide_fit,
            "pass": worker_pass,
            "peak": worker_peak,
        }[kind]
        print(json.dumps(fn(*rest)))
    elif a.mode == "run":
        run(a.parts.split(","), a.runs)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
