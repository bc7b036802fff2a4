"""The defaults against the best width: how close each family's default comes to its oracle.

    python benchmarks/defaults.py accuracy [--sets a,b] [--seeds 0,1,2]
                                           [--solvers cg,direct] [--oracle-solvers cg,direct]
    python benchmarks/defaults.py cost [--sets a,b] [--rounds 3] [--cost-solvers cg,rf]
    python benchmarks/defaults.py refit [--sets a,b] [--seeds 0,1,2]
    python benchmarks/defaults.py table

Every set as a new user has it: raw features as on disk (constant columns kept), the official
train/test files where a set has them (ijcnn1, adult, USPS), else a random 80/20 split with
seeds 0, 1, 2; two-output sets (naval, energy) fit both targets, RMSE averaged over outputs.
The estimator is ``NystromRegressor()`` / ``NystromClassifier()`` with ``random_state=seed``
(CG, its default) and ``solver="direct"``; ``--solvers krls,rf,nytro`` runs the other
families' defaults instead: ``KRLSRegressor()`` / ``KRLSClassifier()`` (on the sets of at
most ``KRLS_MAX_ROWS`` training rows: its O(n^3) path), ``RandomFeaturesRegressor()`` /
``Classifier()`` and ``NYTRORegressor()`` / ``Classifier()``. Methods, per set and seed:

- ``default``: the estimator with no other argument, on the raw features;
- ``scaled``: the same on features standardized on the training part (raw = scaled?);
- ``oracle``: ``kernel=Gaussian(w), scale=False`` on the standardized features for 15
  widths w log-spaced over 1/16-8 x their median distance (λ on the same hold-out, the same
  m, solver and refit as the default); the best test error of the 15;
- ``today``, ``auto_old`` (recorded results, no longer run): the median heuristic on the raw
  features without refit, and ``kernel=Gaussian("auto")`` fitting each of its grid of widths in
  full; the width screen replaced both (the tables' "median heuristic" and "grid" columns);
- ``ard``: ``kernel=Gaussian("ard")``, per-feature widths learned on the scaled inputs;
- ``hgb``: scikit-learn's ``HistGradientBoostingRegressor`` / ``Classifier`` with defaults.

Accuracy fits run in one process per set and seed. ``cost`` times, in fresh processes,
alternating, the default fit against ``kernel=est.kernel_`` (the same model without the
search; the default's width passed to the second process), median of ``--rounds``.

``refit``: the default with ``refit=False`` (the model of the training part) against
``refit=True`` (refit on all rows at the chosen point), CG and direct, test error and fit
time, in one process per set and seed: how the default of ``refit`` was decided.

Writes ``results/defaults.json``.
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
DATA = HERE.parent.parent / "shared" / "data"
OUT = HERE / "results" / "defaults.json"
#: name -> (file under ../shared/data, target column(s), separator)
SETS: dict[str, tuple[str, Any, str]] = {
    "cpusmall": ("cpusmall/cpu_small.csv", -1, ","),
    "pumadyn32nh": ("pumadyn32nh/puma32H.arff", -1, "arff"),
    "kin8nm": ("uci/kin8nm.csv", "y", ","),
    "protein": ("uci/protein-structure.csv", "RMSD", ","),
    "power-plant": ("uci/power-plant.csv", "PE", ","),
    "naval": ("uci/naval-propulsion.csv", ["comp_decay_state", "turb_decay_state"], ","),
    "concrete": ("uci/concrete.csv", -1, ","),
    "energy": ("uci/energy.csv", ["y1", "y2"], ","),
    "wine": ("uci/wine.csv", "quality", ","),
    "yacht": ("uci/yacht.csv", -1, ","),
    "airfoil": ("uci/airfoil_self_noise.dat", "TARGET", "\t"),
    "abalone": ("abalone/abalone.trn.bz2", None, "libsvm"),
    "ijcnn1": ("", None, "shared"),
    "adult": ("", None, "shared"),
    "usps": ("", None, "shared"),
}
CLASSIFICATION = ("ijcnn1", "adult", "usps")
OFFICIAL_SPLIT = CLASSIFICATION
ORACLE_FACTORS = 2.0 ** np.linspace(-4, 3, 15)
SOLVERS = ("cg", "direct")
#: methods whose results are recorded but no longer run (the docstring's ``today``, ``auto_old``)
OLD_METHODS = ("today", "auto_old")
#: the other families, by the name ``--solvers`` gives them
FAMILIES = ("krls", "rf", "nytro")
#: exact KRLS's eigendecomposition path is O(n^3): sets with more training rows are skipped
KRLS_MAX_ROWS = 6000


def load(name: str, seed: int) -> tuple[np.ndarray, ...]:
    """(X_train, y_train, X_test, y_test), raw features."""
    path, target, sep = SETS[name]
    if sep == "shared":
        from kernelpath.datasets import load_shared

        d = load_shared(name)
        return d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    import pandas as pd

    full = DATA / path
    if sep == "arff":
        from kernelpath.datasets import load_arff

        X, y = load_arff(full)
    elif sep == "libsvm":
        from kernelpath.datasets import load_libsvm

        X, y = load_libsvm(full)
    else:
        if name == "cpusmall":
            df = pd.read_csv(full, skiprows=1, header=None)
        else:
            df = pd.read_csv(full, sep=sep)
        cols = target if isinstance(target, list) else [target]
        cols = [df.columns[c] if isinstance(c, int) else c for c in cols]
        y = df[cols].to_numpy(np.float64)
        y = y[:, 0] if y.shape[1] == 1 else y
        X = df.drop(columns=cols).to_numpy(np.float64)
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    return X[perm[:cut]], y[perm[:cut]], X[perm[cut:]], y[perm[cut:]]


def test_error(name: str, y: np.ndarray, pred: np.ndarray) -> float:
    """Error rate in percent (classification) or RMSE averaged over the outputs."""
    if name in CLASSIFICATION:
        return float(100 * np.mean(np.asarray(pred) != y))
    r = (np.asarray(pred) - y).reshape(len(y), -1)
    return float(np.mean(np.sqrt(np.mean(r**2, axis=0))))


def estimator(name: str, solver: str, seed: int, **kw: Any) -> Any:
    import kernelpath as kp

    cls = {
        "krls": (kp.KRLSClassifier, kp.KRLSRegressor),
        "rf": (kp.RandomFeaturesClassifier, kp.RandomFeaturesRegressor),
        "nytro": (kp.NYTROClassifier, kp.NYTRORegressor),
    }.get(solver, (kp.NystromClassifier, kp.NystromRegressor))[name not in CLASSIFICATION]
    if solver == "direct":
        kw["solver"] = solver
    return cls(random_state=seed, **kw)


def standardized(Xtr: np.ndarray, Xte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return (Xtr - mu) / sd, (Xte - mu) / sd


def fit_score(name: str, est: Any, data: tuple[np.ndarray, ...]) -> dict[str, Any]:
    Xtr, ytr, Xte, yte = data
    t = time.perf_counter()
    est.fit(Xtr, ytr)
    seconds = time.perf_counter() - t
    out: dict[str, Any] = {"fit_s": seconds, "test_error": test_error(name, yte, est.predict(Xte))}
    sigma = getattr(est.kernel_, "sigma", None)
    out["sigma"] = np.atleast_1d(sigma).tolist() if sigma is not None else None
    return out


def accuracy_one(
    name: str,
    seed: int,
    methods: list[str],
    oracle_solvers: tuple[str, ...] = SOLVERS,
    solvers: tuple[str, ...] = SOLVERS,
) -> dict[str, Any]:
    """In this process: the methods' test errors for one set and seed."""
    from kernelpath import Gaussian
    from kernelpath.kernels import median_distance

    data = load(name, seed)
    Xtr, ytr, Xte, yte = data
    Zs = standardized(Xtr, Xte)
    sdata = (Zs[0], ytr, Zs[1], yte)
    out: dict[str, Any] = {"set": name, "seed": seed, "n_train": len(Xtr), "d": Xtr.shape[1]}
    for solver in solvers:
        if solver == "krls" and len(Xtr) > KRLS_MAX_ROWS:
            continue
        if "default" in methods:
            out[f"default_{solver}"] = fit_score(name, estimator(name, solver, seed), data)
        if "scaled" in methods:
            out[f"scaled_{solver}"] = fit_score(name, estimator(name, solver, seed), sdata)
        if "today" in methods:  # only with the old code on the path
            out[f"today_{solver}"] = fit_score(name, estimator(name, solver, seed), data)
        if "auto_old" in methods:  # only with the old code on the path: its "auto" width
            est = estimator(name, solver, seed, kernel=Gaussian("auto"))
            out[f"auto_old_{solver}"] = fit_score(name, est, data)
        if "ard" in methods:  # per-feature widths learned (scaled inputs), guarded by "auto"
            est = estimator(name, solver, seed, kernel=Gaussian("ard"))
            out[f"ard_{solver}"] = fit_score(name, est, data)
        if "oracle" in methods and solver in oracle_solvers:
            med = median_distance(Zs[0], 0)
            errs = []
            for f in ORACLE_FACTORS:
                est = estimator(name, solver, seed, kernel=Gaussian(med * f), scale=False)
                errs.append(fit_score(name, est, sdata)["test_error"])
            best = int(np.argmin(errs))
            out[f"oracle_{solver}"] = {
                "test_error": errs[best],
                "factor": float(ORACLE_FACTORS[best]),
                "errors": errs,
                "median": med,
            }
    if "hgb" in methods:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
        from sklearn.multioutput import MultiOutputRegressor

        if name in CLASSIFICATION:
            hgb: Any = HistGradientBoostingClassifier(random_state=seed)
        else:
            hgb = HistGradientBoostingRegressor(random_state=seed)
            if ytr.ndim == 2:
                hgb = MultiOutputRegressor(hgb)
        t = time.perf_counter()
        hgb.fit(Xtr, ytr)
        out["hgb"] = {
            "fit_s": time.perf_counter() - t,
            "test_error": test_error(name, yte, hgb.predict(Xte)),
        }
    return out


def refit_one(name: str, seed: int) -> dict[str, Any]:
    data = load(name, seed)
    out: dict[str, Any] = {"set": name, "seed": seed}
    for solver in SOLVERS:
        for refit in (False, True) if solver == "direct" else ():
            est = estimator(name, solver, seed, refit=refit)
            out[f"{solver}_refit_{refit}"] = fit_score(name, est, data)
    return out


def cost_one(name: str, solver: str, which: str, sigma_file: str) -> dict[str, Any]:
    """In a fresh process: the default fit (its width written to ``sigma_file``) or the fit
    of the estimator given that width."""
    from kernelpath import Gaussian

    data = load(name, 0)
    if which == "default":
        est = estimator(name, solver, 0)
    else:
        sigma = np.asarray(json.loads(Path(sigma_file).read_text()))
        est = estimator(name, solver, 0, kernel=Gaussian(sigma))
    r = fit_score(name, est, data)
    if which == "default":
        Path(sigma_file).write_text(json.dumps(r["sigma"]))
    return r


def _worker(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "worker", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _results() -> dict[str, Any]:
    return json.loads(OUT.read_text()) if OUT.exists() else {"accuracy": {}, "cost": {}}


def _save(res: dict[str, Any]) -> None:
    OUT.write_text(json.dumps(res, indent=1) + "\n")


def summary(res: dict[str, Any]) -> dict[str, Any]:
    """Mean test error over the seeds per set and method, and the targets' ratios."""
    out: dict[str, Any] = {}
    for name in SETS:
        runs = [r for k, r in res["accuracy"].items() if k.startswith(name + "/")]
        if not runs:
            continue
        keys = sorted({k for r in runs for k in r if isinstance(r[k], dict)})
        mean = {k: float(np.mean([r[k]["test_error"] for r in runs if k in r])) for k in keys}
        fit = {
            k: float(np.median([r[k]["fit_s"] for r in runs if k in r and "fit_s" in r[k]]))
            for k in keys
            if any("fit_s" in r.get(k, {}) for r in runs)
        }
        count = {k: sum(k in r for r in runs) for k in keys}
        out[name] = {"seeds": len(runs), "test_error": mean, "fit_s": fit, "runs": count}
    return out


def _vs(cls: bool, a: float, b: float) -> str:
    """a against b: points apart (classification) or the ratio (regression)."""
    return f"{a - b:+.2f} pt" if cls else f"{a / b:.3f}"


def _cost_cell(res: dict[str, Any], key: str) -> str:
    """The cost ratio of ``key`` ("set/solver") and its two times, or "—"."""
    c = res["cost"].get(key)
    return f"{c['ratio']:.2f}× ({c['default_s']:.1f} / {c['given_s']:.1f} s)" if c else "—"


def table(res: dict[str, Any]) -> str:
    """The docs' table: mean test error over the seeds per set, the targets' comparisons and
    the cost ratio."""
    s = summary(res)
    head = (
        "| set (seeds) | default (CG) | oracle (CG) | default vs oracle | today | default vs "
        "today | default on standardized | raw vs standardized | default (direct) | direct "
        "vs today | direct raw vs standardized | HGB | default fit | cost vs given width |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for name, r in s.items():
        e, f = r["test_error"], r["fit_s"]
        cls = name in CLASSIFICATION

        def v(k: str, e: dict[str, float] = e) -> str:
            return f"{e[k]:.4g}" if k in e else "—"

        def vs(a: str, b: str, e: dict[str, float] = e, cls: bool = cls) -> str:
            return _vs(cls, e[a], e[b]) if a in e and b in e else "—"

        cost = _cost_cell(res, f"{name}/cg")
        fit = f"{f['default_cg']:.1f} s" if "default_cg" in f else "—"
        unit = " (error %)" if cls else ""
        rows.append(
            f"| {name}{unit} ({r['seeds']}) | {v('default_cg')} | {v('oracle_cg')} "
            f"| {vs('default_cg', 'oracle_cg')} | {v('today_cg')} | {vs('default_cg', 'today_cg')} "
            f"| {v('scaled_cg')} | {vs('default_cg', 'scaled_cg')} | {v('default_direct')} "
            f"| {vs('default_direct', 'today_direct')} "
            f"| {vs('default_direct', 'scaled_direct')} | {v('hgb')} | {fit} | {cost} |"
        )
    return "\n".join(rows)


def choices_table(res: dict[str, Any]) -> str:
    """The default against the other ways to get a width (CG): mean test error over the
    seeds and the median fit time of each."""
    s = summary(res)
    cols = [
        ("default_cg", "default"),
        ("today_cg", "median heuristic, raw"),
        ("auto_old_cg", '"auto" grid, each width fit in full'),
        ("ard_cg", '"ard"'),
        ("hgb", "HGB"),
    ]
    rows = [
        "| set (seeds) | " + " | ".join(label for _, label in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for name, r in s.items():
        e, f = r["test_error"], r["fit_s"]
        cells = []
        for k, _ in cols:
            if k not in e:
                cells.append("—")
                continue
            t = f"{f[k]:.1f} s" if k in f else ""
            n = r["runs"][k]
            if n != r["seeds"]:  # fewer seeds than the set's other columns
                t += f", {n} seed{'s' if n > 1 else ''}"
            cells.append(f"{e[k]:.4g} ({t})" if t else f"{e[k]:.4g}")
        unit = " (error %)" if name in CLASSIFICATION else ""
        rows.append(f"| {name}{unit} ({r['seeds']}) | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def family_table(res: dict[str, Any]) -> str:
    """The other families' defaults against their oracles (same m or D, λ on the same
    hold-out): mean test error over the seeds."""
    s = summary(res)
    rows = [
        "| set (seeds) | family | default | oracle | default vs oracle | today | default vs "
        "today | default fit | cost vs given width |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in s.items():
        e, f, cls = r["test_error"], r["fit_s"], name in CLASSIFICATION
        for fam in FAMILIES:
            d, o = e.get(f"default_{fam}"), e.get(f"oracle_{fam}")
            if d is None:
                continue
            vs = _vs(cls, d, o) if o is not None else "—"
            t = e.get(f"today_{fam}")  # the family's median-heuristic default (recorded)
            vt = "—" if t is None else _vs(cls, d, t)
            fit = f.get(f"default_{fam}")
            unit = " (error %)" if cls else ""
            cost = _cost_cell(res, f"{name}/{fam}")
            rows.append(
                f"| {name}{unit} ({r['seeds']}) | {fam} | {d:.4g} | "
                f"{'—' if o is None else f'{o:.4g}'} | {vs} | "
                f"{'—' if t is None else f'{t:.4g}'} | {vt} | "
                f"{'—' if fit is None else f'{fit:.1f} s'} | {cost} |"
            )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["accuracy", "cost", "refit", "table", "worker"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--methods", default="default,scaled,oracle,hgb")
    ap.add_argument("--solvers", default="cg,direct", help="cg, direct, krls, rf, nytro")
    ap.add_argument("--oracle-solvers", default="cg,direct")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cost-solvers", default="cg", help="cg, direct, krls, rf, nytro")
    a = ap.parse_args()
    if a.mode == "worker":
        kind = a.args[0]
        if kind == "accuracy":
            oracle = tuple(a.args[4].split(",")) if len(a.args) > 4 else SOLVERS
            solvers = tuple(a.args[5].split(",")) if len(a.args) > 5 else SOLVERS
            r = accuracy_one(a.args[1], int(a.args[2]), a.args[3].split(","), oracle, solvers)
        elif kind == "refit":
            r = refit_one(a.args[1], int(a.args[2]))
        else:
            r = cost_one(*a.args[1:5])
        print(json.dumps(r))
        return 0
    res = _results()
    if a.mode == "table":
        print("**`NystromRegressor()` / `NystromClassifier()` against the oracle**\n")
        print(table(res))
        print("\n**The other families' defaults against their oracles**\n")
        print(family_table(res))
        print("\n**The default against the other ways to a width (CG), error and fit time**\n")
        print(choices_table(res))
        return 0
    sets = [s for s in a.sets.split(",") if s]
    if a.mode == "refit":
        res.setdefault("refit", {})
        for name in sets:
            seeds = [0] if name in OFFICIAL_SPLIT else [int(x) for x in a.seeds.split(",")]
            for seed in seeds:
                r = _worker(["refit", name, str(seed)])
                res["refit"][f"{name}/{seed}"] = r
                _save(res)
                print(json.dumps(r), flush=True)
        return 0
    if a.mode == "accuracy":
        for name in sets:
            seeds = [0] if name in OFFICIAL_SPLIT else [int(x) for x in a.seeds.split(",")]
            for seed in seeds:
                key = f"{name}/{seed}"
                wanted = a.methods.split(",")
                run_now = ",".join(m for m in wanted if m not in OLD_METHODS)
                r: dict[str, Any] = {}
                if run_now:
                    args = [name, str(seed), run_now, a.oracle_solvers, a.solvers]
                    r = _worker(["accuracy", *args])
                merged = dict(res["accuracy"].get(key, {}), **r)
                res["accuracy"][key] = merged
                _save(res)
                print(json.dumps({k: v for k, v in merged.items() if k != "oracle"})[:400])
        res["summary"] = summary(res)
        _save(res)
        return 0
    for name in sets:  # cost
        for solver in a.cost_solvers.split(","):
            sigma_file = f"/tmp/defaults_sigma_{name}_{solver}.json"
            runs: dict[str, list[dict[str, Any]]] = {"default": [], "given": []}
            for _ in range(a.rounds):
                for which in ("default", "given"):
                    runs[which].append(_worker(["cost", name, solver, which, sigma_file]))
            d = float(np.median([r["fit_s"] for r in runs["default"]]))
            g = float(np.median([r["fit_s"] for r in runs["given"]]))
            res["cost"][f"{name}/{solver}"] = {
                "default_s": d,
                "given_s": g,
                "ratio": d / g,
                "runs": runs,
            }
            _save(res)
            print(name, solver, d, g, d / g, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
