"""The thesis's Table 6.2 (SGM and SIGM with the hinge loss) on the rows whose data is here,
with the thesis's settings, beside the published values.

    python benchmarks/run.py thesis_table62 run [--reps 10] [--rows breastcancer,adult1000,...]
    python benchmarks/run.py thesis_table62 table [--write]
    python benchmarks/run.py thesis_table62 run --wide --rows ijcnn1000 --reps 3
        # the experiment on the gaps: steps up to 1000 and up to 500 passes ("<row>:wide")
    python benchmarks/run.py thesis_table62 run --hinge --rows adult1000,ijcnn1000 --reps 3
        # SGM's step (C) or θ (D) chosen by the hold-out's hinge loss ("<row>:hinge")
    python benchmarks/run.py thesis_table62 run --intercept --rows ijcnn1000,adult1000 --reps 3
        # the same four methods with an unpenalized intercept ("<row>:intercept")
    python benchmarks/run.py thesis_table62 run --averaged
        # the same four methods scored by eq. 6.4's step-weighted average ("<row>:averaged")
    python benchmarks/run.py thesis_table62 run --last --reps 3
        # SIGM's last iterate after all its passes, without early stopping ("<row>:last")

Settings, as Sec. 6.4 prints them: the Gaussian widths of Table 6.1 (breast cancer σ = 0.4,
adult σ = 4, ijcnn1 σ = 0.6), the hinge loss, one example per step (eq. 6.3), a hold-out of
20% of the training set reshuffled in every repetition, 10 repetitions. The four methods:

- SGM, constant step (C): one pass, θ = 0, the step chosen on the hold-out among 30 values
  (the thesis does not print them; here log-spaced in [1e-3, 1], its Fig. 6.2a's range);
- SGM, decaying step (D): one pass, η = 1/4, θ chosen on the hold-out among 30 values in [0, 1];
- SIGM (C): η = 1/√n, θ = 0, passes chosen by early stopping on the hold-out;
- SIGM (D): η = 1/4, θ = 1/2, passes chosen by early stopping.

The thesis runs SGM on the kernel itself. Here the feature map is the Nyström map on every
training point (``features="nystrom"``, ``n_features`` = the training rows): its inner
products are the kernel's on the training points, and the iterates of eq. 6.3 stay in their
span, so the iteration is the kernelized one. No intercept, no input scaling beyond the
authors' data classes (adult's 0/1 indicators as ±1, ijcnn1 as LIBSVM ships it, breast cancer
as the NYTRO reference code's file, min-max scaled). Rows "adult1000" / "ijcnn1000" draw 1000
training points at random from the training file in each repetition and test on the whole
test file.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from _common import h, load_pm1, load_results, mean_sd, save_results, within, write_block

#: row -> (data set, σ, training points or None for all), and the published
#: (hinge loss, ±), (class error %, ±), in the order SGM C, SGM D, SIGM C, SIGM D
ROWS: dict[str, dict[str, Any]] = {
    "breastcancer": {
        "data": "breastcancer",
        "sigma": 0.4,
        "n": None,
        "hinge": [(0.127, 0.022), (0.135, 0.024), (0.131, 0.023), (0.204, 0.017)],
        "error": [(3.1, 1.1), (3.0, 1.1), (3.2, 1.1), (3.9, 1.0)],
    },
    "adult1000": {
        "data": "adult",
        "sigma": 4.0,
        "n": 1000,
        "hinge": [(0.380, 0.003), (0.378, 0.002), (0.383, 0.002), (0.450, 0.002)],
        "error": [(16.6, 0.3), (16.2, 0.2), (16.1, 0.0), (23.6, 0.0)],
    },
    "ijcnn1000": {
        "data": "ijcnn1",
        "sigma": 0.6,
        "n": 1000,
        "hinge": [(0.199, 0.016), (0.199, 0.009), (0.205, 0.010), (0.267, 0.006)],
        "error": [(8.4, 0.8), (9.1, 0.1), (9.3, 0.5), (9.4, 0.6)],
    },
}
METHODS = ("SGM C", "SGM D", "SIGM C", "SIGM D")
MAX_PASSES = 100


def _row_data(row: str, rep: int) -> tuple[np.ndarray, ...]:
    """The row's training and test arrays for repetition ``rep`` (a fresh draw of the
    training points where the row has n)."""
    spec = ROWS[row]
    Xtr, ytr, Xte, yte = load_pm1(spec["data"])
    if spec["n"] is not None:
        pick = np.random.default_rng(100 + rep).choice(len(Xtr), spec["n"], replace=False)
        Xtr, ytr = Xtr[pick], ytr[pick]
    return Xtr, ytr, Xte, yte


def _sgm(row: str, n: int, rep: int, intercept: bool = False, **kw: Any) -> Any:
    """Eq. 6.3 (one example per step, hinge loss, no intercept unless ``intercept``) on the
    Nyström map of the n - round(0.2 n) rows it is fitted on: the kernelized iteration."""
    import kernelpath as kp

    return kp.SGMClassifier(
        kp.Gaussian(ROWS[row]["sigma"]),
        loss="hinge",
        features="nystrom",
        n_features=n - int(round(0.2 * n)),
        batch_size=1,
        fit_intercept=intercept,
        scale=False,
        refit=False,
        random_state=rep,
        **kw,
    )


def _hinge(y: np.ndarray, f: np.ndarray) -> float:
    return float(np.mean(np.maximum(0.0, 1.0 - y * f)))


def _record(label: str, method: str, rep: int, est: Any, Xte: Any, yte: Any, sec: float) -> Any:
    f = np.asarray(est.decision_function(Xte)).ravel()
    out = {
        "row": label,
        "method": method,
        "rep": rep,
        "hinge": _hinge(yte, f),
        "error_pct": float(100 * np.mean(np.where(f >= 0, 1.0, -1.0) != yte)),
        "time": sec,
        "best_params": {k: float(v) for k, v in est.best_params_.items()},
    }
    print(out, flush=True)
    return out


def fit_row(
    row: str,
    rep: int,
    tag: str = "",
    wide: bool = False,
    intercept: bool = False,
    averaged: bool = False,
) -> list[dict[str, Any]]:
    Xtr, ytr, Xte, yte = _row_data(row, rep)
    n = len(Xtr)
    passes = 5 * MAX_PASSES if wide else MAX_PASSES
    settings = {
        "SGM C": dict(step_size=np.logspace(-3, 3 if wide else 0, 30), decay=0.0, n_passes=1),
        "SGM D": dict(step_size=0.25, decay=np.linspace(0, 1, 30), n_passes=1),
        "SIGM C": dict(step_size=1 / np.sqrt(n), decay=0.0, n_passes=passes),
        "SIGM D": dict(step_size=0.25, decay=0.5, n_passes=passes),
    }
    if averaged:  # eq. 6.4: the iterates averaged with weights eta_k
        for kw in settings.values():
            kw.update(averaged=True, averaging="step")
    out = []
    for method in METHODS:
        est = _sgm(row, n, rep, intercept, n_iter_no_change=10, **settings[method])
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        sec = time.perf_counter() - t0
        out.append(_record(row + tag, method, rep, est, Xte, yte, sec))
    return out


def fit_row_hinge(row: str, rep: int) -> list[dict[str, Any]]:
    """SGM C and D with the step (or θ) chosen by the hold-out's hinge loss instead of its
    classification error: one fit per candidate, the same split, centers and draws."""
    Xtr, ytr, Xte, yte = _row_data(row, rep)
    grids = {
        "SGM C": [dict(step_size=float(s), decay=0.0) for s in np.logspace(-3, 0, 30)],
        "SGM D": [dict(step_size=0.25, decay=float(t)) for t in np.linspace(0, 1, 30)],
    }
    out = []
    for method, grid in grids.items():
        best: tuple[float, Any] | None = None
        for kw in grid:
            est = _sgm(row, len(Xtr), rep, n_passes=1, **kw).fit(Xtr, ytr)
            va = est.validation_indices_
            h = _hinge(ytr[va], np.asarray(est.decision_function(Xtr[va])).ravel())
            if best is None or h < best[0]:
                best = (h, est)
        assert best is not None
        out.append(_record(row + ":hinge", method, rep, best[1], Xte, yte, 0.0))
    return out


def fit_row_last(row: str, rep: int) -> list[dict[str, Any]]:
    """SIGM C and D without early stopping: the last of ``MAX_PASSES`` passes on the same
    training part (the early-stopped fit's split, nothing held out in the second fit)."""
    Xtr, ytr, Xte, yte = _row_data(row, rep)
    n = len(Xtr)
    settings = {
        "SIGM C": dict(step_size=1 / np.sqrt(n), decay=0.0, n_passes=MAX_PASSES),
        "SIGM D": dict(step_size=0.25, decay=0.5, n_passes=MAX_PASSES),
    }
    out = []
    for method, kw in settings.items():
        tr = _sgm(row, n, rep, n_iter_no_change=10, **kw).fit(Xtr, ytr).train_indices_
        # the map of the same n - round(0.2 n) rows, none held out, every pass run
        est = _sgm(row, n, rep, validation_fraction=0.0, n_iter_no_change=None, **kw)
        t0 = time.perf_counter()
        est.fit(Xtr[tr], ytr[tr])
        sec = time.perf_counter() - t0
        est.best_params_ = {"n_passes": MAX_PASSES}
        out.append(_record(row + ":last", method, rep, est, Xte, yte, sec))
    return out


def run(
    rows: str = ",".join(ROWS),
    reps: int = 10,
    wide: bool = False,
    hinge: bool = False,
    intercept: bool = False,
    averaged: bool = False,
    last: bool = False,
) -> str:
    """The rows' repetitions in this process, one variant of the methods at a time (the
    flags); each variant's rows are kept under "<row>:<variant>"."""
    results = load_results("thesis_table62", {})
    flags = {"last": last, "hinge": hinge, "wide": wide, "intercept": intercept}
    tag = next((f":{k}" for k, on in {**flags, "averaged": averaged}.items() if on), "")
    for row in h.names(rows):
        runs: list[dict[str, Any]] = []
        for rep in range(reps):
            if last:
                runs += fit_row_last(row, rep)
            elif hinge:
                runs += fit_row_hinge(row, rep)
            else:
                runs += fit_row(row, rep, tag, wide, intercept, averaged)
            results[row + tag] = runs
            save_results("thesis_table62", results)
    return table()


def table(write: bool = False) -> str:
    """Table 6.2 beside the published rows (``--write``: into REPORT.md's block)."""
    results = load_results("thesis_table62")
    lines = [
        "| row | method | hinge loss: published | here | within 2× ± | error %: published "
        "| here | within 2× ± | fit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row, runs in results.items():
        spec = ROWS[row.split(":")[0]]
        for i, method in enumerate(METHODS):
            rs = [r for r in runs if r["method"] == method]
            if not rs:
                continue
            loss, e = [r["hinge"] for r in rs], [r["error_pct"] for r in rs]
            ph, pe = spec["hinge"][i], spec["error"][i]
            lines.append(
                f"| {row} ({len(rs)} reps) | {method} | {ph[0]} ± {ph[1]} | {mean_sd(loss, '.3f')} "
                f"| {within(loss, ph)} | {pe[0]} ± {pe[1]} | {mean_sd(e, '.1f')} | {within(e, pe)} "
                f"| {np.median([r['time'] for r in rs]):.1f} |"
            )
    text = "\n".join(lines)
    if write:
        write_block("thesis_table62", text)
    return text


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table}))
