"""float32 operators compute their products with float64 right-hand sides in float64, on
the host and on CUDA: without it the Nyström solvers' sums of R v (large entries that
cancel) were noise on ill-conditioned centers, and a float32 CG path trained to an error of
0 everywhere (on the host; on an H200, MNIST's default classifier erred 21.25%)."""

import warnings

import numpy as np
import pytest

from kernelpath import NystromClassifier
from kernelpath._kernels import HAVE_NUMBA
from kernelpath.datasets import load_shared
from kernelpath.kernels import Gaussian
from kernelpath.operators import KernelOperator, blocks
from kernelpath.operators.blocks import product_dtype
from kernelpath.solvers.iterative import IterativeOptions, iterative_path

from .conftest import requires_shared


def _problem(rng, n=2000, m=200, d=10):
    X = rng.standard_normal((n, d))
    Y = np.sin(2 * X[:, :3]) + 0.1 * rng.standard_normal((n, 3))
    return X, Y, X[:m]


def test_a_float64_right_hand_side_is_multiplied_in_float64(rng):
    X, _, C = _problem(rng, n=500, m=60)
    op = KernelOperator(X.astype(np.float32), C.astype(np.float32), Gaussian(sigma=2.0))
    K32 = op.matvec(np.eye(60, dtype=np.float32))  # the operator's float32 entries
    assert K32.dtype == np.float32
    K = K32.astype(np.float64)
    # large entries of both signs whose products cancel, as R v does
    V = rng.standard_normal((60, 3)) * 1e4
    V[:, 1] -= V[:, 1].mean()
    w = rng.uniform(0.5, 2.0, 500)
    A = rng.standard_normal((500, 2))
    assert op.product_dtype(V) == np.float64
    assert op.product_dtype(V.astype(np.float32)) == np.float32
    for got, want in [
        (op.matvec(V), K @ V),
        (op.rmatvec(A), K.T @ A),
        (op.fused(V), K.T @ (K @ V)),
        (op.fused(V, w), K.T @ (w[:, None] * (K @ V))),
        (op.fused(V[:, :1], w), K.T @ (w[:, None] * (K @ V[:, :1]))),  # the GEMV route
    ]:
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
    # a float32 right-hand side keeps the float32 product
    assert op.fused(V.astype(np.float32)).dtype == np.float32
    # the Gram matrix (the direct path's) sums in float64 too
    G = op.gram(w)
    assert G.dtype == np.float64
    np.testing.assert_allclose(G, K.T @ (w[:, None] * K), rtol=1e-10, atol=1e-12)


def test_the_product_rule_is_the_same_on_every_device():
    """The rule has no device: float64 for a float64 right-hand side of a float32 operator
    (CUDA summed in float32 until MNIST's default classifier erred 21.25% on an H200)."""
    V = np.zeros(3)
    assert product_dtype(np.float32, V) == np.float64
    assert product_dtype(np.float32, V.astype(np.float32)) == np.float32
    assert product_dtype(np.float64, V.astype(np.float32)) == np.float64
    torch = pytest.importorskip("torch")
    assert product_dtype(np.float32, torch.zeros(3, dtype=torch.float64)) == np.float64


def _devices() -> list:
    """NumPy, and torch on the CPU and on CUDA where they are installed (CUDA's run only on
    a device machine)."""
    out = [pytest.param(None, id="numpy")]
    try:
        import torch
    except ImportError:
        return out
    no_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    return [
        *out,
        pytest.param("cpu", id="torch-cpu"),
        pytest.param("cuda", id="cuda", marks=no_cuda),
    ]


def _on(A: np.ndarray, device: str | None):
    if device is None:
        return A
    import torch

    return torch.from_numpy(A).to(device)


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("sigma", [2.0, 4.0])
def test_float32_cg_path_follows_float64(rng, sigma, device):
    """The whole λ path (20 penalties down to 1e-9 of the top, 10 iterations) in float32
    against float64: before the float64 sums every float32 training error was 0 (the
    projected system was noise) on both problems."""
    X, Y, C = _problem(rng)
    paths = {}
    for dt in (np.float32, np.float64):
        op = KernelOperator(_on(X.astype(dt), device), _on(C.astype(dt), device), Gaussian(sigma))
        paths[dt] = iterative_path(
            op, Y, None, IterativeOptions(method="cg", max_iter=10)
        ).train_error
    e32, e64 = paths[np.float32], paths[np.float64]
    both = np.isfinite(e32) & np.isfinite(e64)
    assert both.sum() >= 40
    assert np.all(e32[both] > 0)
    np.testing.assert_allclose(e32[both], e64[both], rtol=0.05)


@requires_shared
def test_usps_float32_fit_as_accurate_as_float64():
    """USPS with the classifier's defaults: float32 inputs erred 9.8% where float64 erred
    5.9% (the λ path's sums in float32); now within 0.5 points."""
    d = load_shared("usps")
    errs = {}
    for dt in (np.float32, np.float64):
        est = NystromClassifier(scale=False, random_state=0)
        est.fit(d["X_train"].astype(dt), d["y_train"])
        errs[dt] = np.mean(est.predict(d["X_test"].astype(dt)) != d["y_test"])
    assert errs[np.float64] < 0.07
    assert errs[np.float32] < errs[np.float64] + 0.005


def test_a_noisy_projected_system_warns_for_float32(rng, monkeypatch):
    """The stated rule: CG's projected matrix must be positive semi-definite; below
    -1e-5 of its largest eigenvalue its products are noise, which float32 data is warned of
    (and every path records in ``info["indefinite"]``). float32 sums (the code path before
    the float64 sums, forced here) make it noise; the float64 sums do not."""
    X, Y, C = _problem(rng)
    X32, C32 = X.astype(np.float32), C.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = iterative_path(
            KernelOperator(X32, C32, Gaussian(sigma=2.0)),
            Y,
            None,
            IterativeOptions(method="cg", max_iter=10),
        )
    assert clean.info["indefinite"] == 0.0
    monkeypatch.setattr(KernelOperator, "product_dtype", lambda self, A: self.dtype)
    with pytest.warns(RuntimeWarning, match="projected system has an eigenvalue"):
        noisy = iterative_path(
            KernelOperator(X32, C32, Gaussian(sigma=2.0)),
            Y,
            None,
            IterativeOptions(method="cg", max_iter=10),
        )
    assert noisy.info["indefinite"] > 1e-3


@pytest.mark.parametrize("route", ["host", "blocked"])
@pytest.mark.parametrize("refine", [True, False])
def test_compact_float32_factor_applies_r_in_float64(rng, monkeypatch, refine, route):
    """The compact factor keeps float32 triangles; R v from them by a float32 solve alone
    (``refine=False``, the code path before) made the projected system noise, and one step
    of refinement with float64 residuals makes the path float64's. ``blocked``: the GPU's
    route (the blocked Cholesky factor, the triangle widened where it lives), on CPU
    tensors; it solved in float32 alone until P at m = 50,000 erred 7% more than at
    m = 20,000 on an H200."""
    from kernelpath.solvers.compact import CompactFactor

    device = None
    if route == "blocked":
        pytest.importorskip("torch")
        device = "cpu"
        monkeypatch.setattr(CompactFactor, "_blocked", lambda self: True)
    if not refine:
        monkeypatch.setattr(CompactFactor, "_refines", lambda self: False)
    X, Y, C = _problem(rng)
    ref = iterative_path(
        KernelOperator(X, C, Gaussian(sigma=2.0)),
        Y,
        None,
        IterativeOptions(method="cg", max_iter=10),
    )
    X32, C32 = _on(X.astype(np.float32), device), _on(C.astype(np.float32), device)
    op = KernelOperator(X32, C32, Gaussian(sigma=2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        path = iterative_path(
            op, Y, None, IterativeOptions(method="cg", max_iter=10, factor_layout="compact")
        )
    assert path.info["preconditioners"] == "compact"
    e32, e64 = path.train_error, ref.train_error
    both = np.isfinite(e32) & np.isfinite(e64)
    close = np.allclose(e32[both], e64[both], rtol=0.05) and path.info["indefinite"] == 0.0
    assert close == refine


requires_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="Numba is not installed")


@requires_numba
@pytest.mark.parametrize("cache", ["auto", False])
def test_the_compiled_pass_sums_in_float64(rng, monkeypatch, cache):
    """The compiled row pass (float32 entries widened in registers) against a float64 dense
    computation on right-hand sides whose products cancel: float32 sums would miss by about
    1e-4 of the largest entry."""
    monkeypatch.setattr(blocks, "COMPILED_PASS_MIN_ENTRIES", 0)
    X, _, C = _problem(rng, n=700, m=90)
    op = KernelOperator(X.astype(np.float32), C.astype(np.float32), Gaussian(2.0), cache=cache)
    assert op._compiled
    K = op.matvec(np.eye(90, dtype=np.float32)).astype(np.float64)
    V = rng.standard_normal((90, 3)) * 1e4
    V -= V.mean(axis=0)
    w = rng.uniform(0.5, 2.0, 700)
    for k in (1, 3):
        got, KV = op.fused(V[:, :k], w, return_matvec=True)
        want = K.T @ (w[:, None] * (K @ V[:, :k]))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-11 * np.abs(want).max())
        np.testing.assert_allclose(KV, K @ V[:, :k], rtol=1e-10, atol=1e-11 * np.abs(want).max())
    one = op.fused(V[:, 0])
    assert one.shape == (90,)
    np.testing.assert_allclose(one, K.T @ (K @ V[:, 0]), rtol=1e-10, atol=1e-6)


@requires_numba
def test_the_compiled_pass_holds_numba_in_the_budget(monkeypatch):
    """An operator that runs the compiled pass plans its cache in what Numba's import
    leaves of the budget, and a budget under four times that import keeps widened pieces."""
    X = np.zeros((150_000, 2), dtype=np.float32)
    C = X[:1000]
    budget = 600_000_000 + 64 * 2**20  # K_nm (600 MB) fits beside the blocks, not Numba too
    monkeypatch.setattr(blocks, "COMPILED_PASS_MIN_ENTRIES", 2**62)
    plain = KernelOperator(X, C, Gaussian(1.0), memory_budget=budget)
    monkeypatch.setattr(blocks, "COMPILED_PASS_MIN_ENTRIES", 0)
    compiled = KernelOperator(X, C, Gaussian(1.0), memory_budget=budget)
    assert compiled._compiled and not plain._compiled
    assert plain.cache.planned_rows == 150_000
    assert compiled.cache.planned_rows <= (budget - blocks.COMPILED_PASS_IMPORT_BYTES) // 4000
    small = 4 * blocks.COMPILED_PASS_IMPORT_BYTES - 1
    assert not KernelOperator(X, C, Gaussian(1.0), memory_budget=small)._compiled
    assert not KernelOperator(
        X.astype(np.float64), C, Gaussian(1.0), memory_budget=budget
    )._compiled


@requires_numba
def test_a_fit_through_the_compiled_pass_is_the_widened_fit(rng, monkeypatch):
    """A float32 classifier whose CG passes run compiled makes the model of the widened
    pieces: the same float64 sums in another order, whose last digits CG's small penalties
    magnify to about 1e-5 of the scores (float32 sums move them by tenths)."""
    X = rng.standard_normal((1500, 6)).astype(np.float32)
    y = (np.sin(X[:, 0]) + X[:, 1] > 0).astype(int)
    kw = dict(search="none", random_state=0, n_centers=150)
    widened = NystromClassifier(**kw).fit(X, y)
    monkeypatch.setattr(blocks, "COMPILED_PASS_MIN_ENTRIES", 0)
    compiled = NystromClassifier(**kw).fit(X, y)
    assert compiled.best_params_ == widened.best_params_
    np.testing.assert_allclose(
        compiled.decision_function(X), widened.decision_function(X), rtol=0, atol=1e-4
    )
