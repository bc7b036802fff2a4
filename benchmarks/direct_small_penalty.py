"""The Nyström direct path at a tiny penalty: normal equations against the QR route, and a
least-squares solve of the same problem (issue 45).

    python benchmarks/direct_small_penalty.py run [--trials 1] [--m 5000] [--parts cpusmall,ijcnn1]
    python benchmarks/direct_small_penalty.py table

The thesis' cpuSmall point (``benchmarks/paper/thesis_ch4.py``: columns min-max scaled,
6,554 training rows of which 80% fit, σ = 0.1, m = 5000 uniform centers, λ = 1e-12,
``solver="direct"``, ``scale=False``, no hold-out). Each trial fits the direct path with
``method="normal"`` (the eigendecomposition of AᵀA), ``"qr"`` (a QR of A and an SVD of its
triangle) and the default ``"auto"``, and solves min ‖K_nm α − y‖² + λn αᵀK_mm α on the
same centers with LAPACK's complete orthogonal factorization (``gelsy`` on the stacked
system [K_nm; (λn)^½ L^T], K_mm = L Lᵀ): test RMSE of each, and the fit times (each fit in
this process, one after the other).

And ijcnn1 (``../shared/data``): ``NystromClassifier(solver="direct", random_state=0)``
with its defaults on X and on X moved by one ulp (``np.nextafter`` towards +inf, every
entry), with ``method="normal"`` and the default ``"auto"``: the test error of each and
its change under the perturbation.

Writes ``results/direct_small_penalty.json``; ``table`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "direct_small_penalty.json"
sys.path.insert(0, str(HERE / "paper"))


def _with_method(method: str, est: Any, X: Any, y: Any) -> tuple[Any, float]:
    """``est.fit(X, y)`` with the direct path's ``method``, and its seconds."""
    import kernelpath.fitting.kernel_models as km

    original = km.nystrom_direct_path

    def chosen(*args: Any, **kw: Any) -> Any:
        return original(*args, **{**kw, "method": method})

    km.nystrom_direct_path = chosen  # type: ignore[assignment]
    try:
        t = time.perf_counter()
        est.fit(X, y)
        return est, time.perf_counter() - t
    finally:
        km.nystrom_direct_path = original  # type: ignore[assignment]


def _fit(method: str, Xtr: np.ndarray, ytr: np.ndarray, m: int, trial: int) -> Any:
    import kernelpath as kp

    est = kp.NystromRegressor(
        kp.Gaussian(0.1),
        penalty=1e-12,
        n_centers=m,
        solver="direct",
        scale=False,
        validation_fraction=0.0,
        random_state=trial,
    )
    return _with_method(method, est, Xtr, ytr)


def run_ijcnn1() -> dict[str, Any]:
    import kernelpath as kp
    from kernelpath.datasets import load_shared

    d = load_shared("ijcnn1")
    X, y, Xte, yte = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    moved = np.nextafter(X, np.inf)
    out: dict[str, Any] = {}
    for method in ("normal", "auto"):
        row: dict[str, Any] = {}
        for name, rows in (("X", X), ("X + 1 ulp", moved)):
            est, seconds = _with_method(
                method, kp.NystromClassifier(solver="direct", random_state=0), rows, y
            )
            row[name] = {
                "test_error": float(np.mean(est.predict(Xte) != yte)),
                "fit_s": seconds,
                "params": {k: float(v) for k, v in est.best_params_.items()},
                "spectrum": est.path_.info.get("spectrum"),
            }
            print("ijcnn1", method, name, json.dumps(row[name]), flush=True)
        row["change_points"] = 100 * abs(row["X"]["test_error"] - row["X + 1 ulp"]["test_error"])
        out[method] = row
    return out


def _least_squares(est: Any, Xtr: np.ndarray, ytr: np.ndarray) -> tuple[np.ndarray, float]:
    import scipy.linalg

    C, kern, lam = est.centers_, est.kernel_, 1e-12
    t = time.perf_counter()
    K, Kmm = kern(Xtr, C), kern(C, C)
    ev, U = np.linalg.eigh(Kmm)
    L = U * np.sqrt(np.maximum(ev, 0.0))
    n, m = K.shape
    mu = ytr.mean()
    A = np.vstack([K, np.sqrt(lam * n) * L.T])
    b = np.concatenate([ytr - mu, np.zeros(m)])
    alpha = scipy.linalg.lstsq(A, b, lapack_driver="gelsy")[0]
    return alpha, time.perf_counter() - t


def run(trials: int, m: int, parts: list[str]) -> None:
    from thesis_ch4 import load

    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    if "ijcnn1" in parts:
        res["ijcnn1"] = run_ijcnn1()
    rows = []
    for trial in range(trials if "cpusmall" in parts else 0):
        Xtr, ytr, Xte, yte = load("cpusmall", trial)
        sub = np.random.default_rng(trial).permutation(len(Xtr))[: int(0.8 * len(Xtr))]
        Xtr, ytr = Xtr[sub], ytr[sub]
        row: dict[str, Any] = {"trial": trial, "m": m}
        est = None
        for method in ("normal", "qr", "auto"):
            est, seconds = _fit(method, Xtr, ytr, m, trial)
            pred = np.asarray(est.predict(Xte)).ravel()
            row[method] = {
                "test_rmse": float(np.sqrt(np.mean((pred - yte) ** 2))),
                "fit_s": seconds,
                "spectrum": est.path_.info.get("spectrum"),
            }
            print(trial, method, json.dumps(row[method]), flush=True)
        assert est is not None
        alpha, seconds = _least_squares(est, Xtr, ytr)
        pred = est.kernel_(Xte, est.centers_) @ alpha + ytr.mean()
        row["least_squares"] = {
            "test_rmse": float(np.sqrt(np.mean((pred - yte) ** 2))),
            "solve_s": seconds,
        }
        print(trial, "least_squares", json.dumps(row["least_squares"]), flush=True)
        rows.append(row)
    if rows:
        res["rows"] = rows
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(table())


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "cpuSmall, σ = 0.1, λ = 1e-12, test RMSE:",
        "",
        "| trial | m | normal equations | QR route | auto (chosen) | least squares | "
        "fit s: normal / QR / auto |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['trial']} | {r['m']:,} | {r['normal']['test_rmse']:.4g} "
            f"| {r['qr']['test_rmse']:.4g} | {r['auto']['test_rmse']:.4g} "
            f"({r['auto']['spectrum']}) | {r['least_squares']['test_rmse']:.4g} "
            f"| {r['normal']['fit_s']:.0f} / {r['qr']['fit_s']:.0f} / {r['auto']['fit_s']:.0f} |"
        )
    if "ijcnn1" in res:
        lines += [
            "",
            "ijcnn1, default NystromClassifier(solver='direct'), test error (%):",
            "",
            "| spectrum | X | X + 1 ulp | change (points) | penalty (X / X + 1 ulp) |",
            "|---|---:|---:|---:|---|",
        ]
        for method, r in res["ijcnn1"].items():
            a, b = r["X"], r["X + 1 ulp"]
            lines.append(
                f"| {method} ({a['spectrum']}) | {100 * a['test_error']:.2f} "
                f"| {100 * b['test_error']:.2f} | {r['change_points']:.2f} "
                f"| {a['params']['penalty']:.3g} / {b['params']['penalty']:.3g} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "table"])
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--m", type=int, default=5000)
    ap.add_argument("--parts", default="cpusmall,ijcnn1")
    a = ap.parse_args()
    if a.mode == "run":
        run(a.trials, a.m, a.parts.split(","))
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
