"""Interrupts during the dense factorizations: the compiled LAPACK calls release Python's
lock and run in a helper thread, so Ctrl-C reaches a fit (and the command line) at once."""

from __future__ import annotations

import numpy as np
import pytest

import kernelpath as kp


def _sigint_default() -> None:
    """In the child before it starts: SIGINT's default action. A runner started in the
    background of a shell without job control ignores SIGINT, its children inherit that,
    and Python then installs no KeyboardInterrupt handler (both test_25 subprocess tests
    failed that way under `bash .ci/run &`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_in_place_lapack_matches_scipy_and_refuses_what_it_cannot_factor():
    """The GIL-free eigendecomposition and Cholesky factor (``_kernels``) against SciPy, on
    C- and Fortran-ordered matrices, written over their input."""
    import scipy.linalg

    from kernelpath._kernels import cholesky_lower, eigh_lower

    rng = np.random.default_rng(25)
    G = rng.standard_normal((60, 60))
    A = G @ G.T / 60 + 0.1 * np.eye(60)
    w_ref = scipy.linalg.eigvalsh(A)
    for order in ("C", "F"):
        H = np.array(A, order=order)
        w, V = eigh_lower(H)
        np.testing.assert_allclose(w, w_ref, rtol=1e-12)
        np.testing.assert_allclose(A @ V, V * w, atol=1e-12)
        assert np.shares_memory(V, H)  # in place
        K = np.array(A, order=order)
        L = np.tril(cholesky_lower(K))
        np.testing.assert_allclose(L, scipy.linalg.cholesky(A, lower=True), atol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        cholesky_lower(A - 2 * np.eye(60) * w_ref.max())
    with pytest.raises(ValueError, match="square float64"):
        eigh_lower(A.astype(np.float32))


def test_ctrl_c_stops_a_factorization_at_once():
    """SIGINT reached an exact KRLS fit only after LAPACK returned (187 s measured):
    SciPy's wrappers hold Python's lock for the whole call. The compiled call releases it
    and runs in a helper thread: Ctrl-C 0.5 s into a 3,000 x 3,000 eigendecomposition (a few
    seconds here) stops it within a second; SciPy's call, the control, holds it longer."""
    import signal
    import subprocess
    import sys
    import time

    code = """
import sys, time, numpy as np, scipy.linalg
from kernelpath._kernels import eigh_lower, interruptible
interruptible(eigh_lower, np.eye(50))  # compile (or load) the compiled call first
G = np.random.default_rng(0).standard_normal((3000, 3000)); A = G @ G.T
print("ready", flush=True)
try:
    if sys.argv[1] == "compiled":
        interruptible(eigh_lower, A)
    else:
        scipy.linalg.eigh(A, driver="evd", overwrite_a=True, check_finite=False)
    print("finished", time.monotonic(), flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
"""

    def latency(how: str, wait: float = 120.0) -> float:
        """Seconds from SIGINT to the process's reply, or ``wait`` if none came by then."""
        proc = subprocess.Popen(
            [sys.executable, "-c", code, how],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_sigint_default,
        )
        assert proc.stdout.readline().strip() == "ready", proc.communicate()[1][-2000:]
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:  # still inside LAPACK: held at least ``wait``
            proc.kill()
            proc.communicate()
            return wait
        assert out.split()[:1] in (["interrupted"], ["finished"]), out + err[-2000:]
        return float(out.split()[1]) - sent  # CLOCK_MONOTONIC: one clock for both processes

    # bounded against the control in the same test, so that it holds on a loaded machine:
    # SciPy's call holds the interrupt until LAPACK returns (seconds), the compiled one
    # replies within its 50 ms polls
    compiled = latency("compiled")
    held = latency("scipy")
    assert compiled < held / 4, (compiled, held)


def test_exact_krls_factors_through_the_interruptible_call(monkeypatch):
    """Exact KRLS's eigendecomposition and Cholesky factor go through ``interruptible``
    from ``LAPACK_IN_THREAD_MIN`` rows on (what the test above shows stops at once)."""
    import kernelpath.linalg as la

    seen = []
    real = la.interruptible

    def spy(fn, *args):
        seen.append((fn.__name__, len(args[0])))
        return real(fn, *args)

    monkeypatch.setattr(la, "interruptible", spy)
    X, y = _data(n=1300, d=4)
    kp.KRLSRegressor(kp.Gaussian(2.0), validation_fraction=0.0, penalty=1e-3).fit(X, y)
    kp.KRLSRegressor(kp.Gaussian(2.0), cv="loo").fit(X, y)  # the whole λ path
    assert seen == [("cholesky_lower", 1300), ("eigh_lower", 1300)]
    seen.clear()
    kp.KRLSRegressor(kp.Gaussian(2.0), validation_fraction=0.0, penalty=1e-3).fit(X[:900], y[:900])
    assert seen == []  # below the threshold: SciPy's call


def test_the_command_line_ends_at_once_on_ctrl_c_during_a_factorization(tmp_path):
    """``kernelpath fit --model krls`` interrupted in its eigendecomposition prints its
    one line and exits 130 without waiting for LAPACK to return (the interpreter's exit
    would wait for the helper thread; the command owns its process)."""
    import signal
    import subprocess
    import sys
    import time

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 5))
    np.savez(tmp_path / "d.npz", X=X, y=np.sin(X[:, 0]))
    cmd = [sys.executable, "-m", "kernelpath.cli", "fit", str(tmp_path / "d.npz")]
    cmd += ["--model", "krls", "--sigma", "2", "--scale", "off", "--progress"]

    def run(interrupt: bool) -> tuple[float, subprocess.Popen, str]:
        """Seconds from the factorization's start (interrupted: from the SIGINT 0.5 s
        into it) to the process's end."""
        out = str(tmp_path / ("m.kp" if interrupt else "control.kp"))
        proc = subprocess.Popen(
            [*cmd, "-o", out],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_sigint_default,
        )
        lines = []
        while not any("estimated cost" in line for line in lines):  # said before it factors
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        start = time.monotonic()
        if interrupt:
            time.sleep(0.5)  # the kernel matrix takes a fraction of that: the eigh runs
            assert proc.poll() is None, proc.communicate()
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
        return time.monotonic() - start, proc, err

    # the control, on the same machine under the same load: the whole factorization and
    # the rest of the fit (seconds)
    whole, control, err = run(interrupt=False)
    assert control.returncode == 0, err[-2000:]
    ended, proc, err = run(interrupt=True)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert ended < (whole - 0.5) / 2, (ended, whole)  # not waiting for LAPACK to return
    assert not (tmp_path / "m.kp").exists()
