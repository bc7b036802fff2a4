"""What the command line costs: the start-up of every command against scikit-learn's own
import, and ``kernelpath fit`` + ``kernelpath predict`` on a CSV of 10^6 rows against the same
steps written with the library.

    python benchmarks/run.py cli startup [--runs 5]
    python benchmarks/run.py cli run [--n 1000000] [--rounds 3] [--data-dir DIR]
    python benchmarks/run.py cli startup-table     # results/startup.json
    python benchmarks/run.py cli table             # results/cli.json

``startup``: each command in a fresh process, wall time from start to exit, the commands
alternating, median of ``--runs``: Python alone, ``import sklearn``, ``import kernelpath``,
the first estimator (``from kernelpath import NystromRegressor``), ``kernelpath --help``,
``kernelpath info`` and ``kernelpath predict`` of a 100-row CSV with a small model. Targets:
``--help`` <= 0.5 s; ``predict`` <= 1 s above ``import sklearn``; ``import kernelpath`` <=
``import sklearn`` + 0.3 s.

``run``: P (x ~ N(0, I_20), y = sin<w, x> + 0.1 eps) as ``train.csv`` (n rows) and
``test.csv`` (n / 10 rows). Both ways read the CSV with ``read_table``, fit
``NystromRegressor(n_centers=1000, max_iter=20, random_state=0)``, write the model file, read
the test CSV and write its predictions; each way in fresh processes (the CLI: two, ``fit``
then ``predict``, with ``--progress``), alternating. Reported: the median wall time of each
way, the library's own fit and predict time inside its run, and the CLI's overhead:
(CLI - library) / (library fit + predict); reading and writing files cancel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import fresh as h
import numpy as np

D = 20
KP = [sys.executable, "-m", "kernelpath"]
PARAMS = ["--n-centers", "1000", "--max-iter", "20", "--seed", "0"]
#: the start-up targets: command -> (text, test of the medians)
TARGETS: dict[str, tuple[str, Any]] = {
    "kernelpath --help": ("≤ 0.5 s", lambda med: med["kernelpath --help"] <= 0.5),
    "kernelpath predict": (
        "≤ import sklearn + 1 s",
        lambda med: med["kernelpath predict"] <= med["import sklearn"] + 1,
    ),
    "import kernelpath": (
        "≤ import sklearn + 0.3 s",
        lambda med: med["import kernelpath"] <= med["import sklearn"] + 0.3,
    ),
}


def _wall(cmd: list[str]) -> dict[str, float]:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return {"wall": time.perf_counter() - t}


def startup(runs: int = 5) -> str:
    """Every command in fresh processes, alternating, median of ``runs``."""
    import kernelpath as kp

    with tempfile.TemporaryDirectory() as folder:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((500, 4))
        kp.save(
            kp.NystromRegressor(n_centers=50, random_state=0).fit(X, np.sin(X[:, 0])),
            f"{folder}/m.kp",
        )
        rows = "\n".join(",".join(f"{v:.6f}" for v in r) for r in X[:100])
        Path(folder, "x.csv").write_text("x0,x1,x2,x3\n" + rows + "\n")
        model, data, pred = (os.path.join(folder, f) for f in ("m.kp", "x.csv", "p.csv"))
        cmds = {
            "python": [sys.executable, "-c", "pass"],
            "import sklearn": [sys.executable, "-c", "import sklearn.base"],
            "import kernelpath": [sys.executable, "-c", "import kernelpath"],
            "first estimator": [sys.executable, "-c", "from kernelpath import NystromRegressor"],
            "kernelpath --help": [*KP, "--help"],
            "kernelpath info": [*KP, "info"],
            "kernelpath predict": [*KP, "predict", model, data, "-o", pred, "--quiet"],
        }
        got = h.rounds({k: (lambda _, c=c: _wall(c)) for k, c in cmds.items()}, runs)
    times = {k: [r["wall"] for r in rs] for k, rs in got.items()}
    med = {k: float(np.median(v)) for k, v in times.items()}
    h.save("startup", {"runs": runs, "median_s": med, "times": times, "machine": h.machine()})
    return startup_table()


def startup_table() -> str:
    """Each command's wall time, above ``import sklearn``, and its target."""
    res = h.load("startup")
    med = res["median_s"]
    sk = med["import sklearn"]
    cells = []
    for name, s in med.items():
        target = TARGETS.get(name)
        cell = "" if target is None else f"{target[0]}: {'met' if target[1](med) else 'missed'}"
        cells.append([f"`{name}`", f"{s:.2f}", f"{s - sk:+.2f}", cell])
    header = ["command", "wall time (s)", "above `import sklearn`", "target"]
    note = f"Fresh processes, median of {res['runs']}, on a 2-core machine."
    return h.markdown(header, cells, "lrrl") + "\n\n" + note


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


def library_way(folder: str) -> dict[str, float]:
    """The CLI's two steps written with the library, in this process."""
    t0 = time.perf_counter()
    import kernelpath as kp

    X, y = kp.read_table(folder + "/train.csv", target="y")
    est = kp.NystromRegressor(n_centers=1000, max_iter=20, random_state=0)
    _, fit, _ = h.timed(lambda: est.fit(X, y))
    kp.save(est, folder + "/lib.kp")
    Xt, _ = kp.read_table(folder + "/test.csv", target=None, columns=list(est.feature_names_in_))
    _, pred, _ = h.timed(lambda: est.predict(Xt))
    kp.write_predictions(est, Xt, folder + "/lib_pred.csv", header=["prediction"])
    return {"fit": fit, "predict": pred, "total": time.perf_counter() - t0}


def _library(folder: Path) -> dict[str, float]:
    t = time.perf_counter()
    res = h.call("cli", "library_way", folder=str(folder))
    return {**res, "wall": time.perf_counter() - t}


def _cli(folder: Path) -> dict[str, float]:
    cli = [sys.executable, "-m", "kernelpath.cli"]
    fit = [*cli, "fit", str(folder / "train.csv"), "--target", "y", "-o", str(folder / "cli.kp")]
    pred = [*cli, "predict", str(folder / "cli.kp"), str(folder / "test.csv")]
    t = time.perf_counter()
    _wall([*fit, *PARAMS, "--progress"])
    _wall([*pred, "-o", str(folder / "cli_pred.csv"), "--progress"])
    return {"wall": time.perf_counter() - t}


def run(n: int = 1_000_000, rounds: int = 3, data_dir: str = "/tmp/kernelpath-cli") -> str:
    """The library's way and the CLI's, alternating in fresh processes."""
    folder = Path(data_dir) / f"n{n}"
    write_data(folder, n)
    got = h.rounds({"library": lambda _: _library(folder), "cli": lambda _: _cli(folder)}, rounds)
    lib, cli = got["library"], got["cli"]

    def med(rs: list[dict[str, float]], k: str) -> float:
        return float(np.median([r[k] for r in rs]))

    # the last round's predictions: equal up to the order of the operator's sums (its
    # cache-or-stream decision is measured in each process, so blocks may differ)
    lib_pred = np.loadtxt(folder / "lib_pred.csv", skiprows=1)
    cli_pred = np.loadtxt(folder / "cli_pred.csv", skiprows=1)
    work = med(lib, "fit") + med(lib, "predict")
    h.save(
        "cli",
        {
            "n": n,
            "rounds": rounds,
            "library_wall_s": med(lib, "wall"),
            "library_fit_s": med(lib, "fit"),
            "library_predict_s": med(lib, "predict"),
            "cli_wall_s": med(cli, "wall"),
            "cli_overhead_fraction_of_fit_and_predict": (med(cli, "wall") - med(lib, "wall"))
            / work,
            "max_rel_prediction_diff": float(
                np.abs(lib_pred - cli_pred).max() / np.abs(lib_pred).max()
            ),
            "runs": {"library": lib, "cli": cli},
            "machine": h.machine(),
        },
    )
    return table()


def table() -> str:
    """The CLI's way against the library's: wall time, overhead, predictions."""
    r = h.load("cli")
    cells = [
        [
            "library (read_table, fit, save, predict, write)",
            f"{r['library_wall_s']:.1f} s",
            f"{r['library_fit_s'] + r['library_predict_s']:.1f} s",
            "",
            "",
        ],
        [
            "`kernelpath fit` + `kernelpath predict --progress`",
            f"{r['cli_wall_s']:.1f} s",
            "",
            f"{100 * r['cli_overhead_fraction_of_fit_and_predict']:.1f}% (target ≤ 10%)",
            f"{r['max_rel_prediction_diff']:.0e} relative",
        ],
    ]
    header = ["way", "wall time", "of which fit + predict", "CLI overhead", "predictions differ by"]
    return f"n = {r['n']:,} training rows, median of {r['rounds']}:\n\n" + h.markdown(
        header, cells, "lrrll"
    )


if __name__ == "__main__":
    commands = {"run": run, "startup": startup, "table": table, "startup-table": startup_table}
    sys.exit(h.cli(__doc__, commands))
