"""The compact factor of CG (``solvers.compact``): its triangles against dense float64
algebra, its solutions against the dense closed form and the full factor, its precision
rule, and the layout rule that chooses it."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.linalg

from kernelpath import Gaussian, NystromRegressor
from kernelpath import _backend as B
from kernelpath._backend import NUMPY, Device
from kernelpath.solvers import compact, krylov
from kernelpath.solvers.compact import CompactFactor, blocked_cholesky_, compact_factor
from kernelpath.solvers.iterative import IterativeOptions, IterativeSetup, iterative_path
from kernelpath.solvers.krylov import (
    _anchors,
    anchor_count,
    cg_layout,
    cg_memory,
    compact_first_for,
    compact_in_reach,
    compact_over_eigh,
    forced_compact,
)
from kernelpath.workspace import Workspace

torch = pytest.importorskip("torch")


def problem(n: int = 3000, d: int = 5, m: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X @ rng.standard_normal(d)) + 0.1 * rng.standard_normal(n)
    return X, y, X[:m].copy()


def operator(X, C, sigma=2.0, device=NUMPY, dtype=np.float64):
    ws = Workspace.of(None, device)
    if device.is_torch:
        X, C = (torch.tensor(a, dtype=getattr(torch, np.dtype(dtype).name)) for a in (X, C))
    else:
        X, C = X.astype(dtype), C.astype(dtype)
    return ws.operator(X, C, Gaussian(sigma))


DEVICES = [NUMPY, Device("torch", "cpu")]


@pytest.fixture(params=[False, True], ids=["lapack", "blocked"])
def blocked(request, monkeypatch):
    """Both Cholesky routes: LAPACK in place, and the GPU's blocked torch code on the CPU."""
    if request.param:
        monkeypatch.setattr(CompactFactor, "_blocked", lambda self: True)
    return request.param


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_triangles_match_dense_algebra(device, blocked):
    if blocked and not device.is_torch:
        pytest.skip("the blocked route is torch's")
    X, _, C = problem(m=260)
    op = operator(X, C, device=device)
    fac = compact_factor(op, slots=3)
    K = Gaussian(2.0)(C, C) + fac.jitter * np.eye(len(C))
    T = scipy.linalg.cholesky(K, lower=False)
    W0 = np.asarray(fac.buffers[0])
    np.testing.assert_allclose(np.triu(W0[:-1]), T, atol=1e-10)
    V = np.random.default_rng(1).standard_normal((len(C), 3))
    for got, want in (
        (fac.apply(V), np.linalg.solve(T, V)),
        (fac.apply_t(V), np.linalg.solve(T.T, V)),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9 * np.abs(want).max())
    # three preconditioners in two buffers, each against its dense inverse, and the first
    # still valid after the others were written beside it
    scale = 0.01
    solves = [fac.preconditioner(scale, s) for s in (1e-3, 1e-2, 1e-1)]
    for shift, solve in zip((1e-3, 1e-2, 1e-1), solves, strict=True):
        P = scale * T @ T.T + shift * np.eye(len(C))
        np.testing.assert_allclose(solve(V), np.linalg.solve(P, V), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.triu(np.asarray(fac.buffers[0])[:-1]), T, atol=1e-10)
    with pytest.raises(RuntimeError, match="holds 3 preconditioners"):
        fac.preconditioner(scale, 1.0)
    val, vec = fac.top()
    top = np.linalg.eigvalsh(K)[-1]
    assert abs(val - top) <= 1e-3 * top
    M = T @ T.T
    assert np.linalg.norm(M @ vec - val * vec) <= 1e-2 * val


def test_blocked_cholesky_touches_one_triangle():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((300, 300))
    A = torch.tensor(A @ A.T + 300 * np.eye(300))
    L = torch.linalg.cholesky(A)
    for view in ("lower", "upper"):
        B = A.clone()
        S = B if view == "lower" else B.mT
        blocked_cholesky_(S, 64)
        assert torch.allclose(S.tril(), L, atol=1e-10)
        assert torch.equal(S.triu(1), A.triu(1) if view == "lower" else A.mT.triu(1))
    bad = -torch.eye(10, dtype=torch.float64)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        blocked_cholesky_(bad, 4)


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_cg_with_the_compact_factor_reaches_the_dense_solution(device, blocked):
    """float64: the compact factor's CG path equals the full factor's and the dense closed
    form of the Nyström problem, at every penalty of a path with several anchors."""
    if blocked and not device.is_torch:
        pytest.skip("the blocked route is torch's")
    X, y, C = problem(n=2000, m=250)
    n = len(X)
    op = operator(X, C, device=device)
    lam = np.array([1e-5, 1e-3, 1e-1])
    kw = dict(method="cg", max_iter=120, tol=0.0, n_iter_no_change=None)
    path = iterative_path(op, y, lam, IterativeOptions(factor_layout="compact", **kw))
    assert path.info["preconditioners"] == "compact"
    assert len(path.info["anchor_penalties"]) == 3
    full = iterative_path(operator(X, C), y, lam, IterativeOptions(factor_layout="cholesky", **kw))
    k = Gaussian(2.0)
    Knm, Kmm = k(X, C), k(C, C)
    jit = path.info["jitter"]
    for p, l in enumerate(lam):
        a = np.asarray(path.coef((p, path.shape[1] - 1))).ravel()
        exact = np.linalg.solve(Knm.T @ Knm / n + l * (Kmm + jit * np.eye(len(C))), Knm.T @ y / n)
        af = np.asarray(full.coef((p, full.shape[1] - 1))).ravel()
        np.testing.assert_allclose(Knm @ a, Knm @ exact, atol=1e-6 * np.abs(Knm @ exact).max())
        np.testing.assert_allclose(Knm @ a, Knm @ af, atol=1e-6 * np.abs(Knm @ af).max())


def test_float32_compact_factor_is_as_accurate_as_float64():
    """The precision rule: on a problem where the full factor of the float32 K_mm (cut at
    its rounding) loses 64% of test RMSE (0.269 against 0.164), the float32 compact factor
    with jitter eps sqrt(m) mean(K_ii) loses 1.6%. (Not everywhere: docs/design.md, "The
    compact factor", lists problems where the jitter cost more than the cut.)"""
    rng = np.random.default_rng(0)
    n, d, m, sigma = 10_000, 10, 1500, 10.0
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d) / 3
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(n)
    Xt = rng.standard_normal((5000, d))
    yt = np.sin(Xt @ w)
    C = X[rng.choice(n, m, replace=False)]
    kw = dict(method="cg", max_iter=20, tol=0.0, n_iter_no_change=None)
    test = operator(Xt, C, sigma)

    def rmse(dtype, layout):
        op = operator(X, C, sigma, dtype=dtype)
        path = iterative_path(op, y, 1e-6, IterativeOptions(factor_layout=layout, **kw))
        pred = test.matvec(np.asarray(path.coef(path.best_index), dtype=float))
        return float(np.sqrt(np.mean((np.ravel(pred) - yt) ** 2))), path.info

    ref, _ = rmse(np.float64, "cholesky")
    r32, info = rmse(np.float32, "compact")
    first = np.finfo(np.float32).eps * np.sqrt(m)  # times 10 where the factor failed
    assert np.log10(info["jitter"] / first) == pytest.approx(
        round(np.log10(info["jitter"] / first))
    )
    assert r32 <= 1.02 * ref
    cut, _ = rmse(np.float32, "eigh")  # the float64 factor of the float32 K_mm
    assert cut > 1.5 * ref


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_a_float32_factor_of_float64_data_solves_with_its_stored_triangle(device):
    """The float32 compact factor under float64 data (the layout rule's step before the
    low-rank preconditioner): K_mm is computed in float64 and rounded into the buffer, and
    R = T^-1 is applied in float64 by refinement, so CG's path is the dense float64 solve
    whose penalty matrix is the stored triangle's T^T T (K_mm + j I up to float32's
    rounding) to 1e-4 of the predictions, at every anchor (one refinement step leaves R v
    off by about (eps_32 cond(T))^2, 7e-8 here, which the smallest penalty's system
    amplifies: 2.2e-5 at λ = 1e-5 on an AMD EPYC host, under 1e-5 on the Intel one the
    test was first written on; 2e-8 and 1e-9 at the others); against K_mm itself it
    differs by the jitter and the rounding (here below 1%). A factor not refined (float32
    solves) is off by 1e-2 or more (0.7 at λ = 1e-5), and CG's projected system then warns
    by the stated rule (``krylov.INDEFINITE_SHARE``)."""
    X, y, C = problem(n=2000, m=250)
    n = len(X)
    lam = np.array([1e-5, 1e-3, 1e-1])
    kw = dict(method="cg", max_iter=120, tol=0.0, n_iter_no_change=None)
    fac, plain32 = (
        compact_factor(operator(X, C, device=device), slots=3, dtype=np.float32) for _ in range(2)
    )
    assert fac.dtype == np.float32 and fac._refines()
    plain32._refines = lambda: False
    T = np.triu(np.asarray(B.to_numpy(fac.T), dtype=np.float64))
    k = Gaussian(2.0)
    Knm, Kmm = k(X, C), k(C, C)
    assert np.abs(T.T @ T - Kmm).max() < 100 * fac.jitter
    op = operator(X, C, device=device)
    path = iterative_path(
        op,
        y,
        lam,
        IterativeOptions(factor_layout="compact", **kw),
        prepared=IterativeSetup(factor=fac),
    )
    assert path.info["factor_dtype"] == "float32" and len(path.info["anchor_penalties"]) == 3
    with pytest.warns(RuntimeWarning, match="'cholesky-compact' in float32, data float64"):
        unrefined = iterative_path(
            operator(X, C, device=device),
            y,
            lam,
            IterativeOptions(**kw),
            prepared=IterativeSetup(factor=plain32),
        )
    worst = 0.0
    for p, l in enumerate(lam):
        a = np.asarray(path.coef((p, path.shape[1] - 1))).ravel()
        stored = np.linalg.solve(Knm.T @ Knm / n + l * T.T @ T, Knm.T @ y / n)
        plain = np.linalg.solve(Knm.T @ Knm / n + l * Kmm, Knm.T @ y / n)
        scale = np.abs(Knm @ stored).max()
        assert np.abs(Knm @ (a - stored)).max() < 1e-4 * scale
        assert np.abs(Knm @ (a - plain)).max() < 1e-2 * scale
        u = np.asarray(unrefined.coef((p, unrefined.shape[1] - 1))).ravel()
        worst = max(worst, np.abs(Knm @ (u - stored)).max() / scale)
    assert worst > 1e-2
    with pytest.raises(ValueError, match="dtype must be"):
        compact_factor(operator(X, C, dtype=np.float32), dtype=np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_factor_stays_within_the_memory_it_is_counted_for(dtype):
    """tracemalloc's peak over the compact factor's life (K_mm into the buffer, T, a
    preconditioner, refined products) within ``compact_memory``, which the budget counts.
    m = 5,000 takes the host's blocked Cholesky factor (``_kernels.potrf_scratch``: two
    m x 1,024 blocks, more than the two b x m block rows counted before, b = m / 8 here);
    and forming the preconditioner's rows made two b x i0 temporaries beyond the counted
    scratch (on P at m = 50,000 in 12 GB the fit peaked 0.34 GB above its budget)."""
    import tracemalloc

    m = 5000
    X, _, C = problem(n=m, d=5, m=m)
    op = operator(X, C, sigma=3.0)
    v = np.random.default_rng(1).standard_normal((m, 2))
    tracemalloc.start()
    try:
        fac = compact_factor(op, slots=1, dtype=dtype)
        solve = fac.preconditioner(1.0, 1e-3)
        fac.apply_t(fac.apply(solve(v)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    counted = compact.compact_memory(m, np.dtype(dtype).itemsize, 1)
    assert peak <= counted + 2**20, (peak / 1e6, counted / 1e6)


def test_the_jitter_grows_until_the_factor_exists():
    """Duplicate centers make K_mm singular: the first jitter (below float32's rounding of
    the duplicated rows) fails, and the factor exists with a jitter 10^k times it."""
    X, y, C = problem(m=200)
    C = np.vstack([C, C[:50]])
    op = operator(X, C, dtype=np.float32)
    first = 1e-9
    fac = compact_factor(op, jitter=first)
    assert fac.jitter > first
    assert np.log10(fac.jitter / first) == pytest.approx(round(np.log10(fac.jitter / first)))
    with pytest.raises(np.linalg.LinAlgError, match="no Cholesky factor in float32"):
        compact_factor(operator(X, C, sigma=1e6, dtype=np.float32), jitter=1e-30)


def test_center_gram_into_a_buffer_matches_the_matrix():
    X, _, C = problem(m=400)
    for device in DEVICES:
        op = operator(X, C, device=device)
        K = np.asarray(op.center_gram())
        out = (
            np.empty((400, 400))
            if not device.is_torch
            else torch.empty(400, 400, dtype=torch.float64)
        )
        got = op.center_gram(out=out)
        assert got is out
        np.testing.assert_allclose(np.asarray(out), K, atol=1e-14)


def test_layout_rule_and_memory():
    m, k = 20_000, 1
    lam = np.geomspace(1e-9, 1e-3, 20)
    anchors = len(_anchors(lam)[0])
    assert anchors == 4
    full = cg_memory(m, k, lam, 20, 0, layout="cholesky")
    assert cg_layout(m, k, lam, 20, 0, full, 8) == ("cholesky", 0, 8)
    # float32 beyond the full factors: the compact factor with every anchor where they fit
    all32 = cg_memory(m, k, lam, 20, 0, True, "compact", 4, anchors)
    assert all32 < cg_memory(m, k, lam, 20, 0, layout="eigh")
    assert cg_layout(m, k, lam, 20, 0, all32, 4) == ("compact", anchors, 4)
    assert cg_layout(m, k, lam, 20, 0, None, 4) == ("cholesky", 0, 8)
    # float64 beyond the full factors: as many anchors as fit, at least one
    one = cg_memory(m, k, lam, 20, 0, True, "compact", 8, 1)
    two = cg_memory(m, k, lam, 20, 0, True, "compact", 8, 3)
    assert cg_layout(m, k, lam, 20, 0, one, 8) == ("compact", 1, 8)
    assert cg_layout(m, k, lam, 20, 0, two, 8) == ("compact", 3, 8)
    assert cg_layout(m, k, lam, 20, 0, 1, 8) == ("compact", 1, 8)  # nothing fits: refused
    # float64 below one float64 buffer: the float32 compact factor, as many anchors as fit
    one32 = cg_memory(m, k, lam, 20, 0, True, "compact", 4, 1)
    three32 = cg_memory(m, k, lam, 20, 0, True, "compact", 4, 3)
    assert one32 < one / 1.9 and three32 < one
    assert cg_layout(m, k, lam, 20, 0, one32, 8) == ("compact", 1, 4)
    assert cg_layout(m, k, lam, 20, 0, three32, 8) == ("compact", 3, 4)
    # below one float32 buffer: the low-rank preconditioner, O(m r) bytes
    low = cg_memory(m, k, lam, 20, 0, layout="lowrank")
    assert low < one32 / 2
    assert cg_layout(m, k, lam, 20, 0, one32 - 1, 8) == ("lowrank", 0, 8)
    assert cg_layout(m, k, lam, 20, 0, low, 8) == ("lowrank", 0, 8)
    assert cg_layout(m, k, lam, 20, 0, low, 4, compact_first=True) == ("lowrank", 0, 8)
    assert cg_layout(m, k, lam, 20, 0, low - 1, 8) == ("compact", 1, 8)
    # where no buffer fits the share but one float32 buffer fits the room beyond it: that
    # one (one anchor, the least buffer, float32 data too), before the low-rank factor
    rule = functools.partial(cg_layout, m, k, lam, 20, 0, low)
    assert rule(8, room=one32) == rule(8, room=10 * one) == ("compact", 1, 4)
    assert rule(4, compact_first=True, room=one32) == ("compact", 1, 4)
    assert rule(8, room=one32 - 1) == ("lowrank", 0, 8)
    assert cg_layout(m, k, lam, 20, 0, one, 8, room=10 * one) == ("compact", 1, 8)
    assert cg_layout(m, k, lam, 20, 0, low - 1, 8, room=one32 - 1) == ("compact", 1, 8)
    # asked for by name: every anchor, float32 only where the data's precision does not fit
    everyone = cg_memory(m, k, lam, 20, 0, True, "compact", 8, anchors)
    assert forced_compact(m, k, lam, 20, 0, None, 8) == ("compact", anchors, 8)
    assert forced_compact(m, k, lam, 20, 0, everyone, 8) == ("compact", anchors, 8)
    assert forced_compact(m, k, lam, 20, 0, everyone - 1, 8) == ("compact", anchors, 4)
    assert forced_compact(m, k, lam, 20, 0, 1, 4) == ("compact", anchors, 4)
    # float32 (on every device): the compact factor first, whatever fits
    assert cg_layout(m, k, lam, 20, 0, None, 4, compact_first=True) == ("compact", anchors, 4)
    assert cg_layout(m, k, lam, 20, 0, one, 4, compact_first=True)[0] == "compact"
    assert compact_first_for(4) and not compact_first_for(8)
    # one buffer per two extra anchors: 4 m^2 bytes each in float32
    assert compact.compact_memory(m, 4, 1) < 4 * (m + 1) * m * 1.3
    assert compact.buffers_for(1) == 1 and compact.buffers_for(3) == 2
    assert compact.buffers_for(4) == 3
    # anchors at most as many as slots, spread from the smallest penalty to the largest
    a, owner = _anchors(lam, 2)
    assert a[0] == pytest.approx(1e-9) and a[-1] == pytest.approx(1e-3) and len(a) == 2
    a, owner = _anchors(np.array([0.0, 1e-6, 1e-2]), 1)
    assert list(a) == [0.0] and set(owner) == {0}


def test_an_estimator_over_its_budget_fits_with_the_compact_factor():
    """A fit whose full factors exceed the budget fits with the compact factor: in float64
    to the full factor's predictions, in float32 (with its jitter) to their accuracy."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 6))
    y = np.sin(X @ rng.standard_normal(6))
    kw = dict(
        penalty=1e-6,
        n_centers=1200,
        solver="cg",
        max_iter=30,
        tol=0.0,
        validation_fraction=0.0,
        random_state=0,
    )
    full = NystromRegressor(Gaussian(2.0), **kw).fit(X, y)
    tight = NystromRegressor(Gaussian(2.0), memory_budget="45MB", **kw).fit(X, y)
    assert full.path_.info["preconditioners"] == "cholesky"
    assert tight.path_.info["preconditioners"] == "compact"
    np.testing.assert_allclose(tight.predict(X), full.predict(X), atol=1e-6)
    X32 = X.astype(np.float32)
    f32 = NystromRegressor(Gaussian(2.0), memory_budget="30MB", **kw).fit(X32, y)
    assert f32.path_.info["preconditioners"] == "compact"
    # float32 on the host takes the compact factor within any budget (compact_first_for)
    roomy = NystromRegressor(Gaussian(2.0), **kw).fit(X32, y)
    assert roomy.path_.info["preconditioners"] == "compact"
    assert f32.path_.info["jitter"] > 0
    err64 = np.sqrt(np.mean((full.predict(X) - y) ** 2))
    err32 = np.sqrt(np.mean((f32.predict(X32) - y) ** 2))
    assert err32 <= 1.05 * err64 + 1e-3
    err_roomy = np.sqrt(np.mean((roomy.predict(X32) - y) ** 2))
    assert err_roomy <= 1.05 * err64 + 1e-3


def test_bad_arguments_are_refused_by_name():
    X, y, C = problem(n=400, m=50)
    op = operator(X, C)
    with pytest.raises(ValueError, match="slots"):
        compact_factor(op, slots=0)
    with pytest.raises(ValueError, match="jitter"):
        compact_factor(op, jitter=-1.0)
    with pytest.raises(ValueError, match="block"):
        blocked_cholesky_(torch.eye(4, dtype=torch.float64), 0)
    with pytest.raises(ValueError, match="square"):
        blocked_cholesky_(torch.ones(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="factor_layout"):
        iterative_path(
            op, y, 1e-3, IterativeOptions(method="cg", max_iter=5, factor_layout="dense")
        )


def _same_predictions(path, other, Knm, share):
    """The two paths' last iterates predict alike at every penalty, to ``share`` of the
    largest prediction."""
    for p in range(path.shape[0]):
        a = np.asarray(path.coef((p, path.shape[1] - 1))).ravel()
        e = np.asarray(other.coef((p, other.shape[1] - 1))).ravel()
        np.testing.assert_allclose(Knm @ a, Knm @ e, atol=share * np.abs(Knm @ e).max())


def test_ill_conditioned_centers_take_the_compact_factor_in_place_of_eigh(monkeypatch):
    """From ``COMPACT_OVER_EIGH_MIN_CENTERS`` centers (lowered here to 100), CG's full
    factor, where K_mm fails the Cholesky form's test, gives way to the float64 compact
    factor holding every anchor; its path equals the eigendecomposition's (what
    factor_layout="cholesky" still takes) at every penalty. Well-conditioned centers keep
    the Cholesky form; many anchors, fewer centers or a layout asked for keep the
    eigendecomposition."""
    monkeypatch.setattr(krylov, "COMPACT_OVER_EIGH_MIN_CENTERS", 100)
    X, y, C = problem(n=2000, d=2, m=250)
    lam = np.array([1e-5, 1e-3])
    kw = dict(method="cg", max_iter=120, tol=0.0, n_iter_no_change=None)
    path = iterative_path(operator(X, C), y, lam, IterativeOptions(**kw))
    assert path.info["factor"] == "cholesky-compact"
    assert len(path.info["anchor_penalties"]) == 2
    eig = iterative_path(operator(X, C), y, lam, IterativeOptions(factor_layout="cholesky", **kw))
    assert eig.info["factor"] == "eigh"
    # cond(K_mm) ~ 1e20: the jitter (3.5e-14) and the eigendecomposition's cut treat K_mm's
    # rounding directions apart, 4e-6 of the largest prediction at λ = 1e-5; a dense solve
    # of either normal equations is further off (3e-4: the condition squared)
    _same_predictions(path, eig, Gaussian(2.0)(X, C), 1e-5)
    many = np.geomspace(1e-1, 1e-13, 20)
    assert anchor_count(many) == 7 and not compact_over_eigh(250, many, False)
    assert (
        iterative_path(operator(X, C), y, many, IterativeOptions(**{**kw, "max_iter": 3})).info[
            "factor"
        ]
        == "eigh"
    )
    assert not compact_over_eigh(99, lam, False) and not compact_over_eigh(250, lam, True)
    sharp = iterative_path(
        operator(*problem(n=2000, d=5, m=250)[::2], sigma=0.5), y, lam, IterativeOptions(**kw)
    )
    assert sharp.info["factor"] == "cholesky"


def test_a_budget_without_a_factor_per_anchor_takes_the_compact_factor_over_eigh(monkeypatch):
    """Where a Cholesky factor per anchor does not fit but the eigendecomposition that
    serves every anchor does, and K_mm fails its Cholesky test, CG takes the compact factor
    holding every anchor (from ``COMPACT_OVER_EIGH_MIN_CENTERS`` centers, lowered here to
    100; up to ``EIGH_LAYOUT_MAX_ANCHORS``) if it fits, and its path equals the
    eigendecompositions' (what factor_layout="eigh" takes) at every penalty. K_mm that
    passes the test, too many anchors, a budget with room only for the eigendecomposition's
    matrices, fewer centers or the device keep the eigendecomposition."""
    monkeypatch.setattr(krylov, "COMPACT_OVER_EIGH_MIN_CENTERS", 100)
    X, y, C = problem(n=2000, d=2, m=250)  # cond(K_mm) ~ 1e20 at σ = 2
    lam = np.geomspace(1e-2, 1e-5, 4)
    A = anchor_count(lam)
    assert 2 <= A <= krylov.EIGH_LAYOUT_MAX_ANCHORS
    kw = dict(method="cg", max_iter=120, tol=0.0, n_iter_no_change=None)
    args = (250, 1, lam, 120, 0)
    eigh_need = cg_memory(*args, layout="eigh")
    # a basis of all m dimensions (120 iterations x A anchors > m) beside either
    limit = max(eigh_need, cg_memory(*args, True, "compact", 8, A))
    assert limit < cg_memory(*args, layout="cholesky")
    assert cg_layout(*args, limit) == ("eigh", 0, 8) and compact_in_reach(
        "eigh", *args, limit, False
    )
    path = iterative_path(operator(X, C), y, lam, IterativeOptions(memory_limit=limit, **kw))
    assert path.info["factor"] == "cholesky-compact"
    assert len(path.info["anchor_penalties"]) == A
    eig = iterative_path(operator(X, C), y, lam, IterativeOptions(factor_layout="eigh", **kw))
    assert eig.info["factor"] == "eigh"  # R from K_mm's eigendecomposition, then M's
    # the eigendecomposition's cut drops K_mm's directions below its rounding, the jitter
    # keeps them: 5e-5 of the largest prediction apart at λ = 1e-5, where the compact
    # factor's training error is the lower (0.00954 against 0.00962)
    _same_predictions(path, eig, Gaussian(2.0)(X, C), 1e-4)
    assert np.all(path.train_error[:, -1] <= eig.train_error[:, -1] * (1 + 1e-9))
    # well-conditioned centers: the Cholesky form, rotated to a diagonal
    Xs, ys, Cs = problem(n=2000, d=5, m=250)
    sharp = iterative_path(
        operator(Xs, Cs, sigma=0.5), ys, lam, IterativeOptions(memory_limit=limit, **kw)
    )
    assert sharp.info["factor"] == "cholesky-eigh"
    # 8 anchors: more buffers than the layout's four matrices
    many = np.geomspace(1e-1, 1e-15, 20)
    assert anchor_count(many) > krylov.EIGH_LAYOUT_MAX_ANCHORS
    assert not compact_over_eigh(250, many, False, "eigh")
    assert not compact_over_eigh(99, lam, False, "eigh")
    assert not compact_over_eigh(250, lam, True, "eigh")
    # 7 anchors: four buffers and the basis beside them do not fit where the
    # eigendecomposition's matrices just fit
    seven = np.geomspace(1e-1, 1e-13, 20)
    assert anchor_count(seven) == 7 and compact_over_eigh(250, seven, False, "eigh")
    args7 = (250, 1, seven, 3, 0)
    tight = cg_memory(*args7, layout="eigh")
    assert cg_layout(*args7, tight) == ("eigh", 0, 8)
    assert not compact_in_reach("eigh", *args7, tight, False)
    small = iterative_path(
        operator(X, C), y, seven, IterativeOptions(memory_limit=tight, **{**kw, "max_iter": 3})
    )
    assert small.info["factor"] == "eigh"


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_float32_refinement_solves_the_stored_triangle_in_float64(device, blocked):
    """R v of a float32 factor is the float64 solution with its stored triangle, on the
    host's route (the widened blocks in the factor's kept scratch) and the GPU's (widened
    where the triangle lives), over several blocks, transposed or not; the host's scratch
    is reused between products and dropped while a preconditioner is formed."""
    if blocked and not device.is_torch:
        pytest.skip("the blocked route is torch's")
    X, _, C = problem(n=1500, m=700)
    fac = compact_factor(operator(X, C, device=device, dtype=np.float32), slots=1)
    assert fac.block < fac.m // 2  # several blocks
    T = np.triu(np.asarray(fac.T, dtype=np.float64))
    V = np.random.default_rng(2).standard_normal((fac.m, 3))
    for got, want in (
        (fac.apply(V), scipy.linalg.solve_triangular(T, V)),
        (fac.apply_t(V), scipy.linalg.solve_triangular(T, V, trans="T")),
    ):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    scratch = fac._wide
    assert (scratch is None) == bool(blocked)
    fac.apply(V[:, 0])
    assert fac._wide is scratch  # kept, not made again
    fac.preconditioner(1.0, 1e-3)
    assert fac._wide is None


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_the_product_t_tt_is_formed_once_for_every_anchor(device, blocked, monkeypatch):
    """Five anchors in three buffers, over several blocks of rows: scale T T^T is formed
    once (into the last slot) and copied for the others; a failed factor of an earlier
    slot copies again with the larger shift, one of the last slot forms the product again;
    every preconditioner equals its dense inverse and T is untouched."""
    if blocked and not device.is_torch:
        pytest.skip("the blocked route is torch's")
    X, _, C = problem(n=1500, m=700)
    fac = compact_factor(operator(X, C, device=device), slots=5)
    assert fac.slots == 5 and fac.block < fac.m // 2
    T = np.triu(np.asarray(fac.T, dtype=np.float64))
    formed = []
    form = CompactFactor._form_preconditioner
    monkeypatch.setattr(
        CompactFactor,
        "_form_preconditioner",
        lambda self, Lw, scale, shift: formed.append(shift) or form(self, Lw, scale, shift),
    )
    fails = {1: 1, 4: 1}  # slot -> Cholesky failures to raise before the real factor
    factor = CompactFactor._cholesky_lower

    def cholesky(self, S):
        slot = len(self.shifts_used)
        if fails.get(slot, 0):
            fails[slot] -= 1
            raise np.linalg.LinAlgError("forced")
        factor(self, S)

    monkeypatch.setattr(CompactFactor, "_cholesky_lower", cholesky)
    scale, shifts = 0.01, [1e-3, 1e-2, 3e-2, 1e-1, 0.3]
    solves = [fac.preconditioner(scale, s) for s in shifts]
    assert formed == [0.0, 3.0]  # once for all, once more for the last slot's retry
    assert fac.shifts_used == [1e-3, 1e-1, 3e-2, 1e-1, 3.0]
    V = np.random.default_rng(3).standard_normal((fac.m, 2))
    for used, solve in zip(fac.shifts_used, solves, strict=True):
        P = scale * T @ T.T + used * np.eye(fac.m)
        np.testing.assert_allclose(solve(V), np.linalg.solve(P, V), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.triu(np.asarray(fac.T, dtype=np.float64)), T, atol=0)
