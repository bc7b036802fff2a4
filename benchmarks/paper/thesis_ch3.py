"""The exact guide's departure from the thesis's Landweber step (Sec. 3.4.1, eq. 3.7), measured.

    python benchmarks/paper/thesis_ch3.py run     # results/thesis_ch3.json, and prints it

Eq. 3.7 iterates α_t = α_{t-1} + η (Y - K_n α_{t-1}) with η = 2/n (``step="thesis"``); the
library's default is η = 1/||K_n||. Both on the same kernel (the width ``KRLSRegressor()``
chooses with Tikhonov), the same 20% hold-out choosing t on the path of ``max_iter`` = 500
iterations, seeds 0-2: the selected t, whether it is the path's last iterate, and the test
RMSE.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
from _common import run_command

import kernelpath as kp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from defaults import load  # noqa: E402

OUT = HERE / "results" / "thesis_ch3.json"
SETS = ("concrete", "wine", "yacht", "airfoil", "abalone")
MAX_ITER = 500


def run() -> dict:
    out: dict = {}
    for name in SETS:
        rows = []
        for seed in range(3):
            Xtr, ytr, Xte, yte = load(name, seed)[:4]
            kernel = kp.KRLSRegressor(random_state=seed).fit(Xtr, ytr).kernel_
            row = {"seed": seed}
            for step in ("auto", "thesis"):
                est = kp.KRLSRegressor(
                    kernel, filter="landweber", step=step, max_iter=MAX_ITER, random_state=seed
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(Xtr, ytr)
                t = int(est.best_params_["n_iter"])
                rmse = float(np.sqrt(np.mean((est.predict(Xte) - yte) ** 2)))
                row[step] = {"t": t, "at_cap": t == MAX_ITER, "test_rmse": rmse}
            rows.append(row)
        means = {s: float(np.mean([r[s]["test_rmse"] for r in rows])) for s in ("auto", "thesis")}
        out[name] = {"runs": rows, "mean_rmse": means}
    return out


def main() -> None:
    res = run_command(__doc__, OUT, run)
    for name, r in res.items():
        ts = {s: [x[s]["t"] for x in r["runs"]] for s in ("auto", "thesis")}
        m = r["mean_rmse"]
        print(
            f"{name}: test RMSE eta=1/||K|| {m['auto']:.4g} (t {ts['auto']}), "
            f"eta=2/n {m['thesis']:.4g} (t {ts['thesis']})"
        )


if __name__ == "__main__":
    main()
