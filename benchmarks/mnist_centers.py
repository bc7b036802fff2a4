"""MNIST's test error and fit time against the number of centers m on this machine (issue 45).

    python benchmarks/mnist_centers.py run [--m default,2000,5000,10000,20000] [--runs 1]
        [--dtype float64] [--limit 900]
    python benchmarks/mnist_centers.py run --m 20000 --dtype float32 --runs 3 --before SRC
    python benchmarks/mnist_centers.py run --m 40000 --dtype float32 --factor-layout disk
    python benchmarks/mnist_centers.py table
    python benchmarks/mnist_centers.py before-table

The official split (60,000 / 10,000), ``NystromClassifier(scale=False, n_centers=m)`` with
every other default (the width screen, the λ path by CG on a 20% hold-out); "default" is
``n_centers=None``. Each fit runs in a fresh process (``benchmarks/fresh.py mnist``), the m
values in turn, ``--runs`` rounds; a fit past ``--limit`` seconds is stopped and recorded
as such. Reported: the median fit time, the test error, the peak resident memory, the
factor CG took, and this machine's ceilings measured in the same run (``run.machine_info``:
``../shared/tools/machine_limits.py``, where it is). Writes ``results/mnist_centers.json``
(one entry per m and dtype). With ``--before SRC`` (the ``src`` folder of an older tree, e.g.
a ``git worktree``), each fit is followed by the same fit with that tree on the
``PYTHONPATH``, alternating, and the pairs go to ``results/mnist_before.json`` instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "mnist_centers.json"
BEFORE = HERE / "results" / "mnist_before.json"
ROOT = HERE.parent.parent / "shared"


def one(
    m: str, dtype: str, limit: float, src: str | None = None, layout: str = "auto"
) -> dict[str, Any]:
    """One fit in a fresh process (with ``src`` first on its ``PYTHONPATH``: an older tree;
    ``layout``: the estimator's ``factor_layout``); {"timed_out": limit} when it runs past
    ``limit`` s."""
    cmd = [sys.executable, str(HERE / "fresh.py"), "mnist", "--root", str(ROOT / "data")]
    cmd += [] if m == "default" else ["--m", m]
    cmd += ["--dtype", dtype, "--factor-layout", layout]
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=True, timeout=limit, env=env
        )
    except subprocess.TimeoutExpired:
        return {"timed_out": limit}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _commit(src: str) -> str:
    """The commit checked out where ``src`` lives."""
    cmd = ["git", "-C", src, "rev-parse", "--short", "HEAD"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def compare(ms: list[str], runs: int, dtype: str, limit: float, src: str) -> None:
    """Each m with this tree and with ``src``, alternating, ``runs`` rounds."""
    sys.path.insert(0, str(HERE))
    from run import machine_info

    res = json.loads(BEFORE.read_text()) if BEFORE.exists() else {}
    machine = machine_info()
    now = _commit(str(HERE))
    for m in ms:
        got: dict[str, list[dict[str, Any]]] = {"now": [], "before": []}
        for _ in range(runs):
            for tree, path in (("now", None), ("before", src)):
                got[tree].append(one(m, dtype, limit, path))
                print(m, tree, json.dumps(got[tree][-1], default=float), flush=True)
        entry: dict[str, Any] = {"m": m, "dtype": dtype, "machine": machine}
        entry["commits"] = {"now": now + " (working tree)", "before": _commit(src)}
        for tree, rows in got.items():
            done = [r for r in rows if "timed_out" not in r]
            entry[tree] = {
                "fit_s": statistics.median(r["fit_s"] for r in done) if done else None,
                "runs": rows,
            }
        res[f"{m}/{dtype}/{now}/{entry['commits']['before']}"] = entry
    BEFORE.write_text(json.dumps(res, indent=2, default=float) + "\n")


def run(ms: list[str], runs: int, dtype: str, limit: float, layout: str = "auto") -> None:
    sys.path.insert(0, str(HERE))
    from run import machine_info

    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    machine = machine_info()  # this machine's ceilings, measured in the same run
    got: dict[str, list[dict[str, Any]]] = {m: [] for m in ms}
    for _ in range(runs):
        for m in ms:
            got[m].append(one(m, dtype, limit, layout=layout))
            print(m, json.dumps(got[m][-1], default=float), flush=True)
    for m, rows in got.items():
        done = [r for r in rows if "timed_out" not in r]
        entry: dict[str, Any] = {"m": m, "dtype": dtype, "runs": len(rows), "limit_s": limit}
        if layout != "auto":
            entry["factor_layout"] = layout
        if done:
            entry.update(
                fit_s=statistics.median(r["fit_s"] for r in done),
                fit_s_all=[r["fit_s"] for r in done],
                test_error_pct=statistics.median(r["test_error_pct"] for r in done),
                centers=done[0]["centers"],
                peak_mb=max(r["peak_mb"] for r in done),
                factor=done[0]["factor"],
                best_params=done[0]["best_params"],
                kernel=done[0]["kernel"],
            )
        entry["timed_out"] = len(rows) - len(done)
        entry["machine"] = machine
        res[f"{m}/{dtype}" + ("" if layout == "auto" else f"/{layout}")] = entry
    OUT.write_text(json.dumps(res, indent=2, default=float) + "\n")
    print(table())


def _key(item: tuple[str, dict[str, Any]]) -> tuple[int, str]:
    """By the centers a fit used (the default's count is known once it ran), then dtype."""
    r = item[1]
    return (int(r.get("centers", 0 if r["m"] == "default" else r["m"])), r["dtype"])


def table() -> str:
    res = json.loads(OUT.read_text())
    lines = [
        "| n_centers | centers used | dtype | test error | fit (s) | peak memory (GB) | factor "
        "| host |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    for _, r in sorted(res.items(), key=_key):
        if "fit_s" not in r:
            lines.append(
                f"| {r['m']} | | {r['dtype']} | | past {r['limit_s']:.0f} s | | | {_host(r)} |"
            )
            continue
        n = len(r["fit_s_all"])
        how = f" (median of {n})" if n > 1 else ""
        lines.append(
            f"| {r['m']} | {r['centers']:,} | {r['dtype']} | {r['test_error_pct']:.2f}% "
            f"| {r['fit_s']:.0f}{how} | {r['peak_mb'] / 1e3:.1f} | {r['factor']['factor']} "
            f"| {_host(r)} |"
        )
    return "\n".join(lines)


def _host(r: dict[str, Any]) -> str:
    """The host a row ran on (``run.host_name``: rows without a record ran on the Intel host
    of the stops before 68), and the row's ``note`` (a row kept from an older tree says
    which)."""
    sys.path.insert(0, str(HERE))
    from run import host_cell, host_name

    blas = (r.get("machine") or {}).get("blas") or [{}]
    return host_cell(host_name(blas[0].get("architecture")), r.get("note"))


def before_table() -> str:
    """The alternating comparisons (``--before``): median fit time of each tree, the runs,
    the ratio and the test error."""
    res = json.loads(BEFORE.read_text())
    lines = [
        "| m | dtype | this tree | fit (s) | runs | tree before | fit (s) | runs | ratio "
        "| test error (this, before) | host |",
        "|---:|---|---|---:|---|---|---:|---|---:|---|---|",
    ]
    for r in res.values():
        now, before = r["now"], r["before"]
        errs = [x["runs"][0].get("test_error_pct") for x in (now, before)]

        def runs(x: dict[str, Any]) -> str:
            return ", ".join(f"{row['fit_s']:.0f}" for row in x["runs"] if "fit_s" in row)

        lines.append(
            f"| {int(r['m']):,} | {r['dtype']} | {r['commits']['now'].split()[0]} "
            f"| {now['fit_s']:.0f} | {runs(now)} | {r['commits']['before']} "
            f"| {before['fit_s']:.0f} | {runs(before)} | {before['fit_s'] / now['fit_s']:.2f}x "
            f"| {errs[0]:.2f}%, {errs[1]:.2f}% | {_host(r)} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "table", "before-table"])
    ap.add_argument("--m", default="default,2000,5000,10000,20000")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--limit", type=float, default=900.0)
    ap.add_argument("--before", help="an older tree's src folder, run alternating")
    ap.add_argument("--factor-layout", default="auto", help="the estimator's factor_layout")
    a = ap.parse_args()
    if a.mode == "run" and a.before:
        compare(a.m.split(","), a.runs, a.dtype, a.limit, a.before)
    elif a.mode == "run":
        run(a.m.split(","), a.runs, a.dtype, a.limit, a.factor_layout)
    elif a.mode == "before-table":
        print(before_table())
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
