"""Online learners against batch closed forms."""

import numpy as np
import pytest

from kernelpath import Gaussian, RandomFourierFeatures, RecursiveRLS


def _ridge(Z, U, lam, w=None, prior=1.0):
    w = np.ones(len(Z)) if w is None else w
    D = Z.shape[1]
    return np.linalg.solve(Z.T @ (w[:, None] * Z) + prior * lam * np.eye(D), Z.T @ (w[:, None] * U))


@pytest.mark.parametrize("k", [1, 3])
def test_any_sequence_of_partial_fits_equals_batch_ridge(rng, k):
    X = rng.standard_normal((240, 6))
    U = X @ rng.standard_normal((6, k)) + 0.1 * rng.standard_normal((240, k))
    model = RecursiveRLS(penalty=0.3)
    start = 0
    sizes = [1, 5, 1, 17, 60]
    while start < len(X):
        size = sizes[start % len(sizes)]
        if size == 1:
            model.partial_fit(X[start], U[start] if k > 1 else U[start, 0])
        else:
            model.partial_fit(X[start : start + size], U[start : start + size])
        start += size
        ref = _ridge(X[:start], U[:start], 0.3)
        got = model.coef_.reshape(ref.shape)
        np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10 * np.abs(ref).max())
    assert model.n_samples_seen_ == 240
    np.testing.assert_allclose(model.predict(X[:5]).reshape(5, k), X[:5] @ ref, rtol=1e-8)


def test_forgetting_equals_the_weighted_closed_form(rng):
    X = rng.standard_normal((150, 4))
    u = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(150)
    mu = 0.95
    model = RecursiveRLS(penalty=2.0, forgetting=mu)
    for t in range(150):
        model.partial_fit(X[t], u[t])
        w = mu ** np.arange(t, -1, -1)
        ref = _ridge(X[: t + 1], u[: t + 1, None], 2.0, w, prior=mu ** (t + 1))[:, 0]
        np.testing.assert_allclose(model.coef_, ref, rtol=1e-8, atol=1e-12)


def test_random_features_and_callables(rng):
    X = rng.uniform(-1, 1, (400, 2))
    y = np.sin(3 * X[:, 0])
    fmap = RandomFourierFeatures(Gaussian(0.5), n_features=100, random_state=0)
    model = RecursiveRLS(penalty=1e-3, features=fmap).fit(X, y)
    Z = model.features_.transform(X)  # a fitted clone of fmap (the parameter stays as given)
    np.testing.assert_allclose(model.coef_, _ridge(Z, y[:, None], 1e-3)[:, 0], rtol=1e-7)
    poly = RecursiveRLS(
        penalty=1e-6, features=lambda A: np.column_stack([A, A**2, np.ones(len(A))])
    )
    poly.fit(X, X[:, 0] ** 2 - X[:, 1] + 0.5)
    np.testing.assert_allclose(poly.predict(X[:3]), X[:3, 0] ** 2 - X[:3, 1] + 0.5, atol=1e-5)


def test_fit_resets_and_bad_input_is_named(rng):
    X = rng.standard_normal((20, 3))
    y = X[:, 0]
    model = RecursiveRLS().fit(X, y)
    before = model.coef_.copy()
    model.fit(X, y)
    np.testing.assert_array_equal(model.coef_, before)
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(X[:, :2], y)
    with pytest.raises(ValueError, match="numbers of samples"):
        model.partial_fit(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        model.partial_fit(X[0] * np.nan, 1.0)
    with pytest.raises(ValueError, match="penalty"):
        RecursiveRLS(penalty=0.0).fit(X, y)
    with pytest.raises(ValueError, match="forgetting"):
        RecursiveRLS(forgetting=1.5).fit(X, y)
    with pytest.raises(TypeError, match="features"):
        RecursiveRLS(features=3).fit(X, y)
    with pytest.raises(ValueError, match="outputs"):
        model.partial_fit(X, np.column_stack([y, y]))


# ------------------------------------------------------------------ classification
from kernelpath import IncrementalRLSClassifier  # noqa: E402


def _blobs(rng, k=4, n=60, d=2):
    centers = rng.uniform(-5, 5, (k, d))
    X = np.vstack([c + 0.5 * rng.standard_normal((n, d)) for c in centers])
    y = np.repeat(np.arange(k), n)
    p = rng.permutation(len(y))
    return X[p], y[p], centers


def test_unrecoded_weights_are_batch_one_hot_rls(rng):
    X, y, _ = _blobs(rng)
    clf = IncrementalRLSClassifier(penalty=0.7, alpha=0.0, validation_every=None)
    for i in range(0, len(X), 9):
        clf.partial_fit(X[i : i + 9], y[i : i + 9])
    order = list(clf.classes_)
    Y = np.zeros((len(y), len(order)))
    Y[np.arange(len(y)), [order.index(v) for v in y]] = 1.0
    W = _ridge(X, Y, 0.7)
    np.testing.assert_allclose(clf.decision_function(X[:7]), X[:7] @ W, rtol=1e-8)
    # full recoding multiplies class t's scores by k / k_t
    full = IncrementalRLSClassifier(penalty=0.7, alpha=1.0, validation_every=None).fit(X, y)
    gamma = len(y) / np.array([np.sum(y == c) for c in full.classes_])
    Yf = np.zeros((len(y), len(full.classes_)))
    Yf[np.arange(len(y)), [list(full.classes_).index(v) for v in y]] = 1.0
    np.testing.assert_allclose(
        full.decision_function(X[:7]), X[:7] @ _ridge(X, Yf, 0.7) * gamma, rtol=1e-8
    )


def test_class_extension_learns_a_new_class_from_one_example(rng):
    X, y, centers = _blobs(rng, k=4)
    clf = IncrementalRLSClassifier(
        penalty=1e-2,
        alpha=1.0,
        validation_every=None,
        features=lambda A: np.exp(-((A[:, None, :] - grid[None]) ** 2).sum(-1) / 2.0),
    )
    grid = rng.uniform(-7, 7, (150, 2))
    known = y < 3
    clf.partial_fit(X[known], y[known])
    before = clf.score(X[known], y[known])
    new = X[y == 3][0]
    clf.partial_fit(new, 3)  # one example of an unseen class
    assert list(clf.classes_) == [*sorted(set(y[known]), key=list(y[known]).index), 3]
    near = new + 0.2 * rng.standard_normal((30, 2))
    assert np.mean(clf.predict(near) == 3) >= 0.9
    assert clf.score(X[known], y[known]) >= before - 0.02


def test_online_selection_and_bad_input(rng):
    X, y, _ = _blobs(rng)
    clf = IncrementalRLSClassifier(validation_every=4).fit(X, y)
    assert clf.validation_scores_.shape == (4, 5)
    assert np.isfinite(clf.validation_scores_).all()
    assert clf.n_samples_seen_ == len(X) and clf.class_counts_.sum() == len(X) - len(X) // 4
    with pytest.raises(ValueError, match="alpha"):
        IncrementalRLSClassifier(alpha=2.0).fit(X, y)
    with pytest.raises(ValueError, match="penalty"):
        IncrementalRLSClassifier(penalty=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="validation_every"):
        IncrementalRLSClassifier(validation_every=1).fit(X, y)
    with pytest.raises(ValueError, match="numbers of samples"):
        clf.partial_fit(X[:3], y[:2])


# ------------------------------------------------------------------ semiparametric
from kernelpath import SemiparametricRegressor  # noqa: E402
from kernelpath.datasets import ARM, arm_regressor, make_arm_dynamics  # noqa: E402


def test_arm_regressor_is_the_lagrangian_dynamics(rng):
    # τ = M(q) q̈ + C(q, q̇) q̇ + G(q) written from the masses and lengths directly
    a = ARM
    m1, m2, l1, lc1, lc2, I1, I2, g = (
        a[k] for k in ("m1", "m2", "l1", "lc1", "lc2", "I1", "I2", "g")
    )
    X = rng.uniform(-2, 2, (50, 6))
    q1, q2, d1, d2, dd1, dd2 = X.T
    M11 = I1 + I2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * np.cos(q2))
    M12 = I2 + m2 * (lc2**2 + l1 * lc2 * np.cos(q2))
    M22 = I2 + m2 * lc2**2
    h = m2 * l1 * lc2 * np.sin(q2)
    G1 = (m1 * lc1 + m2 * l1) * g * np.cos(q1) + m2 * lc2 * g * np.cos(q1 + q2)
    G2 = m2 * lc2 * g * np.cos(q1 + q2)
    tau1 = M11 * dd1 + M12 * dd2 - h * (2 * d1 * d2 + d2**2) + G1
    tau2 = M12 * dd1 + M22 * dd2 + h * d1**2 + G2
    _, _, reg, pi = make_arm_dynamics(5, random_state=0)
    got = np.einsum("ntp,p->nt", reg(X), pi)
    np.testing.assert_allclose(got, np.column_stack([tau1, tau2]), rtol=1e-12, atol=1e-12)
    assert arm_regressor(X[0]).shape == (2, 5)


def test_arm_trajectories_are_consistent(rng):
    X, tau, _, _ = make_arm_dynamics(400, "circle-b", noise=0.0, random_state=1, dt=0.01)
    # velocities and accelerations are the derivatives of the angles
    np.testing.assert_allclose(np.gradient(X[:, :2], 0.01, axis=0)[5:-5], X[5:-5, 2:4], atol=5e-3)
    np.testing.assert_allclose(np.gradient(X[:, 2:4], 0.01, axis=0)[5:-5], X[5:-5, 4:6], atol=5e-2)
    with pytest.raises(ValueError, match="trajectory"):
        make_arm_dynamics(10, trajectory="square")


def test_parameters_converge_without_unmodeled_effects():
    X, tau, reg, pi = make_arm_dynamics(2000, unmodeled=False, noise=0.01, random_state=2)
    sp = SemiparametricRegressor(reg, random_state=0).fit(X, tau)
    np.testing.assert_allclose(sp.parameters_, pi, rtol=0.01)


def test_semiparametric_beats_both_parts_where_each_is_weak():
    # thesis §8.4.3: train on one circle, then test-and-update on another in chunks;
    # measured over seeds 0-3: first 300 samples RMSE SP 0.85-1.00, NP 1.20-2.13;
    # steady state (last 1000) SP 0.067-0.069, P 0.54-0.56
    Xa, ta, reg, _ = make_arm_dynamics(2000, "circle-a", random_state=0)
    Xb, tb, _, _ = make_arm_dynamics(2000, "circle-b", random_state=100)
    sp = SemiparametricRegressor(reg, random_state=0).fit(Xa, ta)
    mu, sd = Xa.mean(0), Xa.std(0)
    rf = RandomFourierFeatures(Gaussian(np.sqrt(6)), n_features=300, random_state=0)
    nonpar = RecursiveRLS(1e-3, features=rf).fit((Xa - mu) / sd, ta)
    err = {"sp": [], "p": [], "np": []}
    for c in range(0, 2000, 50):
        xb, yb = Xb[c : c + 50], tb[c : c + 50]
        err["sp"].append(np.mean((sp.predict(xb) - yb) ** 2))
        err["p"].append(np.mean((sp.predict_parametric(xb) - yb) ** 2))
        err["np"].append(np.mean((nonpar.predict((xb - mu) / sd) - yb) ** 2))
        sp.partial_fit(xb, yb)
        nonpar.partial_fit((xb - mu) / sd, yb)
    assert np.mean(err["sp"][:6]) < np.mean(err["np"][:6])
    assert np.mean(err["sp"][-20:]) < 0.5 * np.mean(err["p"][-20:])


def test_semiparametric_bad_input():
    X, tau, reg, pi = make_arm_dynamics(20, random_state=0)
    with pytest.raises(ValueError, match="initial_parameters"):
        SemiparametricRegressor(reg, initial_parameters=[1.0]).fit(X, tau)
    with pytest.raises(ValueError, match="outputs"):
        SemiparametricRegressor(reg).fit(X, tau[:, :1])
    with pytest.raises(ValueError, match="regressor must return"):
        SemiparametricRegressor(lambda A: A).fit(X, tau)
    prior = SemiparametricRegressor(reg, initial_parameters=pi, parametric_penalty=1e9)
    np.testing.assert_allclose(prior.fit(X, tau).parameters_, pi, rtol=1e-3)


def test_recoding_helps_the_minority_class_on_digits(monkeypatch):
    # the benchmark's protocol (benchmarks/online.py) on 2 seeds: measured gains of about
    # 50 points for the minority class and no loss overall
    from pathlib import Path

    # on the path for this test only: benchmarks/sparse.py would shadow pydata's sparse
    # (dask imports it) in later tests of the same worker
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from online import bench_recoding

    res = bench_recoding(quick=True)["digits"]
    assert res["minority_gain_points"] >= 10
    assert res["overall_loss_points"] <= 1
