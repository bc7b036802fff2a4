"""The README's first set-up command on a plain install: a fresh virtual
environment with nothing but the core dependencies, ``python -m pip install .``, then
``kernelpath demo`` and the command line on a CSV file (fit, predict)."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"{cmd}: {p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    return p.stdout


def test_plain_install_runs_the_demo_and_fits_a_csv(tmp_path):
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    bindir = env / ("Scripts" if sys.platform == "win32" else "bin")
    py = str(bindir / "python")
    # --no-compile: pip's byte-compiling of SciPy and scikit-learn took 18 of the install's
    # 33 s here; the modules a run imports are compiled as it imports them
    _run([py, "-m", "pip", "install", "--quiet", "--no-compile", str(ROOT)], tmp_path)
    # nothing but the core dependencies: none of the extras came along
    missing = _run(
        [
            py,
            "-c",
            "import importlib.util as u; print([m for m in "
            "('torch', 'dask', 'h5py', 'zarr', 'matplotlib', 'pandas') if u.find_spec(m)])",
        ],
        tmp_path,
    )
    assert missing.strip() == "[]"
    kp = str(bindir / "kernelpath")
    assert "test RMSE" in _run([kp, "demo"], tmp_path)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(600)
    with open(tmp_path / "train.csv", "w") as fh:
        fh.write("a,b,c,y\n")
        np.savetxt(fh, np.column_stack([X, y])[:500], delimiter=",", fmt="%.17g")
    with open(tmp_path / "test.csv", "w") as fh:
        fh.write("a,b,c\n")
        np.savetxt(fh, X[500:], delimiter=",", fmt="%.17g")
    _run([kp, "fit", "train.csv", "--target", "y", "--output", "m.kp"], tmp_path)
    _run([kp, "predict", "m.kp", "test.csv", "-o", "p.csv", "--quiet"], tmp_path)
    pred = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    assert pred.shape == (100,)
    assert np.sqrt(np.mean((pred - y[500:]) ** 2)) < 0.3
