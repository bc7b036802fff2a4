"""The defaults: inputs scaled by folding the feature scales into the widths, the
width chosen by the screen, ``refit="auto"``; each against an independent computation."""

from __future__ import annotations

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.kernels import median_distance
from kernelpath.scaling import feature_scales


def _data(n=1500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y


def test_the_scale_rule_on_a_constant_a_cauchy_and_a_rare_binary_column():
    rng = np.random.default_rng(0)
    n = 20000
    normal = 3.0 * rng.standard_normal(n)
    const = np.full(n, 7.0)
    cauchy = rng.standard_cauchy(n)
    rare = (rng.random(n) < 0.001).astype(float)  # about 20 ones: IQR 0
    X = np.column_stack([normal, const, cauchy, rare])
    s = feature_scales(X, rng)
    assert np.all(np.isfinite(s)) and np.all(s > 0)
    assert s[0] == pytest.approx(normal.std(), rel=1e-12) and s[0] == pytest.approx(3, rel=0.03)
    assert s[1] == 1.0  # constant: adds nothing to any distance
    rounded = np.full(n, 0.998) + rng.choice([0.0, 2e-16, -2e-16], n)  # naval's columns
    assert feature_scales(rounded[:, None], rng)[0] == 1.0
    assert s[2] == pytest.approx(cauchy.std(), rel=1e-12)  # its largest values decide
    # two values: at least half their gap, not sqrt(p (1 - p)) = 0.03 (a rare one magnified)
    assert rare.mean() < 0.002 and s[3] == 0.5
    # above SCALE_ROWS rows: a random subsample, within its sampling error
    big = np.tile(X, (6, 1))
    sub = feature_scales(big, np.random.default_rng(1))
    np.testing.assert_allclose(sub[[0, 3]], s[[0, 3]], rtol=0.1)


def test_an_indicator_weighs_half_its_gap_whatever_its_coding():
    rng = np.random.default_rng(3)
    n = 5000
    for p in (0.001, 0.1, 0.3, 0.5, 0.85):
        ind = (rng.random(n) < p).astype(float)
        q = ind.mean()
        for a, b in ((0.0, 1.0), (-1.0, 1.0), (3.0, 7.5)):
            col = a + (b - a) * ind
            got = feature_scales(col[:, None], rng)[0]
            # sqrt(q (1 - q)) (b - a) is at most (b - a) / 2: the floor decides every p
            assert got == pytest.approx((b - a) / 2, rel=1e-12)
            assert np.sqrt(q * (1 - q)) * (b - a) <= got * (1 + 1e-12)
        # standardized, an indicator is two values 1 / sd apart: scaled, the same gap of 2
        z = (ind - q) / ind.std()
        assert (z.max() - z.min()) / feature_scales(z[:, None], rng)[0] == pytest.approx(2.0)
    # three values are not an indicator: the standard deviation
    three = rng.choice([0.0, 1.0, 2.0], n, p=[0.98, 0.01, 0.01])
    assert feature_scales(three[:, None], rng)[0] == pytest.approx(three.std(), rel=1e-12)


def test_a_fit_with_such_columns_is_finite():
    rng = np.random.default_rng(1)
    n = 3000
    c = rng.standard_cauchy(n)
    X = np.column_stack([c, np.full(n, 3.0), (rng.random(n) < 0.001) * 1.0, rng.random(n)])
    y = np.sin(6 * X[:, 3]) + 0.05 * rng.standard_normal(n)
    est = kp.NystromRegressor(random_state=0).fit(X[:2000], y[:2000])
    pred = est.predict(X[2000:])
    assert np.all(np.isfinite(pred)) and np.all(np.isfinite(est.coef_))
    rmse = np.sqrt(np.mean((pred - y[2000:]) ** 2))
    assert rmse < 0.15, rmse  # the target spreads 0.7, the noise 0.05: the column is learned


def test_folding_the_scales_is_the_fit_on_scaled_inputs():
    X, y = _data()
    X = X * np.array([1e-3, 1.0, 50.0, 1e4])
    s = feature_scales(X, np.random.default_rng(0))
    kw = dict(n_centers=100, solver="direct", random_state=0)
    a = kp.NystromRegressor(kp.Gaussian(1.5), scale=True, **kw).fit(X, y)
    b = kp.NystromRegressor(kp.Gaussian(1.5), scale=False, **kw).fit(X / s, y)
    np.testing.assert_allclose(a.kernel_.sigma, 1.5 * s, rtol=1e-14)
    np.testing.assert_allclose(a.predict(X), b.predict(X / s), rtol=0, atol=1e-8)


def test_raw_and_scaled_inputs_give_the_same_default_fit():
    # X / s has scales of 1 (up to rounding): the default fit on raw X is the default fit
    # on X / s. The screen's scores agree to rounding where K_mm is well conditioned (the
    # narrow widths); at the wide ones the rank the factor keeps depends on the rounding, so
    # the vertex of the parabola, and the model, agree to a few percent, not to rounding.
    X, y = _data()
    X = X * np.array([1e-3, 1.0, 50.0, 1e4]) + np.array([0.0, 5.0, -3.0, 1e5])
    s = feature_scales(X, np.random.default_rng(0))
    a = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    b = kp.NystromRegressor(search="none", random_state=0).fit(X / s, y)
    wa, wb = a.path_.info["width_search"][0], b.path_.info["width_search"][0]
    assert wa["factors"][:3] == wb["factors"][:3] == [0.0625, 0.25, 0.5]
    np.testing.assert_allclose(wa["val_error"][:3], wb["val_error"][:3], rtol=1e-6)
    np.testing.assert_allclose(a.kernel_.sigma, b.kernel_.sigma * s, rtol=0.05)
    # at one width the two are one model (test_folding_the_scales_is_the_fit_on_scaled_inputs)


@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.RandomFeaturesRegressor(random_state=0),
        lambda: kp.RandomFeaturesRegressor(kp.Laplacian(2.0), n_features=300, random_state=0),
        lambda: kp.SGMRegressor(features="random", n_features=200, random_state=0),
        lambda: kp.EigenProRegressor(n_features=300, n_epochs=3, random_state=0),
    ],
)
def test_random_fourier_maps_are_drawn_for_the_standardized_inputs(make):
    # the map's phases are drawn relative to the training columns' means, so the fit on raw
    # X is the fit on standardized X up to rounding (a numeric width is in units of X
    # with scale="auto", so the Laplacian case shifts X without scaling it)
    X, y = _data(n=800)
    scaled = isinstance(make().kernel, str)
    s = X.std(axis=0) * [1e-3, 1.0, 50.0, 1e4] if scaled else np.ones(4)
    shift = np.array([0.0, 5.0, -3.0, 1e5]) if scaled else np.array([3.0, -7.0, 0.5, 20.0])
    raw = X * (s / X.std(axis=0) if scaled else 1.0) + shift
    std = (raw - raw.mean(axis=0)) / s if scaled else raw - raw.mean(axis=0)
    a, b = make().fit(raw, y), make().fit(std, y)
    np.testing.assert_allclose(a.predict(raw), b.predict(std), rtol=0, atol=1e-7)
    # scale=False keeps the map of the inputs as given (the fit of earlier versions)
    off = make().set_params(scale=False).fit(raw, y)
    assert off.features_.center is None


def test_a_numeric_width_is_in_the_units_of_x_unless_scale_is_true():
    X, y = _data(n=300)
    est = kp.NystromRegressor(kp.Gaussian(2.0), n_centers=30, random_state=0).fit(X * 10, y)
    assert est.kernel_ == kp.Gaussian(2.0)  # scale="auto": given widths are not scaled
    off = kp.NystromRegressor(n_centers=30, scale=False, random_state=0).fit(X * 10, y)
    assert not off.kernel_.per_feature
    lin = kp.NystromRegressor(kp.Linear(), n_centers=30, random_state=0).fit(X, y)
    assert lin.kernel_ == kp.Linear()
    with pytest.raises(ValueError, match="scale=True"):
        kp.NystromRegressor(kp.Linear(), scale=True).fit(X, y)
    with pytest.raises(ValueError, match="scale must be"):
        kp.NystromRegressor(scale="standard").fit(X, y)
    with pytest.raises(TypeError, match="scale must be"):
        kp.NystromRegressor(scale=1).fit(X, y)
    with pytest.raises(ValueError, match="refit must be"):
        kp.NystromRegressor(refit="always").fit(X, y)


def test_the_default_fit_is_the_fit_at_its_width_plus_the_search():
    X, y = _data()
    for Est in (kp.NystromRegressor, kp.RandomFeaturesRegressor, kp.NYTRORegressor):
        plain = {"search": "none"} if "search" in Est().get_params() else {}
        a = Est(random_state=0, **plain).fit(X, y)
        b = Est(kernel=a.kernel_, random_state=0, **plain).fit(X, y)
        # equal up to the summation order of the dense factorizations, whose BLAS threads
        # follow the cores other processes leave free when each fit starts: the
        # random-features fit differed by 2e-10 between a loaded and a quiet start
        np.testing.assert_allclose(
            a.predict(X), b.predict(X), rtol=1e-9, atol=1e-12, err_msg=Est.__name__
        )
        info = a.path_.info["width_search"][0]
        assert info["sigma"] == pytest.approx(info["median"] * info["factor"])


def test_the_screen_finds_the_best_width_of_a_dense_grid():
    # the 1-D search against brute force: the direct λ path at 25 widths on the same split
    X, y = _data(n=2500, seed=3)
    kw = dict(solver="direct", n_centers=200, refit=False, random_state=0)
    est = kp.NystromRegressor(**kw).fit(X, y)
    info = est.path_.info["width_search"][0]
    assert info["shift"] == 1.0  # 2000 training rows: the screen fits on all of them
    med = median_distance(X / info["scales"], 0)
    errs = []
    for f in 2.0 ** np.linspace(-4, 3, 25):
        k = kp.Gaussian(med * f * info["scales"])
        errs.append(kp.NystromRegressor(k, **kw).fit(X, y).path_.best_val_error)
    assert est.path_.best_val_error <= 1.01 * min(errs)


def test_refit_auto_refits_closed_forms_only():
    X, y = _data(n=600)
    direct = kp.NystromRegressor(kp.Gaussian(1.0), n_centers=50, solver="direct", random_state=0)
    cg = kp.NystromRegressor(kp.Gaussian(1.0), n_centers=50, random_state=0)
    for est, refits in ((direct, True), (cg, False)):
        a = est.fit(X, y)
        b = kp.NystromRegressor(**dict(est.get_params(deep=False), refit=refits)).fit(X, y)
        np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_bad_input_and_small_data():
    X, y = _data(n=40)
    Xn = X.copy()
    Xn[:, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        kp.NystromRegressor(missing_values="error").fit(Xn, y)
    with pytest.warns(UserWarning, match="column '1' is missing in every row"):
        kp.NystromRegressor(random_state=0).fit(Xn, y)
    with pytest.raises(ValueError, match="n_samples=1"):
        kp.NystromRegressor().fit(X[:1], y[:1])
    # a width search by k-fold on fewer rows than folds
    with pytest.raises(ValueError, match="cv=5 is larger than the number of samples"):
        kp.NystromRegressor(cv=5).fit(X[:4], y[:4])
    # a handful of rows: the screen fits on what there is
    est = kp.NystromRegressor(random_state=0).fit(X[:6], y[:6])
    assert np.all(np.isfinite(est.predict(X)))
    # no validation split: a named kernel takes the median heuristic on the scaled inputs
    est = kp.NystromRegressor(validation_fraction=0, penalty=1e-3, random_state=0).fit(X, y)
    s = feature_scales(X, np.random.default_rng(0))
    ratio = est.kernel_.sigma / s
    assert np.allclose(ratio, ratio[0]) and "width_search" not in est.path_.info


def test_the_command_line_scales_by_default_and_can_turn_it_off(tmp_path):
    from kernelpath.cli.main import main

    X, y = _data(n=200)
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([X * 100, y]), delimiter=",", header="a,b,c,d,y", comments="")
    for flag, per_feature in (([], True), (["--scale", "off"], False)):
        out = tmp_path / f"m{len(flag)}.kp"
        argv = [
            "fit",
            str(path),
            "--target",
            "y",
            "-o",
            str(out),
            "--seed",
            "0",
            "--search",
            "none",
        ]
        argv += flag
        assert main(argv) == 0
        model = kp.load(out)
        assert bool(model.kernel_.per_feature) is per_feature


def test_the_vertex_of_the_screen_is_the_parabola_minimum_in_log_sigma():
    from kernelpath.fitting.widths import _vertex

    # y = (log f - log v)^2 + 1 sampled at factors of 2: the vertex is v, on the grid of
    # 2^(1/16) the nearest point of it
    fs = [0.25, 0.5, 1.0, 2.0]
    v = 2.0 ** (-8 / 16)  # on the grid
    scores = {f: ((np.log(f) - np.log(v)) ** 2 + 1.0, 0.0) for f in fs}
    assert _vertex(scores, 0.5) == pytest.approx(v, rel=1e-12)
    assert _vertex(scores, 1.0) == pytest.approx(v, rel=1e-12)  # from either neighbour
    off = {f: ((np.log(f) - np.log(0.7)) ** 2 + 1.0, 0.0) for f in fs}  # 0.7 = 2^(-8.23/16)
    assert _vertex(off, 0.5) == pytest.approx(2.0 ** (-8 / 16), rel=1e-12)
    # an end, and a concave triple, keep the best scored factor
    assert _vertex(scores, 0.25) == 0.25
    concave = {0.5: (1.0, 0.0), 1.0: (0.9, 0.0), 2.0: (2.0, 0.0), 4.0: (1.0, 0.0)}
    assert _vertex(concave, 2.0) == 2.0


def test_the_first_pass_over_factors_of_4_finds_the_vertex_of_the_whole_grid(monkeypatch):
    import kernelpath.fitting.widths as W

    X, y = _data()
    fits = {}
    for stride in (1, 2):  # every factor of 2 (8 fits), or factors of 4 and then the best's
        monkeypatch.setattr(W, "COARSE_STRIDE", stride)
        fits[stride] = kp.NystromRegressor(random_state=0).fit(X, y)
    whole, quick = (fits[k].path_.info["width_search"][0] for k in (1, 2))
    assert whole["factors"] == list(W.COARSE_FACTORS)
    assert len(quick["factors"]) == 6 and set(quick["factors"]) < set(whole["factors"])
    curve = dict(zip(whole["factors"], whole["val_error"], strict=True))
    best = min(curve, key=curve.__getitem__)
    assert {best / 2, best, best * 2} <= set(quick["factors"])  # the vertex's three
    assert quick["factor"] == whole["factor"]
    np.testing.assert_array_equal(fits[1].predict(X), fits[2].predict(X))


def test_the_width_found_on_the_subsample_is_shifted_only_for_nystrom_krls():
    # the best width on n_s rows is moved by (n_s / n)^WIDTH_SHIFT for Nyström KRLS (whose
    # m grows with n); random features (a fixed D) and NYTRO (regularized by its
    # iterations) keep the subsample's best
    from kernelpath.fitting.widths import WIDTH_SHIFT

    X, y = _data(n=4600)
    ests = {
        "nystrom": kp.NystromRegressor(n_centers=100, solver="direct", random_state=0),
        "rf": kp.RandomFeaturesRegressor(n_features=200, random_state=0),
        "nytro": kp.NYTRORegressor(n_centers=100, random_state=0),
    }
    for name, est in ests.items():
        info = est.fit(X, y).path_.info["width_search"][0]
        n_tr = len(est.train_indices_)
        assert info["n_rows"] == 2000 < n_tr
        moved = (2000 / n_tr) ** WIDTH_SHIFT if name == "nystrom" else 1.0
        assert info["shift"] == pytest.approx(moved, rel=1e-12)
        assert info["factor"] == pytest.approx(info["screen_best"] * moved, rel=1e-12)


def test_a_narrower_width_within_one_standard_error_of_the_best_ties_with_it():
    from scipy.stats import ttest_rel

    from kernelpath.fitting.widths import TIE_SE, narrowest_tie

    rng = np.random.default_rng(0)
    n = 400
    base = rng.exponential(size=n)
    noise = rng.standard_normal(n)
    # paired differences with a chosen t statistic: mean / (sd / sqrt(n)) = t
    d = noise - noise.mean()
    d = d / (d.std(ddof=1) / np.sqrt(n))

    def at(t):
        return base + (d + t) * 0.01

    losses = {0.25: at(3.0), 0.5: at(0.8), 1.0: base, 2.0: at(0.1), 4.0: at(5.0)}
    t = {f: ttest_rel(v, base).statistic if f != 1.0 else 0.0 for f, v in losses.items()}
    tied = [f for f in losses if t[f] <= TIE_SE]
    assert tied == [0.5, 1.0, 2.0]  # scipy's paired t statistic, independently
    assert narrowest_tie(losses, 1.0, None) == 0.5  # the narrowest of them
    assert narrowest_tie({1.0: base, 0.25: at(3.0)}, 1.0, None) == 1.0  # none: the best
    # equal weights are no weights; a row weighted 3 counts with its Kish effective size
    assert narrowest_tie(losses, 1.0, np.full(n, 3.0)) == 0.5
    w = rng.uniform(0.5, 2.0, n)
    dw = losses[0.5] - base
    mean = np.average(dw, weights=w)
    n_eff = w.sum() ** 2 / (w**2).sum()
    se = np.sqrt(np.average((dw - mean) ** 2, weights=w) / (n_eff - 1))
    assert (narrowest_tie(losses, 1.0, w) == 0.5) == (mean <= TIE_SE * se)


def test_the_tie_rule_pairs_the_screens_own_validation_losses(monkeypatch):
    import kernelpath.fitting.widths as W

    X, y = _data()
    seen = []
    row_losses = W.row_losses

    def recording(family, problem, cand, rows):
        out = row_losses(family, problem, cand, rows)
        seen.append(out.mean())
        return out

    monkeypatch.setattr(W, "row_losses", recording)
    plain = kp.NystromRegressor(search="none", random_state=0)
    info = plain.fit(X, y).path_.info["width_search"][0]
    # the rows' squared losses of the model made of each screening fit average to the loss
    # its solver scored the hold-out with (to rounding: the wide widths' coefficients cancel)
    np.testing.assert_allclose(np.sort(seen), np.sort(info["val_loss"]), rtol=1e-6)
    # a signal the widths tell apart: the vertex, no tie
    curve = dict(zip(info["factors"], info["val_loss"], strict=True))
    assert info["tie"] == min(curve, key=curve.__getitem__)
    # noise alone: every width predicts about the mean, all tie, the narrowest is taken
    noise = np.random.default_rng(1).standard_normal(len(y))
    info = plain.fit(X, noise).path_.info["width_search"][0]
    assert info["tie"] == min(info["factors"]) == info["screen_best"]
    assert info["factor"] == pytest.approx(info["tie"] * info["shift"], rel=1e-12)


@pytest.mark.parametrize("cls", [kp.RandomFeaturesRegressor, kp.NYTRORegressor])
def test_the_families_whose_width_is_not_shifted_keep_the_best_screened_width(cls):
    # noise alone ties every width; where the width is not moved with n (a fixed D, NYTRO's
    # iterations) the narrowest tie is not taken: the best of the screen, then its vertex
    X, _ = _data()
    noise = np.random.default_rng(1).standard_normal(len(X))
    info = cls(random_state=0).fit(X, noise).path_.info["width_search"][0]
    curve = dict(zip(info["factors"], info["val_error"], strict=True))
    top = min(curve, key=curve.__getitem__)
    assert info["tie"] == top
    assert info["shift"] == 1.0
    assert top > min(info["factors"])  # the rule would have moved it


def test_the_refit_keeps_the_default_m_centers_and_draws_a_given_m_again():
    X, y = _data(n=600)
    kw = dict(n_centers=40, solver="direct", random_state=0)
    a = kp.NystromRegressor(kp.Gaussian(1.5), refit=True, **kw).fit(X, y)
    b = kp.NystromRegressor(kp.Gaussian(1.5), refit=False, **kw).fit(X, y)
    # a given m: the refit draws its m centers again, from all the rows; the indices point
    # into all the rows, the search's into its training part
    np.testing.assert_array_equal(a.centers_, X[a.center_indices_])
    np.testing.assert_array_equal(b.centers_, X[b.train_indices_][b.center_indices_])
    assert len(a.centers_) == len(b.centers_) == 40
    assert np.isin(a.center_indices_, b.validation_indices_).any()  # not only the 80%
    assert a.penalty_ == b.penalty_

    # the closed form on all the rows at the chosen λ with those centers, independently:
    # (K_nm^T K_nm + n λ K_mm) α = K_nm^T (y - mean y)
    def k(A, C):
        d = ((A[:, None, :] - C[None]) ** 2).sum(-1)
        return np.exp(-d / (2 * 1.5**2))

    Knm, Kmm = k(X, a.centers_), k(a.centers_, a.centers_)
    alpha = np.linalg.lstsq(
        Knm.T @ Knm + len(X) * a.penalty_ * Kmm, Knm.T @ (y - y.mean()), rcond=None
    )[0]
    np.testing.assert_allclose(a.predict(X), Knm @ alpha + y.mean(), rtol=1e-6, atol=1e-6)
    assert not np.allclose(a.predict(X), b.predict(X))  # more rows: another model
    # the default m, which grows with n: the refit keeps the search's centers, draws the rest
    # uniformly from the rows that are not centers, to the m of a fit on all the rows
    from kernelpath.fitting.kernel_models import default_n_centers

    kw = dict(solver="direct", random_state=0)
    a = kp.NystromRegressor(kp.Gaussian(1.5), refit=True, **kw).fit(X, y)
    b = kp.NystromRegressor(kp.Gaussian(1.5), refit=False, **kw).fit(X, y)
    m = len(b.centers_)
    assert m == default_n_centers(len(b.train_indices_)) < len(a.centers_) == default_n_centers(600)
    np.testing.assert_array_equal(a.centers_[:m], b.centers_)
    assert len(np.unique(a.center_indices_)) == len(a.centers_)
