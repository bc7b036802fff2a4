"""Per-feature kernel widths and their learning (``sigma="ard"``), against independent
computations: rescaled features, finite differences, and data where only some features
matter."""

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.ard import width_objective

RADIAL = [
    kp.Gaussian,
    kp.Laplacian,
    kp.Cauchy,
    lambda sigma: kp.Matern(sigma, nu=0.5),
    lambda sigma: kp.Matern(sigma, nu=1.5),
    lambda sigma: kp.Matern(sigma, nu=2.5),
]
SIGMA = np.array([0.5, 1.3, 2.0, 0.8, 3.0])


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 5))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 3] + 0.1 * rng.standard_normal(300)
    return X, y


@pytest.mark.parametrize("make", RADIAL, ids=range(len(RADIAL)))
def test_per_feature_widths_equal_rescaled_features(make, data):
    X, _ = data
    Z = X[:40] + 0.01
    K = make(sigma=SIGMA)(X, Z)
    ref = make(sigma=1.0)(X / SIGMA, Z / SIGMA)
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=1e-12)
    # the operator folds the widths into the centers and the norms: the same products
    v = np.random.default_rng(1).standard_normal(40)
    op = kp.KernelOperator(X, Z, make(sigma=SIGMA))
    ref_op = kp.KernelOperator(X / SIGMA, Z / SIGMA, make(sigma=1.0))
    np.testing.assert_allclose(op.matvec(v), ref_op.matvec(v), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.center_gram(), ref_op.center_gram(), atol=1e-12)


@pytest.mark.parametrize("make", [kp.Gaussian, kp.Cauchy, lambda sigma: kp.Matern(sigma, 2.5)])
def test_random_features_divide_frequencies_per_feature(make, data):
    X, _ = data
    f = kp.RandomFourierFeatures(make(sigma=SIGMA), n_features=200, random_state=3).fit(X)
    g = kp.RandomFourierFeatures(make(sigma=1.0), n_features=200, random_state=3).fit(X / SIGMA)
    np.testing.assert_allclose(f.transform(X), g.transform(X / SIGMA), atol=1e-12)


def test_estimators_leverage_and_online_learners_take_per_feature_widths(data):
    X, y = data
    Xs = X / SIGMA
    kw = dict(n_centers=50, penalty=1e-3, solver="direct", random_state=0)
    a = kp.NystromRegressor(kp.Gaussian(SIGMA), **kw).fit(X, y)
    b = kp.NystromRegressor(kp.Gaussian(1.0), **kw).fit(Xs, y)
    np.testing.assert_allclose(a.predict(X), b.predict(Xs), rtol=1e-9, atol=1e-9)
    lev = kp.leverage_scores(X, kp.Cauchy(SIGMA), 1e-2)
    np.testing.assert_allclose(lev, kp.leverage_scores(Xs, kp.Cauchy(1.0), 1e-2), rtol=1e-9)
    rf = kp.RandomFourierFeatures(kp.Gaussian(SIGMA), n_features=100, random_state=0)
    rf1 = kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=100, random_state=0)
    o = kp.RecursiveRLS(penalty=1e-2, features=rf).partial_fit(X, y)
    o1 = kp.RecursiveRLS(penalty=1e-2, features=rf1).partial_fit(Xs, y)
    np.testing.assert_allclose(o.predict(X), o1.predict(Xs), atol=1e-9)


def test_width_path_over_per_feature_kernels_is_a_kernel_axis(data):
    X, y = data
    kernels = [kp.Gaussian(SIGMA), kp.Gaussian(2 * SIGMA)]
    m = kp.NystromRegressor(kernels, n_centers=40, random_state=0).fit(X, y)
    assert m.path_.param_names[0] == "kernel"
    assert any(m.kernel_ == k for k in kernels)


@pytest.mark.parametrize(
    "make", [kp.Gaussian, kp.Cauchy, lambda s: kp.Matern(s, 1.5), lambda s: kp.Matern(s, 2.5)]
)
@pytest.mark.parametrize("cv", ["holdout", 3])
def test_gradient_equals_finite_differences(make, cv, data):
    X, y = data
    rng = np.random.default_rng(2)
    Y = np.c_[y, np.cos(X[:, 2])]  # two outputs
    w = rng.uniform(0.5, 2.0, len(X))
    C = rng.standard_normal((30, 5))
    f = width_objective(make(1.0), X[:150], Y[:150], C, sample_weight=w[:150], cv=cv)
    theta = np.r_[np.log(SIGMA), np.log(1e-3)]
    _, g = f(theta)
    fd = np.empty_like(theta)
    h = 1e-5
    for i in range(len(theta)):
        e = np.zeros_like(theta)
        e[i] = h
        fd[i] = (f(theta + e, grad=False) - f(theta - e, grad=False)) / (2 * h)
    assert np.abs(g - fd).max() <= 1e-6 * np.abs(fd).max()


def test_laplacian_gradient_up_to_the_distance_rounding(data):
    """k(c, c) of the Laplacian kernel is exp(-sqrt(rounding of the Gram trick)) = 1 - 4e-8,
    which moves with the widths at random: finite differences carry that noise (1e-4), the
    analytic gradient does not (it is 0 at r = 0)."""
    X, y = data
    C = np.random.default_rng(2).standard_normal((30, 5))
    f = width_objective(kp.Laplacian(1.0), X[:150], y[:150], C)
    theta = np.r_[np.log(SIGMA), np.log(1e-3)]
    _, g = f(theta)
    h = 1e-4
    fd = np.array(
        [
            (f(theta + h * e, grad=False) - f(theta - h * e, grad=False)) / (2 * h)
            for e in np.eye(len(theta))
        ]
    )
    assert np.abs(g - fd).max() <= 2e-3 * np.abs(fd).max()


def test_irrelevant_features_get_wide_and_the_test_error_drops():
    rng = np.random.default_rng(0)
    n, d = 1500, 8

    def f(X):
        return np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]

    X = rng.standard_normal((n, d))
    y = f(X) + 0.1 * rng.standard_normal(n)
    Xt = rng.standard_normal((2000, d))
    kw = dict(n_centers=200, random_state=0)
    auto = kp.NystromRegressor(kp.Gaussian("auto"), **kw).fit(X, y)
    ard = kp.NystromRegressor(kp.Gaussian("ard"), **kw).fit(X, y)
    widths = ard.kernel_.sigma
    start = ard.ard_info_["start"]["sigma"]
    assert widths.shape == (d,)
    assert np.all(widths[3:] >= 10 * start), widths  # the five irrelevant features
    assert widths[:3].max() < widths[3:].min(), widths  # relevance ranks them
    rmse = {m: np.sqrt(np.mean((m.predict(Xt) - f(Xt)) ** 2)) for m in (auto, ard)}
    assert rmse[ard] < 0.5 * rmse[auto]
    assert ard.ard_info_["objective_end"] < ard.ard_info_["objective_start"]


def test_the_guard_keeps_auto_where_the_learned_widths_lose(monkeypatch, data):
    """Learned widths that are useless (1e-3 of the start) lose on the hold-out to the
    "auto" widths: the fit is then the sigma="auto" fit, number for number."""
    X, y = data
    import kernelpath.ard as ard

    seen = {}

    def bad(kernel, Xs, ys, **kw):
        seen["X"], seen["y"] = np.asarray(Xs), np.asarray(ys)
        info = {"start": {"sigma": 1.0, "penalty": 1e-3}, "time": 0.0}
        return kp.Gaussian(np.full(Xs.shape[1], 1e-3)), info

    monkeypatch.setattr(ard, "learn_widths", bad)
    kw = dict(n_centers=40, random_state=3)
    fit = kp.NystromRegressor(kp.Gaussian("ard"), **kw).fit(X, y)
    auto = kp.NystromRegressor(kp.Gaussian("auto"), **kw).fit(X, y)
    assert fit.ard_info_["chosen"] == "start"
    assert fit.kernel_ == auto.kernel_  # the scaled "auto" width (one per feature)
    np.testing.assert_array_equal(fit.predict(X), auto.predict(X))
    # learned on the training rows only, never on the hold-out that judges them
    # (scaled: the subsample divided by the feature scales, folded back afterwards)
    scales = fit.path_.info["width_search"][0]["scales"]
    np.testing.assert_allclose(seen["X"] * scales, X[fit.train_indices_], rtol=1e-14)
    assert len(fit.train_indices_) + len(fit.validation_indices_) == len(X)
    # the path has the learned kernel first, then the "auto" width the screen chose
    assert fit.path_.param_names[0] == "kernel" and fit.path_.shape[0] == 2


def test_learned_widths_win_the_guard_where_they_are_better():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((1000, 5))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(1000)
    fit = kp.NystromRegressor(kp.Gaussian("ard"), n_centers=100, random_state=0).fit(X, y)
    assert fit.ard_info_["chosen"] == "learned" and fit.kernel_.per_feature
    assert fit.ard_info_["n_rows"] == len(fit.train_indices_) == 800


def test_without_selection_the_learned_kernel_is_used_alone(data):
    X, y = data
    fit = kp.NystromRegressor(
        kp.Gaussian("ard"), n_centers=40, penalty=1e-4, validation_fraction=0, random_state=0
    ).fit(X, y)
    assert fit.kernel_.per_feature and fit.ard_info_["chosen"] == "learned"
    assert fit.ard_info_["n_rows"] == len(X)


def test_classifier_learns_widths():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((600, 6))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, "out", "in")
    clf = kp.NystromClassifier(kp.Gaussian("ard"), n_centers=100, random_state=0).fit(X, y)
    w = clf.kernel_.sigma
    assert w[:2].max() < w[2:].min()
    assert clf.score(X, y) > 0.9


def test_learned_widths_round_trip_through_a_model_file(tmp_path, data):
    X, y = data
    m = kp.NystromRegressor(kp.Matern("ard", nu=2.5), n_centers=30, random_state=0)
    m.fit(X, y)
    kp.save(m, tmp_path / "m.kp")
    back = kp.load(tmp_path / "m.kp")
    assert np.array_equal(back.predict(X), m.predict(X))
    np.testing.assert_array_equal(back.kernel_.sigma, m.kernel_.sigma)


def test_plot_widths_ranks_features(data):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from kernelpath.plotting import plot_widths

    ax = plot_widths(kp.Gaussian(SIGMA), feature_names=list("abcde"))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == "a" and labels[0] == "e"  # smallest width on top
    widths = [p.get_width() for p in ax.patches]
    np.testing.assert_allclose(sorted(widths), np.sort(SIGMA.min() / SIGMA))


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda X: kp.Gaussian([1.0, 2.0])(X, X), ValueError, "sigma has 2 widths"),
        (lambda X: kp.Gaussian([1.0, -2.0]), ValueError, "sigma: every per-feature width"),
        (lambda X: kp.Laplacian([1.0, np.inf]), ValueError, "sigma: every per-feature width"),
        (lambda X: kp.Cauchy([[1.0]]), ValueError, "1-D"),
        (lambda X: kp.Gaussian(["a", "b"]), TypeError, "sigma"),
        (lambda X: kp.Gaussian("ard").resolve(X), ValueError, "learn_widths"),
        (lambda X: kp.Gaussian("ard")(X, X), ValueError, "learned"),
        (lambda X: kp.Polynomial(gamma="ard"), ValueError, "gamma"),
        (lambda X: kp.learn_widths(kp.Linear(), X, X[:, 0]), ValueError, "kernel"),
        (lambda X: kp.learn_widths("polynomial", X, X[:, 0]), ValueError, "kernel"),
        (lambda X: kp.learn_widths("gaussian", X, X[:5, 0]), ValueError, "y has 5 rows"),
        (lambda X: kp.learn_widths("gaussian", X, X[:, 0], cv=1), ValueError, "cv"),
        (
            lambda X: kp.NystromRegressor([kp.Gaussian("ard"), kp.Gaussian(1.0)]).fit(X, X[:, 0]),
            ValueError,
            "kernel: sigma='ard'",
        ),
        (
            lambda X: kp.RandomFourierFeatures(kp.Gaussian("ard"), n_features=10).fit(X),
            ValueError,
            "sigma='ard'",
        ),
        (
            lambda X: kp.NystromRegressor(kp.Gaussian(np.ones(3)), n_centers=5).fit(X, X[:, 0]),
            ValueError,
            "sigma has 3 widths",
        ),
    ],
)
def test_bad_widths_are_named(call, error, words, data):
    X, _ = data
    with pytest.raises(error, match=words):
        call(X)
