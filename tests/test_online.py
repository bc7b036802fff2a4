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
    fmap = RandomFourierFeatures(Gaussian(0.5), 100, random_state=0)
    model = RecursiveRLS(penalty=1e-3, features=fmap).fit(X, y)
    Z = fmap.transform(X)
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
