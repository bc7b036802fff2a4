"""Randomly pivoted Cholesky centers against uniform ones, per number of centers (issue 45).

    python benchmarks/rpcholesky.py run [--sizes 500,2000] [--sets ijcnn1,protein]
    python benchmarks/rpcholesky.py table

The default ``NystromClassifier`` (ijcnn1) or ``NystromRegressor`` (protein) with
``n_centers=m`` and ``centers="uniform"`` or ``"rpcholesky"``, ``random_state=0``, each fit
in a fresh process (one run each): test error (%) or RMSE, and the fit's seconds. protein
has one table: 80% of its rows (a fixed permutation) fit, 20% test.

Writes ``results/rpcholesky.json``; ``table`` prints the table.
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
OUT = HERE / "results" / "rpcholesky.json"


def worker(name: str, centers: str, m: int) -> dict[str, Any]:
    import kernelpath as kp
    from kernelpath.datasets import load_shared

    d = load_shared(name)
    if "X_train" not in d:  # one table: 80% to fit, 20% to test, the same split each run
        perm = np.random.default_rng(0).permutation(len(d["y"]))
        cut = int(0.8 * len(perm))
        tr, te = perm[:cut], perm[cut:]
        d = {
            "X_train": d["X"][tr],
            "y_train": d["y"][tr],
            "X_test": d["X"][te],
            "y_test": d["y"][te],
        }
    classify = name == "ijcnn1"
    Est = kp.NystromClassifier if classify else kp.NystromRegressor
    est = Est(n_centers=m, centers=centers, random_state=0)
    t = time.perf_counter()
    est.fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - t
    pred = est.predict(d["X_test"])
    if classify:
        score = float(100 * np.mean(pred != d["y_test"]))
    else:
        score = float(np.sqrt(np.mean((pred - d["y_test"]) ** 2)))
    return {"score": score, "fit_s": seconds, "measure": "error %" if classify else "RMSE"}


def run(sets: list[str], sizes: list[int]) -> None:
    res: dict[str, Any] = {}
    for name in sets:
        for m in sizes:
            for centers in ("uniform", "rpcholesky"):
                out = subprocess.run(
                    [sys.executable, __file__, "worker", name, centers, str(m)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                r = json.loads(out.stdout.strip().splitlines()[-1])
                res.setdefault(name, {}).setdefault(str(m), {})[centers] = r
                print(name, m, centers, json.dumps(r), flush=True)
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "| set | m | uniform | rpcholesky | fit s: uniform / rpcholesky |",
        "|---|---:|---:|---:|---|",
    ]
    for name, by_m in res.items():
        for m, r in by_m.items():
            u, p = r["uniform"], r["rpcholesky"]
            lines.append(
                f"| {name} ({u['measure']}) | {int(m):,} | {u['score']:.4g} | {p['score']:.4g} "
                f"| {u['fit_s']:.1f} / {p['fit_s']:.1f} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--sets", default="ijcnn1,protein")
    a = ap.parse_args()
    if a.mode == "worker":
        name, centers, m = a.args
        print(json.dumps(worker(name, centers, int(m))))
    elif a.mode == "run":
        run(a.sets.split(","), [int(s) for s in a.sizes.split(",")])
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
