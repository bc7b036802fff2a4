"""Prediction intervals (split conformal, from the held-out residuals) and the posterior
standard deviation of ``predict(X, return_std=True)``, against their definitions computed
independently."""

from __future__ import annotations

import numpy as np
import pytest

import kernelpath as kp


def _data(n: int, seed: int, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    X = r.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + noise * r.normal(size=n)


def test_the_interval_is_the_conformal_quantile_of_the_held_out_residuals():
    X, y = _data(1500, 0)
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, y)  # CG: no refit
    val = est.validation_indices_
    r = np.sort(np.abs(y[val] - est.predict(X[val])))
    np.testing.assert_allclose(est.conformal_residuals_[:, 0], r, rtol=1e-10, atol=1e-12)
    for c in (0.5, 0.8, 0.9, 0.95):
        q = r[int(np.ceil((len(val) + 1) * c)) - 1]
        interval = est.predict_interval(X[:7], coverage=c)
        pred = est.predict(X[:7])
        np.testing.assert_allclose(interval, np.column_stack([pred - q, pred + q]))
    assert est.noise_variance_[0] == pytest.approx(np.mean(r**2))


def test_the_intervals_cover_new_rows_as_promised():
    X, y = _data(4000, 0)
    Xt, yt = _data(20000, 1)
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    for c in (0.8, 0.9):
        lo, hi = est.predict_interval(Xt, coverage=c).T
        covered = np.mean((yt >= lo) & (yt <= hi))
        assert c - 0.03 <= covered <= c + 0.03, (c, covered)


def test_k_fold_uses_every_rows_out_of_fold_residual():
    X, y = _data(600, 0)
    est = kp.NystromRegressor(search="none", cv=3, solver="direct", random_state=0).fit(X, y)
    assert est.conformal_residuals_.shape == (600, 1)
    assert np.all(np.diff(est.conformal_residuals_[:, 0]) >= 0)


def test_multi_output_intervals_have_an_output_axis():
    X, y = _data(800, 0)
    Y = np.column_stack([y, 10 * y])
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, Y)
    out = est.predict_interval(X[:4])
    assert out.shape == (4, 2, 2)
    widths = out[:, 1, :] - out[:, 0, :]
    np.testing.assert_allclose(widths[:, 1], 10 * widths[:, 0], rtol=0.05)


def test_intervals_and_std_are_refused_where_nothing_was_held_out():
    X, y = _data(300, 0)
    loo = kp.NystromRegressor(search="none", solver="direct", cv="loo").fit(X, y)
    with pytest.raises(ValueError, match="held none out"):
        loo.predict_interval(X)
    with pytest.raises(ValueError, match="held none out"):
        loo.predict(X, return_std=True)
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match="coverage must be in"):
            est.predict_interval(X, coverage=bad)
    with pytest.raises(TypeError, match="coverage must be a number"):
        est.predict_interval(X, coverage="0.9")
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="return_std must be True or False"):
            est.predict(X, return_std=bad)
    for other in (kp.NYTRORegressor(), kp.RandomFeaturesRegressor(), kp.EigenProRegressor()):
        other.set_params(random_state=0).fit(X, y)
        with pytest.raises(ValueError, match="return_std"):
            other.predict(X, return_std=True)
        assert other.predict_interval(X).shape == (300, 2)


def _gaussian_gram(kernel, A, B):
    return np.asarray(kernel(A, B))


def test_krls_std_is_the_exact_gaussian_process_posterior():
    X, y = _data(400, 0)
    Xt, _ = _data(50, 1)
    est = kp.KRLSRegressor(random_state=0).fit(X, y)
    mean, std = est.predict(Xt, return_std=True)
    C, k, lam = est.centers_, est.kernel_, est.penalty_
    n = est.n_fit_rows_
    assert n == C.shape[0]
    K = _gaussian_gram(k, C, C)
    Kx = _gaussian_gram(k, Xt, C)
    prior = np.diag(_gaussian_gram(k, Xt, Xt))
    var_f = prior - np.einsum("ij,ji->i", Kx, np.linalg.solve(K + n * lam * np.eye(n), Kx.T))
    sigma2 = est.noise_variance_[0]
    expected = np.sqrt(sigma2 / (n * lam) * np.clip(var_f, 0, None) + sigma2)
    np.testing.assert_allclose(std, expected, rtol=1e-6)
    np.testing.assert_allclose(mean, est.predict(Xt))


def _nystrom_shape(est, Z):
    C, k, lam = est.centers_, est.kernel_, est.penalty_
    m = C.shape[0]
    K = _gaussian_gram(k, C, C)
    Kx = _gaussian_gram(k, Z, C)
    return 1.0 - np.einsum("ij,ji->i", Kx, np.linalg.solve(K + m * lam * np.eye(m), Kx.T))


def test_nystrom_std_conditions_on_the_centers():
    X, y = _data(2000, 0)
    Xt, _ = _data(40, 1)
    est = kp.NystromRegressor(search="none", solver="direct", random_state=0).fit(X, y)
    _, std = est.predict(Xt, return_std=True)
    var_f = np.clip(_nystrom_shape(est, Xt), 0, None)
    s2, sigma2 = est.signal_variance_[0], est.noise_variance_[0]
    np.testing.assert_allclose(std, np.sqrt(s2 * var_f + sigma2), rtol=1e-6)


def test_the_two_variances_are_the_likelihoods_best_on_the_held_out_rows():
    from scipy.optimize import minimize

    X, y = _data(1500, 3, noise=0.2)
    y = y + 0.8 * np.abs(X[:, 0]) ** 3 * np.random.default_rng(4).normal(size=len(y))
    est = kp.NystromRegressor(search="none", solver="direct", refit=False, random_state=0)
    est.fit(X, y)
    val = est.validation_indices_
    r2 = (y[val] - est.predict(X[val])) ** 2
    v = np.clip(_nystrom_shape(est, X[val]), 0, None)

    def nll(p):
        var = np.exp(p[0]) * v + np.exp(p[1])
        return np.mean(np.log(var) + r2 / var)

    best = min(
        (minimize(nll, start, method="L-BFGS-B") for start in ([0.0, -2.0], [3.0, -4.0], [-3, 0])),
        key=lambda res: res.fun,
    )
    ours = nll(np.log([est.signal_variance_[0], est.noise_variance_[0]]))
    floor = 0.05 * est.noise_variance_[0] / np.median(v)
    if est.signal_variance_[0] > floor * (1 + 1e-6):
        assert ours <= best.fun + 1e-4
    else:  # the floor holds s^2 where the likelihood would take it lower
        assert np.exp(best.x[0]) <= floor * 1.05


def test_the_std_interval_covers_new_rows():
    X, y = _data(3000, 0)
    Xt, yt = _data(10000, 1)
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    mean, std = est.predict(Xt, return_std=True)
    covered = np.mean(np.abs(yt - mean) <= 1.645 * std)
    assert 0.85 <= covered <= 0.95
    # far from the data the posterior's own variance shows
    far = np.array([[40.0, 40.0]])
    assert est.predict(far, return_std=True)[1][0] > 1.5 * np.median(std)
