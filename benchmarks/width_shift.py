"""How the best width moves with the number of training rows: the constant
``fitting.widths.WIDTH_SHIFT`` (issue 24).

    python benchmarks/width_shift.py run SETS     # e.g. cpusmall,kin8nm,protein,ijcnn1
    python benchmarks/width_shift.py analyse

``run``: for each set and seeds 0, 1, a fixed validation fifth of the rows and nested training
subsamples of 1000, 3000, 9000, 27000 rows and all the rest; Nyström KRLS in closed form (its
own code here, independent of the library's solvers) with sqrt(n) log n uniform centers, a
λ grid of 21 values 1e-10 to 1, at 29 widths 2^(k/4), k = -16..12, times the median distance;
the validation error of the best λ at each width (error rate for ijcnn1 and adult, MSE for
the regression sets). The features are divided by their IQR / 1.349 (the scale rule under
test when this ran; the library's rule is now the standard deviation). Writes
``results/width_shift.json``.

``analyse``: the width chosen on 3000 or 9000 rows, moved by (n_s / n)^b, evaluated on the
curve of all the rows: the validation error against the best there, for b = 0 ... 0.4.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg as sl

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "width_shift.json"
FACTORS = 2.0 ** (np.arange(-16, 13) / 4)
PENALTIES = np.logspace(-10, 0, 21)


def data(name: str) -> tuple[np.ndarray, np.ndarray, bool]:
    from kernelpath.datasets import load_shared

    if name in ("ijcnn1", "adult"):
        d = load_shared(name)
        X, y, clf = d["X_train"], d["y_train"], True
    else:
        sys.path.insert(0, str(HERE))
        from ard import load

        Xtr, ytr, Xte, yte = load(name)
        X, y, clf = np.vstack([Xtr, Xte]), np.concatenate([ytr, yte]), False
    q = np.percentile(X, [25, 75], axis=0)
    s = (q[1] - q[0]) / 1.349
    s = np.where(s > 0, s, X.std(0))
    s = np.where(s > 0, s, 1.0)
    return X / s, y.astype(float), clf


def sqd(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    D = (A**2).sum(1)[:, None] + (B**2).sum(1)[None] - 2 * A @ B.T
    return np.maximum(D, 0)


def run(name: str, seed: int) -> dict:
    from kernelpath.fitting.kernel_models import default_n_centers
    from kernelpath.kernels import median_distance

    X, y, clf = data(name)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(X))
    nv = len(X) // 5
    va, pool = perm[:nv], perm[nv:]
    med = median_distance(X, 0)
    sizes = [s for s in (1000, 3000, 9000, 27000) if s < len(pool)] + [len(pool)]
    out = []
    for n in sizes:
        tr = pool[:n]
        m = default_n_centers(n)
        C = X[tr[rng.permutation(n)[:m]]]
        Dn, Dm, Dv = sqd(X[tr], C), sqd(C, C), sqd(X[va], C)
        mu = y[tr].mean()
        yc = y[tr] - mu
        best = []
        for f in FACTORS:
            g = 1 / (2 * (f * med) ** 2)
            Kn, Km, Kv = np.exp(-g * Dn), np.exp(-g * Dm), np.exp(-g * Dv)
            jitter = (1e-10 * n + 1e-12 * np.trace(Km)) * np.eye(m)
            e, V = sl.eigh(Kn.T @ Kn, Km + jitter)
            P = (Kv @ V) @ ((V.T @ (Kn.T @ yc))[:, None] / (e[:, None] + PENALTIES * n)) + mu
            mse = ((P - y[va][:, None]) ** 2).mean(0)
            err = (np.sign(P) != y[va][:, None]).mean(0) if clf else mse
            best.append((float(err.min()), float(mse.min())))
        b = np.array(best)
        out.append(
            {
                "n": n,
                "m": m,
                "err": b[:, 0].tolist(),
                "mse": b[:, 1].tolist(),
                "best_f_err": float(FACTORS[b[:, 0].argmin()]),
                "best_f_mse": float(FACTORS[b[:, 1].argmin()]),
            }
        )
        print(name, seed, n, m, out[-1]["best_f_err"], out[-1]["best_f_mse"], flush=True)
    return {"set": name, "seed": seed, "factors": FACTORS.tolist(), "med": med, "sizes": out}


def analyse() -> None:
    res = json.loads(OUT.read_text())
    for key in ("err", "mse"):
        print("criterion", key)
        for b in (0, 0.1, 0.2, 0.3, 0.4):
            by: dict[tuple[str, int], list[float]] = {}
            for r in res:
                F = np.log(np.array(r["factors"]))
                full = r["sizes"][-1]
                cf = np.array(full[key])
                for s in r["sizes"][:-1]:
                    if s["n"] not in (3000, 9000):
                        continue
                    f = F[np.argmin(s[key])] + b * np.log(s["n"] / full["n"])
                    j = np.abs(F - f).argmin()
                    by.setdefault((r["set"], s["n"]), []).append(cf[j] / cf.min())
            cells = (f"{k[0][:8]} {k[1] // 1000}k: {np.mean(v):.3f}" for k, v in by.items())
            print(f"b={b}", " | ".join(cells))


if __name__ == "__main__":
    if sys.argv[1] == "analyse":
        analyse()
    else:
        res = []
        for name in sys.argv[2].split(","):
            for seed in (0, 1):
                t = time.time()
                res.append(run(name, seed))
                print("time", time.time() - t, flush=True)
                OUT.write_text(json.dumps(res))
