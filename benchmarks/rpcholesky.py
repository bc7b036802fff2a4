"""Center strategies per number of centers: uniform, leverage and randomly pivoted Cholesky
(issue 45: "test error against m on MNIST, ijcnn1 and protein").

    python benchmarks/rpcholesky.py run [--sizes 500,2000] [--sets mnist,ijcnn1,protein]
                                        [--seeds 0,1,2] [--centers uniform,...]
    python benchmarks/rpcholesky.py table

Each set's estimator with ``n_centers=m``, one ``centers`` strategy and ``random_state`` =
the seed, every other parameter at its default, each fit in a fresh process: MNIST with
``NystromClassifier(scale=False)`` (the issue's protocol, official split), ijcnn1 with
``NystromClassifier()`` (official split), protein with ``NystromRegressor()`` on 80% of
its rows (a fixed permutation; the other 20% test). Leverage is ``"approximate-leverage"``
(El Alaoui & Mahoney's two-pass scores): the exact scores need the n × n kernel (18 GB at
MNIST's 48,000 training rows). The seed draws the centers (and the width screen's and the
hold-out's rows), so the spread over seeds is the strategy's own.

Results accumulate in ``results/rpcholesky.json`` (a (set, m, strategy) cell run again
replaces its seeds), written after every fit; ``table`` prints the mean test error (%) or
RMSE over the seeds with its range, and the median fit time.
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
#: The strategies, in the table's column order; "leverage" here is the approximate scores.
STRATEGIES = ("uniform", "approximate-leverage", "rpcholesky")


def worker(name: str, centers: str, m: int, seed: int) -> dict[str, Any]:
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
    classify = name in ("ijcnn1", "mnist")
    kw: dict[str, Any] = {"scale": False} if name == "mnist" else {}
    Est = kp.NystromClassifier if classify else kp.NystromRegressor
    est = Est(n_centers=m, centers=centers, random_state=seed, **kw)
    t = time.perf_counter()
    est.fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - t
    pred = est.predict(d["X_test"])
    if classify:
        score = float(100 * np.mean(pred != d["y_test"]))
    else:
        score = float(np.sqrt(np.mean((pred - d["y_test"]) ** 2)))
    return {"score": score, "fit_s": seconds, "measure": "error %" if classify else "RMSE"}


def run(sets: list[str], sizes: list[int], seeds: list[int], strategies: list[str]) -> None:
    res: dict[str, Any] = json.loads(OUT.read_text()) if OUT.is_file() else {}
    if "sets" not in res:  # the first version's layout (one seed, two strategies): replaced
        res = {"sets": {}}
    for name in sets:
        for m in sizes:
            cells: dict[str, dict[str, Any]] = {
                c: {"seeds": [], "scores": [], "fit_s": []} for c in strategies
            }
            for seed in seeds:  # the strategies alternate within each seed's round
                for centers in strategies:
                    out = subprocess.run(
                        [sys.executable, __file__, "worker", name, centers, str(m), str(seed)],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    cell = cells[centers]
                    cell["seeds"].append(seed)
                    cell["scores"].append(r["score"])
                    cell["fit_s"].append(r["fit_s"])
                    cell["measure"] = r["measure"]
                    print(name, m, centers, seed, json.dumps(r), flush=True)
                    res["sets"].setdefault(name, {}).setdefault(str(m), {})[centers] = cell
                    res["date"] = time.strftime("%Y-%m-%d %H:%M")
                    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(table())


def _cell(c: dict[str, Any] | None) -> tuple[str, str]:
    if c is None:
        return "—", "—"
    s = np.asarray(c["scores"])
    spread = f" ({s.min():.4g}–{s.max():.4g})" if len(s) > 1 else ""
    return f"{s.mean():.4g}{spread}", f"{np.median(c['fit_s']):.1f}"


def table() -> str:
    res = json.loads(OUT.read_text())
    seeds = {
        len(c["seeds"]) for by_m in res["sets"].values() for r in by_m.values() for c in r.values()
    }
    lines = [
        "Mean over the seeds (range), and the median fit in seconds; "
        f"{'/'.join(str(k) for k in sorted(seeds))} seeds a cell, measured {res['date']}:",
        "",
        "| set | m | uniform | leverage (approximate) | rpcholesky "
        "| fit s: uniform / leverage / rpcholesky |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, by_m in res["sets"].items():
        for m, r in sorted(by_m.items(), key=lambda kv: int(kv[0])):
            cells = [_cell(r.get(s)) for s in STRATEGIES]
            measure = next(iter(r.values()))["measure"]
            lines.append(
                f"| {name} ({measure}) | {int(m):,} | "
                + " | ".join(c[0] for c in cells)
                + " | "
                + " / ".join(c[1] for c in cells)
                + " |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "worker", "table"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--sets", default="mnist,ijcnn1,protein")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--centers", default=",".join(STRATEGIES))
    a = ap.parse_args()
    if a.mode == "worker":
        name, centers, m, seed = a.args
        print(json.dumps(worker(name, centers, int(m), int(seed))))
    elif a.mode == "run":
        strategies = a.centers.split(",")
        bad = [s for s in strategies if s not in STRATEGIES]
        if bad:
            raise SystemExit(f"unknown strategies {bad}; known: {list(STRATEGIES)}")
        run(
            a.sets.split(","),
            [int(s) for s in a.sizes.split(",")],
            [int(s) for s in a.seeds.split(",")],
            strategies,
        )
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
