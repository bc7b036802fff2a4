"""What the papers' reproduction scripts share: the data as the authors' code prepared it,
mean ± sd and the "within twice the published ±" test, their results folder, and writing a
generated table into REPORT.md between its markers (the harness's ``write_block``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPORT = HERE / "REPORT.md"
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent))
import fresh as h  # noqa: E402  (benchmarks/fresh.py: the harness)


def load_pm1(name: str) -> tuple[np.ndarray, ...]:
    """A shared set with an official split (adult, ijcnn1, breastcancer) as the authors' data
    classes prepare it: labels ±1; adult's 0/1 indicators scaled to ±1 (Enitor's
    ``Adult.scale``, 2x - 1); the others as shipped; the test file padded with zero columns
    where LIBSVM left the last ones out."""
    from kernelpath.datasets import load_shared

    d = load_shared(name)
    Xtr, Xte = np.asarray(d["X_train"], float), np.asarray(d["X_test"], float)
    if Xte.shape[1] < Xtr.shape[1]:
        Xte = np.hstack([Xte, np.zeros((len(Xte), Xtr.shape[1] - Xte.shape[1]))])
    if name == "adult":
        Xtr, Xte = 2 * Xtr - 1, 2 * Xte - 1
    ytr = np.where(np.asarray(d["y_train"]) > 0, 1.0, -1.0)
    yte = np.where(np.asarray(d["y_test"]) > 0, 1.0, -1.0)
    return Xtr, ytr, Xte, yte


def mean_sd(values: list[float], fmt: str) -> str:
    a = np.asarray(values, dtype=float)
    if len(a) == 1:
        return f"{a[0]:{fmt}} (one run)"
    return f"{a.mean():{fmt}} ± {a.std(ddof=1):{fmt}}"


def within(values: list[float], published: tuple[float, float]) -> str:
    """ "yes" when the mean is within twice the published ± of the published mean (2% of it
    where the paper prints no ±), else a bold "no"."""
    value, sd = published
    band = 2 * sd if sd > 0 else 0.02 * abs(value)
    return "yes" if abs(float(np.mean(values)) - value) <= band else "**no**"


def write_block(name: str, text: str) -> None:
    """Put ``text`` between REPORT.md's ``<!-- name: start -->`` and ``<!-- name: end -->``."""
    h.write_block(REPORT, name, text)


def load_results(name: str, default: Any = None) -> Any:
    """``results/NAME.json`` of the reproductions (``default`` where there is none)."""
    path = RESULTS / f"{name}.json"
    if default is not None and not path.is_file():
        return default
    return json.loads(path.read_text())


def save_results(name: str, doc: Any) -> None:
    """Write ``results/NAME.json`` of the reproductions."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=1, default=h.jsonable) + "\n")
