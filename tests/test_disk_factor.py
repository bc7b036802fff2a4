"""The compact factor in a file (``solvers.disk``): its triangles against dense float64
algebra on the triangles it stored, its panels against LAPACK's factor, its fit against the
dense Nyström solution (test_factor_layout.py), its memory (the panels, not the buffer), a full
disk, a failed factor and bad arguments refused by name, and ``center_gram``'s rows."""

from __future__ import annotations

import errno
import os
import tracemalloc

import numpy as np
import pytest
import scipy.linalg

import kernelpath as kp
from kernelpath._backend import NUMPY, Device
from kernelpath.solvers import disk
from kernelpath.solvers.compact import compact_factor
from kernelpath.solvers.disk import DiskFactor, disk_factor, disk_memory
from kernelpath.workspace import Workspace

torch = pytest.importorskip("torch")


def _operator(m=300, d=5, sigma=2.0, device=NUMPY, dtype=np.float32, n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    C = X[:m].copy()
    if device.is_torch:
        X, C = torch.from_numpy(X), torch.from_numpy(C)
    return Workspace.of(None, device).operator(X, C, kp.Gaussian(sigma))


def _dense_k(op) -> np.ndarray:
    return np.asarray(op.center_gram(), dtype=np.float64)


@pytest.mark.parametrize("rows", [37, 64, 300, 1000])
def test_the_streamed_steps_are_the_dense_algebra_of_the_stored_triangles(rows):
    """T^T T = K_mm + j I to float32's rounding; R = T^-1 applied (both ways) as the dense
    float64 solve with the stored T; the products exact; the preconditioner's A A^T =
    scale T T^T + shift I and its solve the dense one with the stored A. Panels of 37 rows
    do not divide m = 300; 1,000 rows are one panel."""
    op = _operator()
    fac = disk_factor(op, rows=rows)
    m = op.m
    T = np.triu(np.asarray(fac.W[:m], dtype=np.float64))
    K = _dense_k(op) + fac.jitter * np.eye(m)
    assert np.abs(T.T @ T - K).max() <= 50 * np.finfo(np.float32).eps * np.abs(K).max()
    V = np.random.default_rng(1).standard_normal((m, 4))
    for transpose in (False, True):
        want = scipy.linalg.solve_triangular(T, V, trans="T" if transpose else "N")
        got = fac.apply_t(V) if transpose else fac.apply(V)
        assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()
        prod = fac._tri_product(V, transpose, wide=True)
        assert np.allclose(prod, (T.T if transpose else T) @ V, rtol=0, atol=1e-12)
    want = scipy.linalg.solve_triangular(T, V[:, 0])  # a vector as a column
    assert np.abs(fac.apply(V[:, 0]) - want).max() <= 1e-9 * np.abs(want).max()
    top, _ = fac.top()
    assert top == pytest.approx(np.linalg.eigvalsh(K)[-1], rel=1e-3)
    scale, shift = 0.5, 1e-3
    solve = fac.preconditioner(scale, shift)
    A = np.tril(np.asarray(fac.W[1:], dtype=np.float64))
    P = scale * T @ T.T + fac.shifts_used[0] * np.eye(m)
    assert np.abs(A @ A.T - P).max() <= 50 * np.finfo(np.float32).eps * np.abs(P).max()
    want = np.linalg.solve(A @ A.T, V)
    assert np.abs(solve(V) - want).max() <= 1e-3 * np.abs(want).max()  # a float32 solve
    # forming A left T alone
    assert np.array_equal(np.triu(np.asarray(fac.W[:m], dtype=np.float64)), T)
    with pytest.raises(RuntimeError, match="1 preconditioner"):
        fac.preconditioner(scale, shift)


def test_the_factor_is_lapacks_in_float32():
    """On a well-conditioned K_mm (narrow width) the panels' T is LAPACK's float32 factor
    and the compact factor's to float32's rounding, with the same jitter."""
    op = _operator(sigma=0.7)
    fac = disk_factor(op, rows=50)
    ref = compact_factor(op, dtype=np.float32)
    assert fac.jitter == pytest.approx(ref.jitter, rel=1e-6)
    m = op.m
    T, Tc = np.triu(fac.W[:m]).astype(np.float64), np.triu(ref.T).astype(np.float64)
    assert np.abs(T - Tc).max() <= 1e-5 * np.abs(Tc).max()


def test_a_torch_operator_writes_its_bands_through_a_tensor():
    op = _operator(device=Device("torch", "cpu"))
    fac = disk_factor(op, rows=64)
    T = np.triu(np.asarray(fac.W[: op.m], dtype=np.float64))
    K = _dense_k(_operator()) + fac.jitter * np.eye(op.m)
    assert np.abs(T.T @ T - K).max() <= 50 * np.finfo(np.float32).eps * np.abs(K).max()


def test_the_fit_holds_the_panels_not_the_buffer():
    """tracemalloc over the factor, the preconditioner and a refined product: the peak is
    the three panels and the vectors, far below the buffer (the file's)."""
    op = _operator(m=1200, n=1300)
    rows = 40
    V = np.random.default_rng(0).standard_normal((op.m, 3))
    tracemalloc.start()
    try:
        fac = disk_factor(op, rows=rows)
        fac.preconditioner(0.5, 1e-3)(V)
        fac.apply(V)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    buffer = 4 * (op.m + 1) * op.m  # 5.8 MB
    panels = disk_memory(op.m, rows)  # 0.58 MB
    assert peak <= panels + 12 * V.nbytes + 2 * 2**20  # K's bands (BLOCK_BYTES) and LAPACK
    assert peak < buffer / 2


def test_a_disk_without_room_is_an_oserror_naming_the_directory(monkeypatch, tmp_path):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(disk.os, "posix_fallocate", full)
    with pytest.raises(OSError, match=str(tmp_path)) as info:
        disk_factor(_operator(), directory=tmp_path)
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []  # an unnamed file: nothing left behind


def test_a_factor_that_fails_every_jitter_is_refused_and_its_file_closed(monkeypatch):
    closed = []
    original = DiskFactor.close

    def close(self):
        closed.append(1)
        original(self)

    monkeypatch.setattr(DiskFactor, "close", close)
    op = _operator(sigma=50.0)
    # every jitter of the six tries, from 1e-30 on, is far below float32's rounding of this
    # wide kernel's K_mm (nearly all ones), whose smallest eigenvalues are rounding noise
    with pytest.raises(np.linalg.LinAlgError, match="no Cholesky factor in float32"):
        disk_factor(op, jitter=1e-30)
    assert closed == [1]
    fac = disk_factor(op)  # the default first jitter holds (or grows until it does)
    assert fac.jitter >= np.finfo(np.float32).eps * np.sqrt(op.m)


def test_center_gram_writes_the_rows_asked_for():
    op = _operator(dtype=np.float64)
    K = op.center_gram()
    out = np.empty((25, op.m), dtype=np.float32)
    op.center_gram(out=out, rows=(100, 125))
    assert np.allclose(out, K[100:125], rtol=0, atol=1e-7)
    with pytest.raises(ValueError, match="rows needs out"):
        op.center_gram(rows=(0, 2))
    with pytest.raises(ValueError, match="out must have shape"):
        op.center_gram(out=np.empty((3, op.m)), rows=(0, 2))
    with pytest.raises(ValueError, match="rows must satisfy"):
        op.center_gram(out=np.empty((2, op.m)), rows=(op.m - 1, op.m + 1))


def test_bad_arguments_are_refused_by_name(tmp_path):
    with pytest.raises(TypeError, match="directory"):
        disk_factor(_operator(), directory=3)
    with pytest.raises((TypeError, ValueError), match="rows"):
        disk_factor(_operator(), rows=0)
    with pytest.raises((TypeError, ValueError), match="jitter"):
        disk_factor(_operator(), jitter=-1.0)
    with pytest.raises((TypeError, ValueError), match="m"):
        disk_memory(0)
    with pytest.raises((TypeError, ValueError), match="rows"):
        disk_memory(100, rows=2.5)


@pytest.mark.parametrize("kind", ["missing", "regular file", "not writable"])
def test_a_tmpdir_that_is_no_writable_folder_is_refused_naming_tmpdir(kind, monkeypatch, tmp_path):
    """``tempfile`` silently takes another folder where ``TMPDIR`` names a missing folder,
    a file or a folder it cannot write in: the disk factor's 4 m^2 bytes then went to /tmp.
    They are refused, naming ``TMPDIR``, before anything is written; a usable ``TMPDIR``
    is where the file goes (``TEMP`` and ``TMP`` are not read past it)."""
    where = tmp_path / "scratch"
    if kind == "regular file":
        where.write_text("")
    elif kind == "not writable":
        where.mkdir()
        real = os.access
        monkeypatch.setattr(
            os, "access", lambda p, mode: False if os.fspath(p) == str(where) else real(p, mode)
        )
    monkeypatch.setenv("TMPDIR", str(where))
    monkeypatch.setenv("TEMP", str(tmp_path))
    with pytest.raises(ValueError, match=f"TMPDIR='{where}'"):
        disk_factor(_operator())
    monkeypatch.undo()
    good = tmp_path / "good"
    good.mkdir()
    monkeypatch.setenv("TMPDIR", str(good))
    seen = []
    real_file = disk.tempfile.TemporaryFile
    monkeypatch.setattr(
        disk.tempfile, "TemporaryFile", lambda dir: seen.append(dir) or real_file(dir=dir)
    )
    disk_factor(_operator(m=50)).close()
    assert seen == [str(good)]
