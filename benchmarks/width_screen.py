"""How many rows, and which search, the width screen needs: variants of the screen's
constants (``kernelpath.fitting.widths``) against the oracle of ``benchmarks/defaults.py``.

    python benchmarks/width_screen.py run [--variants v0,v4] [--sets a,b]
    python benchmarks/width_screen.py table

Each variant sets module constants of ``kernelpath.fitting.widths`` before the default fit
(``NystromRegressor()`` / ``NystromClassifier()`` with ``random_state=seed``, CG) on the sets
and splits of ``benchmarks/defaults.py``: seeds 0, 1, 2 for the regression sets, the official
split for ijcnn1, adult and USPS; one process per set. Test error against the oracle stored
in ``results/defaults.json`` (15 widths, the best test error), and the fit's time in that
process (first fit of the process: comparable between variants, not a cost ratio; the cost
target is measured by ``defaults.py cost``).

Variants: ``v0`` the issue-24 screen (all rows up to 6000, factors of 2 refined twice, to
2^(1/4)); ``v1`` one refinement and the parabola's vertex; ``v2`` no refinement, the vertex;
``v3`` v1 on half the rows (at least 2000); ``v4`` v2 on half the rows, 2000-4000; ``v5``
v4 with a first pass over factors of 4 and then the factors of 2 either side of its best
(``COARSE_STRIDE = 2``: 6 fits where v4 has 8; the default since). Writes
``results/width_screen.json``.
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
OUT = HERE / "results" / "width_screen.json"
SETS = (
    "cpusmall pumadyn32nh kin8nm protein power-plant naval concrete energy wine yacht airfoil "
    "abalone ijcnn1 adult usps"
).split()
#: The variant's module constants; SCREEN_FRACTION, SCREEN_MIN_ROWS, SCREEN_ROWS set the rows,
#: REFINE the rounds of halving the step (sqrt(2), 2^(1/4)) before the vertex (VERTEX).
VARIANTS: dict[str, dict[str, Any]] = {
    "v0": {
        "SCREEN_FRACTION": 1.0,
        "SCREEN_MIN_ROWS": 1000,
        "SCREEN_ROWS": 6000,
        "REFINE": 2,
        "VERTEX": False,
    },
    "v1": {
        "SCREEN_FRACTION": 1.0,
        "SCREEN_MIN_ROWS": 1000,
        "SCREEN_ROWS": 6000,
        "REFINE": 1,
        "VERTEX": True,
    },
    "v2": {
        "SCREEN_FRACTION": 1.0,
        "SCREEN_MIN_ROWS": 1000,
        "SCREEN_ROWS": 6000,
        "REFINE": 0,
        "VERTEX": True,
    },
    "v3": {
        "SCREEN_FRACTION": 0.5,
        "SCREEN_MIN_ROWS": 2000,
        "SCREEN_ROWS": 6000,
        "REFINE": 1,
        "VERTEX": True,
    },
    "v4": {
        "SCREEN_FRACTION": 0.5,
        "SCREEN_MIN_ROWS": 2000,
        "SCREEN_ROWS": 4000,
        "REFINE": 0,
        "VERTEX": True,
        "STRIDE": 1,
    },
    "v5": {
        "SCREEN_FRACTION": 0.5,
        "SCREEN_MIN_ROWS": 2000,
        "SCREEN_ROWS": 4000,
        "REFINE": 0,
        "VERTEX": True,
        "STRIDE": 2,
    },
}


def _patch(cfg: dict[str, Any]) -> None:
    """Set the rows; replace the search by the variant's (refinement rounds, vertex)."""
    import kernelpath.fitting.widths as W

    for k in ("SCREEN_FRACTION", "SCREEN_MIN_ROWS", "SCREEN_ROWS"):
        setattr(W, k, cfg[k])
    vertex = W._vertex

    def search(scores: dict[float, Any], best: float, score: Any = None) -> float:
        return vertex(scores, best) if cfg["VERTEX"] else best

    W._vertex = search  # type: ignore[assignment]
    W.REFINE_ROUNDS = cfg["REFINE"]
    W.COARSE_STRIDE = cfg.get("STRIDE", 1)  # every factor of 2 before v5


def worker(name: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    import defaults as D

    _patch(cfg)
    out = []
    seeds = [0] if name in D.OFFICIAL_SPLIT else [0, 1, 2]
    for seed in seeds:
        Xtr, ytr, Xte, yte = D.load(name, seed)
        est = D.estimator(name, "cg", seed)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t
        err = D.test_error(name, yte, est.predict(Xte))
        out.append({"set": name, "seed": seed, "err": err, "t": fit_s})
    return out


def table(res: dict[str, Any]) -> str:
    ref = json.loads((HERE / "results" / "defaults.json").read_text())["accuracy"]
    tags = list(res["variants"])
    lines = ["| set | " + " | ".join(f"{t} vs oracle | {t} fit" for t in tags) + " |"]
    lines.append("|---|" + "---|---|" * len(tags))
    for name in SETS:
        cells = []
        for t in tags:
            rows = [r for r in res["variants"][t]["rows"] if r["set"] == name]
            if not rows:
                cells += ["", ""]
                continue
            orc = np.mean([ref[f"{name}/{r['seed']}"]["oracle_cg"]["test_error"] for r in rows])
            e = float(np.mean([r["err"] for r in rows]))
            cls = name in ("ijcnn1", "adult", "usps")
            cells.append(f"{e - orc:+.2f} pt" if cls else f"{e / orc:.3f}")
            cells.append(f"{np.mean([r['t'] for r in rows]):.1f} s")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run", "table", "worker"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--sets", default=",".join(SETS))
    a = ap.parse_args()
    if a.mode == "worker":
        print(json.dumps(worker(a.args[0], VARIANTS[a.args[1]])))
        return 0
    res = json.loads(OUT.read_text()) if OUT.exists() else {"variants": {}}
    if a.mode == "table":
        print(table(res))
        return 0
    for tag in a.variants.split(","):
        rows: list[dict[str, Any]] = []
        for name in a.sets.split(","):
            cmd = [sys.executable, __file__, "worker", name, tag]
            p = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows += json.loads(p.stdout.strip().splitlines()[-1])
        res["variants"][tag] = {"constants": VARIANTS[tag], "rows": rows}
        OUT.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
