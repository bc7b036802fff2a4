"""Start-up cost: what a user waits for before any work, against scikit-learn's own import.

    python benchmarks/startup.py run [--runs 5]
    python benchmarks/startup.py table

Each command runs in a fresh process (wall time from start to exit, median of ``--runs``,
the commands alternating): Python alone, ``import sklearn``, ``import kernelpath``, the
first estimator (``from kernelpath import NystromRegressor``), ``kernelpath --help``,
``kernelpath info`` and ``kernelpath predict`` of a 100-row CSV with a small model. The
targets (issue 43): ``--help`` <= 0.5 s; ``predict`` <= 1 s above ``import sklearn``;
``import kernelpath`` <= ``import sklearn`` + 0.3 s. Writes ``results/startup.json``.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "startup.json"
KP = [sys.executable, "-m", "kernelpath"]


def commands(folder: str) -> dict[str, list[str]]:
    model, data = os.path.join(folder, "m.kp"), os.path.join(folder, "x.csv")
    pred = os.path.join(folder, "p.csv")
    return {
        "python": [sys.executable, "-c", "pass"],
        "import sklearn": [sys.executable, "-c", "import sklearn.base"],
        "import kernelpath": [sys.executable, "-c", "import kernelpath"],
        "first estimator": [sys.executable, "-c", "from kernelpath import NystromRegressor"],
        "kernelpath --help": [*KP, "--help"],
        "kernelpath info": [*KP, "info"],
        "kernelpath predict": [*KP, "predict", model, data, "-o", pred, "--quiet"],
    }


def _prepare(folder: str) -> None:
    import numpy as np

    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4))
    y = np.sin(X[:, 0])
    kp.save(kp.NystromRegressor(n_centers=50, random_state=0).fit(X, y), f"{folder}/m.kp")
    header = "x0,x1,x2,x3\n"
    rows = "\n".join(",".join(f"{v:.6f}" for v in r) for r in X[:100])
    Path(folder, "x.csv").write_text(header + rows + "\n")


def run(runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _prepare(folder)
        cmds = commands(folder)
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(runs):
            for name, cmd in cmds.items():
                t = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True)
                times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    OUT.write_text(json.dumps({"runs": runs, "median_s": med, "times": times}, indent=2) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    med = res["median_s"]
    sk = med["import sklearn"]
    targets = {
        "kernelpath --help": ("≤ 0.5 s", med["kernelpath --help"] <= 0.5),
        "kernelpath predict": ("≤ import sklearn + 1 s", med["kernelpath predict"] <= sk + 1),
        "import kernelpath": ("≤ import sklearn + 0.3 s", med["import kernelpath"] <= sk + 0.3),
    }
    lines = ["| command | wall time (s) | above `import sklearn` | target |", "|---|---:|---:|---|"]
    for name, s in med.items():
        target = targets.get(name)
        cell = "" if target is None else f"{target[0]}: {'met' if target[1] else 'missed'}"
        lines.append(f"| `{name}` | {s:.2f} | {s - sk:+.2f} | {cell} |")
    lines.append("")
    lines.append(f"Fresh processes, median of {res['runs']}, on this project's 2-core machine.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "table"])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    if a.mode == "run":
        run(a.runs)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
