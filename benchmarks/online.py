"""The online learners: RecursiveRLS's updates per second, and recoding under class
imbalance.

    python benchmarks/run.py online run [--quick]     # results/online.json, one fresh process
    python benchmarks/run.py online table

throughput
    Per-sample ``RecursiveRLS.partial_fit`` with D = 500 random Fourier features of 6-D
    inputs (the arm's q, q̇, q̈), 5000 updates after a warm-up, best of 3. Target: >= 1000
    updates per second (a 1 kHz control loop). Also the bare rank-one Cholesky update.
recoding
    Thesis §7.6.1's imbalance protocol on scikit-learn's digits and USPS: the other T - 1
    classes are streamed balanced, then the minority class arrives one example in every 15
    samples of a continuing stream; after each of its first 10 examples, the test accuracy on
    the minority class and overall, for α = 0, the selected α (online selection on every
    10th sample, balanced accuracy) and full recoding α = 1, on the same model. 10 seeds
    (the minority class is the seed's digit). Target: at the start of its stream (its first
    5 examples) the selected α raises the minority accuracy by >= 10 points and loses
    <= 1 point overall.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import fresh as h
import numpy as np


def bench_throughput(quick: bool) -> dict[str, Any]:
    from kernelpath import Gaussian, RandomFourierFeatures, RecursiveRLS
    from kernelpath._kernels import HAVE_NUMBA
    from kernelpath.cholesky import cholesky_update
    from kernelpath.datasets import make_arm_dynamics

    X, tau, _, _ = make_arm_dynamics(6000, random_state=0)
    n = 1000 if quick else 5000

    def per_sample(Xs: Any, ys: Any) -> float:
        best = np.inf
        for _ in range(3):
            model = RecursiveRLS(
                1e-3, features=RandomFourierFeatures(Gaussian(2.0), n_features=500, random_state=0)
            )
            model.partial_fit(Xs[:100], ys[:100])
            t0 = time.perf_counter()
            for i in range(100, 100 + n):
                model.partial_fit(Xs[i], ys[i])
            best = min(best, time.perf_counter() - t0)
        return float(best)

    best = per_sample(X, tau)
    try:  # the same stream as torch-CPU tensors (copied to the host sample by sample)
        import torch

        best_tensor: float | None = per_sample(torch.from_numpy(X), torch.from_numpy(tau))
    except ImportError:
        best_tensor = None
    R = np.linalg.cholesky(np.eye(500) * 10).T.copy()
    z = np.random.default_rng(0).standard_normal(500) * 0.01
    t0 = time.perf_counter()
    for _ in range(n):
        cholesky_update(R, z, overwrite=True)
    bare = time.perf_counter() - t0
    out = {
        "n_features": 500,
        "updates": n,
        "partial_fit_per_s": n / best,
        "partial_fit_per_s_tensors": None if best_tensor is None else n / best_tensor,
        "cholesky_update_per_s": n / bare,
        "numba": HAVE_NUMBA,
    }
    print("throughput", out)
    return out


def _stream(ytr: np.ndarray, minority: Any, rng: np.random.Generator) -> tuple[np.ndarray, list]:
    """Indices of the stream and the positions after each minority example."""
    major = rng.permutation(np.flatnonzero(ytr != minority))
    minor = rng.permutation(np.flatnonzero(ytr == minority))[:10]
    half = len(major) // 2
    head, tail = list(major[:half]), list(major[half:])
    order = head[:]
    marks = []
    for j, m in enumerate(minor):
        order.extend(tail[j * 14 : (j + 1) * 14])
        order.append(m)
        marks.append(len(order))
    order.extend(tail[len(minor) * 14 :])
    return np.array(order), marks


def bench_recoding(quick: bool) -> dict[str, Any]:
    from sklearn.datasets import load_digits

    from kernelpath import Gaussian, IncrementalRLSClassifier, RandomFourierFeatures
    from kernelpath.datasets import shared_data_dir
    from kernelpath.kernels import median_distance

    sets: dict[str, Any] = {}
    X, y = load_digits(return_X_y=True)
    p = np.random.default_rng(0).permutation(len(X))
    X, y = X[p] / 16.0, y[p]
    sets["digits"] = (X[:1300], y[:1300], X[1300:], y[1300:])
    if shared_data_dir() is not None and not quick:
        from kernelpath.datasets import load_shared

        d = load_shared("usps")
        sets["usps"] = (d["X_train"], d["y_train"], d["X_test"], d["y_test"])
    seeds = 3 if quick else 10
    out: dict[str, Any] = {}
    for name, (Xtr, ytr, Xte, yte) in sets.items():
        sigma = median_distance(Xtr, 0)
        runs = []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            minority = np.unique(ytr)[seed % 10]
            order, marks = _stream(ytr, minority, rng)
            fmap = RandomFourierFeatures(Gaussian(sigma), n_features=500, random_state=seed).fit(
                Xtr[:1]
            )
            clf = IncrementalRLSClassifier(features=fmap, validation_every=10)
            t0 = time.perf_counter()
            pos = 0
            curves: dict[str, list[tuple[float, float]]] = {"0": [], "selected": [], "1": []}
            chosen = []
            for mark in marks:
                clf.partial_fit(Xtr[order[pos:mark]], ytr[order[pos:mark]])
                pos = mark
                mask = yte == minority
                for key, a in [("0", 0.0), ("selected", None), ("1", 1.0)]:
                    pred = clf.predict(Xte, alpha=a)
                    curves[key].append(
                        (float(np.mean(pred[mask] == minority)), float(np.mean(pred == yte)))
                    )
                chosen.append(clf.alpha_)
            clf.partial_fit(Xtr[order[pos:]], ytr[order[pos:]])
            sec = time.perf_counter() - t0
            runs.append(
                {
                    "minority": float(minority),
                    "curves": curves,
                    "selected_alpha": chosen,
                    "stream_s": sec,
                    "updates_per_s": len(order) / sec,
                }
            )

        def mean(key: str, which: int, runs: list = runs) -> float:
            return float(np.mean([[c[which] for c in r["curves"][key][:5]] for r in runs]))

        summary = {
            key: {"minority_acc": mean(key, 0), "overall_acc": mean(key, 1)}
            for key in ["0", "selected", "1"]
        }
        gain = summary["selected"]["minority_acc"] - summary["0"]["minority_acc"]
        loss = summary["0"]["overall_acc"] - summary["selected"]["overall_acc"]
        out[name] = {
            "seeds": seeds,
            "summary_first_5": summary,
            "minority_gain_points": 100 * gain,
            "overall_loss_points": 100 * loss,
            "runs": runs,
        }
        print(name, summary, "gain", round(100 * gain, 1), "loss", round(100 * loss, 2))
    return out


def suite(quick: bool = False) -> dict[str, Any]:
    return {"throughput": bench_throughput(quick), "recoding": bench_recoding(quick)}


def run(quick: bool = False) -> str:
    """Both parts in one fresh process (``--quick``: fewer updates and seeds)."""
    return table(h.suite("online", "online", quick))


def table(name: str = "online") -> str:
    """Updates per second, and the minority class's accuracy at the start of its stream."""
    d = h.load(name)["result"]
    t = d["throughput"]
    tensors = t.get("partial_fit_per_s_tensors")
    out = [
        f"RecursiveRLS, D = {t['n_features']} random features, one sample per call: "
        f"{t['partial_fit_per_s']:.0f} updates/s"
        + (f", {tensors:.0f} with torch-CPU tensor inputs" if tensors else "")
        + f" (the rank-one Cholesky update alone: {t['cholesky_update_per_s']:.0f}/s; Numba: "
        f"{t['numba']}).",
        "\nRecoding under class imbalance (thesis §7.6.1 protocol; accuracy after each of the "
        "minority class's first 5 examples, mean over seeds):\n",
    ]
    codings = {"0": "α = 0 (plain RLS)", "selected": "selected α", "1": "α = 1 (full recoding)"}
    cells = [
        [
            f"{data} ({res['seeds']} seeds)",
            label,
            f"{100 * res['summary_first_5'][key]['minority_acc']:.1f}%",
            f"{100 * res['summary_first_5'][key]['overall_acc']:.1f}%",
        ]
        for data, res in d["recoding"].items()
        for key, label in codings.items()
    ]
    header = ["data set", "coding", "minority accuracy", "overall accuracy"]
    out.append(h.markdown(header, cells, "llrr"))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(h.cli(__doc__, {"run": run, "table": table}))
