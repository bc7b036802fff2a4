"""Learned per-feature widths (``sigma="ard"``) against one width (``sigma="auto"``) and
scikit-learn's ``HistGradientBoostingRegressor`` with its defaults, on the shared regression
sets.

    python benchmarks/run.py ard run [--rounds 3] [--sets cpusmall,kin8nm,...]
    python benchmarks/run.py ard objective [--sets ...]   # the choice of the objective
    python benchmarks/run.py ard table                    # the table, from results/ard.json

Every set: a random 80/20 train/test split (seed 0), features standardized on the training
part, targets as they are (the first target where a set has two). kernelpath:
``NystromRegressor(Gaussian(sigma=...), n_centers=min(1000, 0.8 n_train), random_state=r)``
with its default CG solver and λ path, and ``HistGradientBoostingRegressor(random_state=r)``,
in round r = 0, 1, 2, ...: every round draws other centers, hold-out and subsample (on the
small sets one draw moves the test RMSE by several percent). Every fit runs in a fresh process
(``fit`` timed from the call to its return), the three methods alternating, ``--rounds``
rounds; reported: the median fit time, the mean test RMSE over the rounds and ratios of
those. Sets used while building ARD (``DEVELOPMENT``) are marked.

``objective``: in one process, the test RMSE of ARD with the hold-out objective
(``cv="holdout"``) against the 3-fold mean (``cv=3``), and the learning time.

Writes ``results/ard.json`` (``results/ard_objective.json``).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import fresh as h
import numpy as np

DATA = h.SHARED / "data"
#: name -> (file under ../shared/data, target column, separator)
SETS: dict[str, tuple[str, Any, str]] = {
    "cpusmall": ("cpusmall/cpu_small.csv", -1, ","),
    "pumadyn32nh": ("pumadyn32nh/puma32H.arff", -1, "arff"),
    "kin8nm": ("uci/kin8nm.csv", "y", ","),
    "concrete": ("uci/concrete.csv", -1, ","),
    "protein": ("uci/protein-structure.csv", "RMSD", ","),
    "power-plant": ("uci/power-plant.csv", "PE", ","),
    "naval": ("uci/naval-propulsion.csv", "comp_decay_state", ","),
    "energy": ("uci/energy.csv", "y1", ","),
    "wine": ("uci/wine.csv", "quality", ","),
    "yacht": ("uci/yacht.csv", -1, ","),
    "airfoil": ("uci/airfoil_self_noise.dat", "TARGET", "\t"),
    "abalone": ("abalone/abalone.trn.bz2", None, "libsvm"),
}
#: the sets the objective and the defaults were chosen on
DEVELOPMENT = ("cpusmall", "pumadyn32nh", "kin8nm", "concrete")
METHODS = ("auto", "ard", "hgb")


def load(name: str) -> tuple[np.ndarray, ...]:
    import pandas as pd

    path, target, sep = SETS[name]
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
        if name == "naval":  # two targets: keep the compressor's, drop the turbine's
            df = df.drop(columns=["turb_decay_state"])
        if name == "energy":  # two targets: keep the heating load, drop the cooling load
            df = df.drop(columns=["y2"])
        col = df.columns[target] if isinstance(target, int) else target
        y = df[col].to_numpy(np.float64)
        X = df.drop(columns=[col]).to_numpy(np.float64)
    X = X[:, np.ptp(X, axis=0) > 0]  # constant columns (naval has two) carry nothing
    perm = np.random.default_rng(0).permutation(len(X))
    cut = int(0.8 * len(X))
    tr, te = perm[:cut], perm[cut:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    return (X[tr] - mu) / sd, y[tr], (X[te] - mu) / sd, y[te]


def fit_one(name: str, method: str, cv: Any = "holdout", seed: int = 0) -> dict[str, Any]:
    Xtr, ytr, Xte, yte = load(name)
    if method == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        est: Any = HistGradientBoostingRegressor(random_state=seed)
    else:
        import kernelpath as kp

        m = min(1000, int(0.8 * len(Xtr)))
        est = kp.NystromRegressor(kp.Gaussian(sigma=method), n_centers=m, random_state=seed)
    t = time.perf_counter()
    if method == "ard" and cv != "holdout":
        import kernelpath as kp

        learned = kp.learn_widths(kp.Gaussian("ard"), Xtr, ytr, cv=cv, random_state=0)
        est.set_params(kernel=learned)
    est.fit(Xtr, ytr)
    seconds = time.perf_counter() - t
    rmse = float(np.sqrt(np.mean((est.predict(Xte) - yte) ** 2)))
    out = {"set": name, "method": method, "seed": seed, "fit_s": seconds, "test_rmse": rmse}
    if method == "ard" and hasattr(est, "ard_info_"):
        out["ard_s"] = est.ard_info_["time"]
        out["chosen"] = est.ard_info_["chosen"]
        out["widths"] = np.atleast_1d(est.kernel_.sigma).tolist()
    return out


def table() -> str:
    """The README's table from ``results/ard.json``."""
    results = h.load("ard")
    head = (
        '| set (train rows, features) | `"auto"` RMSE | `"ard"` RMSE | ard vs auto '
        "| learned kept | HGB RMSE | ard vs HGB | ard fit / auto fit |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for name in SETS:
        if name not in results:
            continue
        r = results[name]
        n_train, n_features = r["train_shape"]  # recorded: the table needs no data
        dev = " (dev)" if r["development_set"] else ""
        t, f = r["test_rmse"], r["fit_s"]
        kept = sum(c == "learned" for c in r.get("ard_chosen", []))
        rows.append(
            f"| {name}{dev} ({n_train:,}, {n_features}) | {t['auto']:.4g} | {t['ard']:.4g} "
            f"| {100 * r['ard_vs_auto_rmse']:+.1f}% | {kept} of {len(r.get('ard_chosen', []))} "
            f"| {t['hgb']:.4g} | {100 * r['ard_vs_hgb_rmse']:+.1f}% "
            f"| {f['ard']:.1f} s / {f['auto']:.1f} s = {r['ard_cost_vs_auto']:.1f}× |"
        )
    return "\n".join(rows)


def objective(sets: str = ",".join(SETS)) -> list[dict[str, Any]]:
    """ARD's objective: the hold-out (``cv="holdout"``) against the 3-fold mean, in this
    process; writes results/ard_objective.json."""
    rows = []
    for name in h.names(sets):
        for cv in ("holdout", 3):
            rows.append({**fit_one(name, "ard", cv), "cv": cv})
    h.save("ard_objective", rows)
    return rows


def run(rounds: int = 3, sets: str = ",".join(SETS)) -> str:
    """Each set: the three methods alternating in fresh processes for ``rounds`` rounds."""
    for name in h.names(sets):
        runs = h.rounds({m: _job(name, m) for m in METHODS}, rounds)
        med = {m: float(np.median([r["fit_s"] for r in runs[m]])) for m in METHODS}
        rmse = {m: float(np.mean([r["test_rmse"] for r in runs[m]])) for m in METHODS}
        entry = {
            "development_set": name in DEVELOPMENT,
            "train_shape": list(load(name)[0].shape),
            "fit_s": med,
            "test_rmse": rmse,
            "ard_vs_auto_rmse": rmse["ard"] / rmse["auto"] - 1,
            "ard_vs_hgb_rmse": rmse["ard"] / rmse["hgb"] - 1,
            "ard_cost_vs_auto": med["ard"] / med["auto"],
            "ard_chosen": [r.get("chosen") for r in runs["ard"]],
            "widths": runs["ard"][-1].get("widths"),
            "runs": runs,
        }
        h.record("ard", name, entry)
    return table()


def _job(name: str, method: str) -> Any:
    return lambda seed: h.call("ard", "fit_one", name=name, method=method, seed=seed)


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "objective": objective, "table": table}))
