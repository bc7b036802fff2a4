"""Plots draw the numbers they claim to: the heat map is the path's error grid, the leverage
scatter the data and scores, the learning curve a test-then-update run done by hand."""

from __future__ import annotations

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.plotting import plot_learning_curve, plot_leverage, prequential_errors

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _data(n=500, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_heatmap_of_the_m_and_sigma_grids():
    X, y = _data()
    for est in (
        kp.NystromRegressor(n_centers="auto", random_state=0),
        kp.NystromRegressor(
            [kp.Gaussian(s) for s in (0.25, 0.5, 1.0, 2.0)],
            n_centers=30,
            random_state=0,
            max_iter=6,
        ),
    ):
        path = est.fit(X, y).path_
        fig, ax = plt.subplots()
        path.plot(ax=ax)
        image = ax.get_images()[0].get_array()
        want = path.val_error if path.val_error.ndim == 2 else np.fmin.reduce(path.val_error, 2)
        np.testing.assert_allclose(np.ma.filled(image, np.nan), np.log10(want), equal_nan=True)
        star = ax.collections[0].get_offsets()[0]
        assert tuple(star) == (path.best_index[1], path.best_index[0])
        assert ax.get_ylabel() == path.param_names[0] and ax.get_xlabel() == "penalty"
        plt.close(fig)
    with pytest.raises(ValueError, match="two grid parameters"):
        kp.NystromRegressor(n_centers=20, random_state=0).fit(X, y).path_.plot(kind="heatmap")
    with pytest.raises(ValueError, match="kind"):
        path.plot(kind="pie")


def test_curves_stay_the_default_for_iteration_paths():
    X, y = _data()
    path = kp.NystromRegressor(n_centers=20, penalty=[1e-2, 1e-4], random_state=0).fit(X, y).path_
    fig, ax = plt.subplots()
    path.plot(ax=ax)
    assert not ax.get_images() and len(ax.get_lines()) == 2
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), path.val_error[0])
    plt.close(fig)


def test_leverage_plot():
    X, _ = _data(300)
    tau = kp.leverage_scores(X, kp.Gaussian(1.0), 1e-3)
    fig, ax = plt.subplots()
    plot_leverage(X, tau, ax=ax)
    pts = ax.collections[0]
    order = np.argsort(tau)
    np.testing.assert_array_equal(pts.get_offsets(), X[order][:, :2])
    np.testing.assert_allclose(pts.get_array(), np.log10(tau[order]))
    fig2, ax2 = plt.subplots()
    plot_leverage(X, tau, features=2, ax=ax2)
    np.testing.assert_array_equal(ax2.collections[0].get_offsets(), np.c_[X[:, 2], tau])
    with pytest.raises(ValueError, match="scores must have shape"):
        plot_leverage(X, tau[:5])
    with pytest.raises(ValueError, match="features"):
        plot_leverage(X, tau, features=(0, 7))
    plt.close("all")


def test_learning_curve_is_test_then_update():
    X, y = _data(400)
    curve = prequential_errors(kp.RecursiveRLS(1e-2), X, y, batch_size=100)
    ref = kp.RecursiveRLS(1e-2)
    want = []
    for s in range(0, 400, 100):
        if s:
            want.append(np.sqrt(np.mean((ref.predict(X[s : s + 100]) - y[s : s + 100]) ** 2)))
        ref.partial_fit(X[s : s + 100], y[s : s + 100])
    np.testing.assert_allclose(curve["error"], want, rtol=1e-12)
    np.testing.assert_array_equal(curve["seen"], [100, 200, 300])
    assert curve["metric"] == "rmse"
    labels = np.where(y > 0, "pos", "neg")
    cls = prequential_errors(kp.IncrementalRLSClassifier(), X, labels, batch_size=100)
    assert cls["metric"] == "error_rate" and np.all((0 <= cls["error"]) & (cls["error"] <= 1))
    fig, ax = plt.subplots()
    plot_learning_curve(curve, ax=ax, label="RLS")
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), curve["error"])
    plt.close(fig)
