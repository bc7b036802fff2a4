"""The estimators' ``factor_layout`` and ``preconditioner_rank`` (CG's factor asked for by
name): every layout reaches the dense Nyström solution ("disk" with its jitter), the layout
and rank asked for are the ones the fit takes, a layout the budget cannot hold is refused
before any kernel work, and the options that cannot apply are refused by name."""

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.fitting.memory import BudgetError
from kernelpath.operators.kernel import KernelOperator

LAYOUTS = ("cholesky", "eigh", "compact", "lowrank")
#: the ``path_.info`` of each layout: (the factor, the preconditioners)
TAKEN = {
    "cholesky": ("cholesky", "cholesky"),
    "eigh": ("cholesky-eigh", "diagonal"),
    "compact": ("cholesky-compact", "compact"),
    "lowrank": ("lowrank", "lowrank"),
}


def _data(n=800, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X.sum(axis=1)) + 0.5 * X[:, 0] * X[:, 1] + 2.0 + 0.1 * rng.standard_normal(n)
    return X, y


def _gauss(A, B, sigma):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * sigma**2))


def _dense_nystrom(X, y, C, sigma, lam, Xt, jitter=0.0):
    """The Nyström KRLS solution in float64 by a dense solve, with the intercept the
    regressor fits (the targets' mean): (K_nm^T K_nm + n λ (K_mm + j I)) α = K_nm^T (y - ȳ),
    j the float32 factor's ``jitter`` (0: K_mm's own norm)."""
    Knm, Kmm = _gauss(X, C, sigma), _gauss(C, C, sigma)
    H = Knm.T @ Knm + len(X) * lam * (Kmm + jitter * np.eye(len(C)))
    a = np.linalg.solve(H, Knm.T @ (y - y.mean()))
    return _gauss(Xt, C, sigma) @ a + y.mean()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reaches_the_dense_solution_and_is_the_one_taken(layout):
    X, y = _data()
    C, lam, sigma = X[:120], 1e-4, 2.0
    est = kp.NystromRegressor(
        kp.Gaussian(sigma),
        penalty=lam,
        centers=C,
        max_iter=300,
        tol=1e-12,
        validation_fraction=0.0,
        scale=False,
        factor_layout=layout,
        preconditioner_rank=120,  # the whole K_mm: the low-rank factor is then exact
    ).fit(X, y)
    want = _dense_nystrom(X, y, C, sigma, lam, X[:200])
    assert np.abs(est.predict(X[:200]) - want).max() < 1e-6 * np.abs(want).max()
    info = est.path_.info
    assert (info["factor"], info["preconditioners"]) == TAKEN[layout]


def test_the_rank_asked_for_is_the_sketchs_and_a_small_one_converges_slower():
    X, y = _data()
    C, lam = X[:150], 1e-5
    kw = dict(penalty=lam, centers=C, max_iter=200, tol=1e-10, validation_fraction=0.0)
    kw |= dict(scale=False, factor_layout="lowrank")
    iters = {}
    for rank in (10, 150):
        est = kp.NystromRegressor(kp.Gaussian(2.0), preconditioner_rank=rank, **kw).fit(X, y)
        assert est.path_.info["preconditioner_rank"] == rank
        iters[rank] = est.best_params_["n_iter"]
    assert iters[150] < iters[10]


def test_the_classifier_takes_the_layout_and_nytro_has_none():
    X, y = _data()
    labels = (y > np.median(y)).astype(int)
    est = kp.NystromClassifier(
        kp.Gaussian(2.0), penalty=1e-4, n_centers=100, factor_layout="eigh", random_state=0
    ).fit(X, labels)
    assert est.path_.info["preconditioners"] == "diagonal"
    assert est.get_params()["factor_layout"] == "eigh"
    assert "factor_layout" not in kp.NYTRORegressor().get_params()
    assert "preconditioner_rank" not in kp.NYTROClassifier().get_params()


def test_a_layout_the_budget_cannot_hold_is_refused_before_any_kernel_work(monkeypatch):
    X, y = _data(n=4000)
    made = []
    init = KernelOperator.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(KernelOperator, "__init__", counting)
    # m = 2,000: the Cholesky layout holds three float64 m x m matrices (96 MB), the
    # low-rank one with r = 100 four m x r (6.4 MB)
    kw = dict(penalty=1e-3, n_centers=2000, max_iter=3, random_state=0, memory_budget="60MB")
    with pytest.raises(BudgetError, match="memory_budget"):
        kp.NystromRegressor(kp.Gaussian(2.0), factor_layout="cholesky", **kw).fit(X, y)
    assert made == []
    est = kp.NystromRegressor(
        kp.Gaussian(2.0), factor_layout="lowrank", preconditioner_rank=100, **kw
    ).fit(X, y)
    assert est.path_.info["preconditioners"] == "lowrank"


def test_float64_data_takes_a_float32_compact_factor_where_no_float64_one_fits():
    """m = 2,000 in 60 MB: the full factors (96 MB) and one float64 compact buffer (40 MB)
    exceed the solver's half of the budget, a float32 buffer (20 MB) does not, so the rule
    takes it before the low-rank preconditioner. "compact" asked for keeps float64 where
    the budget holds it (60 MB) and takes float32 where float64 would be refused (35 MB),
    and is refused where not even float32 fits (20 MB). The float32 factor's model is the dense
    float64 solution to 0.5% of the predictions' spread (measured: 0.17%; its penalty is
    the stored triangle's T^T T, K_mm + j I up to float32's rounding: test_compact.py
    checks the solve against that matrix to 1e-5)."""
    X, y = _data(n=4000)
    C, lam, sigma = X[:2000], 1e-3, 2.0
    kw = dict(penalty=lam, centers=C, max_iter=100, tol=1e-10, validation_fraction=0.0)
    want = _dense_nystrom(X, y, C, sigma, lam, X[:300])
    for layout, budget, dtype in (
        ("auto", "60MB", "float32"),
        ("compact", "35MB", "float32"),
        ("compact", "60MB", "float64"),
    ):
        est = kp.NystromRegressor(
            kp.Gaussian(sigma), scale=False, factor_layout=layout, memory_budget=budget, **kw
        ).fit(X, y)
        info = est.path_.info
        assert (info["factor"], info["factor_dtype"]) == ("cholesky-compact", dtype)
        err = np.abs(est.predict(X[:300]) - want).max() / np.abs(want - y.mean()).max()
        assert err < 5e-3
    with pytest.raises(BudgetError, match="memory_budget"):  # not even float32's 20 MB
        kp.NystromRegressor(
            kp.Gaussian(sigma), scale=False, factor_layout="compact", memory_budget="20MB", **kw
        ).fit(X, y)


def test_auto_takes_a_float32_buffer_beyond_the_solvers_share_before_the_low_rank_factor():
    """m = 3,000 in 85 MB: one float32 compact buffer (46 MB with its scratch and the
    basis) exceeds the solver's half of the budget, so the rule took the low-rank
    preconditioner before; it now fits what the budget leaves beside the operators'
    streamed blocks (``solver_room``), so "auto" takes it with one anchor, and the fit's
    traced peak stays within the budget. Its model is the dense float64 solution's to 0.5%
    of the predictions' spread, where a low-rank one (rank 300, which fits) at the same 8
    iterations is not (measured: 0.18% against 3.4%)."""
    import tracemalloc

    X, y = _data(n=4500)
    C, lam, sigma = X[:3000], 1e-3, 1.0
    kw = dict(penalty=lam, centers=C, max_iter=8, tol=0.0, validation_fraction=0.0)
    want = _dense_nystrom(X, y, C, sigma, lam, X[:300])
    errs = {}
    for layout, rank in (("auto", 1000), ("lowrank", 300)):
        est = kp.NystromRegressor(
            kp.Gaussian(sigma),
            scale=False,
            factor_layout=layout,
            preconditioner_rank=rank,
            memory_budget="85MB",
            **kw,
        )
        tracemalloc.start()
        try:
            est.fit(X, y)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= 85e6
        info = est.path_.info
        errs[info["preconditioners"]] = (
            np.abs(est.predict(X[:300]) - want).max() / np.abs(want - y.mean()).max()
        )
        if layout == "auto":
            assert (info["factor"], info["factor_dtype"]) == ("cholesky-compact", "float32")
    assert errs["compact"] < 5e-3 < errs["lowrank"]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"factor_layout": "dense"}, "factor_layout must be one of"),
        ({"factor_layout": "lowrank", "solver": "direct"}, "needs solver='cg'"),
        ({"factor_layout": "compact", "n_centers": "auto"}, "n_centers as a path"),
        ({"preconditioner_rank": 0}, "preconditioner_rank"),
        ({"preconditioner_rank": 2.5}, "preconditioner_rank"),
    ],
)
def test_options_that_cannot_apply_are_refused_by_name(params, match):
    X, y = _data(n=300)
    with pytest.raises((ValueError, TypeError), match=match):
        kp.NystromRegressor(**params).fit(X, y)


def test_the_logistic_loss_refuses_a_layout():
    X, y = _data(n=300)
    with pytest.raises(ValueError, match="square loss"):
        kp.NystromClassifier(loss="logistic", factor_layout="cholesky").fit(X, y > 2)


def test_a_saved_model_keeps_the_layout(tmp_path):
    X, y = _data(n=400)
    est = kp.NystromRegressor(
        kp.Gaussian(2.0), penalty=1e-4, n_centers=50, factor_layout="compact", random_state=0
    ).fit(X, y)
    path = tmp_path / "model.kp"
    kp.save(est, path)
    back = kp.load(path)
    assert back.get_params()["factor_layout"] == "compact"
    np.testing.assert_array_equal(back.predict(X[:20]), est.predict(X[:20]))


def test_the_disk_fit_is_the_dense_nystrom_solution_with_its_jitter():
    """factor_layout="disk" on float64 data: the model with penalty T^T T = K_mm + j I,
    to 0.5% of the predictions' spread from the dense float64 solve with that jitter (as the
    float32 compact factor is held above), the factor and its dtype reported."""
    X, y = _data(n=3000)
    C, lam, sigma = X[:400], 1e-4, 2.0
    est = kp.NystromRegressor(
        kp.Gaussian(sigma),
        penalty=lam,
        centers=C,
        max_iter=200,
        tol=1e-10,
        validation_fraction=0.0,
        scale=False,
        factor_layout="disk",
    ).fit(X, y)
    info = est.path_.info
    assert (info["factor"], info["preconditioners"], info["factor_dtype"]) == (
        "cholesky-disk",
        "compact",
        "float32",
    )
    want = _dense_nystrom(X, y, C, sigma, lam, X[:300], info["jitter"])
    got = est.predict(X[:300])
    assert np.abs(got - want).max() <= 5e-3 * np.ptp(want)


def test_disk_fits_a_budget_that_refuses_the_compact_buffer():
    """m = 2,000 in 20 MB: one float32 compact buffer (16 MB with its scratch, beside the
    basis) is refused, the disk factor's panels (3 x 256 x 2,000 x 4 = 6 MB) fit."""
    X, y = _data(n=4000)
    kw = dict(penalty=1e-3, n_centers=2000, max_iter=5, random_state=0, memory_budget="20MB")
    with pytest.raises(BudgetError, match="memory_budget"):
        kp.NystromRegressor(kp.Gaussian(2.0), factor_layout="compact", **kw).fit(X, y)
    est = kp.NystromRegressor(kp.Gaussian(2.0), factor_layout="disk", **kw).fit(X, y)
    assert est.path_.info["factor"] == "cholesky-disk"
    assert np.isfinite(est.predict(X[:10])).all()
