"""Tens of thousands of centers on the CPU: problem P inside a memory budget against FALKON,
CG's factor layouts at large m, and MNIST's test error against m; every fit in a fresh process.

    python benchmarks/run.py large_m p --n 1000000 --m 20000 --configs auto,falkon [--runs 1]
    python benchmarks/run.py large_m p --n 200000 --m 60000 --configs disk,lowrank
    python benchmarks/run.py large_m mnist --m default,2000,5000,20000 [--dtype float32]
    python benchmarks/run.py large_m table          # P: results/large_m.json and the runs
    python benchmarks/run.py large_m mnist-table    # of million_p.json and disk_factor.json

``p``: problem P (``fresh.py``: x ~ N(0, I_20), y = sin<w, x> + 0.1 eps, 50,000 test points,
Gaussian sigma = 5, λ = 1e-6, uniform centers, 20 CG iterations, float64) with
``NystromRegressor(solver="cg", max_iter=20, tol=0, validation_fraction=0,
memory_budget=BUDGET, factor_layout=LAYOUT)`` for each layout of ``--configs`` ("auto": the
budget's rule picks the factor; "compact", "lowrank", "disk", "cholesky": asked for by
name), and FALKON 0.9 on the CPU (``falkon``: ``max_cpu_mem`` the same budget, KeOps off)
with the same λ, m, iterations and precision. The configurations alternate round after
round; a row is the median of its rounds, with the test RMSE, the peak resident memory
above the loaded data, the factor the fit took, the size of the float32 m x m buffer and
the memory the system had available at the start (what the page cache can hold of a
factor on disk). ``--note`` says how a run was made (e.g. beside a process holding memory).

``mnist``: MNIST's official split (60,000 / 10,000), ``NystromClassifier(scale=False,
n_centers=m)`` with every other default (the width screen, the λ path by CG on a 20%
hold-out; "default" is ``n_centers=None``), each fit in a fresh process (``fresh.py
mnist``), the m values in turn for ``--runs`` rounds; a fit past ``--limit`` seconds is
stopped and recorded as such. Results accumulate in ``results/mnist_centers.json``.
"""

from __future__ import annotations

import sys
from typing import Any

import fresh as h

#: the configurations of ``results/million_p.json``'s rows (n = 10^6, a 12 GB budget)
MILLION_P_LAYOUTS = {
    "kp20k": "auto",
    "kp50k": "auto",
    "kp50k32": "compact",
    "kp50klr": "lowrank",
    "falkon20k": "falkon",
}


def p(
    n: int = 1_000_000,
    m: int = 20_000,
    configs: str = "auto,falkon",
    budget: str = "12GB",
    runs: int = 1,
    iters: int = 20,
    note: str = "",
) -> str:
    """Problem P at ``n`` with ``m`` centers, the configurations alternating."""
    import psutil

    available = psutil.virtual_memory().available
    data = h.problem(n)
    fit = ["fit", "--data", data, "--m", str(m), "--iters", str(iters), "--sigma", "5"]
    fit += ["--penalty", "1e-6"]
    jobs = {}
    for config in h.names(configs):
        if config == "falkon":
            python = h.falkon_python()
            if python is None:
                raise SystemExit(
                    "FALKON's venv was not found (../shared/tools/build_falkon_cpu.sh)"
                )
            args = [*fit, "--lib", "falkon", "--falkon-mem", str(_bytes(budget))]
        else:
            python = None
            args = [*fit, "--lib", "kernelpath", "--budget", budget, "--factor-layout", config]
        jobs[config] = lambda _, args=args, python=python: h.run_fresh(args, python=python)
    for config, results in h.rounds(jobs, runs).items():
        row = h.summary(results, median=("test_rmse",), first=("factor",))
        row.update(n=n, m=m, layout=config, budget=budget, note=note, iters=iters)
        row.update(available_gb=available / 1e9, buffer_gb=4 * (m + 1) * m / 1e9)
        h.record("large_m", f"{n}/{m}/{config}/{budget}" + (f"/{note}" if note else ""), row)
    return table()


def _bytes(budget: str) -> float:
    units = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
    return float(budget[:-2]) * units[budget[-2:].upper()]


def _p_rows() -> list[dict[str, Any]]:
    """Every P row: this script's, and those of ``million_p.json`` and ``disk_factor.json``
    (the same protocol; the layout, n and budget of a million_p row are its configuration's)."""
    rows = list(h.load("disk_factor", {"rows": {}})["rows"].values())
    for key, r in h.load("million_p", {"rows": {}})["rows"].items():
        layout = MILLION_P_LAYOUTS[key]
        rows.append({**r, "n": 1_000_000, "layout": layout, "budget": "12GB", "note": ""})
    rows += [r for key, r in h.load("large_m", {}).items()]
    return sorted(rows, key=lambda r: (r["n"], r["m"], r["layout"] == "falkon", r["layout"]))


def table() -> str:
    """P at large m: each configuration's median fit, its test RMSE and its memory."""
    rows = _p_rows()
    falkon = {(r["n"], r["m"]): r["fit_s"] for r in rows if r["layout"] == "falkon"}
    cells = []
    for r in rows:
        kept = r.get("factor") or {}
        factor = kept.get("factor", "")
        if kept.get("factor_dtype") not in (None, "float64"):
            factor += f" ({kept['factor_dtype']})"
        ref = falkon.get((r["n"], r["m"])) if r["layout"] != "falkon" else None
        cells.append(
            [
                f"{r['n']:,}",
                f"{r['m']:,}",
                "FALKON 0.9" if r["layout"] == "falkon" else f"kernelpath, {r['layout']}",
                r["budget"],
                r["runs"],
                f"{r['fit_s']:.0f}",
                f"{r['test_rmse']:.4f}",
                f"{r['peak_mb'] / 1e3:.1f}",
                factor,
                "" if ref is None else f"{ref / r['fit_s']:.2f}×",
                r.get("note", ""),
            ]
        )
    header = ["n", "m", "configuration", "budget", "runs", "fit (s)", "test RMSE"]
    header += ["peak memory (GB)", "factor taken", "FALKON's time / this", "note"]
    return h.markdown(header, cells, "rrllrrrrlrl")


def mnist(
    m: str = "default,2000,5000,10000,20000",
    runs: int = 1,
    dtype: str = "float64",
    limit: float = 900.0,
    factor_layout: str = "auto",
) -> str:
    """MNIST with each m in turn for ``runs`` rounds; a fit past ``limit`` s is stopped."""
    root = str(h.SHARED / "data")
    jobs = {}
    for size in h.names(m):
        args = ["mnist", "--root", root, "--dtype", dtype, "--factor-layout", factor_layout]
        args += [] if size == "default" else ["--m", size]
        jobs[size] = lambda _, args=args: h.run_fresh(args, timeout=limit, tolerate=True)
    for size, results in h.rounds(jobs, runs).items():
        row = h.summary(results, median=("test_error_pct",), first=("centers", "factor"))
        row.update(m=size, dtype=dtype, limit_s=limit)
        if factor_layout != "auto":
            row["factor_layout"] = factor_layout
        suffix = "" if factor_layout == "auto" else f"/{factor_layout}"
        h.record("mnist_centers", f"{size}/{dtype}{suffix}", row)
    return mnist_table()


def mnist_table() -> str:
    """MNIST's test error and fit time against m (rows of the library as it is; a row kept
    from an older tree has a note and is left out)."""
    res = h.load("mnist_centers", {})

    def order(r: dict[str, Any]) -> tuple[int, str, str]:
        return (
            int(r.get("centers") or (0 if r["m"] == "default" else r["m"])),
            r["dtype"],
            h.host(r.get("machine")),
        )

    cells = []
    for r in sorted((r for r in res.values() if not r.get("note")), key=order):
        if "fit_s" not in r:
            cells.append(
                [
                    r["m"],
                    "",
                    r["dtype"],
                    "",
                    f"past {r['limit_s']:.0f} s",
                    "",
                    "",
                    h.host(r.get("machine")),
                ]
            )
            continue
        n = len(r.get("fit_s_runs") or r.get("fit_s_all") or [r["fit_s"]])
        layout = r.get("factor_layout", "auto")
        cells.append(
            [
                r["m"],
                f"{r['centers']:,}",
                r["dtype"] + ("" if layout == "auto" else f", factor_layout={layout}"),
                f"{r['test_error_pct']:.2f}%",
                f"{r['fit_s']:.0f}" + (f" (median of {n})" if n > 1 else ""),
                f"{r['peak_mb'] / 1e3:.1f}",
                (r.get("factor") or {}).get("factor", ""),
                h.host(r.get("machine")),
            ]
        )
    header = ["n_centers", "centers used", "dtype", "test error", "fit (s)"]
    header += ["peak memory (GB)", "factor", "host"]
    return h.markdown(header, cells, "lrlrrrll")


if __name__ == "__main__":
    commands = {"p": p, "table": table, "mnist": mnist, "mnist-table": mnist_table}
    sys.exit(h.cli(__doc__, commands))
