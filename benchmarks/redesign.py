"""The estimators' redesign (issue 23) changed no figure: the library before it and after it,
fit for fit, in fresh processes, alternating, median of 3.

    git worktree add /tmp/kp_old 46b8d85          # main before the redesign
    python benchmarks/redesign.py run --old /tmp/kp_old/src [--rounds 3]
    python benchmarks/redesign.py table            # from results/redesign.json

The fits are the kernelpath rows of ``run.py --suite real`` (same data, split, kernel, grids
and seeds: ``run.bench_dataset``) and problem P at n = 200,000 (``fresh.py``, m = 2000, 20 CG
iterations at λ = 1e-6, no hold-out). Each fit runs in a fresh process, timed from the
``fit`` call to its return; the two versions alternate within every round. Reported: the
median fit time of each version, their ratio, the chosen point of each and whether they
agree, and the test error of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path as FsPath
from typing import Any

import numpy as np

HERE = FsPath(__file__).resolve().parent
RESULTS = HERE / "results"
SRC = HERE.parent / "src"

#: (data set, estimator label of run.py) of the real suite's kernelpath rows.
REAL_FITS = [
    ("cpusmall", "exact"),
    ("cpusmall", "direct"),
    ("cpusmall", "nytro"),
    ("cpusmall", "cg"),
    ("pumadyn32nh", "exact"),
    ("pumadyn32nh", "direct"),
    ("pumadyn32nh", "nytro"),
    ("pumadyn32nh", "cg"),
    ("protein", "direct"),
    ("protein", "nytro"),
    ("protein", "cg"),
    ("ijcnn1", "direct"),
    ("ijcnn1", "nytro"),
    ("ijcnn1", "cg"),
    ("adult", "direct"),
    ("adult", "nytro"),
    ("adult", "cg"),
]


def one_real(name: str, kind: str) -> dict[str, Any]:
    """Fit one real-suite estimator (as run.bench_dataset builds it); its JSON record."""
    sys.path.insert(0, str(HERE))
    from run import GRID, REAL, _load

    from kernelpath import (
        Gaussian,
        KRLSClassifier,
        KRLSRegressor,
        NystromClassifier,
        NystromRegressor,
        NYTROClassifier,
        NYTRORegressor,
    )

    Xtr, ytr, Xte, yte = _load(name, False)
    clf = REAL[name]["task"] == "classification"
    m = min(2000, len(Xtr) // 2)
    kernel = Gaussian("median").resolve(Xtr, 0)
    common = {"penalty": GRID, "refit": True, "random_state": 0}
    if kind == "exact":
        est = (KRLSClassifier if clf else KRLSRegressor)(kernel, **common)
    elif kind == "direct":
        est = (NystromClassifier if clf else NystromRegressor)(
            kernel, n_centers=m, solver="direct", **common
        )
    elif kind == "nytro":
        est = (NYTROClassifier if clf else NYTRORegressor)(
            kernel, n_centers=m, solver="nu", n_iter_no_change=30, refit=True, random_state=0
        )
    else:
        est = (NystromClassifier if clf else NystromRegressor)(kernel, n_centers=m, **common)
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    sec = time.perf_counter() - t0
    pred = est.predict(Xte)
    err = float(100 * np.mean(pred != yte)) if clf else float(np.sqrt(np.mean((pred - yte) ** 2)))
    best = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in est.best_params_.items()}
    return {"fit_s": sec, "test_error": err, "best_params": best}


def _run(python_path: str, args: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=python_path)
    out = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(old: str, rounds: int) -> dict[str, Any]:
    versions = {"before": old, "after": str(SRC)}
    records: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "p200k")
        subprocess.run(
            [sys.executable, str(HERE / "fresh.py"), "data", "--n", "200000", "--out", data],
            check=True,
        )
        fits = [(f"{n} {k}", ["real", n, k]) for n, k in REAL_FITS]
        fits.append(("P 200k CG", ["p"]))
        for r in range(rounds):
            for label, spec in fits:
                order = list(versions) if r % 2 == 0 else list(versions)[::-1]
                for v in order:
                    if spec[0] == "real":
                        args = [str(HERE / "redesign.py"), "one", spec[1], spec[2]]
                    else:
                        args = [
                            str(HERE / "fresh.py"),
                            "fit",
                            "--lib",
                            "kernelpath",
                            "--data",
                            data,
                        ]
                    res = _run(versions[v], args)
                    if spec[0] != "real":
                        res = {
                            "fit_s": res["fit_s"],
                            "test_error": res["test_rmse"],
                            "best_params": res["best_params"],
                        }
                    records.setdefault(label, {}).setdefault(v, []).append(res)
                    print(f"round {r} {label:22s} {v:6s} {res['fit_s']:7.2f} s", flush=True)
    rows = []
    for label, by in records.items():
        before, after = by["before"], by["after"]
        tb = statistics.median(x["fit_s"] for x in before)
        ta = statistics.median(x["fit_s"] for x in after)
        rows.append(
            {
                "fit": label,
                "before_s": tb,
                "after_s": ta,
                "ratio": ta / tb,
                "same_point": all(x["best_params"] == before[0]["best_params"] for x in after),
                "before_error": before[0]["test_error"],
                "after_error": after[0]["test_error"],
                "best_params": after[0]["best_params"],
                "runs": by,
            }
        )
    return {"rounds": rounds, "rows": rows}


def table() -> str:
    res = json.loads((RESULTS / "redesign.json").read_text())["result"]
    lines = [
        "| fit | before (s) | after (s) | after / before | same point "
        "| test error before / after |",
        "|---|---:|---:|---:|:---:|---:|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['fit']} | {r['before_s']:.2f} | {r['after_s']:.2f} | {r['ratio']:.3f} | "
            f"{'yes' if r['same_point'] else 'no'} | "
            f"{r['before_error']:.4g} / {r['after_error']:.4g} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--old", required=True, help="src folder of the library before")
    r.add_argument("--rounds", type=int, default=3)
    o = sub.add_parser("one")
    o.add_argument("name")
    o.add_argument("kind")
    sub.add_parser("table")
    a = ap.parse_args()
    if a.cmd == "one":
        print(json.dumps(one_real(a.name, a.kind)))
    elif a.cmd == "run":
        sys.path.insert(0, str(HERE))
        from run import machine_info

        payload = {"machine": machine_info(), "result": run(a.old, a.rounds)}
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "redesign.json").write_text(json.dumps(payload, indent=1, default=str))
        print(table())
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
