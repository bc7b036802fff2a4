"""The incremental Nyström path over (m, λ) against batch Nyström KRLS, and the estimators'
center strategies and n_centers paths."""

import warnings

import numpy as np
import pytest

from kernelpath import (
    Gaussian,
    LeverageCenters,
    NystromClassifier,
    NystromRegressor,
    NYTRORegressor,
    SqueakCenters,
)
from kernelpath.operators import KernelOperator
from kernelpath.solvers import incremental_nystrom_path
from kernelpath.solvers._common import Validation
from kernelpath.solvers.incremental import incremental_factor


def _problem(rng, n=400, M=60, k=1):
    X = rng.uniform(-1, 1, (n, 3))
    Y = np.column_stack([np.sin(3 * X[:, 0] + j) for j in range(k)])
    Y += 0.1 * rng.standard_normal(Y.shape)
    C = X[rng.choice(n, M, replace=False)]
    return X, Y, C


def _batch(Knm, Kmm, y, lam, m, w=None):
    n = len(Knm)
    w = np.ones(n) if w is None else w
    A = Knm[:, :m]
    H = A.T @ (w[:, None] * A) + lam * n * Kmm[:m, :m]
    return np.linalg.solve(H, A.T @ (w[:, None] * y))


@pytest.mark.parametrize("method", ["blocked", "rank-one"])
def test_incremental_path_equals_batch_nystrom_everywhere(rng, method):
    X, Y, C = _problem(rng, k=2)
    kernel = Gaussian(0.4)
    w = rng.uniform(0.5, 1.5, len(X))
    w *= len(X) / w.sum()
    Xv = rng.uniform(-1, 1, (100, 3))
    Yv = np.column_stack([np.sin(3 * Xv[:, 0] + j) for j in range(2)])
    op = KernelOperator(X, C, kernel)
    val = Validation(KernelOperator(Xv, C, kernel), Yv)
    lams = np.array([1e-1, 1e-2, 1e-3])
    grid = [1, 2, 7, 20, 33, 60]
    path = incremental_nystrom_path(op, Y, lams, grid, w, val, method=method)
    assert path.shape == (6, 3) and path.param_names == ("n_centers", "penalty")
    Knm, Kmm, Kvm = kernel(X, C), kernel(C, C), kernel(Xv, C)
    for i, m in enumerate(grid):
        for p, lam in enumerate(lams):
            H = Knm[:, :m].T @ (w[:, None] * Knm[:, :m]) + lam * len(X) * Kmm[:m, :m]
            assert np.linalg.cond(H) < 1e7  # well posed: 1e-8 is meaningful
            ref = _batch(Knm, Kmm, Y, lam, m, w)
            got = path.coef((i, p))
            assert got.shape == (m, 2)
            np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
            res = Y - Knm[:, :m] @ ref
            train = np.sum(w[:, None] * res**2) / (w.sum() * 2)
            assert path.train_error[i, p] == pytest.approx(train, rel=1e-8)
            val_mse = np.mean((Yv - Kvm[:, :m] @ ref) ** 2)
            assert path.val_error[i, p] == pytest.approx(val_mse, rel=1e-8)
    assert path.params["n_centers"][path.best_index] in grid


def test_rank_one_steps_build_the_lapack_factor(rng):
    X, Y, C = _problem(rng, M=30)
    op = KernelOperator(X, C, Gaussian(0.5))
    G, K = op.gram(), op.center_gram()
    for shift in [10.0, 1e-2]:
        k1, R1 = incremental_factor(G, K, shift, "rank-one")
        k2, R2 = incremental_factor(G, K, shift, "blocked")
        assert list(k1) == list(k2) == list(range(30))
        np.testing.assert_allclose(R1, R2, rtol=1e-9, atol=1e-10 * np.abs(R2).max())
        np.testing.assert_allclose(R2.T @ R2, G + shift * K, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="method"):
        incremental_factor(G, K, 1.0, "qr")


def test_dependent_centers_are_skipped(rng):
    X, Y, C = _problem(rng, M=10)
    C = np.vstack([C[:4], C[:1], C[4:], C[3:4] + 1e-12])  # centers 5 and 12 repeat earlier ones
    kernel = Gaussian(0.7)
    op = KernelOperator(X, C, kernel)
    Cu = np.delete(C, [4, 11], axis=0)
    Knm, Kmm = kernel(X, Cu), kernel(Cu, Cu)
    G, K = op.gram(), op.center_gram()
    for method in ["blocked", "rank-one"]:
        kept, R = incremental_factor(G, K, 0.1, method)
        assert list(kept) == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10]
        H = (G + 0.1 * K)[np.ix_(kept, kept)]
        np.testing.assert_allclose(R.T @ R, H, rtol=1e-10, atol=1e-10)
        path = incremental_nystrom_path(
            op, Y, np.array([1e-2, 1e-3]), [4, 5, 11, 12], method=method
        )
        assert list(path.info["kept_centers"]) == [10, 10]
        for p, lam in enumerate([1e-2, 1e-3]):
            a4, a5 = path.coef((0, p)), path.coef((1, p))
            a11, a12 = path.coef((2, p)), path.coef((3, p))
            assert a5[4, 0] == 0 and a12[4, 0] == 0 and a12[11, 0] == 0
            np.testing.assert_allclose(a5[:4], a4, rtol=1e-10)
            np.testing.assert_allclose(a12[:11], a11, rtol=1e-10)
            ref = _batch(Knm, Kmm, Y, lam, 10)
            np.testing.assert_allclose(np.delete(a12, [4, 11], axis=0), ref, rtol=1e-8)


def test_incremental_path_checks_the_grid(rng):
    X, Y, C = _problem(rng, M=10)
    op = KernelOperator(X, C, Gaussian(0.7))
    with pytest.raises(ValueError, match="n_centers"):
        incremental_nystrom_path(op, Y, None, [0, 5])
    with pytest.raises(ValueError, match="n_centers"):
        incremental_nystrom_path(op, Y, None, [11])
    with pytest.raises(ValueError, match="method"):
        incremental_nystrom_path(op, Y, None, [5], method="fast")
    path = incremental_nystrom_path(op, Y, None, [3, 10])  # the automatic λ grid
    assert path.shape == (2, 20)


# ----------------------------------------------------------------- estimators
def test_n_centers_auto_chooses_m_and_lambda_and_matches_a_batch_fit(rng):
    X, Y, _ = _problem(rng, n=600)
    y = Y[:, 0]
    est = NystromRegressor(
        kernel=Gaussian(0.7), n_centers="auto", penalty=[1e-2, 1e-4], random_state=0
    ).fit(X, y)
    path = est.path_
    assert path.param_names == ("n_centers", "penalty")
    m, lam = est.best_params_["n_centers"], est.best_params_["penalty"]
    assert est.centers_.shape == (m, 3) and est.coef_.shape == (m,)
    assert m in np.unique(path.params["n_centers"])
    # the chosen point is batch Nyström KRLS on the first m centers, on the training part
    tr = est.train_indices_
    ref = NystromRegressor(
        kernel=Gaussian(0.7),
        n_centers=m,
        centers=est.centers_,
        penalty=lam,
        solver="direct",
        validation_fraction=0.0,
    ).fit(X[tr], y[tr])
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-6, atol=1e-8)
    # every point of the path scores what a batch fit of its (m, λ) scores on the
    # validation part, so choosing the path's minimum is choosing among real fits
    va = est.validation_indices_
    all_centers = X[tr][est.center_indices_]
    # (up to the middle of the m grid: at the largest m, K_mm of this smooth kernel is
    # numerically singular and the path's pivoted Cholesky and the batch pseudo-inverse
    # drop different directions)
    mid = path.shape[0] // 2
    for i, j in [(0, 0), (1, 1), (mid, 0), (mid, 1)]:
        mi = int(path.params["n_centers"][i, j])
        fit = NystromRegressor(
            kernel=Gaussian(0.7),
            centers=all_centers[:mi],
            penalty=float(path.params["penalty"][i, j]),
            solver="direct",
            validation_fraction=0.0,
        ).fit(X[tr], y[tr])
        mse = np.mean((fit.predict(X[va]) - y[va]) ** 2)
        assert path.val_error[i, j] == pytest.approx(mse, rel=1e-6)


def test_n_centers_sequence_and_refit(rng):
    X, Y, _ = _problem(rng, n=300)
    est = NystromRegressor(
        kernel=Gaussian(0.7), n_centers=[5, 20, 40], refit=True, random_state=1
    ).fit(X, Y[:, 0])
    assert list(np.unique(est.path_.params["n_centers"])) == [5, 20, 40]
    assert len(est.centers_) == est.best_params_["n_centers"]
    assert est.score(X, Y[:, 0]) > 0.8


def test_n_centers_path_bad_values(rng):
    X, Y, _ = _problem(rng, n=100)
    y = Y[:, 0]
    with pytest.raises(ValueError, match="n_centers"):
        NystromRegressor(n_centers="many").fit(X, y)
    with pytest.raises(ValueError, match="n_centers"):
        NystromRegressor(n_centers=[0, 5]).fit(X, y)
    with pytest.raises(TypeError, match="n_centers"):
        NystromRegressor(n_centers=[1.5, 5]).fit(X, y)
    with pytest.raises(ValueError, match="NYTRO"):
        NYTRORegressor(n_centers="auto").fit(X, y)
    with pytest.raises(ValueError, match="validation_fraction=0"):
        NystromRegressor(n_centers="auto", penalty=1e-3, validation_fraction=0.0).fit(X, y)
    with pytest.warns(UserWarning, match="dropped"):
        NystromRegressor(n_centers=[5, 500], random_state=0).fit(X, y)


@pytest.mark.parametrize(
    "centers", ["uniform", "leverage", "approximate-leverage", "squeak", "object"]
)
def test_every_strategy_fits_and_is_recorded(rng, centers):
    X, Y, _ = _problem(rng, n=300)
    y = Y[:, 0]
    strategy = LeverageCenters("approximate", penalty=1e-3) if centers == "object" else centers
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = NystromRegressor(
            kernel=Gaussian(0.7), n_centers=40, centers=strategy, random_state=0
        ).fit(X, y)
    assert est.score(X, y) > 0.8
    tr = est.train_indices_
    assert len(est.centers_) <= 40
    np.testing.assert_array_equal(est.centers_, X[tr][est.center_indices_])
    if centers == "uniform":
        assert est.center_strategy_ == "uniform"
        assert est.center_scores_ is None and est.center_penalty_ is None
    else:
        name = "approximate-leverage" if centers == "object" else centers
        assert est.center_strategy_ == name
        assert est.center_scores_.shape == (len(tr),)
        assert np.all((est.center_scores_ >= 0) & (est.center_scores_ <= 1))
        assert est.center_weights_.shape == (len(est.centers_),)
        assert est.center_penalty_ == (1e-3 if centers == "object" else 1e-4)


def test_leverage_strategy_prefers_the_sparse_region(rng):
    # 1-D: dense at the borders, 20 points in the middle; the middle points have the largest
    # scores and leverage sampling picks them far more often than their 4% share
    x = np.concatenate([rng.beta(0.5, 0.5, 480) * 0.3, 0.7 + rng.beta(0.5, 0.5, 480) * 0.3])
    x = np.concatenate([x, rng.uniform(0.45, 0.55, 20)])[:, None]
    y = np.sin(6 * x[:, 0])
    picks = {"uniform": 0, "leverage": 0}
    for seed in range(5):
        for c in picks:
            est = NystromRegressor(
                kernel=Gaussian(0.05), n_centers=30, centers=c, penalty=1e-4, random_state=seed
            ).fit(x, y)
            picks[c] += int(np.sum((est.centers_[:, 0] > 0.4) & (est.centers_[:, 0] < 0.6)))
    assert picks["leverage"] >= 3 * max(picks["uniform"], 1)


def test_the_estimator_penalty_is_the_default_score_penalty(rng):
    X, Y, _ = _problem(rng, n=200)
    est = NystromRegressor(
        kernel=Gaussian(0.7), n_centers=20, centers="leverage", penalty=3e-3, random_state=0
    ).fit(X, Y[:, 0])
    assert est.center_penalty_ == 3e-3


def test_squeak_chooses_the_number_of_centers(rng):
    X, Y, _ = _problem(rng, n=300)
    est = NystromClassifier(
        kernel=Gaussian(0.7), centers=SqueakCenters(penalty=1e-3), random_state=0
    ).fit(X, Y[:, 0] > 0)
    assert est.center_strategy_ == "squeak"
    assert 1 <= len(est.centers_) < 240
    assert est.score(X, Y[:, 0] > 0) > 0.9
    with pytest.warns(UserWarning, match="fewer than"):
        NystromRegressor(kernel=Gaussian(0.7), n_centers=239, centers="squeak", random_state=0).fit(
            X, Y[:, 0]
        )


def test_bad_center_strategy_is_named(rng):
    X, Y, _ = _problem(rng, n=80)
    with pytest.raises(ValueError, match="centers must be one of"):
        NystromRegressor(centers="random").fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="method"):
        LeverageCenters("squeak")
    with pytest.raises(ValueError, match="penalty"):
        LeverageCenters(penalty=-1.0)


def test_a_grid_below_the_number_of_centers(rng):
    X, Y, C = _problem(rng, M=40)
    op = KernelOperator(X, C, Gaussian(0.5))
    full = incremental_nystrom_path(op, Y, np.array([1e-2]), [5, 12, 40])
    part = incremental_nystrom_path(op, Y, np.array([1e-2]), [5, 12])
    for i in range(2):
        np.testing.assert_allclose(part.coef((i, 0)), full.coef((i, 0)), rtol=1e-10)
