"""The fused Gaussian block (``kernelpath._fused``): product, clip and exponential in one
Triton kernel. Checked against NumPy through Triton's interpreter on CPU tensors
(``tests/fused_checks.py``, in a fresh process) and, where CUDA is present, on the GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import kernelpath._fused as F  # noqa: E402
from kernelpath import Gaussian  # noqa: E402

CUDA = torch.cuda.is_available()
HERE = Path(__file__).resolve().parent


def test_the_fused_kernel_through_the_interpreter():
    """Every check of ``fused_checks.py`` passes with Triton's interpreter."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("KERNELPATH_TRITON", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n0",  # in this process: workers would import torch again
        "-p",
        "no:cacheprovider",
        "-W",
        "error::RuntimeWarning",
    ]
    proc = subprocess.run(
        [*cmd, str(HERE / "fused_checks.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE.parent,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_without_the_interpreter_cpu_tensors_take_the_matrix_product(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    A = torch.from_numpy(np.random.default_rng(0).standard_normal((10, 4)))
    assert F.exp_block(A, A, -1, True) is None
    monkeypatch.setenv("KERNELPATH_TRITON", "0")
    assert not F.enabled()


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
def test_on_the_gpu(dtype, tol, calls, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(F, "_kernel", None)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 20))
    Z = X[:700]
    k = Gaussian(5.0)
    got = k(torch.from_numpy(X).to(dtype).cuda(), torch.from_numpy(Z).to(dtype).cuda())
    np.testing.assert_allclose(got.double().cpu().numpy(), k(X, Z), rtol=tol, atol=tol)
    assert calls["fused"] == 1
