"""What the command line adds to the library: ``kernelpath fit`` + ``kernelpath predict`` on a
CSV of 10^6 rows against the same steps written with the library.

    python benchmarks/cli.py [--n 1000000] [--rounds 3] [--dir DIR]
    python benchmarks/cli.py --table     # the table (Markdown) from the results

Data: P (x ~ N(0, I_20), y = sin<w, x> + 0.1 eps) as ``train.csv`` (n rows) and ``test.csv``
(n / 10 rows). Both ways read the CSV with ``read_table``, fit
``NystromRegressor(n_centers=1000, max_iter=20, random_state=0)``, write the model file,
read the test CSV and write its predictions to CSV; each run is a fresh process (the CLI:
two, ``fit`` then ``predict``, with ``--progress``), alternating, ``--rounds`` times.

Reported (``results/cli.json``): the median wall time of each way, the library's own fit and
predict time inside its run, and the CLI's overhead: (CLI - library) / (library fit +
predict). Reading and writing files are the same steps in both, so they cancel.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "cli.json"
D = 20
PARAMS = ["--n-centers", "1000", "--max-iter", "20", "--seed", "0"]


def write_data(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "done").exists():
        return
    rng = np.random.default_rng(0)
    w = rng.standard_normal(D)
    w /= np.linalg.norm(w)
    header = ",".join([f"x{j}" for j in range(D)] + ["y"])
    for name, rows in (("train.csv", n), ("test.csv", n // 10)):
        with open(folder / name, "w") as fh:
            fh.write(header + "\n")
            for s in range(0, rows, 100_000):
                X = rng.standard_normal((min(100_000, rows - s), D))
                y = np.sin(X @ w) + 0.1 * rng.standard_normal(len(X))
                np.savetxt(fh, np.column_stack([X, y]), delimiter=",", fmt="%.10g")
    (folder / "done").write_text("ok")


LIBRARY = """
import sys, time, json
t0 = time.perf_counter()
import kernelpath as kp
folder = sys.argv[1]
X, y = kp.read_table(folder + "/train.csv", target="y")
est = kp.NystromRegressor(n_centers=1000, max_iter=20, random_state=0)
t = time.perf_counter(); est.fit(X, y); fit = time.perf_counter() - t
kp.save(est, folder + "/lib.kp")
Xt, _ = kp.read_table(folder + "/test.csv", target=None, columns=list(est.feature_names_in_))
t = time.perf_counter(); P = est.predict(Xt); pred = time.perf_counter() - t
kp.write_predictions(est, Xt, folder + "/lib_pred.csv", header=["prediction"])
print(json.dumps({"fit": fit, "predict": pred, "total": time.perf_counter() - t0}))
"""


def run_library(folder: Path) -> dict[str, float]:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", LIBRARY, str(folder)], check=True, capture_output=True, text=True
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall"] = time.perf_counter() - t
    return res


def run_cli(folder: Path) -> dict[str, float]:
    cli = [sys.executable, "-m", "kernelpath.cli"]
    t = time.perf_counter()
    subprocess.run(
        [*cli, "fit", str(folder / "train.csv"), "--target", "y", "-o", str(folder / "cli.kp"),
         *PARAMS, "--progress"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    subprocess.run(
        [*cli, "predict", str(folder / "cli.kp"), str(folder / "test.csv"), "-o",
         str(folder / "cli_pred.csv"), "--progress"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return {"wall": time.perf_counter() - t}


def table() -> str:
    """``results/cli.json`` as a Markdown table."""
    r = json.loads(OUT.read_text())
    return "\n".join(
        [
            f"n = {r['n']:,} training rows, median of {r['rounds']}:",
            "",
            "| way | wall time | of which fit + predict | CLI overhead | predictions differ by |",
            "|---|---|---|---|---|",
            f"| library (read_table, fit, save, predict, write) | {r['library_wall_s']:.1f} s "
            f"| {r['library_fit_s'] + r['library_predict_s']:.1f} s | | |",
            f"| `kernelpath fit` + `kernelpath predict --progress` | {r['cli_wall_s']:.1f} s | "
            f"| {100 * r['cli_overhead_fraction_of_fit_and_predict']:.1f}% (target ≤ 10%) "
            f"| {r['max_rel_prediction_diff']:.0e} relative |",
        ]
    )


def main() -> int:
    if sys.argv[1:] == ["--table"]:
        print(table())
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/kernelpath-cli")
    a = ap.parse_args()
    folder = Path(a.dir) / f"n{a.n}"
    write_data(folder, a.n)
    lib, cli = [], []
    for _ in range(a.rounds):
        lib.append(run_library(folder))
        cli.append(run_cli(folder))
        print("library", lib[-1], "cli", cli[-1], flush=True)
    med = lambda rs, k: float(np.median([r[k] for r in rs]))  # noqa: E731
    lib_work = med(lib, "fit") + med(lib, "predict")
    # the last round's predictions: equal up to the order of the operator's sums (its
    # cache-or-stream decision is measured in each process, so blocks may differ)
    lib_pred = np.loadtxt(folder / "lib_pred.csv", skiprows=1)
    cli_pred = np.loadtxt(folder / "cli_pred.csv", skiprows=1)
    diff = float(np.abs(lib_pred - cli_pred).max() / np.abs(lib_pred).max())
    result = {
        "n": a.n,
        "rounds": a.rounds,
        "library_wall_s": med(lib, "wall"),
        "library_fit_s": med(lib, "fit"),
        "library_predict_s": med(lib, "predict"),
        "cli_wall_s": med(cli, "wall"),
        "cli_overhead_fraction_of_fit_and_predict": (med(cli, "wall") - med(lib, "wall"))
        / lib_work,
        "max_rel_prediction_diff": diff,
        "runs": {"library": lib, "cli": cli},
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
