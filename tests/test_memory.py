"""The memory budget as a contract: the solvers' estimates bound what they
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
    operators' cache and blocks) within the budget + 10%. A CG fit once took several
    times its budget (the anchors' Cholesky factors, the validation basis)."""
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
    """n_centers beyond the budget is refused before any pass, naming the most
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
    """n_centers=None is sqrt(n) log(n) at every n (a cap of 5,000 held every n past
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


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.NystromRegressor(n_centers=10, max_iter=10**6, memory_budget="200MB"),
        lambda: kp.NYTRORegressor(n_centers=10, max_iter=10**6, memory_budget="200MB"),
    ],
    ids=["cg", "nytro"],
)
def test_max_iter_does_not_size_the_path_arrays(make):
    """The error columns were allocated for max_iter iterations before the first (5.1 GB at
    10^7); they grow with the iterations run now."""
    import tracemalloc

    X, y = _data(120)
    tracemalloc.start()
    est = make().set_params(random_state=0).fit(X, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20, peak
    assert est.path_.shape[-1] < 10**4


def test_an_exact_path_over_too_many_iterations_is_refused_naming_max_iter():
    X, y = _data(120)
    with pytest.raises(ValueError, match=r"max_iter=100000000: .* give max_iter <= \d+"):
        kp.KRLSRegressor(filter="landweber", max_iter=10**8, memory_budget="200MB").fit(X, y)


def test_many_classes_are_refused_before_their_codes_are_made():
    """20,000 classes at 200MB: a MemoryError for 2.98 GiB of one-vs-all codes (RSS 3.7
    GB). Now refused before any allocation, naming memory_budget."""
    import tracemalloc

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20_000, 3)), np.arange(20_000)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="20000 classes: .* beyond memory_budget"):
            kp.NystromClassifier(n_centers=10, memory_budget="200MB").fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20


@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.EigenProRegressor(random_state=0, memory_budget="40MB"),
        lambda: kp.RandomFeaturesRegressor(random_state=0, memory_budget="40MB"),
    ],
    ids=["eigenpro", "random-features"],
)
def test_a_budget_too_small_for_the_main_fit_is_refused_before_the_screen(make, monkeypatch):
    """EigenPro at 300MB was refused after 35-147 s and random features at 100MB after
    6-32 s: the width screen fit its subsamples first. Now the plan's largest fits are
    checked before any fit (``Family.check_memory``), and EigenPro's batches get at least
    1 MiB (at 113MB it asked for a budget of 498,000 bytes for its batch operator)."""
    import kernelpath.fitting.choice as choice

    def screen(*args, **kwargs):
        raise AssertionError("the width screen ran before the budget was checked")

    monkeypatch.setattr(choice, "choose_width", screen)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60_000, 5))
    with pytest.raises(ValueError, match=r"memory_budget=40 MB is too small .* at least \d+MB"):
        make().fit(X, X[:, 0])


@pytest.mark.parametrize(
    "make",
    [
        lambda b: kp.NystromRegressor(memory_budget=b, random_state=0),
        lambda b: kp.NystromRegressor(solver="direct", memory_budget=b, random_state=0),
        lambda b: kp.NYTRORegressor(memory_budget=b, random_state=0),
        lambda b: kp.NystromClassifier(loss="logistic", memory_budget=b, random_state=0),
        lambda b: kp.KRLSRegressor(memory_budget=b),
    ],
    ids=["cg", "direct", "nytro", "logistic", "krls"],
)
def test_kernel_families_refuse_before_the_width_screen(make, monkeypatch):
    """A budget the main fit cannot live in was refused only after the width screen (2-3.6
    s and 45-68 MB into a 200,000-point fit): the kernel families check their largest fits,
    with the centers they will draw, before it (``Family.check_memory``)."""
    from kernelpath.fitting import choice

    def screen(*args, **kwargs):
        raise AssertionError("the width screen ran before the budget was refused")

    monkeypatch.setattr(choice, "choose_width", screen)
    X, y = _data(n=3000, d=5)
    with pytest.raises(ValueError, match=r"memory_budget=2 MB is too small"):
        make("2MB").fit(X, (y > 0).astype(int) if "Classifier" in type(make(1)).__name__ else y)


def test_the_advised_budget_is_enough_for_the_refit():
    """The refit on every row draws more centers than the hold-out's fit (sqrt(n) log n):
    the refusal names the budget of the largest fit, which then fits."""
    import re

    X, y = _data(n=20_000, d=5)
    est = kp.NystromRegressor(kp.Gaussian(2.0), solver="direct", random_state=0)
    with pytest.raises(ValueError, match="too small") as info:
        est.set_params(memory_budget="20MB").fit(X, y)
    assert "with 1400 centers" in str(info.value)  # the refit's m, not the hold-out's 1224
    need = re.search(r"at least (\d+)MB", str(info.value)).group(1)
    est.set_params(memory_budget=f"{need}MB").fit(X, y)
    assert len(est.centers_) == 1400


@pytest.mark.parametrize(
    ("make", "n"),
    [
        (
            "kp.NystromRegressor(solver='direct', n_centers=800, memory_budget=B, random_state=0)",
            120_000,
        ),
        # the Hessian's 7 matrices of 800 x 800 (36 MB) are what matters: fewer rows
        (
            "kp.NystromClassifier(loss='logistic', n_centers=800, memory_budget=B, random_state=0)",
            60_000,
        ),
    ],
    ids=["direct", "logistic"],
)
def test_peak_resident_memory_of_a_fit_stays_within_the_budget(make, n):
    """Resident memory, not only the arrays the budget counts: the direct fit peaked 40-65
    MB above its arrays (glibc's rising mmap threshold kept freed arrays in fragmented
    heaps; ``_backend.hold_to_budget`` fixes it for fits given a budget), the logistic
    fit's arrays 13% above its budget (its exact Hessian held 7 r x r matrices, 4 counted).
    A fresh process, a warm-up fit first (modules), resident memory sampled every 5 ms."""
    import subprocess
    import sys

    code = f"""
import os, sys, threading, time, numpy as np, kernelpath as kp
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
rng = np.random.default_rng(0)
X = rng.standard_normal(({n}, 20)); y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal({n})
if "Classifier" in {make!r}:
    y = (y > 0).astype(int)
B = None
{make}.set_params(n_centers=50).fit(X[:2000], y[:2000])  # the modules a fit imports
B = "80MB"
time.sleep(0.2)
base = peak = rss(); done = False
def watch():
    global peak
    while not done:
        peak = max(peak, rss()); time.sleep(0.005)
t = threading.Thread(target=watch); t.start()
{make}.fit(X, y)
done = True; t.join()
print((max(peak, rss()) - base) / 1e6)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) <= 1.1 * 80, out.stdout
