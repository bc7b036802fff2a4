"""Peak memory of fits with a huge ``max_iter`` (issue 47, item 3): the path arrays must not
be sized by it.

    python benchmarks/max_iter_memory.py run
    python benchmarks/max_iter_memory.py table

Each case runs in a fresh process on 120 rows x 3 features with ``memory_budget="200MB"``
and reports its outcome and the process's peak RSS (``ru_maxrss``): Nyström CG at
``max_iter=10**7``, NYTRO at ``10**9``, exact KRLS's Landweber filter at ``10**8`` (refused:
its path keeps every iterate). Writes ``results/max_iter_memory.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "max_iter_memory.json"
CASES = {
    "NystromRegressor(n_centers=10, max_iter=10**7)": "nystrom",
    "NYTRORegressor(n_centers=10, max_iter=10**9)": "nytro",
    "KRLSRegressor(filter='landweber', max_iter=10**8)": "krls",
}


def case(name: str) -> dict[str, Any]:
    """In this process: fit the case, report its outcome and the peak RSS."""
    import resource

    import numpy as np

    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    y = np.sin(X[:, 0])
    est = {
        "nystrom": lambda: kp.NystromRegressor(n_centers=10, max_iter=10**7, random_state=0),
        "nytro": lambda: kp.NYTRORegressor(n_centers=10, max_iter=10**9, random_state=0),
        "krls": lambda: kp.KRLSRegressor(filter="landweber", max_iter=10**8),
    }[name]().set_params(memory_budget="200MB")
    try:
        est.fit(X, y)
        outcome = f"fitted, {est.n_iter_} iterations chosen"
    except ValueError as exc:
        outcome = "refused: " + str(exc).split(";")[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"outcome": outcome, "peak_rss_mb": peak}


def main() -> int:
    cmd = sys.argv[1] if len(sys.argv) > 1 else "table"
    if cmd == "case":
        print(json.dumps(case(sys.argv[2])))
        return 0
    if cmd == "run":
        res = {}
        for label, name in CASES.items():
            out = subprocess.run(
                [sys.executable, __file__, "case", name], capture_output=True, text=True, check=True
            )
            res[label] = json.loads(out.stdout.strip().splitlines()[-1])
            print(label, res[label], flush=True)
        OUT.write_text(json.dumps(res, indent=1) + "\n")
        return 0
    res = json.loads(OUT.read_text())
    print('| fit (memory_budget="200MB", 120 rows) | outcome | peak RSS (MB) |')
    print("|---|---|---:|")
    for label, r in res.items():
        print(f"| `{label}` | {r['outcome']} | {r['peak_rss_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
