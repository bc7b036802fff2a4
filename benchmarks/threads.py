"""BLAS threads during a fit: the policy of ``kernelpath._threads`` against the alternatives.

    python benchmarks/threads.py run [--fits adult/cg,ijcnn1/rf] [--rounds 3]
    python benchmarks/threads.py table

Each fit is ``benchmarks/defaults.py``'s default estimator (the width screen included) on its
set's first split, timed in a fresh process, the modes alternating, median of ``--rounds``:

- ``libraries``: BLAS on the libraries' own threads throughout (kernelpath before
  ``_threads``: ``fit_threads`` replaced by a context that does nothing);
- ``fit_threads``: the default (one BLAS thread in the fit, the dense factorizations on the
  threads from before it);
- ``one_thread``: one BLAS thread throughout (``DENSE_MIN_FLOPS`` infinite);
- ``timeout4``: the default with ``OPENBLAS_THREAD_TIMEOUT=4`` in the environment (OpenBLAS's
  threads stop spinning at once; only a user can set it, before NumPy loads).

Writes ``results/threads.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "threads.json"
FITS = (
    "adult/cg",
    "ijcnn1/cg",
    "cpusmall/cg",
    "concrete/cg",
    "ijcnn1/rf",
    "cpusmall/rf",
    "yacht/rf",
)
MODES = ("libraries", "fit_threads", "one_thread", "timeout4")


def worker(fit: str, mode: str) -> dict[str, Any]:
    """In a fresh process: one default fit under ``mode``."""
    import contextlib

    sys.path.insert(0, str(HERE))
    import defaults

    import kernelpath._threads
    import kernelpath.estimators._base

    if mode == "libraries":
        kernelpath.estimators._base.fit_threads = contextlib.nullcontext  # type: ignore[assignment]
    elif mode == "one_thread":
        kernelpath._threads.DENSE_MIN_FLOPS = float("inf")
    name, solver = fit.split("/")
    data = defaults.load(name, 0)
    est = defaults.estimator(name, solver, 0)
    t = time.perf_counter()
    est.fit(data[0], data[1])
    seconds = time.perf_counter() - t
    error = defaults.test_error(name, data[3], est.predict(data[2]))
    return {"fit_s": seconds, "test_error": error}


def run(fits: list[str], rounds: int) -> None:
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    for fit in fits:
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        for _ in range(rounds):
            for mode in MODES:
                env = dict(os.environ)
                if mode == "timeout4":
                    env["OPENBLAS_THREAD_TIMEOUT"] = "4"
                out = subprocess.run(
                    [sys.executable, __file__, "worker", fit, mode],
                    check=True,
                    capture_output=True,
                    text=True,
                    env=env,
                )
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
        res[fit] = {
            "median_s": {m: statistics.median(r["fit_s"] for r in runs[m]) for m in MODES},
            "test_error": {m: runs[m][0]["test_error"] for m in MODES},
            "runs": runs,
        }
        med = res[fit]["median_s"]
        print(fit, " ".join(f"{m} {med[m]:.2f}" for m in MODES), flush=True)
        OUT.write_text(json.dumps(res, indent=1))


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "| fit | " + " | ".join(MODES) + " | default vs libraries | test error (spread) |",
        "|---" * (len(MODES) + 3) + "|",
    ]
    for fit, r in res.items():
        med = r["median_s"]
        errs = list(r["test_error"].values())
        spread = (max(errs) - min(errs)) / abs(errs[0])  # rounding: the modes' BLAS threads
        cells = " | ".join(f"{med[m]:.2f} s" for m in MODES)
        ratio = med["fit_threads"] / med["libraries"]
        lines.append(f"| {fit} | {cells} | {ratio:.2f}× | {errs[0]:.4g} ({spread:.0e}) |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run", "table", "worker"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--fits", default=",".join(FITS))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(*a.args)))
    elif a.mode == "run":
        run(a.fits.split(","), a.rounds)
    else:
        print(table())


if __name__ == "__main__":
    main()
