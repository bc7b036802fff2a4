"""Accuracy on every shared set and MNIST: kernelpath's default against the learned widths
(``sigma="ard"``), the learned metric (``sigma="agop"``), gradient boosting and
scikit-learn's Nystroem + ridge at the same m: what the default search and its options buy.

    python benchmarks/accuracy.py run [--sets a,b] [--seeds 0,1,2] [--methods m1,m2]
                                      [--timeout 1800] [--force]
    python benchmarks/accuracy.py table

Every set as a new user has it (``defaults.load``: raw features, the official split where a
set has one — ijcnn1, adult, USPS, MNIST — else a random 80/20 split by the seed). Methods,
each fit in a fresh process (``worker``), its fit timed there:

- ``default``: ``NystromRegressor()`` / ``NystromClassifier()`` with ``random_state=seed``;
- ``search_none``, ``search_full``: the same with ``search="none"`` (the default before the
  search: the Gaussian, its width screened, m = sqrt(n) log(n)) and ``search="full"``;
- ``ard``: the same with ``kernel=Gaussian("ard")``;
- ``agop``: the same with ``kernel=Gaussian("agop")``;
- ``agop_diagonal``: the same with ``kernel=Gaussian("agop_diagonal")`` (the metric's
  diagonal only);
- ``agop_laplacian``: the same with ``kernel=Laplacian("agop")``;
- ``laplacian``, ``matern15``, ``matern25``: the default with ``kernel=Laplacian()``,
  ``Matern(nu=1.5)``, ``Matern(nu=2.5)`` (the width screened as for the Gaussian): whether a
  screen over the kernel family would pay;
- ``family``: the default with ``kernel=[Gaussian(), Matern(nu=1.5), Matern(nu=2.5),
  Laplacian()]`` (each width screened, the hold-out choosing among the four);
- ``hgb``: ``HistGradientBoostingRegressor`` / ``Classifier(random_state=seed)``, defaults;
- ``sk_nystroem``: ``StandardScaler`` + ``Nystroem(n_components=m, random_state=seed)`` +
  ``RidgeCV`` (regression) or ``LogisticRegressionCV`` (classification), scikit-learn's
  defaults otherwise, at kernelpath's default m for the set's training rows.

Results: ``results/accuracy.json``, one entry per ``set/seed/method`` (rerun only with
``--force``); a process past ``--timeout`` seconds is recorded as timed out.
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
sys.path.insert(0, str(HERE))

from defaults import CLASSIFICATION as _CLS  # noqa: E402
from defaults import SETS as _SETS  # noqa: E402
from defaults import load as _load  # noqa: E402

OUT = HERE / "results" / "accuracy.json"
#: Tables with text columns and missing values, fitted as they are read (``load``).
TABLES = ("adult_raw", "ames")
SETS = [*_SETS, "mnist", *TABLES]
CLASSIFICATION = (*_CLS, "mnist", "adult_raw")
OFFICIAL = (*_CLS, "mnist", "adult_raw")
DATA = HERE.parent.parent / "shared" / "data"
METHODS = (
    "default",
    "search_none",
    "search_full",
    "ard",
    "agop",
    "agop_diagonal",
    "agop_laplacian",
    "laplacian",
    "matern15",
    "matern25",
    "family",
    "hgb",
    "sk_nystroem",
    "hand_encoded",
    "hgb_interval",
)


def load(name: str, seed: int) -> tuple[Any, ...]:
    """(X_train, y_train, X_test, y_test) as a new user has them (the tables as pandas
    frames, as ``read_csv`` gives them: adult_raw's official split, Ames' log price split
    80/20 by the seed)."""
    if name in TABLES:
        import pandas as pd

        if name == "adult_raw":
            tr = pd.read_csv(DATA / "adult_raw" / "adult.data.csv.gz")
            te = pd.read_csv(DATA / "adult_raw" / "adult.test.csv.gz")
            ytr, yte = tr.pop("class").to_numpy(), te.pop("class").to_numpy()
            return tr, ytr, te, yte
        df = pd.read_csv(DATA / "ames" / "ames.csv.gz").drop(columns="Id")
        y = np.log(df.pop("SalePrice").to_numpy(dtype=float))
        perm = np.random.default_rng(seed).permutation(len(df))
        cut = int(0.8 * len(df))
        tr, te = perm[:cut], perm[cut:]
        return df.iloc[tr], y[tr], df.iloc[te], y[te]
    if name == "mnist":
        from kernelpath.datasets import load_shared

        d = load_shared("mnist")
        return d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    return _load(name, seed)


def test_error(name: str, y: np.ndarray, pred: np.ndarray) -> float:
    """Error rate in percent (classification) or RMSE averaged over the outputs."""
    if name in CLASSIFICATION:
        return float(100 * np.mean(np.asarray(pred) != y))
    r = (np.asarray(pred) - y).reshape(len(y), -1)
    return float(np.mean(np.sqrt(np.mean(r**2, axis=0))))


def make(name: str, method: str, seed: int, n_train: int) -> Any:
    """The estimator of ``method`` for set ``name``."""
    cls = name in CLASSIFICATION
    if method == "hgb" and name in TABLES:  # its own categorical support, from the dtypes
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        hgb_cls = HistGradientBoostingClassifier if cls else HistGradientBoostingRegressor
        return _Categorized(hgb_cls(categorical_features="from_dtype", random_state=seed))
    if method == "hand_encoded":
        return _hand_encoded(cls, seed)
    if method == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
        from sklearn.multioutput import MultiOutputRegressor

        if cls:
            return HistGradientBoostingClassifier(random_state=seed)
        two = name in ("naval", "energy")
        hgb = HistGradientBoostingRegressor(random_state=seed)
        return MultiOutputRegressor(hgb) if two else hgb
    if method == "sk_nystroem":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import LogisticRegressionCV, RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        from kernelpath.fitting.kernel_models import default_n_centers

        m = default_n_centers(n_train)
        last = LogisticRegressionCV() if cls else RidgeCV()
        return make_pipeline(StandardScaler(), Nystroem(n_components=m, random_state=seed), last)
    import kernelpath as kp

    est = kp.NystromClassifier if cls else kp.NystromRegressor
    if method in ("search_none", "search_full"):
        return est(search=method.split("_")[1], random_state=seed)
    kernel = {
        "default": None,
        "ard": kp.Gaussian("ard"),
        "agop": kp.Gaussian("agop"),
        "agop_diagonal": kp.Gaussian("agop_diagonal"),
        "agop_laplacian": kp.Laplacian("agop"),
        "laplacian": kp.Laplacian("auto"),
        "matern15": kp.Matern("auto", nu=1.5),
        "matern25": kp.Matern("auto", nu=2.5),
        "family": [
            kp.Gaussian("auto"),
            kp.Matern("auto", nu=1.5),
            kp.Matern("auto", nu=2.5),
            kp.Laplacian("auto"),
        ],
    }[method]
    return est(random_state=seed) if kernel is None else est(kernel=kernel, random_state=seed)


class _Categorized:
    """Gradient boosting on a frame whose text columns are made pandas categories (what
    ``categorical_features="from_dtype"`` reads)."""

    def __init__(self, est: Any) -> None:
        self.est = est

    @staticmethod
    def _frame(X: Any) -> Any:
        out = X.copy()
        for c in out.columns:
            if out[c].dtype.kind not in "biuf":
                out[c] = out[c].astype("category")
        return out

    def fit(self, X: Any, y: Any) -> _Categorized:
        self.est.fit(self._frame(X), y)
        return self

    def predict(self, X: Any) -> Any:
        return self.est.predict(self._frame(X))


def _hand_encoded(cls: bool, seed: int) -> Any:
    """What a user builds by hand: one-hot text columns, median-imputed numeric columns with
    missing indicators, standardized, before the default estimator (``scale=False``)."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    import kernelpath as kp

    numeric = make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler())
    text = make_pipeline(
        SimpleImputer(strategy="constant", fill_value="missing"),
        OneHotEncoder(handle_unknown="ignore", sparse_output=False),
    )
    prep = ColumnTransformer(
        [
            ("num", numeric, make_column_selector(dtype_include="number")),
            ("text", text, make_column_selector(dtype_exclude="number")),
        ]
    )
    est = kp.NystromClassifier if cls else kp.NystromRegressor
    return make_pipeline(prep, est(scale=False, random_state=seed))


def _hgb_interval(name: str, seed: int, Xtr: Any, ytr: Any, Xte: Any, yte: Any) -> dict:
    """Gradient boosting's 0.05 / 0.95 quantile interval: its test coverage and width."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    Y, Yt = np.reshape(ytr, (len(ytr), -1)), np.reshape(yte, (len(yte), -1))
    Xtr, Xte = (X.toarray() if hasattr(X, "toarray") else X for X in (Xtr, Xte))
    covered, widths = [], []
    t = time.perf_counter()
    for k in range(Y.shape[1]):
        lo, hi = (
            HistGradientBoostingRegressor(loss="quantile", quantile=q, random_state=seed)
            .fit(Xtr, Y[:, k])
            .predict(Xte)
            for q in (0.05, 0.95)
        )
        covered.append(float(np.mean((Yt[:, k] >= lo) & (Yt[:, k] <= hi))))
        widths.append(float(np.mean(hi - lo)))
    return {
        "fit_s": time.perf_counter() - t,
        "interval_coverage": float(np.mean(covered)),
        "interval_width": widths,
        "n_train": int(Xtr.shape[0]),
    }


def _intervals(est: Any, Xte: Any, yte: Any) -> dict[str, Any]:
    """A regressor's split-conformal 90% interval and its 1.645 sigma interval: their test
    coverage (averaged over the outputs) and mean widths (per output)."""
    out: dict[str, Any] = {}
    Yt = np.reshape(yte, (len(yte), -1))
    I = est.predict_interval(Xte, coverage=0.9)
    I = I[:, :, None] if I.ndim == 2 else I
    out["interval_coverage"] = float(np.mean((Yt >= I[:, 0]) & (Yt <= I[:, 1])))
    out["interval_width"] = [float(v) for v in np.mean(I[:, 1] - I[:, 0], axis=0)]
    try:
        mean, std = est.predict(Xte, return_std=True)
    except ValueError:
        return out
    mean, std = np.reshape(mean, Yt.shape), np.reshape(std, Yt.shape)
    out["std_coverage"] = float(np.mean(np.abs(Yt - mean) <= 1.645 * std))
    out["std_width"] = [float(v) for v in np.mean(2 * 1.645 * std, axis=0)]
    return out


def worker(name: str, seed: int, method: str) -> dict[str, Any]:
    """In this process: fit, time, score."""
    import resource

    Xtr, ytr, Xte, yte = load(name, seed)
    if method == "hgb_interval":
        return _hgb_interval(name, seed, Xtr, ytr, Xte, yte)
    est = make(name, method, seed, Xtr.shape[0])
    t = time.perf_counter()
    est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t
    out: dict[str, Any] = {
        "fit_s": fit_s,
        "test_error": test_error(name, yte, est.predict(Xte)),
        "n_train": int(Xtr.shape[0]),
        "d": int(Xtr.shape[1]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if name not in CLASSIFICATION and hasattr(est, "predict_interval"):
        out.update(_intervals(est, Xte, yte))
    if hasattr(est, "n_centers_"):
        out["n_centers"] = int(est.n_centers_)
        out["kernel"] = type(est.kernel_).__name__ + (
            f"({est.kernel_.nu})" if hasattr(est.kernel_, "nu") else ""
        )
    if getattr(est, "search_results_", None) is not None:
        out["search"] = [
            {k: v for k, v in row.items() if k != "val_error"}
            for row in est.search_results_
            if row["chosen"]
        ]
    info = getattr(est, "agop_info_", None)
    if info is not None:
        out["chosen_round"] = info["chosen_round"]
        out["rounds"] = [
            {k: r.get(k) for k in ("round", "val_error", "sigma", "rank", "stopped")}
            for r in info["rounds"]
        ]
    return out


def _results() -> dict[str, Any]:
    return json.loads(OUT.read_text()) if OUT.exists() else {"runs": {}}


def _save(res: dict[str, Any]) -> None:
    OUT.write_text(json.dumps(res, indent=1) + "\n")


def run(sets: list[str], seeds: list[int], methods: list[str], timeout: float, force: bool) -> None:
    res = _results()
    for seed in seeds:
        for name in sets:
            if name in OFFICIAL and seed != seeds[0]:
                continue  # one official split: the seeds change only the methods' draws
            for method in methods:
                key = f"{name}/{seed}/{method}"
                if key in res["runs"] and not force:
                    continue
                cmd = [sys.executable, __file__, "worker", name, str(seed), method]
                try:
                    out = subprocess.run(
                        cmd, check=True, capture_output=True, text=True, timeout=timeout
                    )
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                except subprocess.TimeoutExpired:
                    r = {"timed_out": timeout}
                except subprocess.CalledProcessError as exc:
                    r = {"failed": exc.stderr.strip().splitlines()[-1][:300]}
                res = _results()  # another run may have written meanwhile
                res["runs"][key] = r
                _save(res)
                print(key, json.dumps({k: r[k] for k in r if k != "rounds"}), flush=True)


def summary(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per set and method: the mean test error and the median fit time over the seeds."""
    out: dict[str, dict[str, Any]] = {}
    for key, r in res["runs"].items():
        name, _, method = key.split("/")
        cell = out.setdefault(name, {}).setdefault(method, {"errors": [], "times": []})
        if "test_error" not in r:
            cell.setdefault("missing", next(iter(r)))
            continue
        cell["errors"].append(r["test_error"])
        cell["times"].append(r["fit_s"])
    for methods in out.values():
        for cell in methods.values():
            if cell["errors"]:
                cell.pop("missing", None)
                cell["test_error"] = float(np.mean(cell["errors"]))
                cell["fit_s"] = float(np.median(cell["times"]))
                cell["seeds"] = len(cell["errors"])
    return out


def _within(cls: bool, a: float, ref: float) -> bool:
    """The target's test: within 0.3 points (classification) or 3% (regression) of ref, or
    better."""
    return a <= ref + 0.3 if cls else a <= 1.03 * ref


def table(res: dict[str, Any]) -> str:
    """The docs' table: test error (fit seconds) per set and method, and the tallies."""
    s = summary(res)
    methods = [m for m in METHODS if any(m in v for v in s.values())]
    head = "| set | " + " | ".join(methods) + " |"
    lines = [head, "|" + "---|" * (len(methods) + 1)]
    tally = {m: 0 for m in methods}
    counted = 0
    for name in SETS:
        if name not in s:
            continue
        row = s[name]
        most = max(c.get("seeds", 0) for c in row.values())
        cells = []
        for m in methods:
            c = row.get(m)
            if c is None:
                cells.append("—")
            elif "missing" in c:
                cells.append(c["missing"].replace("_", " "))
            else:
                err = c["test_error"]
                fmt = f"{err:.2f}%" if name in CLASSIFICATION else f"{err:.4g}"
                fewer = f", {c['seeds']} of {most} seeds" if c["seeds"] < most else ""
                cells.append(f"{fmt} ({c['fit_s']:.1f} s{fewer})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        hgb = row.get("hgb", {}).get("test_error")
        if hgb is not None and name != "mnist":
            counted += 1
            for m in methods:
                e = row.get(m, {}).get("test_error")
                if e is not None and _within(name in CLASSIFICATION, e, hgb):
                    tally[m] += 1
    lines.append(
        f"| within 3% (0.3 pt) of gradient boosting or better, of {counted} | "
        + " | ".join(str(tally[m]) for m in methods)
        + " |"
    )
    return "\n".join(lines)


def _runs_of(res: dict[str, Any], name: str, method: str) -> list[dict[str, Any]]:
    """The recorded runs of ``name``/``method``, one per seed."""
    return [
        r for k, r in res["runs"].items() if k.split("/")[0] == name and k.split("/")[2] == method
    ]


def _mean_of(res: dict[str, Any], name: str, method: str, key: str) -> float | None:
    """The mean of ``key`` over the seeds of ``name``/``method`` (None: never measured)."""
    vals = [r[key] for r in _runs_of(res, name, method) if key in r]
    return float(np.mean(vals)) if vals else None


def _mean_width(res: dict[str, Any], name: str, method: str) -> float | None:
    """The mean interval width of ``name``/``method`` over its seeds and outputs."""
    vals = [
        float(np.mean(r["interval_width"]))
        for r in _runs_of(res, name, method)
        if "interval_width" in r
    ]
    return float(np.mean(vals)) if vals else None


def defaults_table(res: dict[str, Any]) -> str:
    """The default (``search="auto"``) against ``search="none"`` and gradient boosting: test
    error and median fit seconds over the seeds, the targets' tests, and the intervals'
    test coverage at 0.9 (conformal, 1.645 sigma and boosting's quantile interval)."""
    s = summary(res)
    lines = [
        '| set | default | search="none" | gradient boosting | time ratio | within 3% '
        "(0.3 pt) of boosting | conformal 0.9 | 1.645 sigma | boosting quantiles | width: "
        "conformal / boosting's |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    within = measured = 0
    for name in SETS:
        row = s.get(name, {})
        d, n, h = (row.get(m, {}) for m in ("default", "search_none", "hgb"))
        if "test_error" not in d:
            continue
        cls = name in CLASSIFICATION

        def cell(c: dict[str, Any], cls: bool = cls) -> str:
            if "test_error" not in c:
                return "—"
            e = c["test_error"]
            return (f"{e:.2f}%" if cls else f"{e:.4g}") + f" ({c['fit_s']:.1f} s)"

        ratio = f"{d['fit_s'] / n['fit_s']:.1f}x" if "fit_s" in n else "—"
        ok = "—"
        if "test_error" in h:
            good = _within(cls, d["test_error"], h["test_error"])
            ok = "yes" if good else "no"
            if name in SETS[:15]:
                measured += 1
                within += good
        cov = [
            _mean_of(res, name, m, k)
            for m, k in (
                ("default", "interval_coverage"),
                ("default", "std_coverage"),
                ("hgb_interval", "interval_coverage"),
            )
        ]
        covs = " | ".join("—" if c is None else f"{c:.3f}" for c in cov)
        widths = [_mean_width(res, name, m) for m in ("default", "hgb_interval")]
        covs += " | " + (
            "—" if None in widths else f"{widths[0] / widths[1]:.2f}"  # type: ignore[operator]
        )
        lines.append(f"| {name} | {cell(d)} | {cell(n)} | {cell(h)} | {ratio} | {ok} | {covs} |")
    lines.append(
        f"\nThe default within 3% (0.3 points) of gradient boosting: {within} of {measured} "
        "shared sets."
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--sets", default=",".join(SETS))
    r.add_argument("--seeds", default="0,1,2")
    r.add_argument("--methods", default=",".join(METHODS))
    r.add_argument("--timeout", type=float, default=1800.0)
    r.add_argument("--force", action="store_true")
    w = sub.add_parser("worker")
    w.add_argument("name")
    w.add_argument("seed", type=int)
    w.add_argument("method")
    sub.add_parser("table")
    sub.add_parser("defaults", help="the default against search='none' and boosting")
    a = ap.parse_args()
    if a.cmd == "worker":
        print(json.dumps(worker(a.name, a.seed, a.method)))
    elif a.cmd == "run":
        sets = a.sets.split(",")
        bad = [v for v in sets if v not in SETS] + [
            m for m in a.methods.split(",") if m not in METHODS
        ]
        if bad:
            ap.error(f"unknown sets or methods: {bad}")
        seeds = [int(v) for v in a.seeds.split(",")]
        run(sets, seeds, a.methods.split(","), a.timeout, a.force)
    elif a.cmd == "defaults":
        print(defaults_table(_results()))
    else:
        print(table(_results()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
