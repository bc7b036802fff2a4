"""The default fit's search (``search``): the kernel family, the learned-metric rounds and
the growth of m on the hold-out, and the warnings for widths far from the data's scale and
for models no better than a constant."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.fitting import choice, growth
from kernelpath.fitting.kernel_models import default_n_centers
from kernelpath.fitting.memory import BudgetError


def _rough(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A target with kinks (|x|): rougher than a Gaussian kernel's functions."""
    r = np.random.default_rng(seed)
    X = r.uniform(-1, 1, size=(n, 3))
    return X, 2 * np.abs(X[:, 0]) + np.abs(X[:, 1] - 0.3) + 0.05 * r.normal(size=n)


def _one_direction(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """y depends on one direction of 8 features: what a learned metric finds."""
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, 8))
    w = np.array([1.0, -1.0, 0.5, 0, 0, 0, 0, 0])
    return X, np.sin(1.5 * X @ w) + 0.05 * r.normal(size=n)


def _rmse(est, X, y) -> float:
    return float(np.sqrt(np.mean((est.predict(X) - y) ** 2)))


def test_search_none_is_the_gaussian_at_the_default_m():
    X, y = _rough(1500, 0)
    none = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    gauss = kp.NystromRegressor(kernel="gaussian", search="none", random_state=0).fit(X, y)
    assert isinstance(none.kernel_, kp.Gaussian) and none.kernel_.metric is None
    np.testing.assert_array_equal(none.predict(X), gauss.predict(X))
    assert none.n_centers_ == default_n_centers(len(none.train_indices_))
    assert not hasattr(none, "search_results_")


@pytest.mark.parametrize("bad", ["some", "", None, 1])
def test_search_refuses_other_values(bad):
    with pytest.raises(ValueError, match="search"):
        kp.NystromRegressor(search=bad).fit(np.ones((20, 2)), np.arange(20.0))


def test_the_family_screen_takes_matern_on_a_rough_target_and_records_it():
    X, y = _rough(3000, 0)
    Xt, yt = _rough(2000, 1)
    none = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    auto = kp.NystromRegressor(random_state=0).fit(X, y)
    families = [r for r in auto.search_results_ if r["step"] == "family"]
    assert [r["kernel"] for r in families] == ["gaussian", "matern25"]
    chosen = [r for r in families if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["kernel"] == "matern25"
    assert isinstance(auto.kernel_, kp.Matern) and auto.kernel_.nu == 2.5
    # the screen's choice holds on rows it never saw
    assert _rmse(auto, Xt, yt) < 0.9 * _rmse(none, Xt, yt)


def test_the_gaussian_is_kept_unless_another_family_is_clearly_better(monkeypatch):
    """With the acceptance rule made impossible to meet, the Gaussian stays, whatever the
    screens' scores."""
    X, y = _rough(1500, 0)
    monkeypatch.setattr(choice, "clearly_lower", lambda *a: False)
    est = kp.NystromRegressor(random_state=0).fit(X, y)
    assert isinstance(est.kernel_, kp.Gaussian)
    families = [r for r in est.search_results_ if r["step"] == "family"]
    assert families[0]["chosen"] and not families[1]["chosen"]


def test_metric_rounds_find_the_direction_and_round_zero_is_the_plain_model():
    X, y = _one_direction(2500, 0)
    Xt, yt = _one_direction(2000, 1)
    none = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    auto = kp.NystromRegressor(random_state=0).fit(X, y)
    rounds = [r for r in auto.search_results_ if r["step"] == "metric"]
    assert rounds[0]["round"] == 0 and len(rounds) >= 2
    chosen = [r for r in rounds if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["round"] >= 1
    # the chosen round's validation error is the lowest of those taken, and the metric
    # puts the three features y depends on first
    assert chosen[0]["val_error"] <= rounds[0]["val_error"]
    assert set(np.argsort(-auto.feature_relevances_)[:3]) == {0, 1, 2}
    assert _rmse(auto, Xt, yt) < 0.7 * _rmse(none, Xt, yt)


def test_metric_rounds_stop_at_the_row_limit(monkeypatch):
    X, y = _one_direction(1200, 0)
    monkeypatch.setattr(choice, "METRIC_MAX_ROWS", 500)
    est = kp.NystromRegressor(random_state=0).fit(X, y)
    assert not [r for r in est.search_results_ if r["step"] == "metric"]
    assert not hasattr(est, "agop_info_")
    # "full" runs them at every size
    full = kp.NystromRegressor(search="full", random_state=0).fit(X, y)
    assert [r for r in full.search_results_ if r["step"] == "metric"]


def _wavy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A target with more detail than sqrt(n) log(n) centers resolve."""
    r = np.random.default_rng(seed)
    X = r.uniform(-1, 1, size=(n, 2))
    return X, np.sin(25 * X[:, 0]) * np.cos(20 * X[:, 1]) + 0.02 * r.normal(size=n)


@pytest.fixture
def wide_share(monkeypatch):
    """m may grow to half the training rows (small data that grows like large data)."""
    monkeypatch.setattr(growth, "MAX_CENTER_SHARE", 0.5)


def test_m_stays_where_it_is_a_large_share_of_the_rows():
    X, y = _wavy(3000, 0)
    est = kp.NystromRegressor(kernel="gaussian", solver="direct", random_state=0).fit(X, y)
    steps = [r for r in est.search_results_ if r["step"] == "centers"]
    assert len(steps) == 1 and steps[0]["chosen"]
    assert 2 * steps[0]["n_centers"] > growth.MAX_CENTER_SHARE * len(est.train_indices_)


def test_m_doubles_while_the_validation_error_pays(wide_share):
    X, y = _wavy(3000, 0)
    est = kp.NystromRegressor(kernel="gaussian", solver="direct", random_state=0).fit(X, y)
    steps = [r for r in est.search_results_ if r["step"] == "centers"]
    m0 = default_n_centers(len(est.train_indices_))
    assert steps[0]["n_centers"] == m0
    assert [r["n_centers"] for r in steps] == [m0 * 2**i for i in range(len(steps))]
    kept = [r for r in steps if r["chosen"]]
    assert len(kept) == 1 and kept[0]["n_centers"] > m0
    best = kept[0]
    # every doubling kept paid by more than GROWTH_GAIN, and the one after it did not
    for prev, nxt in zip(steps, steps[1:], strict=False):
        if nxt["n_centers"] <= best["n_centers"]:
            assert nxt["val_error"] < (1 - growth.GROWTH_GAIN) * prev["val_error"]
        else:
            assert nxt["val_error"] >= (1 - growth.GROWTH_GAIN) * best["val_error"]
    # the refit on every row keeps the chosen centers and draws the rest of its m
    growth_factor = best["n_centers"] / m0
    assert est.n_centers_ == round(default_n_centers(len(X)) * growth_factor)
    assert est.centers_.shape[0] == est.n_centers_
    # the same fit without the search: the default m and a worse model
    none = kp.NystromRegressor(
        kernel="gaussian", solver="direct", search="none", random_state=0
    ).fit(X, y)
    Xt, yt = _wavy(2000, 1)
    assert _rmse(est, Xt, yt) < _rmse(none, Xt, yt)


def test_m_does_not_grow_past_the_memory_budget(wide_share):
    X, y = _wavy(3000, 0)
    free = kp.NystromRegressor(kernel="gaussian", solver="direct", random_state=0).fit(X, y)
    grown = max(r["n_centers"] for r in free.search_results_ if r["step"] == "centers")
    # a budget that holds the default m's fit (its refit on every row has the most
    # centers) but not a doubled one: between what the library asks for each
    m0 = default_n_centers(len(free.train_indices_))
    assert grown > m0

    def need(m: int) -> int:
        with pytest.raises(BudgetError) as info:
            kp.NystromRegressor(
                kernel="gaussian", solver="direct", search="none", n_centers=m, memory_budget=2**20
            ).fit(X, y)
        return info.value.need

    small, big = need(default_n_centers(len(X))), need(2 * default_n_centers(len(X)))
    assert small < big
    est = kp.NystromRegressor(
        kernel="gaussian", solver="direct", random_state=0, memory_budget=(small + big) // 2
    ).fit(X, y)
    steps = [r for r in est.search_results_ if r["step"] == "centers"]
    assert max(r["n_centers"] for r in steps) < grown


def test_given_centers_or_m_do_not_grow(wide_share):
    X, y = _wavy(1500, 0)
    est = kp.NystromRegressor(n_centers=150, random_state=0).fit(X, y)
    assert not [r for r in est.search_results_ if r["step"] == "centers"]
    assert est.n_centers_ == 150


def test_the_classifier_and_torch_inputs_search_too():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(0)
    X = r.normal(size=(1500, 4))
    y = (np.sin(2 * X[:, 0]) + X[:, 1] ** 2 > 0.8).astype(int)
    clf = kp.NystromClassifier(random_state=0).fit(X, y)
    steps = {row["step"] for row in clf.search_results_}
    assert {"family", "centers"} <= steps
    reg = kp.NystromRegressor(random_state=0).fit(torch.as_tensor(X), torch.as_tensor(X[:, 0]))
    assert reg.search_results_ and reg.n_centers_ >= default_n_centers(1200)


def test_kernel_classes_choose_their_width_like_the_default():
    """Laplacian() / Matern() / Gaussian() without a width on raw features far from unit
    scale: the width is chosen by the fit, so the model is far better than a constant."""
    r = np.random.default_rng(0)
    X = r.uniform(0, 1, size=(1500, 3)) * np.array([1000.0, 20.0, 0.01])
    y = np.sin(X[:, 0] / 200) + X[:, 2] * 50 + 0.05 * r.normal(size=1500)
    Xt, yt = X[1000:], y[1000:]
    for K in (kp.Gaussian, kp.Laplacian, kp.Matern):
        est = kp.NystromRegressor(kernel=K(), search="none", random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est.fit(X[:1000], y[:1000])
        assert _rmse(est, Xt, yt) < 0.5 * np.std(yt), K


@pytest.mark.parametrize("sigma,shape", [(1e-4, "identity"), (1e6, "constant")])
def test_a_width_far_from_the_data_warns_naming_sigma(sigma, shape):
    r = np.random.default_rng(0)
    X = r.normal(size=(400, 3)) * 10
    y = X[:, 0] + 0.1 * r.normal(size=400)
    with pytest.warns(UserWarning, match=f"sigma={sigma!r}.*nearly (the )?{shape}"):
        kp.NystromRegressor(kernel=kp.Laplacian(sigma), random_state=0).fit(X, y)


def test_a_width_near_the_data_does_not_warn():
    r = np.random.default_rng(0)
    X = r.normal(size=(400, 3)) * 10
    y = X[:, 0] + 0.1 * r.normal(size=400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kp.NystromRegressor(kernel=kp.Laplacian(20.0), random_state=0).fit(X, y)


def test_a_model_no_better_than_the_mean_warns():
    r = np.random.default_rng(0)
    X = r.normal(size=(600, 3))
    y = r.normal(size=600)  # y does not depend on X
    with pytest.warns(UserWarning, match="no better than the mean of y"):
        kp.NystromRegressor(search="none", random_state=0).fit(X, y)


def test_a_classifier_no_better_than_the_majority_warns():
    r = np.random.default_rng(0)
    X = r.normal(size=(600, 3))
    y = (r.uniform(size=600) < 0.2).astype(int)  # 80% one class, independent of X
    with pytest.warns(UserWarning, match="most frequent class"):
        kp.NystromClassifier(search="none", random_state=0).fit(X, y)


def test_a_fitted_model_does_not_warn():
    X, y = _rough(800, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kp.NystromRegressor(random_state=0).fit(X, y)
