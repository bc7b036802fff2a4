"""The memory budget as a contract (issue 25): the solvers' estimates bound what they
allocate, a whole fit's traced peak stays within ``memory_budget``, and a budget too small
for the solver's matrices is refused before any pass over the data."""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest

import kernelpath as kp
from kernelpath import linalg
from kernelpath._backend import n_threads, symmetrize
from kernelpath.kernels import Gaussian
from kernelpath.operators import KernelOperator
from kernelpath.solvers import (
    IterativeOptions,
    incremental_nystrom_path,
    iterative_path,
    nystrom_direct_path,
)
from kernelpath.solvers._common import Validation
from kernelpath.solvers.incremental import incremental_memory
from kernelpath.solvers.iterative import cg_memory, gradient_memory
from kernelpath.solvers.nystrom import direct_memory

OP_BUDGET = 2 * 2**20  # the operators' own share: a few small blocks


def _problem(n: int = 3000, m: int = 400, n_val: int = 800, d: int = 8):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    Xv = rng.standard_normal((n_val, d))
    yv = np.sin(Xv[:, 0])
    k = Gaussian(3.0)
    op = KernelOperator(X, X[:m].copy(), k, OP_BUDGET, cache=False)
    vop = KernelOperator(Xv, X[:m].copy(), k, OP_BUDGET, cache=False)
    return op, y, Validation(vop, yv[:, None], "mse")


def _traced(fn):
    tracemalloc.start()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak


def test_direct_memory_bounds_the_direct_path():
    op, y, val = _problem()
    m = op.m
    path, peak = _traced(lambda: nystrom_direct_path(op, y, None, None, val))
    est = direct_memory(m, 1, 20, n_threads())
    # the solver's matrices are most of it: an m x m temporary more would not fit
    assert peak <= est + 2 * OP_BUDGET
    assert peak > 3 * 8 * m * m
    assert np.isfinite(path.val_error).all()


@pytest.mark.parametrize("cholesky", [True, False])
def test_cg_memory_bounds_cg_in_either_mode(cholesky):
    op, y, val = _problem()
    limit = cg_memory(op.m, 1, None, 100, len(val.Y), cholesky=cholesky)
    path, peak = _traced(
        lambda: iterative_path(
            op,
            y,
            None,
            IterativeOptions(
                method="cg", max_iter=100, n_iter_no_change=10, tol=1e-4, memory_limit=limit
            ),
            weights=None,
            validation=val,
        )
    )
    assert peak <= limit + 2 * OP_BUDGET
    expected = "cholesky" if cholesky else "diagonal"
    assert path.info["preconditioners"] == expected
    assert path.info["krylov_dim"] <= op.m


def test_cg_modes_give_the_same_path():
    """One eigendecomposition for every anchor (the lean mode) is the same method as one
    Cholesky factor per anchor: the same Krylov spaces, rotated."""
    op, y, val = _problem()
    fast = iterative_path(
        op,
        y,
        None,
        IterativeOptions(method="cg", max_iter=30, n_iter_no_change=None, tol=0.0),
        weights=None,
        validation=val,
    )
    limit = cg_memory(op.m, 1, None, 30, len(val.Y), cholesky=False)
    lean = iterative_path(
        op,
        y,
        None,
        IterativeOptions(
            method="cg", max_iter=30, n_iter_no_change=None, tol=0.0, memory_limit=limit
        ),
        weights=None,
        validation=val,
    )
    assert fast.info["preconditioners"] == "cholesky" and lean.info["preconditioners"] == "diagonal"
    np.testing.assert_allclose(lean.val_error, fast.val_error, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(lean.coef((5, 10)), fast.coef((5, 10)), rtol=1e-5, atol=1e-8)


def test_gradient_and_incremental_memory_bound_their_paths():
    op, y, val = _problem()
    m = op.m
    _, peak = _traced(
        lambda: iterative_path(
            op,
            y,
            None,
            IterativeOptions(method="nu", max_iter=50, n_iter_no_change=None, tol=0.0),
            weights=None,
            validation=val,
        )
    )
    assert peak <= gradient_memory(m, 1, None, len(val.Y)) + 2 * OP_BUDGET
    grid = np.array([50, 100, 200, 400])
    _, peak = _traced(lambda: incremental_nystrom_path(op, y, None, grid, None, val))
    assert peak <= incremental_memory(m, 1, None, len(grid), len(val.Y)) + 2 * OP_BUDGET


def test_diagonalized_factor_keeps_the_factor_identities():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((60, 60))
    K = A @ A.T / 60 + np.eye(60)
    fac = linalg.nystrom_factor(K)
    assert fac.method == "cholesky"
    M = fac.R.T @ K @ K @ fac.R
    diag = linalg.nystrom_factor(K).diagonalized()
    R, mu = diag.R, diag.M
    assert diag.method == "cholesky-eigh" and mu.ndim == 1
    np.testing.assert_allclose(R @ R.T, np.linalg.inv(K), atol=1e-10)
    np.testing.assert_allclose(R.T @ K @ R, np.eye(60), atol=1e-10)
    np.testing.assert_allclose(R.T @ K @ K @ R, np.diag(mu), atol=1e-9)
    # each shift's preconditioner inverts scale M + shift I in its factor's axes
    V = rng.standard_normal((60, 3))
    for shift in (1e-6, 1e-2, 1.0):
        want = np.linalg.solve(0.3 * M + shift * np.eye(60), V)
        np.testing.assert_allclose(fac.preconditioner(0.3, shift)(V), want, rtol=1e-7)
        want = np.linalg.solve(0.3 * np.diag(mu) + shift * np.eye(60), V)
        np.testing.assert_allclose(diag.preconditioner(0.3, shift)(V), want, rtol=1e-7)


def test_unpreconditioned_factor_has_no_m():
    K = np.eye(5) * 2.0
    fac = linalg.nystrom_factor(K, preconditioned=False)
    assert fac.M is None
    with pytest.raises(ValueError, match="preconditioned"):
        fac.preconditioner(1.0, 1.0)


@pytest.mark.parametrize("lower", [False, True])
def test_symmetrize_in_place(lower):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((700, 700))
    want = np.tril(A) + np.tril(A, -1).T if lower else (A + A.T) / 2
    B = np.asfortranarray(A) if lower else A.copy()
    out = symmetrize(B, lower=lower, block=128)
    assert out is B
    np.testing.assert_array_equal(out, want)


def test_gram_matches_dense_products_with_weights():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1500, 5))
    w = rng.uniform(0, 2, 1500)
    op = KernelOperator(X, X[:90].copy(), Gaussian(2.0), 2**20, cache=False)
    K = op.block(0, 1500)
    G = op.gram(w)
    np.testing.assert_allclose(G, K.T @ (w[:, None] * K), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(G, G.T)


# ---------------------------------------------------------------------------- whole fits
def _fit_data(n: int = 30_000, d: int = 10):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize(
    ("solver", "budget", "kernel"),
    [
        ("cg", 50e6, Gaussian(3.0)),
        ("cg", 120e6, Gaussian(3.0)),
        ("direct", 50e6, Gaussian(3.0)),
        ("direct", 120e6, Gaussian(3.0)),
        ("cg", 60e6, "gaussian"),  # the width screen, then the fit
    ],
)
def test_fit_peak_stays_within_the_budget(solver, budget, kernel):
    """tracemalloc's peak over the whole fit (the hold-out copies, the m x m algebra, the
    operators' cache and blocks) within the budget + 10%. Before issue 25 a CG fit took
    several times its budget (the anchors' Cholesky factors, the validation basis)."""
    X, y = _fit_data()
    est = kp.NystromRegressor(
        kernel, n_centers=800, solver=solver, scale=False, memory_budget=int(budget),
        random_state=0,
    )  # fmt: skip
    _, peak = _traced(lambda: est.fit(X, y))
    assert peak <= 1.1 * budget, (peak / 1e6, budget / 1e6)
    assert est.score(X[:2000], y[:2000]) > 0.9


@pytest.mark.parametrize("centers", ["approximate-leverage", "leverage"])
def test_leverage_centers_share_the_budget(centers):
    """The leverage-score strategies run their own operators with what the fit's copies
    and vectors leave of the budget (before: the whole budget, beside the copies)."""
    exact = centers == "leverage"
    X, y = _fit_data(2000 if exact else 20_000)
    budget = 120e6 if exact else 60e6  # exact: 1600 x 1600 matrices
    est = kp.NystromRegressor(
        Gaussian(3.0), n_centers=400, centers=centers, solver="direct", scale=False,
        memory_budget=int(budget), random_state=0,
    )  # fmt: skip
    _, peak = _traced(lambda: est.fit(X, y))
    assert peak <= 1.1 * budget, peak / 1e6


def _needed(est, X, y) -> int:
    """The budget (MB) a refusal names."""
    with pytest.raises(ValueError, match=r"is too small .*at least \d+MB") as info:
        est.fit(X, y)
    return int(re.search(r"at least (\d+)MB", str(info.value)).group(1))


def test_fit_refuses_a_budget_too_small_for_the_solver():
    X, y = _fit_data(8000)
    est = kp.NystromRegressor(
        Gaussian(3.0), n_centers=1500, solver="cg", scale=False, memory_budget="20MB"
    )
    with pytest.raises(ValueError, match=r"memory_budget=20 MB is too small for NystromRegr"):
        est.fit(X, y)
    need = _needed(est, X, y)
    est.set_params(memory_budget=f"{need}MB").fit(X, y)  # the budget it names is enough
    assert np.isfinite(est.coef_).all()


def test_a_converted_copy_of_x_counts_in_the_budget():
    """X as integers is converted to float64 while validating it: that copy is charged to
    the budget (refused at the budget that fits float64 X, which is not copied)."""
    X, y = _fit_data(8000, 40)
    X = np.round(X * 100)
    est = kp.NystromRegressor(
        Gaussian(600.0), n_centers=300, solver="direct", scale=False, penalty=1e-3,
        validation_fraction=0, memory_budget="1.5MB",
    )  # fmt: skip
    need = _needed(est, X, y)
    est.set_params(memory_budget=f"{need}MB").fit(X, y)
    with pytest.raises(ValueError, match="copies of the data"):
        est.fit(X.astype(np.int64), y)


@pytest.mark.parametrize(
    ("make", "budget"),
    [
        (lambda b: kp.KRLSRegressor(Gaussian(3.0), scale=False, memory_budget=b), 60e6),
        (lambda b: kp.KRLSRegressor(Gaussian(3.0), scale=False, cv="loo", memory_budget=b), 90e6),
        (
            lambda b: kp.RandomFeaturesRegressor(
                Gaussian(3.0), n_features=800, scale=False, memory_budget=b, random_state=0
            ),
            100e6,
        ),
        (
            lambda b: kp.SGMRegressor(
                Gaussian(3.0),
                n_features=300,
                features="nystrom",
                scale=False,
                memory_budget=b,
                random_state=0,
                n_passes=3,
            ),
            70e6,
        ),  # fmt: skip
        (
            lambda b: kp.EigenProRegressor(
                Gaussian(3.0), scale=False, memory_budget=b, random_state=0, n_epochs=2
            ),
            140e6,
        ),
    ],
)
def test_every_family_stays_within_its_budget(make, budget):
    """The other families' own memory (exact KRLS's n x n eigendecomposition, RF's D x D
    matrices, SGM's feature map and blocks, EigenPro's subsample eigensystem) is set aside
    the same way: the traced peak stays within the budget + 10%, and a budget a fifth of
    it is refused."""
    n = 1500 if isinstance(make(1e9), kp.KRLSRegressor) else 12_000
    X, y = _fit_data(n)
    _, peak = _traced(lambda: make(int(budget)).fit(X, y))
    assert peak <= 1.1 * budget, (peak / 1e6, budget / 1e6)
    with pytest.raises(ValueError, match=r"memory_budget=\d+ MB is too small"):
        make(int(budget / 5)).fit(X, y)


@pytest.mark.parametrize("solver", ["cg", "direct"])
def test_a_refused_number_of_centers_names_the_most_the_budget_fits(solver):
    """Issue 45: n_centers beyond the budget is refused before any pass, naming the most
    centers it fits; that many fit, one more is refused again."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 5))
    y = np.sin(X[:, 0])

    def make(m):
        return kp.NystromRegressor(
            Gaussian(2.0), n_centers=m, solver=solver, memory_budget="30MB", scale=False,
            random_state=0,
        )  # fmt: skip

    with pytest.raises(ValueError, match=r"the most centers it fits here is n_centers=\d+") as e:
        make(3000).fit(X, y)
    most = int(str(e.value).rsplit("=", 1)[1])
    assert 100 < most < 3000
    assert make(most).fit(X, y).centers_.shape[0] == most
    with pytest.raises(ValueError, match=f"n_centers={most}$"):
        make(most + 1).fit(X, y)


def test_the_default_number_of_centers_has_no_cap_and_is_refused_by_name():
    """Issue 45: n_centers=None is sqrt(n) log(n) at every n (a cap of 5,000 held every n past
    ~120,000 rows at one m); where the budget cannot hold that many, the fit is refused before
    any pass, naming the default's m, memory_budget and the most centers the budget fits
    (that this many fit is the test above's); exact KRLS and given centers are not called
    the default's."""
    from kernelpath.fitting.kernel_models import default_n_centers

    assert default_n_centers(10**6) == int(np.sqrt(1e6) * np.log(1e6)) == 13815
    assert default_n_centers(10**7) > 50_000
    assert default_n_centers(50) == 50 and default_n_centers(200) == 100
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300_000, 2))
    y = np.sin(X[:, 0])
    m = default_n_centers(240_000)  # the hold-out's training rows
    assert m > 5000

    est = kp.NystromRegressor(Gaussian(1.0), memory_budget="300MB", scale=False, random_state=0)
    with pytest.raises(ValueError, match=r"memory_budget=300 MB is too small") as e:
        est.fit(X, y)
    said = str(e.value)
    assert f"n_centers=None draws sqrt(n) log(n) = {m} centers for 240000 rows" in said
    most = int(said.rsplit("n_centers=", 1)[1])
    assert 1000 < most < m
    # centers that are not the default's are not called the default's in a refusal
    small = X[:6000]
    for other in (
        kp.KRLSRegressor(Gaussian(1.0), memory_budget="30MB", scale=False),
        kp.NystromRegressor(Gaussian(1.0), centers=small[:3000], memory_budget="30MB"),
    ):
        with pytest.raises(ValueError, match="the most centers it fits here") as e:
            other.fit(small, y[:6000])
        assert "n_centers=None" not in str(e.value)
