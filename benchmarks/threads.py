"""BLAS threads during a fit: the policy of ``kernelpath._threads`` against the alternatives.

    python benchmarks/threads.py run [--fits adult/cg,ijcnn1/rf] [--rounds 3]
    python benchmarks/threads.py load [--fits synthetic/rf,adult/cg] [--rounds 3]
    python benchmarks/threads.py table
    python benchmarks/threads.py stream [--streams incremental,recursive] [--rounds 3]
    python benchmarks/threads.py public [--calls leverage-exact,learn-widths] [--rounds 3]

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

``load`` measures the rule on a busy machine (issue 43): each fit with ``LOAD_PROCESSES``
CPU-bound processes beside it (pure-Python loops, started before and stopped after each
fit, each bounded to ``LOAD_LIMIT_S``) and without, in the modes ``fit_threads`` (the rule:
the dense operations on at most the cores free when the fit starts), ``before`` (the rule
without that count: the threads from before the fit; under load only for the synthetic
fits, the issue's measurement) and ``one_thread``. The fits are
``LOAD_FITS``: every default fit of ``benchmarks/defaults.py`` (``SET/cg``) and the issue's
default random features, exact KRLS and EigenPro on 3,000 rows x 8 (``synthetic/FAMILY``:
y = sin(<w, x>) + 0.1 eps). Writes ``results/threads_load.json``.

``stream`` times the online learners (``STREAMS``: 3,000 single-sample updates of
``IncrementalRLSClassifier`` on 200 random Fourier features, then 200 predictions;
``RecursiveRLS`` on 4,000 samples in batches of 20 with 400 features; ``RebalancedRLSClassifier``
on 3,000 samples in batches of 30 with 300 features, predicting after each) in the modes
``one_blas_thread`` (the default: ``_threads.stream_threads`` around every update and
prediction) and ``libraries`` (that context replaced by one that does nothing: kernelpath
before it), with and without ``LOAD_PROCESSES`` busy processes. Writes
``results/threads_stream.json``.

``public`` times the public functions that do a fit's dense work outside an estimator's
``fit`` (``PUBLIC``: exact and approximate leverage scores of 2,500 and 4,000 rows, the
effective dimension of 2,500 rows, ``NystromFeatures`` with 1,500 centers fitted on and
mapping 4,000 rows, ``LeverageCenters`` drawing 800 of 2,500 rows, ``learn_widths`` on
1,500 rows; 10 Gaussian features) in the modes ``fit_threaded`` (the default:
``_threads.fit_threaded`` around each) and ``libraries`` (``fit_threads`` replaced by a
context that does nothing: kernelpath before it), with and without ``LOAD_PROCESSES`` busy
processes. Writes ``results/threads_public.json``.
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
LOAD_OUT = HERE / "results" / "threads_load.json"
LOAD_MODES = ("fit_threads", "before", "one_thread")
LOAD_PROCESSES = 2
LOAD_LIMIT_S = 900
SYNTHETIC = ("synthetic/rf", "synthetic/krls", "synthetic/eigenpro")
#: benchmarks/defaults.py's sets (its ``SETS``), each with its default fit
DEFAULT_SETS = (
    "cpusmall", "pumadyn32nh", "kin8nm", "protein", "power-plant", "naval", "concrete",
    "energy", "wine", "yacht", "airfoil", "abalone", "ijcnn1", "adult", "usps",
)  # fmt: skip
LOAD_FITS = (*SYNTHETIC, *(f"{s}/cg" for s in DEFAULT_SETS))
STREAM_OUT = HERE / "results" / "threads_stream.json"
STREAMS = ("incremental", "recursive", "rebalanced")
STREAM_MODES = ("one_blas_thread", "libraries")
PUBLIC_OUT = HERE / "results" / "threads_public.json"
PUBLIC = (
    "leverage-exact",
    "leverage-approximate",
    "effective-dimension",
    "nystrom-features",
    "leverage-centers",
    "learn-widths",
)
PUBLIC_MODES = ("fit_threaded", "libraries")


def stream_worker(learner: str, mode: str) -> dict[str, Any]:
    """In a fresh process: one online learner's stream under ``mode``."""
    import contextlib

    import numpy as np

    import kernelpath as kp
    import kernelpath._threads

    if mode == "libraries":
        kernelpath._threads.stream_threads = contextlib.nullcontext  # type: ignore[assignment]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 4))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.1 * rng.standard_normal(4000)
    labels = np.where(X[:, 2] > 1.2, 2, (X[:, 0] > 0).astype(int))
    D = {"incremental": 200, "recursive": 400, "rebalanced": 300}[learner]
    phi = kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=D, random_state=0)
    phi.fit(X[:1])
    t = time.perf_counter()
    if learner == "incremental":
        inc = kp.IncrementalRLSClassifier(features=phi, validation_every=6)
        for i in range(3000):
            inc.partial_fit(X[i], labels[i])
        score = float(np.mean(inc.predict(X[3000:3200]) == labels[3000:3200]))
    elif learner == "recursive":
        rls = kp.RecursiveRLS(penalty=1e-3, features=phi)
        for i in range(0, 4000, 20):
            rls.partial_fit(X[i : i + 20], y[i : i + 20])
        score = float(np.sqrt(np.mean((rls.predict(X[:500]) - y[:500]) ** 2)))
    else:
        reb = kp.RebalancedRLSClassifier(penalty=1e-2, features=phi)
        for i in range(0, 3000, 30):
            reb.partial_fit(X[i : i + 30], labels[i : i + 30], classes=[0, 1, 2])
            reb.predict(X[3000:3010])
        score = float(np.mean(reb.predict(X[3000:3500]) == labels[3000:3500]))
    return {"fit_s": time.perf_counter() - t, "score": score}


def public_worker(call: str, mode: str) -> dict[str, Any]:
    """In a fresh process: one public function's call under ``mode``."""
    import contextlib

    import numpy as np

    import kernelpath as kp
    import kernelpath._threads

    if mode == "libraries":
        kernelpath._threads.fit_threads = contextlib.nullcontext  # type: ignore[assignment]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 10))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(4000)
    k = kp.Gaussian(2.0)
    t = time.perf_counter()
    if call == "leverage-exact":
        out = float(kp.leverage_scores(X[:2500], k, 1e-3, "exact").sum())
    elif call == "leverage-approximate":
        out = float(kp.leverage_scores(X, k, 1e-3, "approximate", random_state=0).sum())
    elif call == "effective-dimension":
        out = kp.effective_dimension(X[:2500], k, 1e-3, "exact")[0]
    elif call == "nystrom-features":
        Phi = kp.NystromFeatures(k, n_components=1500, random_state=0).fit(X).transform(X)
        out = float(np.linalg.norm(Phi))
    elif call == "leverage-centers":
        sel = kp.LeverageCenters(penalty=1e-3).select(X[:2500], 800, np.random.default_rng(0), k)
        out = float(sel.scores.sum())
    else:
        out = float(np.sum(kp.learn_widths(k, X[:1500], y[:1500], random_state=0).sigma))
    return {"fit_s": time.perf_counter() - t, "value": out}


def public(calls: list[str], rounds: int) -> None:
    """Each call under load and quiet, the modes alternating, median of ``rounds``."""
    for call in calls:
        _loaded_rounds(PUBLIC_OUT, call, ["public-worker", call], PUBLIC_MODES, rounds, "value")


def public_table() -> str:
    """The public functions: inside ``fit_threads`` against the libraries' threads, loaded
    and quiet."""
    return _against_libraries(PUBLIC_OUT, "call", "fit_threaded", "fit threads")


def stream(learners: list[str], rounds: int) -> None:
    """Each learner under load and quiet, the modes alternating, median of ``rounds``."""
    for learner in learners:
        _loaded_rounds(
            STREAM_OUT, learner, ["stream-worker", learner], STREAM_MODES, rounds, "score"
        )


def stream_table() -> str:
    """The online learners: one BLAS thread against the libraries' threads, loaded and
    quiet."""
    return _against_libraries(STREAM_OUT, "learner", "one_blas_thread", "one thread")


def _against_libraries(out: Path, what: str, mode: str, label: str) -> str:
    """The table of ``out``'s entries: ``mode`` against the libraries' threads, loaded and
    quiet (``what``: the first column's heading; ``label``: the mode's)."""
    res = json.loads(out.read_text())
    lines = [
        f"| {what} | loaded: {label} | libraries | ratio | quiet: {label} | libraries | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in res.items():
        m = r["median_s"]
        cells = []
        for state in ("load", "quiet"):
            own, lib = m[f"{state}/{mode}"], m[f"{state}/libraries"]
            cells.append(f"{own:.2f} s | {lib:.2f} s | {own / lib:.2f}×")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _synthetic(family: str) -> tuple[Any, ...]:
    import numpy as np

    import kernelpath as kp

    rng = np.random.default_rng(0)
    w = rng.standard_normal(8)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((4000, 8))
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(4000)
    cls = {
        "rf": kp.RandomFeaturesRegressor,
        "krls": kp.KRLSRegressor,
        "eigenpro": kp.EigenProRegressor,
    }[family]
    return cls(random_state=0), X[:3000], y[:3000], X[3000:], y[3000:]


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
    elif mode == "before":  # the rule without the count of busy cores
        kernelpath._threads.free_cores = lambda cores: cores
    name, solver = fit.split("/")
    if name == "synthetic":
        est, Xtr, ytr, Xte, yte = _synthetic(solver)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        seconds = time.perf_counter() - t
        rmse = float(((est.predict(Xte) - yte) ** 2).mean() ** 0.5)
        return {"fit_s": seconds, "test_error": rmse}
    data = defaults.load(name, 0)
    est = defaults.estimator(name, solver, 0)
    t = time.perf_counter()
    est.fit(data[0], data[1])
    seconds = time.perf_counter() - t
    error = defaults.test_error(name, data[3], est.predict(data[2]))
    return {"fit_s": seconds, "test_error": error}


def _busy() -> list[subprocess.Popen[bytes]]:
    """``LOAD_PROCESSES`` CPU-bound loops, each ending by itself after ``LOAD_LIMIT_S``."""
    code = f"import time\nt = time.time()\nwhile time.time() - t < {LOAD_LIMIT_S}: pass"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(LOAD_PROCESSES)]
    time.sleep(0.5)  # running before the fit starts
    return procs


def _loaded_rounds(
    out: Path,
    name: str,
    command: list[str],
    modes: tuple[str, ...],
    rounds: int,
    result: str,
    skip: Any = None,
) -> None:
    """``command`` + [mode] in fresh processes, with ``LOAD_PROCESSES`` busy processes and
    without, the modes alternating, ``rounds`` times (``skip(busy, mode)``: a pair not run),
    recorded in ``out`` under ``name`` beside its other entries: the median time per
    "load/MODE" or "quiet/MODE", every time, and each key's last ``result``."""
    runs: dict[str, list[float]] = {}
    last: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for busy in (True, False):
            for mode in modes:
                if skip is not None and skip(busy, mode):
                    continue
                procs = _busy() if busy else []
                try:
                    done = subprocess.run(
                        [sys.executable, __file__, *command, mode],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
                r = json.loads(done.stdout.strip().splitlines()[-1])
                key = f"{'load' if busy else 'quiet'}/{mode}"
                runs.setdefault(key, []).append(r["fit_s"])
                last[key] = r
    med = {k: statistics.median(v) for k, v in runs.items()}
    res = json.loads(out.read_text()) if out.exists() else {}
    res[name] = {
        "median_s": med,
        result: {k: r[result] for k, r in last.items()},
        "runs": runs,
        "rounds": rounds,
    }
    print(name, " ".join(f"{k} {v:.2f}" for k, v in med.items()), flush=True)
    out.write_text(json.dumps(res, indent=1) + "\n")


def load(fits: list[str], rounds: int) -> None:
    """Each fit under load and quiet, the modes alternating, median of ``rounds``."""
    for fit in fits:
        # "before" loaded: the measurement, on the synthetic fits only (minutes per
        # set otherwise)
        synthetic = fit.startswith("synthetic/")
        _loaded_rounds(
            LOAD_OUT,
            fit,
            ["worker", fit],
            LOAD_MODES,
            rounds,
            "test_error",
            lambda busy, mode, synthetic=synthetic: busy and mode == "before" and not synthetic,
        )


def load_table() -> str:
    """Under load: the rule's time over one thread's (target <= 1.5); quiet: the rule's
    time over the rule without the count (target <= 1, no slower than before)."""
    res = json.loads(LOAD_OUT.read_text())
    lines = [
        "| fit | loaded: rule | before | one thread | rule / one thread | quiet: rule | "
        "before | rule / before |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fit, r in res.items():
        m = r["median_s"]
        before = f"{m['load/before']:.2f} s" if "load/before" in m else "—"
        lines.append(
            f"| {fit} | {m['load/fit_threads']:.2f} s | {before} "
            f"| {m['load/one_thread']:.2f} s "
            f"| {m['load/fit_threads'] / m['load/one_thread']:.2f}× "
            f"| {m['quiet/fit_threads']:.2f} s | {m['quiet/before']:.2f} s "
            f"| {m['quiet/fit_threads'] / m['quiet/before']:.2f}× |"
        )
    return "\n".join(lines)


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
    ap.add_argument(
        "mode",
        choices=[
            "run",
            "load",
            "table",
            "load-table",
            "worker",
            "stream",
            "stream-table",
            "stream-worker",
            "public",
            "public-table",
            "public-worker",
        ],
    )
    ap.add_argument("args", nargs="*")
    ap.add_argument("--fits", default=",".join(FITS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", default=",".join(STREAMS))
    ap.add_argument("--calls", default=",".join(PUBLIC))
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(*a.args)))
    elif a.mode == "run":
        run(a.fits.split(","), a.rounds)
    elif a.mode == "load":
        fits = a.fits.split(",") if a.fits != ",".join(FITS) else list(LOAD_FITS)
        load(fits, a.rounds)
    elif a.mode == "load-table":
        print(load_table())
    elif a.mode == "stream-worker":
        print(json.dumps(stream_worker(*a.args)))
    elif a.mode == "stream":
        stream(a.streams.split(","), a.rounds)
    elif a.mode == "stream-table":
        print(stream_table())
    elif a.mode == "public-worker":
        print(json.dumps(public_worker(*a.args)))
    elif a.mode == "public":
        public(a.calls.split(","), a.rounds)
    elif a.mode == "public-table":
        print(public_table())
    else:
        print(table())


if __name__ == "__main__":
    main()
