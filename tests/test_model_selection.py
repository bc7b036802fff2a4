"""Model selection: paths over kernels (sigma="auto", sequences), successive halving, and the
cross-validation modes (closed-form leave-one-out and GCV against brute force and the dense hat
matrix, k-fold against separate fits)."""

import numpy as np
import pytest
from sklearn.model_selection import KFold, PredefinedSplit

import kernelpath as kp
from kernelpath import (
    Gaussian,
    KRLSClassifier,
    KRLSRegressor,
    Laplacian,
    NystromClassifier,
    NystromRegressor,
    NYTRORegressor,
    Polynomial,
    RandomFeaturesRegressor,
    SGMRegressor,
)
from kernelpath.kernels import AUTO_WIDTH_FACTORS, median_distance

GRID = np.geomspace(1e-1, 1e-5, 5)


def _data(n=50, d=3, seed=0, outputs=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0])[:, None] + 0.3 * X[:, 1:2] * np.arange(1, outputs + 1)
    y = y + 0.1 * rng.normal(size=(n, outputs)) + 3.0
    return X, (y[:, 0] if outputs == 1 else y)


def _brute_loo(make, X, y, grid, w=None, classify=False):
    """Refit on n - 1 points with the penalty lambda n / (n - w_i) (the unnormalized penalty
    held fixed; w_i = 1 without weights) and predict the left-out point."""
    n = len(X)
    ww = np.ones(n) if w is None else w * n / w.sum()
    errs, losses = [], []
    for lam in grid:
        e = loss = 0.0
        for i in range(n):
            keep = np.arange(n) != i
            est = make(lam * n / (n - ww[i])).fit(
                X[keep], y[keep], sample_weight=None if w is None else w[keep]
            )
            if classify:
                f = est.decision_function(X[i : i + 1])[0]
                code = 1.0 if y[i] == est.classes_[1] else -1.0
                e += ww[i] * float((f >= 0) != (code > 0))
                loss += ww[i] * (f - code) ** 2
            else:
                r = np.atleast_1d(est.predict(X[i : i + 1])[0] - y[i])
                e += ww[i] * np.mean(r**2)
        errs.append(e / n)
        losses.append(loss / n)
    return np.array(errs), np.array(losses)


CENTERS = _data()[0][:15]
LOO_SOLVERS = {
    "krls": lambda lam, **kw: KRLSRegressor(Gaussian(1.0), penalty=lam, **kw),
    "nystrom": lambda lam, **kw: NystromRegressor(
        Gaussian(1.0), penalty=lam, centers=CENTERS, solver="direct", **kw
    ),
    # the closed form scores one feature map: scale=False keeps the map of each left-out
    # fit that map (with scale on, its phases are drawn about the training rows' mean,
    # which leaving a row out moves)
    "rf": lambda lam, **kw: RandomFeaturesRegressor(
        Gaussian(1.0), penalty=lam, n_features=25, random_state=3, scale=False, **kw
    ),
}


@pytest.mark.parametrize("solver", sorted(LOO_SOLVERS))
@pytest.mark.parametrize("weighted", [False, True])
def test_loo_equals_brute_force(solver, weighted):
    X, y = _data()
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X)) if weighted else None
    make = LOO_SOLVERS[solver]
    est = make(GRID, cv="loo").fit(X, y, sample_weight=w)
    brute, _ = _brute_loo(lambda lam: make(lam, validation_fraction=0), X, y, GRID, w)
    np.testing.assert_allclose(est.path_.val_error, brute, rtol=1e-8)
    # the model is the fit on all the data at the chosen penalty
    best = GRID[int(np.argmin(brute))]
    ref = make(best, validation_fraction=0).fit(X, y, sample_weight=w)
    assert est.penalty_ == pytest.approx(best)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-10, atol=1e-10)


def test_loo_multi_output_and_classification():
    X, Y = _data(outputs=2)
    est = KRLSRegressor(Gaussian(1.0), penalty=GRID, cv="loo").fit(X, Y)
    brute, _ = _brute_loo(
        lambda lam: KRLSRegressor(Gaussian(1.0), penalty=lam, validation_fraction=0), X, Y, GRID
    )
    np.testing.assert_allclose(est.path_.val_error, brute, rtol=1e-8)
    labels = np.where(X[:, 0] + 0.3 * np.random.default_rng(2).normal(size=len(X)) > 0, "a", "b")
    clf = NystromClassifier(
        Gaussian(1.0), penalty=GRID, centers=CENTERS, solver="direct", cv="loo"
    ).fit(X, labels)
    err, loss = _brute_loo(
        lambda lam: NystromClassifier(
            Gaussian(1.0), penalty=lam, centers=CENTERS, solver="direct", validation_fraction=0
        ),
        X,
        labels,
        GRID,
        classify=True,
    )
    np.testing.assert_allclose(clf.path_.val_error, err, rtol=1e-12)
    np.testing.assert_allclose(clf.path_.val_loss, loss, rtol=1e-8)


def test_gcv_equals_dense_hat_matrix():
    X, y = _data()
    n = len(X)
    w = np.random.default_rng(4).uniform(0.5, 2.0, n)
    wn = w * n / w.sum()
    est = KRLSRegressor(Gaussian(1.0), penalty=GRID, cv="gcv").fit(X, y, sample_weight=w)
    K = Gaussian(1.0)(X, X)
    W = np.diag(wn)
    ones = np.ones(n)
    for p, lam in enumerate(GRID):
        S = K @ np.linalg.solve(W @ K + lam * n * np.eye(n), W)  # f = S (y - mean)
        H = S @ (np.eye(n) - np.outer(ones, wn) / n) + np.outer(ones, wn) / n
        r = y - H @ y
        gcv = (wn @ r**2 / n) / (1 - np.trace(H) / n) ** 2
        assert est.path_.val_error[p] == pytest.approx(gcv, rel=1e-8)
    nys = NystromRegressor(Gaussian(1.0), penalty=GRID, centers=X, solver="direct", cv="gcv").fit(
        X, y, sample_weight=w
    )
    np.testing.assert_allclose(nys.path_.val_error, est.path_.val_error, rtol=1e-6)


def test_kfold_is_the_mean_of_separate_fits_and_refits_on_all_data():
    X, y = _data(n=60)
    folds = KFold(3, shuffle=True, random_state=0)
    est = NystromRegressor(
        Gaussian(1.0), penalty=GRID, centers=CENTERS, solver="direct", cv=folds
    ).fit(X, y)
    per_fold = []
    for tr, va in folds.split(X):
        f = NystromRegressor(
            Gaussian(1.0), penalty=GRID, centers=CENTERS, solver="direct", validation_fraction=0
        )
        errs = []
        for lam in GRID:
            f.set_params(penalty=lam).fit(X[tr], y[tr])
            errs.append(np.mean((f.predict(X[va]) - y[va]) ** 2))
        per_fold.append(errs)
    per_fold = np.array(per_fold)
    np.testing.assert_allclose(est.path_.fold_errors, per_fold, rtol=1e-8)
    np.testing.assert_allclose(est.path_.val_error, per_fold.mean(axis=0), rtol=1e-8)
    res = est.path_.cv_results
    assert res["rank_val_error"][np.argmin(per_fold.mean(axis=0))] == 1
    assert set(res) >= {"split0_val_error", "split2_val_error", "std_val_error"}
    best = GRID[int(np.argmin(per_fold.mean(axis=0)))]
    ref = NystromRegressor(
        Gaussian(1.0), penalty=best, centers=CENTERS, solver="direct", validation_fraction=0
    ).fit(X, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-10)


@pytest.mark.parametrize(
    "make",
    [
        lambda cv: NystromRegressor(Gaussian(1.0), n_centers=20, solver="cg", cv=cv, max_iter=8),
        lambda cv: NYTRORegressor(Gaussian(1.0), n_centers=20, cv=cv, max_iter=30),
        lambda cv: KRLSRegressor(Gaussian(1.0), filter="landweber", cv=cv, max_iter=30),
        lambda cv: SGMRegressor(Gaussian(1.0), n_features=30, cv=cv, n_passes=3),
    ],
)
def test_kfold_for_every_solver(make):
    X, y = _data(n=80)
    est = make(4).set_params(random_state=0).fit(X, y)
    assert est.path_.fold_errors.shape[0] == 4
    assert est.path_.val_error.shape == est.path_.shape
    assert np.isfinite(est.predict(X)).all()
    assert len(est.train_indices_) == len(X)


def test_path_over_kernels_matches_separate_fits():
    X, y = _data(n=80)
    kernels = [Gaussian(0.5), Gaussian(1.0), Laplacian(1.0)]
    split = PredefinedSplit(np.where(np.arange(len(X)) % 4 == 0, 0, -1))  # one fold
    est = NystromRegressor(kernels, penalty=GRID, centers=CENTERS, solver="direct", cv=split).fit(
        X, y
    )
    assert est.path_.param_names == ("kernel", "penalty")
    assert est.path_.shape == (3, len(GRID))
    seps = []
    for k in kernels:
        sep = NystromRegressor(k, penalty=GRID, centers=CENTERS, solver="direct", cv=split)
        seps.append(sep.fit(X, y))
    errs = np.array([s.path_.val_error for s in seps])
    np.testing.assert_allclose(est.path_.val_error, errs, rtol=1e-10)
    kb = int(np.argmin(errs.min(axis=1)))
    assert est.kernel_ == kernels[kb] and est.best_params_["kernel"] == kernels[kb]
    np.testing.assert_allclose(est.predict(X), seps[kb].predict(X), rtol=1e-10)
    # hold-out mode: the same kernel axis, coefficients on demand
    hold = NystromRegressor(kernels, penalty=GRID, centers=CENTERS, solver="direct").fit(X, y)
    assert hold.path_.shape == (3, len(GRID))
    assert hold.path_.coef((2, 1)).shape == (len(CENTERS), 1)


def test_sigma_auto_is_a_grid_around_the_median_with_a_sigma_axis():
    # with k-fold, LOO or GCV "auto" is the grid of widths, each fit in full
    X, y = _data(n=80)
    est = KRLSRegressor(Gaussian(sigma="auto"), cv="gcv", scale=False, random_state=0).fit(X, y)
    assert est.path_.param_names == ("sigma", "penalty")
    sig = est.path_.params["sigma"][:, 0]
    med = median_distance(X)
    np.testing.assert_allclose(sig, med * np.array(AUTO_WIDTH_FACTORS), rtol=1e-12)
    assert est.kernel_.sigma == est.best_params_["sigma"]
    assert est.kernel_.sigma in sig
    import matplotlib

    matplotlib.use("Agg")
    assert est.path_.plot() is not None


def test_random_features_share_the_draws_across_widths():
    X, y = _data(n=80)

    def fit(kernels):
        return RandomFeaturesRegressor(kernels, n_features=20, penalty=GRID, random_state=0).fit(
            X, y
        )

    a, b = fit([Gaussian(0.5), Gaussian(2.0)]), fit([Gaussian(0.25), Gaussian(8.0)])
    # whichever width each chose, its map is the same draws scaled by 1 / sigma
    np.testing.assert_allclose(
        a.features_.frequencies_ * a.kernel_.sigma,
        b.features_.frequencies_ * b.kernel_.sigma,
        rtol=1e-12,
    )


def test_successive_halving_screens_widths_on_subsamples():
    rng = np.random.default_rng(0)
    n = 8000
    X = rng.normal(size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)
    grid = [Gaussian(median_distance(X, 0) * f) for f in AUTO_WIDTH_FACTORS]
    est = NystromRegressor(grid, n_centers=60, solver="direct", random_state=0).fit(X, y)
    info = est.path_.info
    assert len(info["screening"]) == 1  # 6400 training rows: one round on 2133 rows
    rnd = info["screening"][0]
    assert rnd["n_train"] == 6400 // 3 and len(rnd["candidates"]) == len(AUTO_WIDTH_FACTORS)
    full = [i for i, r in enumerate(info["n_train"]) if r == 6400]
    assert len(full) == int(np.ceil(len(AUTO_WIDTH_FACTORS) / 3))
    assert est.best_params_["sigma"] in [est.path_.params["sigma"][i, 0] for i in full]
    # the survivors are the subsample's best width and its neighbours
    best_sub = int(np.argmin(rnd["best_val_error"]))
    assert best_sub in full
    assert max(full) - min(full) == len(full) - 1


def test_bad_model_selection_input():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="kernel: an empty sequence"):
        NystromRegressor([]).fit(X, y)
    with pytest.raises(TypeError, match="kernel"):
        NystromRegressor([Gaussian(1.0), 3]).fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        Polynomial(gamma="auto")
    with pytest.raises(ValueError, match="sigma"):
        Gaussian(sigma="widest")
    with pytest.raises(ValueError, match="cv=31 is larger than the number of samples"):
        KRLSRegressor(cv=31).fit(X, y)
    labels = np.array([0] * 27 + [1] * 3)
    with pytest.raises(ValueError, match="cv=4 is larger than the number of samples of the"):
        KRLSClassifier(cv=4).fit(X, labels)
    with pytest.raises(ValueError, match="cv=1"):
        KRLSRegressor(cv=1).fit(X, y)
    with pytest.raises(ValueError, match="cv must be one of"):
        KRLSRegressor(cv="loocv").fit(X, y)
    with pytest.raises(TypeError, match="cv must be"):
        KRLSRegressor(cv=2.5).fit(X, y)
    with pytest.raises(ValueError, match="cv='loo' is not available"):
        NystromRegressor(solver="cg", cv="loo").fit(X, y)
    with pytest.raises(ValueError, match="cv='gcv' is not available"):
        NystromRegressor(n_centers="auto", solver="direct", cv="gcv").fit(X, y)
    with pytest.raises(ValueError, match="cv='loo' is not available"):
        KRLSRegressor(filter="landweber", cv="loo").fit(X, y)
    w = np.ones(len(X))
    w[0] = 0
    with pytest.raises(ValueError, match="sample_weight: cv='loo' needs positive"):
        KRLSRegressor(cv="loo").fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match="validation_fraction=0 turns selection off"):
        KRLSRegressor([Gaussian(1.0), Gaussian(2.0)], penalty=1e-3, validation_fraction=0).fit(X, y)


@pytest.mark.parametrize("cv", [3, "splitter"])
def test_random_features_k_fold_refits_at_the_chosen_penalty(cv):
    """k-fold random features raised IndexError at the refit (the fold-averaged path keeps
    no coefficients); the model is now the closed form on its feature map at the chosen λ."""
    from sklearn.model_selection import KFold

    X, y = _xy()
    est = kp.RandomFeaturesRegressor(
        n_features=40, cv=KFold(4) if cv == "splitter" else cv, random_state=0
    ).fit(X, y)
    F = est.features_.transform(X)
    n = len(X)
    ref = np.linalg.solve(F.T @ F + est.penalty_ * n * np.eye(40), F.T @ (y - y.mean()))
    np.testing.assert_allclose(est.coef_, ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max())
    labels = (y > 0).astype(int)
    clf = kp.RandomFeaturesClassifier(n_features=40, cv=3, random_state=0).fit(X, labels)
    assert clf.score(X, labels) > 0.9


def test_cv_as_a_list_of_splits():
    """scikit-learn's convention: ``cv`` may be an iterable of (train, validation) index
    arrays; it was refused ("cv must be ... got list"). A list or a generator of the same
    folds gives the model the splitter gives."""
    from sklearn.model_selection import KFold

    X, y = _data(120)
    folds = list(KFold(3, shuffle=True, random_state=1).split(X))
    kw = dict(n_centers=20, random_state=0)
    ref = kp.NystromRegressor(cv=KFold(3, shuffle=True, random_state=1), **kw).fit(X, y)
    for cv in (folds, (f for f in folds), [(np.isin(np.arange(120), t), v) for t, v in folds]):
        est = kp.NystromRegressor(cv=cv, **kw).fit(X, y)
        np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    with pytest.raises(TypeError, match="split 0 must be a .train, validation. pair"):
        kp.NystromRegressor(cv=[np.arange(10)], **kw).fit(X, y)
    with pytest.raises(ValueError, match="cv: the iterable of splits is empty"):
        kp.NystromRegressor(cv=[], **kw).fit(X, y)
    with pytest.raises(ValueError, match="row indices outside"):
        kp.NystromRegressor(cv=[(np.arange(100), np.arange(100, 200))], **kw).fit(X, y)


def _xy(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
