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
        assert ax.get_xlabel() == "penalty λ"
        assert ax.get_ylabel() in ("Nyström centers m", "kernel width σ")
        assert ax.figure.axes[-1].get_ylabel() == "log10 validation MSE (squared target units)"
        assert len(ax.get_xticklabels()) <= 11 and all(t.get_text() for t in ax.get_xticklabels())
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
    assert not ax.get_images() and len(ax.get_lines()) == 3  # two λ, and the chosen point
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), path.val_error[0])
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == [
        "penalty=0.01",
        "penalty=0.0001",
    ]
    plt.close(fig)


def _chosen(ax):
    """The red star of the chosen point: (x, y, its legend label)."""
    star = [ln for ln in ax.get_lines() if ln.get_marker() == "*"]
    assert len(star) == 1
    return star[0].get_xdata()[0], star[0].get_ydata()[0], star[0].get_label()


def test_path_curves_read_at_a_glance():
    """The default (λ, t) path: 20 curves by a colour scale (no 20-entry legend), the
    chosen point marked where the selection put it, axes naming quantities and units; the
    same path against λ: one curve per iteration count, not vertical bars."""
    X, y = _data(800)
    est = kp.NystromRegressor(n_centers=60, random_state=0).fit(X, y)
    path = est.path_
    assert path.param_names == ("penalty", "n_iter") and path.shape[0] == 20
    fig, ax = plt.subplots()
    path.plot(ax=ax)
    assert ax.get_xlabel() == "iterations t"
    assert ax.get_ylabel() == "validation MSE (squared target units)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 1 and legend[0].startswith("chosen: penalty=")
    assert fig.axes[-1].get_ylabel() == "penalty λ"  # the colour bar
    colours = {tuple(ln.get_color()) for ln in ax.get_lines() if ln.get_marker() != "*"}
    assert len(colours) == 20  # one colour per λ, none repeated
    x, err, _ = _chosen(ax)
    assert x == est.best_params_["n_iter"] and err == path.best_val_error
    plt.close(fig)
    fig, ax = plt.subplots()
    path.plot(ax=ax, param="penalty")
    assert ax.get_xlabel() == "penalty λ" and ax.get_xscale() == "log"
    curves = [ln for ln in ax.get_lines() if ln.get_marker() != "*"]
    assert len(curves) == path.shape[1]
    for ln in curves:  # a curve over λ: distinct x values, not a vertical bar
        xs = ln.get_xdata()
        assert len(np.unique(xs[np.isfinite(ln.get_ydata())])) > 1
    x, err, _ = _chosen(ax)
    assert x == est.best_params_["penalty"] and err == path.best_val_error
    plt.close(fig)
    with pytest.raises(ValueError, match="param must be one of"):
        path.plot(param="sigma")


def test_widths_ranked_in_standardized_units():
    """A feature of large raw values that matters ranks by its effect: relevance is
    spread / width, the spreads those the fit learned in (kept in the model file)."""
    from kernelpath.plotting import plot_widths

    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(0, 1, 800), rng.normal(1400, 1100, 800), rng.normal(0, 1, 800)]
    y = np.sin(X[:, 0]) + np.tanh(X[:, 1] / 1100) + 0.05 * rng.standard_normal(800)
    est = kp.NystromRegressor(kp.Gaussian("ard"), n_centers=80, random_state=0).fit(X, y)
    spreads = np.asarray(est.ard_info_["feature_scales"])
    np.testing.assert_allclose(spreads, X.std(axis=0), rtol=0.05)
    fig, ax = plt.subplots()
    plot_widths(est, feature_names=["a", "big", "noise"], ax=ax)
    bars = {
        t.get_text(): p.get_width() for t, p in zip(ax.get_yticklabels(), ax.patches, strict=True)
    }
    want = spreads / est.kernel_.widths()
    np.testing.assert_allclose([bars["a"], bars["big"], bars["noise"]], want / want.max())
    assert bars["big"] > 0.1 > bars["noise"]  # in raw units "big" would read as ~1e-3
    assert "standardized units" in ax.get_xlabel()
    plt.close(fig)
    fig, ax = plt.subplots()
    plot_widths(est.kernel_, ax=ax)  # a bare kernel: raw units, said so
    assert "raw units" in ax.get_xlabel()
    plot_widths(est.kernel_, ax=ax, X=X)
    assert "X's spreads" in ax.get_xlabel()
    plt.close("all")


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
    assert ax.get_ylabel() == "RMSE (target units) on the next batch"
    assert ax.get_xlabel() == "samples learned before the batch"
    plt.close(fig)
