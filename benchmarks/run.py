"""kernelpath benchmarks: one runner, peers in the same process, results as JSON.

    python benchmarks/run.py                      # every suite (about 2 hours here)
    python benchmarks/run.py --suite peers        # problem P against FALKON, fresh processes
    python benchmarks/run.py --suite peers --sizes 200k,1M --runs 3
    python benchmarks/run.py --suite gpu          # benchmarks/gpu.py run --save (CUDA)
    python benchmarks/run.py --suite real --datasets cpusmall,pumadyn32nh
    python benchmarks/run.py --suite centers      # leverage scores, d_eff, the (m, λ) path
    python benchmarks/run.py --quick              # small sizes, to check the runner
    python benchmarks/run.py --table              # print the README table from the JSON

Each result records the machine (cores, BLAS, library versions) and its ceilings measured at
the start of the same run (``../shared/tools/machine_limits.py`` when present), time, error
and peak resident memory above the process baseline (sampled every 5 ms).

Suites
------
peers
    Problem P (x ~ N(0, I_20), y = sin(<w, x>) + 0.1 eps, Gaussian sigma = 5, λ = 1e-6,
    m = 2000, 20 CG iterations, float64) at n = 200,000, 10^6 and 10^7 against FALKON and
    scikit-learn, every fit in a fresh process, alternating, median of 3:
    ``benchmarks/peers.py``.
gpu
    ``benchmarks/gpu.py``: P at n = 10^7 with m = 20,000 and 50,000, 10^6 with m = 100,000,
    MNIST, against FALKON on the same GPU (skips without CUDA).
real
    cpusmall, pumadyn32nh, protein (80/20 random split), ijcnn1, adult (their own splits):
    exact KRLS (n <= 10,000), Nyström direct, NYTRO (ν-method) and CG, all choosing λ (and t)
    on a 20% hold-out and refitting on the training set, against KernelRidge (n <= 10,000)
    and Nystroem + Ridge / RidgeClassifier + GridSearchCV over the same λ grid and the same
    hold-out split. Same kernel (Gaussian, sigma = median distance of the training inputs).
centers
    Center selection and the incremental (m, λ) path: see ``benchmarks/centers.py``.
stochastic, sgm
    EigenPro against kernel SGD, random features against Nyström, SGM / SIGM against
    LinearSVC: ``benchmarks/stochastic.py``.
online
    RecursiveRLS throughput, recoding under class imbalance: ``benchmarks/online.py``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path as FsPath
from typing import Any

import numpy as np

HERE = FsPath(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fresh import PeakMemory  # noqa: E402  (one memory sampler for both runners)

RESULTS = HERE / "results"
GRID = np.geomspace(1e-1, 1e-9, 20)


# ---------------------------------------------------------------- measurement helpers
def timed(fn: Any) -> tuple[Any, float, float]:
    """(result, seconds, peak MB above baseline)."""
    with PeakMemory() as mem:
        t = time.perf_counter()
        out = fn()
        sec = time.perf_counter() - t
    return out, sec, mem.mb


#: The hosts the results ran on, by the BLAS kernels OpenBLAS picked there.
HOSTS = {"SkylakeX": "Intel (SkylakeX)", "Haswell": "AMD EPYC (Haswell)"}


def host_name(arch: str | None) -> str:
    """The host of OpenBLAS kernels ``arch``; None: the Intel host of the stops before 68
    (results recorded without their machine ran there)."""
    arch = arch or "SkylakeX"
    return HOSTS.get(arch, arch)


def host_cell(host: str, note: str | None = None) -> str:
    """A table's host cell: the host, then the row's note (a row kept from an older tree
    says which)."""
    return f"{host}; {note}" if note else host


def blas_libraries() -> list[dict[str, Any]]:
    """The BLAS libraries loaded here (threadpoolctl): API, version, threads and the
    kernels OpenBLAS picked (``architecture``, which ``host_name`` maps to a host)."""
    from threadpoolctl import threadpool_info

    return [
        {k: d.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
        for d in threadpool_info()
        if d.get("user_api") == "blas"
    ]


def machine_info() -> dict[str, Any]:
    import scipy
    import sklearn

    import kernelpath

    info: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "kernelpath": kernelpath.__version__,
        "blas": blas_libraries(),
    }
    tool = HERE.parent.parent / "shared" / "tools" / "machine_limits.py"
    if tool.is_file():
        spec = importlib.util.spec_from_file_location("machine_limits", tool)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cores = info["cores"]
        one, allc = mod.exp_rates(np.float64, 2**24, 3, cores)
        info["limits"] = {
            "gemm_gflops_float64": round(mod.gemm_rate(np.float64, 2048, 3), 1),
            "gemm_gflops_float32": round(mod.gemm_rate(np.float32, 2048, 3), 1),
            "exp_gelem_allcores_float64": round(allc, 2),
            "exp_gelem_1thread_float64": round(one, 2),
            "read_gb_s": round(mod.read_bandwidth(2**27, 3), 1),
            "source": "../shared/tools/machine_limits.py, measured at the start of this run",
        }
    return info


def save(name: str, payload: dict[str, Any]) -> FsPath:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    print(f"wrote {path}")
    return path


def sine_problem(
    n: int, d: int, m: int, w_scale: float, n_test: int = 20_000
) -> tuple[np.ndarray, ...]:
    """(X, y, X_test, y_test, centers) of y = sin(<w, x>) + 0.1 eps, x ~ N(0, I_d),
    w ~ N(0, I_d) / ``w_scale`` (sqrt(d): problem P), m centers drawn uniformly from X, the
    test targets noiseless; seed 0."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal(d) / w_scale
    X = rng.standard_normal((n, d))
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(n)
    Xt = rng.standard_normal((n_test, d))
    return X, y, Xt, np.sin(Xt @ w), X[rng.choice(n, m, replace=False)]


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


# ---------------------------------------------------------------- real suite
REAL = {
    "cpusmall": {"task": "regression", "split": "random"},
    "pumadyn32nh": {"task": "regression", "split": "random"},
    "protein": {"task": "regression", "split": "random"},
    "ijcnn1": {"task": "classification", "split": "given"},
    "adult": {"task": "classification", "split": "given"},
}


def _load(name: str, quick: bool) -> tuple[np.ndarray, ...]:
    from sklearn.preprocessing import StandardScaler

    from kernelpath.datasets import load_shared

    d = load_shared(name)
    if "X" in d:
        perm = np.random.default_rng(0).permutation(len(d["X"]))
        cut = int(0.8 * len(perm))
        Xtr, ytr = d["X"][perm[:cut]], d["y"][perm[:cut]]
        Xte, yte = d["X"][perm[cut:]], d["y"][perm[cut:]]
    else:
        Xtr, ytr, Xte, yte = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    if quick:
        Xtr, ytr, Xte, yte = Xtr[:3000], ytr[:3000], Xte[:2000], yte[:2000]
    if name != "adult":  # adult: 0/1 indicators, left as they are
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    return Xtr, ytr, Xte, yte


def suite_real(quick: bool, names: list[str]) -> dict[str, Any]:
    return {name: bench_dataset(name, quick) for name in names}


def bench_dataset(name: str, quick: bool) -> dict[str, Any]:
    """Every method on one data set, with the same kernel, λ grid and hold-out split."""
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.kernel_approximation import Nystroem
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.model_selection import GridSearchCV, PredefinedSplit
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from kernelpath import (
        Gaussian,
        KRLSClassifier,
        KRLSRegressor,
        NystromClassifier,
        NystromRegressor,
        NYTROClassifier,
        NYTRORegressor,
    )
    from kernelpath.selection import holdout_split

    spec = REAL[name]
    Xtr, ytr, Xte, yte = _load(name, quick)
    clf = spec["task"] == "classification"
    n = len(Xtr)
    m = min(2000, n // 2)
    kernel = Gaussian("median").resolve(Xtr, 0)
    gamma = 1 / (2 * kernel.sigma**2)
    tr, va = holdout_split(n, 0.2, np.random.default_rng(0), ytr if clf else None)
    fold = np.full(n, -1)
    fold[va] = 0
    metric = "test_error_pct" if clf else "test_rmse"
    rows: list[dict[str, Any]] = []

    def run(label: str, make: Any) -> None:
        est, sec, mb = timed(make)
        pred = est.predict(Xte)
        err = float(100 * np.mean(pred != yte)) if clf else rmse(pred, yte)
        row: dict[str, Any] = {"method": label, "fit_s": sec, metric: err, "peak_mb": mb}
        if hasattr(est, "best_params_"):
            row["best_params"] = {
                k: (v.item() if isinstance(v, np.generic) else v)
                for k, v in est.best_params_.items()
            }
        rows.append(row)
        print(
            f"  {name:12s} {label:45s} {sec:8.2f} s  {metric}={err:.4f}  {mb:8.0f} MB", flush=True
        )
        del est
        gc.collect()

    common = {"penalty": GRID, "refit": True, "random_state": 0}
    Reg = NystromClassifier if clf else NystromRegressor
    Exact = KRLSClassifier if clf else KRLSRegressor
    Nytro = NYTROClassifier if clf else NYTRORegressor
    print(
        f"{name}: n_train={n}, n_test={len(Xte)}, d={Xtr.shape[1]}, m={m}, "
        f"sigma={kernel.sigma:.3g}",
        flush=True,
    )
    if n <= 10_000:
        run("kernelpath exact KRLS", lambda: Exact(kernel, **common).fit(Xtr, ytr))
    run(
        "kernelpath Nyström direct",
        lambda: Reg(kernel, n_centers=m, solver="direct", **common).fit(Xtr, ytr),
    )
    run(
        "kernelpath NYTRO (ν-method)",
        lambda: Nytro(
            kernel, n_centers=m, solver="nu", n_iter_no_change=30, refit=True, random_state=0
        ).fit(Xtr, ytr),
    )
    run("kernelpath Nyström-CG", lambda: Reg(kernel, n_centers=m, **common).fit(Xtr, ytr))
    alphas = list(GRID * len(tr))
    if n <= 10_000 and not clf:
        # KernelRidge has no intercept: give it centered targets, as ours are
        centered = TransformedTargetRegressor(
            KernelRidge(kernel="rbf", gamma=gamma), transformer=StandardScaler(with_std=False)
        )
        kr = GridSearchCV(
            centered,
            {"regressor__alpha": alphas},
            cv=PredefinedSplit(fold),
            scoring="neg_mean_squared_error",
        )
        run("scikit-learn KernelRidge + GridSearchCV", lambda: kr.fit(Xtr, ytr))
    lin = RidgeClassifier() if clf else Ridge()
    pipe = Pipeline(
        [("nys", Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0)), ("lin", lin)]
    )
    gs = GridSearchCV(
        pipe,
        {"lin__alpha": alphas},
        cv=PredefinedSplit(fold),
        scoring="accuracy" if clf else "neg_mean_squared_error",
    )
    run("scikit-learn Nystroem + Ridge + GridSearchCV", lambda: gs.fit(Xtr, ytr))
    return {
        "n_train": n,
        "n_test": len(Xte),
        "d": Xtr.shape[1],
        "n_centers": m,
        "sigma": kernel.sigma,
        "task": spec["task"],
        "metric": metric,
        "rows": rows,
    }


# ---------------------------------------------------------------- table
def table() -> str:
    lines = []
    lines.extend(_peers_table())
    real = RESULTS / "real.json"
    if real.is_file():
        d = json.loads(real.read_text())
        lines.append(
            "\nReal data (λ grid of 20 values, 20% hold-out, refit on the training set):\n"
        )
        lines.append("| data set | method | fit (s) | test error | peak memory (MB) |")
        lines.append("|---|---|---:|---:|---:|")
        for name, res in d["result"].items():
            unit = "%" if res["metric"] == "test_error_pct" else " RMSE"
            for r in res["rows"]:
                lines.append(
                    f"| {name} (n={res['n_train']:,}) | {r['method']} | "
                    f"{r['fit_s']:.1f} | {r[res['metric']]:.3f}{unit} | "
                    f"{r['peak_mb']:.0f} |"
                )
    lines.extend(_centers_table())
    lines.extend(_stochastic_table())
    lines.extend(_online_table())
    return "\n".join(lines)


def _peers_table() -> list[str]:
    path = RESULTS / "peers.json"
    if not path.is_file():
        return []
    d = json.loads(path.read_text())
    res, machine = d["result"], d["machine"]
    out = [
        f"Problem P (d=20, m=2000, λ=1e-6, 20 CG iterations, float64), {machine['cores']} "
        f"cores; {res['protocol']}:\n",
        "| n | method | fit (s) | test RMSE | peak memory (MB) | FALKON's time / this |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for p in res["problems"].values():
        for label, r in p["rows"].items():
            speed = r.get("speedup_vs_falkon")
            out.append(
                f"| {p['n_train']:,} | {label} | {r['fit_s']:.1f} | {r['test_rmse']:.4f} | "
                f"{r['peak_mb']:.0f} | {'-' if speed is None else f'{speed:.1f}x'} |"
            )
    dates = {k: p.get("date") for k, p in res["problems"].items() if p.get("date")}
    if len(set(dates.values())) > 1:
        out.append(
            "\nRuns: " + "; ".join(f"n={k} on {v}" for k, v in dates.items()) + " (the same code "
            "for the operator's passes; each size's machine ceilings are in its JSON entry)."
        )
    if not str(res["falkon"]).startswith("/"):
        out.append(f"\nFALKON: {res['falkon']}.")
    lim = machine.get("limits", {})
    for label, r in res.get("streamed_pass", {}).items():
        if r.get("fraction_of_limit") is not None:
            out.append(
                f"\nStreamed pass K_nm^T(K_nm v) at n={r['n']:,}, m={r['m']} ({label}): "
                f"{r['pass_s']:.2f} s = {100 * r['fraction_of_limit']:.0f}% of this machine's "
                f"limit ({r['limit_s']:.2f} s: the 2nmd distance flops at "
                f"{lim.get('gemm_gflops_float64')} GFLOP/s plus nm exponentials at "
                f"{lim.get('exp_gelem_allcores_float64')} G/s, both measured in the same run)."
            )
    return out


def _online_table() -> list[str]:
    path = RESULTS / "online.json"
    if not path.is_file():
        return []
    d = json.loads(path.read_text())["result"]
    t = d["throughput"]
    out = [
        f"\nRecursiveRLS, D = {t['n_features']} random features, one sample per call: "
        f"{t['partial_fit_per_s']:.0f} updates/s"
        + (
            f", {t['partial_fit_per_s_tensors']:.0f} with torch-CPU tensor inputs"
            if t.get("partial_fit_per_s_tensors")
            else ""
        )
        + " (the rank-one Cholesky update alone: "
        f"{t['cholesky_update_per_s']:.0f}/s; Numba: {t['numba']})."
    ]
    out.append(
        "\nRecoding under class imbalance (thesis §7.6.1 protocol; accuracy after each of the "
        "minority class's first 5 examples, mean over seeds):\n"
    )
    out.append("| data set | coding | minority accuracy | overall accuracy |")
    out.append("|---|---|---:|---:|")
    names = {"0": "α = 0 (plain RLS)", "selected": "selected α", "1": "α = 1 (full recoding)"}
    for name, res in d["recoding"].items():
        for key, label in names.items():
            srow = res["summary_first_5"][key]
            out.append(
                f"| {name} ({res['seeds']} seeds) | {label} | "
                f"{100 * srow['minority_acc']:.1f}% | {100 * srow['overall_acc']:.1f}% |"
            )
    return out


def _stochastic_table() -> list[str]:
    out: list[str] = []
    path = RESULTS / "stochastic.json"
    if path.is_file():
        d = json.loads(path.read_text())["result"]
        out.append(
            "\nEpochs to reach the optimal (kernel interpolation) test error within two test "
            "points, EigenPro against plain kernel SGD with the same batch size:\n"
        )
        out.append(
            "| data set | kernel | optimal error | EigenPro epochs (q, batch) | SGD epochs | "
            "ratio | time to target, EigenPro / SGD (s) |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|")
        for name, res in d["eigenpro"].items():
            for r in res["rows"]:
                ep, sgd = r["eigenpro"], r["sgd"]
                n_sgd = r["epochs_sgd"]
                sgd_txt = str(n_sgd) if n_sgd is not None else f"> {len(sgd['test_error'])}"
                ratio = r["epoch_ratio"]
                ratio_txt = f"{ratio:.1f}" if isinstance(ratio, (int, float)) else str(ratio)
                t_ep = r["time_to_target_eigenpro_s"]
                t_sgd = r["time_to_target_sgd_s"]
                t_sgd_txt = (
                    f"{t_sgd:.1f}"
                    if t_sgd is not None
                    else f"> {len(sgd['test_error']) * sgd['epoch_s']:.0f}"
                )
                out.append(
                    f"| {name} (n={res['n_train']:,}) | {r['kernel'].split('(')[0]} | "
                    f"{100 * r['optimal_error']:.2f}% | {r['epochs_eigenpro']} "
                    f"({ep['q']}, {ep['batch_size']}) | {sgd_txt} | {ratio_txt} | "
                    f"{'-' if t_ep is None else f'{t_ep:.1f}'} / {t_sgd_txt} |"
                )
        if "rf" in d:
            rf = d["rf"]
            out.append(
                f"\nRandom features against Nyström on cpusmall (n={rf['n_train']:,}, λ chosen "
                "on a 20% hold-out, test RMSE, mean of 3 seeds):\n"
            )
            out.append(
                "| D or m | Nyström, uniform centers | Nyström, approximate-leverage centers | "
                "RF-KRLS (D features) |"
            )
            out.append("|---:|---:|---:|---:|")
            for r in rf["rows"]:
                lev = r.get("nystrom_leverage_rmse")
                out.append(
                    f"| {r['size']} | {r['nystrom_rmse']:.3f} | "
                    f"{'-' if lev is None else f'{lev:.3f}'} | {r['random_features_rmse']:.3f} |"
                )
            p = rf["d_path"]
            out.append(
                f"\nRF-KRLS path over {len(p['grid'])} values of D up to {p['grid'][-1]} and 20 λ: "
                f"{p['path_s']:.2f} s = {p['ratio_path_to_one_fit']:.2f}x one fit at the "
                f"largest D ({p['one_fit_at_max_s']:.2f} s); refitting at every D: "
                f"{p['refits_s']:.2f} s. Chosen D={p['best']['n_features']}, "
                f"test RMSE {p['test_rmse']:.3f}."
            )
    path = RESULTS / "sgm.json"
    if path.is_file():
        d = json.loads(path.read_text())["result"]
        out.append("\nSGM / SIGM with the hinge loss (thesis Table 6.2's shape):\n")
        out.append("| data set | method | passes | fit (s) | test hinge loss | test error |")
        out.append("|---|---|---:|---:|---:|---:|")
        for name, res in d.items():
            for r in res["rows"]:
                out.append(
                    f"| {name} (n={res['n_train']:,}, D={res['n_features']}) | {r['method']} | "
                    f"{r.get('passes', '-')} | {r['fit_s']:.1f} | {r['test_hinge']:.3f} | "
                    f"{r['test_error_pct']:.2f}% |"
                )
    return out


def _centers_table() -> list[str]:
    path = RESULTS / "centers.json"
    if not path.is_file():
        return []
    d = json.loads(path.read_text())["result"]
    out: list[str] = []
    lev = d["leverage"]
    p = lev["problem"]
    out.append(
        f"\nCenters needed to come within 10% of the exact KRLS risk (1-D Alaoui-Mahoney design, "
        f"n={p['n']}, d_eff={lev['d_eff']:.0f}, d_max={lev['d_max']:.0f}, mean of "
        f"{p['seeds']} seeds):\n"
    )
    out.append("| strategy | m within 10% | ratio to uniform |")
    out.append("|---|---:|---:|")
    for name, c in lev["curves"].items():
        ratio = lev["m_ratio_to_uniform"][name]
        out.append(
            f"| {name} | {c['m_within_10pct']} | {'-' if ratio is None else f'{ratio:.2f}'} |"
        )
    if "deff" in d:
        out.append("\nEffective dimension against maximal degrees of freedom (exact):\n")
        out.append("| data set | λ | d_eff | d_max | d_eff approx. | approx. within 2x |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for name, res in d["deff"].items():
            for r in res["rows"]:
                out.append(
                    f"| {name} (n={res['n']:,}) | {r['penalty']:.0e} | {r['d_eff']:.0f} | "
                    f"{r['d_max']:.0f} | {r['d_eff_approx']:.0f} | "
                    f"{100 * r['approx_within_2x']:.0f}% |"
                )
    if "mpath" in d:
        m = d["mpath"]
        q = m["problem"]
        out.append(
            f"\n(m, λ) path on cpusmall (n={q['n_train']:,}, M={q['max_centers']}, "
            f"{q['n_penalties']} λ x {q['n_m_values']} m): whole path {m['path_s']:.2f} s = "
            f"{m['ratio_path_to_batch']:.2f}x one batch Nyström fit at M "
            f"({m['batch_at_M_s']:.2f} s, all λ); refitting batch Nyström at 20 values of m: "
            f"{m['refit_20_m_s']:.2f} s. Chosen m={m['best']['n_centers']}, "
            f"test RMSE {m['best']['test_rmse']:.3f} (batch at M: "
            f"{m['batch_at_M_best']['test_rmse']:.3f})."
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--suite",
        choices=["peers", "gpu", "real", "centers", "stochastic", "sgm", "online", "all"],
        default="all",
    )
    ap.add_argument("--runs", type=int, default=3, help="peers: rounds (the median is kept)")
    ap.add_argument("--sizes", default="all", help="peers: 200k,1M,10M or all")
    ap.add_argument("--datasets", default=",".join(REAL))
    ap.add_argument("--quick", action="store_true", help="small sizes (checks the runner)")
    ap.add_argument("--table", action="store_true", help="print the README table and exit")
    args = ap.parse_args()
    if args.table:
        print(table())
        return 0
    info = machine_info()
    print(json.dumps(info, indent=1))
    suffix = "-quick" if args.quick else ""
    if args.suite in ("peers", "all"):
        from peers import suite_peers

        res = suite_peers(args.quick, info, args.runs, args.sizes)
        old = RESULTS / f"peers{suffix}.json"
        if args.sizes != "all" and old.is_file():  # keep the sizes this run did not measure
            kept = json.loads(old.read_text())
            for key, prob in kept["result"]["problems"].items():
                if key not in res["problems"]:
                    prob.setdefault("machine", kept["machine"])
                    res["problems"][key] = prob
            order = ["200k", "1M", "10M"]
            res["problems"] = dict(
                sorted(res["problems"].items(), key=lambda kv: order.index(kv[0]))
            )
        save("peers" + suffix, {"machine": info, "result": res})
    if args.suite in ("gpu", "all"):  # benchmarks/gpu.py: its own runner, fresh processes
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, str(HERE / "gpu.py"), "run", "--out", tmp, "--save"]
            subprocess.run(cmd, check=False)
    if args.suite in ("real", "all"):
        from kernelpath.datasets import shared_data_dir

        if shared_data_dir() is None:
            print("real suite skipped: ../shared/data is absent")
        else:
            names = [s for s in args.datasets.split(",") if s]
            unknown = set(names) - set(REAL)
            if unknown:
                ap.error(f"--datasets: unknown {sorted(unknown)}; choose from {sorted(REAL)}")
            res = suite_real(args.quick, names)
            save("real" + suffix, {"machine": info, "result": res})
    if args.suite in ("centers", "all"):
        from centers import suite_centers

        res = suite_centers(args.quick, _load, RESULTS)
        save("centers" + suffix, {"machine": info, "result": res})
    if args.suite in ("stochastic", "all"):
        from stochastic import suite_stochastic

        res = suite_stochastic(args.quick, _load)
        save("stochastic" + suffix, {"machine": info, "result": res})
    if args.suite in ("sgm", "all"):
        from stochastic import bench_sgm

        from kernelpath.datasets import shared_data_dir

        if shared_data_dir() is None:
            print("sgm suite skipped: ../shared/data is absent")
        else:
            save("sgm" + suffix, {"machine": info, "result": bench_sgm(args.quick, _load)})
    if args.suite in ("online", "all"):
        from online import suite_online

        save("online" + suffix, {"machine": info, "result": suite_online(args.quick)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
