"""float32 against float64 on the CPU: the default ``NystromRegressor`` fit on the same rows
given as float32 and as float64 (the fit follows its input's dtype).

    python benchmarks/run.py float32 run [--sets protein,cpusmall,kin8nm] [--runs 3]
    python benchmarks/run.py float32 table
    python benchmarks/run.py float32 precision      # results/float32_precision.json
    python benchmarks/run.py float32 precision_table
    python benchmarks/run.py float32 products [--runs 3] [--only LABEL_PART]
                                                    # results/float32_pass.json
    python benchmarks/run.py float32 products_table

Each fit in a fresh process, the dtypes alternating, median of ``--runs``; reported: fit
time, the chosen width and penalty, test RMSE, and the median |prediction difference|
between the two fits over the target's standard deviation. Data: ``benchmarks/defaults.py``'s
sets, first split. Writes ``results/float32.json``.

``precision`` asks which float32 products a float32 fit can afford, the question of every
faster float32 product on a GPU: ``NystromClassifier(search="none")`` on MNIST (15,000
training rows in [0, 1], the 10,000 test rows) and USPS, float32 inputs, each fit in a fresh
process whose CG products (``KernelOperator.fused``: t = K_nm α, then K_nmᵀ diag(w) t) are
computed one way (``PRODUCT_SCHEMES``); the other products stay as the library makes them.
"float32 in pieces" emulates a blocked float32 product: float32 matrix products over
``PIECE`` centers (for K_nm α) or ``PIECE`` rows (for K_nmᵀ t), their results summed in
float64; "split" first writes the float64 right-hand side as the sum of two float32 arrays
(hi = float32(v), lo = float32(v - hi)) and multiplies both. Reported: test error, and the
penalty and iterations the validation chose.

``products`` times CG's path (λ = 1e-6, 20 iterations, ``solvers.iterative.iterative_path``)
on problem P-like rows, float32 data with the compiled row pass (``_kernels.fused_rows_float32``,
forced on at every size), float32 data with widened pieces (the pass off), and float64 data;
fresh processes alternating, median of ``--runs``; Numba's import falls inside the first
pass's time, as a user's fit pays it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from typing import Any

import fresh as h
import numpy as np


def fit_one(name: str, dtype: str, pred_out: str) -> dict[str, Any]:
    """The default fit of ``name``'s first split in ``dtype``; its predictions saved."""
    import defaults

    import kernelpath as kp

    Xtr, ytr, Xte, yte = defaults.load(name, 0)
    Xtr, Xte = Xtr.astype(dtype), Xte.astype(dtype)
    est, seconds, _ = h.timed(
        lambda: kp.NystromRegressor(random_state=0).fit(Xtr, ytr.astype(dtype))
    )
    pred = np.asarray(est.predict(Xte), dtype=np.float64)
    np.save(pred_out, pred)
    return {
        "fit_s": seconds,
        "sigma": float(np.mean(est.kernel_.widths())),
        "penalty": float(est.best_params_["penalty"]),
        "test_rmse": defaults.test_error(name, yte, pred),
    }


def run(sets: str = "protein,cpusmall,kin8nm", runs: int = 3) -> str:
    """Each set: the two dtypes alternating in fresh processes, median of ``runs``."""
    import defaults

    with tempfile.TemporaryDirectory() as folder:
        for name in h.names(sets):
            jobs = {
                dtype: lambda _, name=name, dtype=dtype: h.call(
                    "float32", "fit_one", name=name, dtype=dtype, pred_out=f"{folder}/{dtype}.npy"
                )
                for dtype in ("float64", "float32")
            }
            got = h.rounds(jobs, runs)
            spread = float(np.std(defaults.load(name, 0)[3]))
            p64, p32 = np.load(f"{folder}/float64.npy"), np.load(f"{folder}/float32.npy")
            entry: dict[str, Any] = {
                dtype: {
                    "fit_s": statistics.median(r["fit_s"] for r in rows),
                    **{k: rows[0][k] for k in ("sigma", "penalty", "test_rmse")},
                }
                for dtype, rows in got.items()
            }
            entry["median_diff_over_spread"] = float(np.median(np.abs(p64 - p32)) / spread)
            entry["runs"] = runs
            h.record("float32", name, entry)
    return table()


def table() -> str:
    """Fit time, chosen width and penalty, and test RMSE of each dtype, and how far apart."""
    cells = []
    for name, r in h.load("float32").items():
        a, b = r["float64"], r["float32"]
        cells.append(
            [
                name,
                f"{a['fit_s']:.2f}",
                f"{b['fit_s']:.2f}",
                f"{a['sigma']:.3g} / {b['sigma']:.3g}",
                f"{a['penalty']:.2g} / {b['penalty']:.2g}",
                f"{a['test_rmse']:.4g} / {b['test_rmse']:.4g}",
                f"{100 * r['median_diff_over_spread']:.2f}%",
            ]
        )
    header = ["set", "fit float64 (s)", "fit float32 (s)", "width 64 / 32", "penalty 64 / 32"]
    header += ["test RMSE 64 / 32", "median difference / spread"]
    return h.markdown(header, cells, "lrrlllr")


#: Rows or centers of one float32 piece of the emulated blocked products.
PIECE = 256
#: scheme: (how K_nm α is computed, how K_nmᵀ t is computed); "float64": the float32 block
#: widened, float64 sums (the library's); "float32": float32 right-hand side and sums;
#: "rounded": the right-hand side rounded to float32, float64 sums; "pieces": float32 in
#: ``PIECE`` pieces summed in float64; "split pieces": the same with a split right-hand side;
#: "split block": one float32 product per operator block, split, summed in float64.
PRODUCT_SCHEMES = {
    "float64 products (the library's)": ("float64", "float64"),
    "float32 products": ("float32", "float32"),
    "right-hand sides rounded to float32, float64 sums": ("rounded", "rounded"),
    "both in float32 pieces": ("pieces", "pieces"),
    "both split, in float32 pieces": ("split pieces", "split pieces"),
    "K_nm α split in float32 pieces, K_nmᵀ t float64": ("split pieces", "float64"),
    "K_nm α float64, K_nmᵀ t split in float32 pieces": ("float64", "split pieces"),
    "K_nm α float64, K_nmᵀ t split, float32 per block": ("float64", "split block"),
}


def _float32_product(Kb: np.ndarray, V: np.ndarray, how: str, transpose: bool) -> np.ndarray:
    """Kb @ V (or Kb.T @ V) for a float32 block and a float64 V, computed as ``how`` says,
    in float64."""
    K = Kb.T if transpose else Kb  # float32
    if how == "float64":
        return K.astype(np.float64) @ V
    if how in ("float32", "rounded"):
        V32 = V.astype(np.float32)
        return K @ V32 if how == "float32" else K.astype(np.float64) @ V32.astype(float)
    hi = V.astype(np.float32)
    parts = [hi, (V - hi).astype(np.float32)] if how.startswith("split") else [hi]
    both = np.concatenate(parts, axis=1)
    k = V.shape[1]
    out = np.zeros((K.shape[0], k))
    piece = K.shape[1] if how.endswith("block") else PIECE
    for j in range(0, K.shape[1], piece):  # the summed dimension, in pieces
        p = K[:, j : j + piece] @ both[j : j + piece]
        for i in range(len(parts)):
            out += p[:, i * k : (i + 1) * k]
    return out


def _emulate(scheme: str) -> None:
    """Make ``KernelOperator.fused`` compute float32 operators' products by ``scheme``."""
    import kernelpath.operators.kernel as K

    first, second = PRODUCT_SCHEMES[scheme]
    library = K.KernelOperator.fused

    def fused(
        self: Any, B_: Any, weights: Any = None, return_matvec: bool = False, native: bool = False
    ) -> Any:
        if self.dtype != np.float32 or (first, second) == ("float64", "float64"):
            return library(self, B_, weights, return_matvec, native)
        B2, vec = self._in(B_, self.m, "B", np.float64)
        w = None if weights is None else np.asarray(weights, np.float64)
        KB = np.empty((self.n, B2.shape[1])) if return_matvec else None

        def work(wk: int) -> np.ndarray:
            acc = np.zeros(B2.shape)
            for s, e, Kb in self._blocks(wk, self._cached_rows(B2.shape[1])):
                t = _float32_product(Kb, B2, first, transpose=False)
                if KB is not None:
                    KB[s:e] = t
                if w is not None:
                    t *= w[s:e, None]
                acc += _float32_product(Kb, t, second, transpose=True)
            return acc

        out = sum(self._run(work))
        if vec:
            out, KB = out[:, 0], None if KB is None else KB[:, 0]
        return (out, KB) if return_matvec else out

    K.KernelOperator.fused = fused  # type: ignore[method-assign]


def precision_fit(name: str, scheme: str) -> dict[str, Any]:
    """One float32 fit of ``name`` with its CG products computed by ``scheme``."""
    import kernelpath as kp
    from kernelpath.datasets import load_shared

    _emulate(scheme)
    d = load_shared(name)
    rows = 15_000 if name == "mnist" else len(d["y_train"])
    scale = 255.0 if name == "mnist" else 1.0
    X = (d["X_train"][:rows] / scale).astype(np.float32)
    Xt = (d["X_test"] / scale).astype(np.float32)
    est, seconds, _ = h.timed(
        lambda: kp.NystromClassifier(search="none", random_state=0).fit(X, d["y_train"][:rows])
    )
    return {
        "test_error_pct": 100 * float(np.mean(est.predict(Xt) != d["y_test"])),
        "penalty": float(est.best_params_["penalty"]),
        "n_iter": int(est.best_params_["n_iter"]),
        "centers": int(est.n_centers_),
        "rows": rows,
        "fit_s": seconds,
    }


def precision(sets: str = "mnist,usps") -> str:
    """Every scheme of ``PRODUCT_SCHEMES`` on each set, one fresh process each."""
    for name in h.names(sets):
        for scheme in PRODUCT_SCHEMES:
            got = h.call("float32", "precision_fit", name=name, scheme=scheme)
            print(name, scheme, got, flush=True)
            h.record("float32_precision", scheme, {**got, "piece": PIECE}, within=name)
    return precision_table()


def precision_table() -> str:
    """Test error (%) of each product scheme on each set, with the validation's choice."""
    doc = h.load("float32_precision")
    sets = list(doc)
    cells = [
        [scheme]
        + [
            f"{r['test_error_pct']:.2f} (λ {r['penalty']:.1g}, {r['n_iter']} it.)"
            for r in (doc[name][scheme] for name in sets)
        ]
        for scheme in PRODUCT_SCHEMES
        if all(scheme in doc[name] for name in sets)
    ]
    rows = ", ".join(f"{name} {next(iter(doc[name].values()))['rows']:,} rows" for name in sets)
    header = ["CG's products (float32 operator)"] + [f"{name}: test error %" for name in sets]
    return f'{h.markdown(header, cells, "l" + "r" * len(sets))}\n\n({rows}, `search="none"`)'


#: (label, n, m, d, cache) of the ``products`` runs
PRODUCT_CONFIGS = [
    ("n = 25,000, d = 20, m = 1,000, K_nm cached", 25_000, 1000, 20, True),
    ("n = 50,000, d = 20, m = 1,000, K_nm cached", 50_000, 1000, 20, True),
    ("n = 50,000, d = 20, m = 2,000, K_nm cached", 50_000, 2000, 20, True),
    ("n = 200,000, d = 20, m = 2,000, K_nm cached", 200_000, 2000, 20, True),
    ("n = 200,000, d = 20, m = 2,000, streamed", 200_000, 2000, 20, False),
    ("n = 30,000, d = 784, m = 3,000, K_nm cached", 30_000, 3000, 784, True),
    ("n = 20,000, d = 784, m = 20,000, K_nm cached", 20_000, 20_000, 784, True),
]
PRODUCT_MODES = ("float32, compiled pass", "float32, widened pieces", "float64 data")


def products_fit(mode: str, n: int, m: int, d: int, cache: bool) -> dict[str, Any]:
    """CG's path in one ``PRODUCT_MODES`` mode: its seconds and training MSE."""
    import kernelpath.operators.blocks as blocks
    import kernelpath.operators.kernel as K
    from kernelpath.kernels import Gaussian
    from kernelpath.solvers.iterative import IterativeOptions, iterative_path

    blocks.COMPILED_PASS_MIN_ENTRIES = 0 if mode == "float32, compiled pass" else 2**62
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d)).astype(np.float64 if mode == "float64 data" else np.float32)
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    op = K.KernelOperator(X, X[:m], Gaussian(sigma=float(np.sqrt(d))), cache=cache)
    path, seconds, peak = h.timed(
        lambda: iterative_path(op, y, [1e-6], IterativeOptions("cg", 20, tol=0.0))
    )
    return {"fit_s": seconds, "peak_mb": peak, "train_mse": float(path.train_error[0, -1])}


def products(runs: int = 3, only: str = "") -> str:
    """Each configuration (whose label contains ``only``): the three modes alternating in
    fresh processes, median of ``runs``."""
    for label, n, m, d, cache in PRODUCT_CONFIGS:
        if only not in label:
            continue
        jobs = {
            mode: lambda _, mode=mode, n=n, m=m, d=d, cache=cache: h.call(
                "float32", "products_fit", mode=mode, n=n, m=m, d=d, cache=cache
            )
            for mode in PRODUCT_MODES
        }
        got = h.rounds(jobs, runs)
        entry = {mode: h.summary(rows, median=("train_mse",)) for mode, rows in got.items()}
        h.record("float32_pass", label, entry, within="rows")
    return products_table()


def products_table() -> str:
    """Seconds (median) and training MSE of CG's path in each mode."""
    cells = []
    for label, r in h.load("float32_pass")["rows"].items():
        if not all(mode in r for mode in PRODUCT_MODES):
            continue
        base = r["float32, widened pieces"]["fit_s"]
        cells.append(
            [label]
            + [f"{r[mode]['fit_s']:.2f} ({base / r[mode]['fit_s']:.2f}×)" for mode in PRODUCT_MODES]
            + [f"{r[mode]['train_mse']:.6f}" for mode in PRODUCT_MODES[::2]]
        )
    header = ["problem (CG, 20 iterations)"] + [f"{mode} (s)" for mode in PRODUCT_MODES]
    header += ["MSE float32", "MSE float64"]
    return h.markdown(header, cells)


if __name__ == "__main__":
    commands = {"run": run, "table": table, "precision": precision, "products": products}
    tables = {"precision_table": precision_table, "products_table": products_table}
    sys.exit(h.cli(__doc__, {**commands, **tables}))
