"""The papers' variants, selectable by name, against literal implementations of the papers'
lines on small data (independent NumPy loops, not the library's solvers)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import kernelpath as kp
from kernelpath.operators import KernelOperator
from kernelpath.selection import RelativeDropStopping, SlopeStopping
from kernelpath.solvers import IterativeOptions, exact_path, iterative_path
from kernelpath.solvers._common import Validation

SIGMA = 1.5


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (260, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(260)
    Xv = rng.uniform(-2, 2, (80, 3))
    yv = np.sin(Xv[:, 0]) + 0.5 * Xv[:, 1] ** 2
    C = X[rng.choice(260, 30, replace=False)]
    return X, y, Xv, yv, C


def gauss(A, B):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * SIGMA**2))


def literal_nytro(X, y, Xv, yv, C, gamma, T, divide_by_n=True):
    """NYTRO's lines: R = chol(K_mm + 1e-10 I), A = K_nm R^-1, beta_t = beta_{t-1} -
    (γ/n) A^T (A beta_{t-1} - y) (the reference code: no 1/n), validation MSE of every t."""
    n = len(X)
    Knm, Kvm = gauss(X, C), gauss(Xv, C)
    R = scipy.linalg.cholesky(gauss(C, C) + 1e-10 * np.eye(len(C)))  # upper: K_mm = R^T R
    A = scipy.linalg.solve_triangular(R, Knm.T, trans="T").T  # K_nm R^-1
    Av = scipy.linalg.solve_triangular(R, Kvm.T, trans="T").T
    beta = np.zeros(len(C))
    errs = []
    for _ in range(T):
        g = A.T @ (A @ beta - y)
        beta = beta - (gamma / n if divide_by_n else gamma) * g
        alpha = scipy.linalg.solve_triangular(R, beta)
        errs.append(np.mean((Kvm @ alpha - yv) ** 2))
    return np.array(errs), np.vstack([A, Av])


def nytro_path(problem, T, **kw):
    X, y, Xv, yv, C = problem
    k = kp.Gaussian(SIGMA)
    op = KernelOperator(X, C, k)
    val = Validation(KernelOperator(Xv, C, k), yv[:, None], "mse")
    kw.setdefault("n_iter_no_change", None)
    return iterative_path(
        op, y, 0.0, IterativeOptions(method="gd", max_iter=T, tol=0.0, **kw), validation=val
    )


def test_nytro_paper_step_is_one_over_kappa_squared(problem):
    X, y, Xv, yv, C = problem
    literal, _ = literal_nytro(X, y, Xv, yv, C, gamma=1.0, T=40)  # κ² = k(x, x) = 1
    path = nytro_path(problem, 40, step="paper")
    np.testing.assert_allclose(path.val_error[0], literal, rtol=1e-7)
    assert path.info["step"] == pytest.approx(1.0)


def test_nytro_reference_step_is_one_over_the_squared_norm(problem):
    X, y, Xv, yv, C = problem
    # the reference code's K_nm has every row it is given, the hold-out rows too
    _, A_all = literal_nytro(X, y, Xv, yv, C, gamma=1.0, T=1)
    gamma = 1.0 / np.linalg.norm(A_all, 2) ** 2
    literal, _ = literal_nytro(X, y, Xv, yv, C, gamma=gamma, T=40, divide_by_n=False)
    path = nytro_path(problem, 40, step="reference")
    np.testing.assert_allclose(path.val_error[0], literal, rtol=1e-5)
    # a number is γ of the paper's update
    lit2, _ = literal_nytro(X, y, Xv, yv, C, gamma=0.3, T=25)
    np.testing.assert_allclose(nytro_path(problem, 25, step=0.3).val_error[0], lit2, rtol=1e-7)


def code_rule_stop(rmse, thres, win=10):
    """The reference code's windowLinearFitting as its Table 2 runs used it: for t = win,
    win + 1, ..., fit b = [ones, (1..win)'] \\ err(t-win+1 : t)' and stop at the first t
    with b(2) >= -(thres / win)."""
    for t in range(win, len(rmse) + 1):
        X = np.column_stack([np.ones(win), np.arange(1.0, win + 1)])
        b = np.linalg.lstsq(X, rmse[t - win : t], rcond=None)[0]
        if b[1] >= -(thres / win):
            return t
    return len(rmse)


def first_stop(errors, rule, thres=0.0):
    """The literal stopping iteration (1-based) of a validation-error (MSE) sequence."""
    for t in range(1, len(errors) + 1):
        if rule == "reference" and t >= 10:
            rmse = np.sqrt(errors[t - 10 : t])
            if code_rule_stop(np.append(rmse, np.inf), thres) == 10:  # the window ending at t
                return t
        if rule == "paper" and t >= 2 and np.sqrt(errors[t - 1]) > 0.95 * np.sqrt(errors[t - 2]):
            return t
    return len(errors)


@pytest.mark.parametrize(
    ("rule", "thres"), [("paper", None), ("reference", 0.0), ("reference", 2e-3)]
)
def test_nytro_stopping_rules_stop_where_the_papers_lines_do(problem, rule, thres):
    full = nytro_path(problem, 3000, step=3.0).val_error[0]
    t_stop = first_stop(full, rule, thres or 0.0)
    assert 2 <= t_stop < 3000
    path = nytro_path(
        problem, 3000, step=3.0, stopping=rule, n_iter_no_change=10, stopping_threshold=thres
    )
    assert path.shape[1] == t_stop
    np.testing.assert_allclose(path.val_error[0], full[:t_stop], rtol=1e-12)
    if thres:  # a threshold stops earlier than the default
        assert t_stop < first_stop(full, rule)


def test_stopping_rules_on_given_sequences():
    slope = SlopeStopping(1, window=3)
    for t, e in enumerate([5.0, 4.0, 3.0, 2.9, 2.95, 3.1], start=1):
        slope.update(t, np.array([e]))
        # stops at the first window of 3 whose fitted line does not slope down
        assert slope.active[0] == (t < 6)
    drop = RelativeDropStopping(1)
    for t, e in enumerate([1.0, 0.81, 0.75], start=1):  # RMSE 1, 0.9, 0.866
        drop.update(t, np.array([e]))
        assert drop.active[0] == (t < 3)  # 0.866 > 0.95 * 0.9
    # the code's rule with a threshold, on a slowly falling RMSE curve
    rmse = 0.6 + 0.3 * np.exp(-np.arange(1, 301) / 40.0)
    for thres in (0.0069, 0.000835):
        rule = SlopeStopping(1, window=10, threshold=thres)
        t_code = code_rule_stop(rmse, thres)
        assert 10 < t_code < 300
        for t, e in enumerate(rmse**2, start=1):
            rule.update(t, np.array([e]))
            if not rule.active[0]:
                break
        assert t == t_code


def test_nytro_estimator_takes_the_variants(problem):
    X, y, Xv, yv, C = problem
    kw = dict(centers=C, random_state=0, max_iter=200)
    est = kp.NYTRORegressor(kp.Gaussian(SIGMA), step="paper", stopping="paper", **kw).fit(X, y)
    ref = kp.NYTRORegressor(kp.Gaussian(SIGMA), step="reference", stopping="reference", **kw)
    ref.fit(X, y)
    auto = kp.NYTRORegressor(kp.Gaussian(SIGMA), **kw).fit(X, y)
    assert est.path_.info["step"] == pytest.approx(1.0)
    assert ref.path_.info["step"] > 1.0 and auto.path_.info["step"] > 1.0
    # the 5% rule stops long before the windowed rule
    assert est.path_.shape[1] < auto.path_.shape[1]
    for bad, err in [
        (dict(step="fast"), ValueError),
        (dict(step=-1.0), ValueError),
        (dict(stopping="never"), ValueError),
        (dict(stopping_threshold=1.5, stopping="paper"), ValueError),
        (dict(stopping_threshold="tight", stopping="reference"), TypeError),
        (dict(stopping_threshold=np.nan, stopping="reference"), ValueError),
        (dict(nu=0.0), ValueError),
        (dict(nu="one"), TypeError),
    ]:
        name = next(iter(bad))
        with pytest.raises(err, match=name):
            kp.NYTRORegressor(kp.Gaussian(SIGMA), **kw, **bad).fit(X, y)


def literal_nu_method(K, y, nu, T):
    """Engl, Hanke & Neubauer §6.3 on K alpha = y with K / ||K|| (μ_1 = 0)."""
    s = np.linalg.eigvalsh(K).max()
    A, b = K / s, y / s
    x_prev, x = np.zeros_like(y), np.zeros_like(y)
    for k in range(1, T + 1):
        if k == 1:
            mu, om = 0.0, (4 * nu + 2) / (4 * nu + 1)
        else:
            mu = ((k - 1) * (2 * k - 3) * (2 * k + 2 * nu - 1)) / (
                (k + 2 * nu - 1) * (2 * k + 4 * nu - 1) * (2 * k + 2 * nu - 3)
            )
            om = (4 * (2 * k + 2 * nu - 1) * (k + nu - 1)) / (
                (k + 2 * nu - 1) * (2 * k + 4 * nu - 1)
            )
        x, x_prev = x + mu * (x - x_prev) + om * (b - A @ x), x
    return x


@pytest.mark.parametrize("nu", [0.5, 1.0, 2.5])
def test_nu_method_order_reaches_the_estimator(problem, nu):
    X, y, *_ = problem
    T = 12
    est = kp.KRLSRegressor(
        kp.Gaussian(SIGMA), filter="nu", nu=nu, max_iter=T, validation_fraction=0
    ).fit(X, y)
    yc = y - y.mean()
    alpha = literal_nu_method(gauss(X, X), yc, nu, T)
    np.testing.assert_allclose(est.predict(X), gauss(X, X) @ alpha + y.mean(), rtol=1e-8)


def test_landweber_thesis_step_and_its_stability_check(problem):
    X, y, *_ = problem
    n, T = len(X), 30
    K = gauss(X, X)
    alpha = np.zeros(n)
    for _ in range(T):  # the thesis: alpha_t = alpha_{t-1} + (2/n)(y - K alpha_{t-1})
        alpha = alpha + (2.0 / n) * (y - K @ alpha)
    op = KernelOperator(X, X, kp.Gaussian(SIGMA))
    path = exact_path(op, y, "landweber", np.arange(1, T + 1), step=2.0)
    np.testing.assert_allclose(path.coef((T - 1,))[:, 0], alpha, rtol=1e-8, atol=1e-10)
    est = kp.KRLSRegressor(
        kp.Gaussian(SIGMA), filter="landweber", step="thesis", max_iter=T, validation_fraction=0
    ).fit(X, y)
    alpha_c = np.zeros(n)
    for _ in range(T):
        alpha_c = alpha_c + (2.0 / n) * (y - y.mean() - K @ alpha_c)
    np.testing.assert_allclose(est.predict(X), K @ alpha_c + y.mean(), rtol=1e-8)
    # η ||K|| >= 2 diverges: refused, naming the step
    s_max = np.linalg.eigvalsh(K).max()
    with pytest.raises(ValueError, match="step"):
        kp.KRLSRegressor(
            kp.Gaussian(SIGMA), filter="landweber", step=2.5 / s_max, validation_fraction=0
        ).fit(X, y)
    with pytest.raises(ValueError, match="step"):
        kp.KRLSRegressor(kp.Gaussian(SIGMA), filter="landweber", step="fast").fit(X, y)


def literal_sgm(Phi, y, eta, theta, b, T, seed):
    """Algorithm 1 with the square loss and eq. 6.4's average sum η_t w_t / sum η_t."""
    rng = np.random.default_rng(seed)
    w = np.zeros(Phi.shape[1])
    num, den = np.zeros_like(w), 0.0
    for t in range(1, T + 1):
        idx = rng.integers(0, len(Phi), size=b)
        step = eta * t ** (-theta)
        w = w - step * Phi[idx].T @ (Phi[idx] @ w - y[idx]) / b
        num, den = num + step * w, den + step
    return w, num / den


def test_sgm_step_weighted_average_is_eq_6_4_and_theta_is_a_path_axis():
    from kernelpath.solvers.sgm import SGMRun, sgm_path

    rng = np.random.default_rng(5)
    Phi = rng.standard_normal((90, 6)) / 3
    y = Phi @ rng.standard_normal(6) + 0.05 * rng.standard_normal(90)
    feats = lambda idx: Phi[idx]  # noqa: E731
    b, passes = 8, 3
    T = passes * -(-90 // b)

    def run(steps, theta, averaging):
        return SGMRun("square", steps, theta, b, passes, True, 0.0, averaging)

    for theta in (0.0, 0.5):
        path = sgm_path(
            feats, 90, 6, y, run(np.array([0.7]), theta, "step"), np.random.default_rng(11)
        )
        _, avg = literal_sgm(Phi, y, 0.7, theta, b, T, 11)
        np.testing.assert_allclose(path.coef((0, passes - 1))[:, 0], avg, rtol=1e-10)
    # the uniform mean differs once the steps decay
    uni = sgm_path(feats, 90, 6, y, run(np.array([0.7]), 0.5, "uniform"), np.random.default_rng(11))
    assert not np.allclose(uni.coef((0, passes - 1))[:, 0], avg, rtol=1e-3)
    # several θ: one axis, each slice the run of that θ alone (the same minibatches)
    steps = np.array([0.3, 0.7])
    both = sgm_path(
        feats, 90, 6, y, run(steps, np.array([0.0, 0.5]), "step"), np.random.default_rng(11)
    )
    assert both.param_names == ("decay", "step_size", "n_passes")
    assert both.shape == (2, 2, passes)
    for i, theta in enumerate((0.0, 0.5)):
        one = sgm_path(feats, 90, 6, y, run(steps, theta, "step"), np.random.default_rng(11))
        for j in range(2):
            np.testing.assert_allclose(both.coef((i, j, 1)), one.coef((j, 1)), rtol=1e-12)
        np.testing.assert_allclose(both.train_error[i], one.train_error, rtol=1e-12)


def test_sgm_estimator_chooses_theta_on_the_hold_out():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, (400, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(400)
    est = kp.SGMRegressor(
        kp.Gaussian(1.0), n_features=100, decay=[0.0, 0.25, 0.5], averaged=True,
        averaging="step", n_passes=4, random_state=0,
    ).fit(X, y)  # fmt: skip
    assert est.path_.param_names == ("decay", "step_size", "n_passes")
    i = est.path_.best_index
    assert est.decay_ == [0.0, 0.25, 0.5][i[0]]
    assert est.path_.val_error[i] == np.nanmin(est.path_.val_error)
    for bad, err in [(dict(averaging="mean"), ValueError), (dict(decay=[0.1, 2.0]), ValueError)]:
        with pytest.raises(err, match=next(iter(bad))):
            kp.SGMRegressor(kp.Gaussian(1.0), n_features=20, **bad).fit(X, y)


def test_semiparametric_protocol_is_test_then_update_sample_by_sample():
    from kernelpath.datasets import make_arm_dynamics
    from kernelpath.online import semiparametric_protocol

    Xa, ta, reg, _ = make_arm_dynamics(600, "circle-a", random_state=0)
    Xb, tb, _, _ = make_arm_dynamics(400, "circle-b", random_state=1)
    out = semiparametric_protocol(
        reg, Xa, ta, Xb, tb, n_parts=4, part_size=100, window=50, n_features=80, random_state=3
    )
    # the same by hand, with the same random streams
    seeds = np.random.default_rng(3).integers(2**63, size=2)
    sp = kp.SemiparametricRegressor(reg, n_features=80, random_state=int(seeds[0])).fit(Xa, ta)
    mu, sd = Xa.mean(0), Xa.std(0)
    rff = kp.RandomFourierFeatures(
        kp.Gaussian(np.sqrt(6)), n_features=80, random_state=int(seeds[1])
    )
    nonpar = kp.RecursiveRLS(1e-3, features=rff).fit((Xa - mu) / sd, ta)
    e = {"P": [], "NP": [], "SP": []}
    for i in range(400):
        x, y = Xb[i : i + 1], tb[i : i + 1]
        e["P"].append(np.mean((sp.predict_parametric(x) - y) ** 2))
        e["SP"].append(np.mean((sp.predict(x) - y) ** 2))
        e["NP"].append(np.mean((nonpar.predict((x - mu) / sd) - y) ** 2))
        sp.partial_fit(x, y)
        nonpar.partial_fit((x - mu) / sd, y)
    for name in ("P", "NP", "SP"):
        np.testing.assert_allclose(out["squared_errors"][name], e[name], rtol=1e-10)
        np.testing.assert_allclose(
            out["part_rmse"][name], np.sqrt(np.reshape(e[name], (4, 100)).mean(1)), rtol=1e-10
        )
        w = out["windowed_rmse"][name]
        assert w.shape == (351,)
        assert w[7] == pytest.approx(np.sqrt(np.mean(e[name][7:57])), rel=1e-10)
    # the thesis's shape: SP better than NP early on, better than P at the end
    assert out["part_rmse"]["SP"][0] < out["part_rmse"]["NP"][0]
    assert out["part_rmse"]["SP"][-1] < out["part_rmse"]["P"][-1]
    with pytest.raises(ValueError, match="X_stream"):
        semiparametric_protocol(reg, Xa, ta, Xb, tb, n_parts=5, part_size=100)
    with pytest.raises(ValueError, match="window"):
        semiparametric_protocol(reg, Xa, ta, Xb, tb, n_parts=1, part_size=10, window=20)


# ------------------------------------------------------------------ SQUEAK (Algorithm 1)
def literal_squeak(X, lam, q_bar, eps, seed):
    """SQUEAK's Algorithm 1 line by line, one point per step: the dictionary as explicit
    copies (each copy of point i a column e_i / sqrt(q̄ p~_i) of S), Eq. 5 with the shift γ on
    the kernel matrix of the points read so far, line 4's p~ = max{min{τ~, p~}, p~/2}, and
    one binomial draw per dictionary point in dictionary order."""
    rng = np.random.default_rng(seed)
    n = len(X)
    gamma = lam * n
    d_idx, d_p, d_q = [], [], []
    floored = 0
    for t in range(n):
        d_idx, d_p, d_q = d_idx + [t], d_p + [1.0], d_q + [q_bar]  # EXPAND
        Kt = gauss(X[: t + 1], X[: t + 1])
        cols = []
        for i, p, q in zip(d_idx, d_p, d_q, strict=True):
            for _ in range(q):
                e = np.zeros(t + 1)
                e[i] = 1.0 / np.sqrt(q_bar * p)
                cols.append(e)
        S = np.array(cols).T
        inner = np.linalg.inv(S.T @ Kt @ S + gamma * np.eye(S.shape[1]))
        new_idx, new_p, new_q = [], [], []
        for i, p, q in zip(d_idx, d_p, d_q, strict=True):
            k_i = Kt[:, i]
            tau = (1 - eps) / gamma * (Kt[i, i] - k_i @ S @ inner @ S.T @ k_i)
            p_new = max(min(tau, p), p / 2)
            floored += p / 2 > min(tau, p)
            q_new = rng.binomial(q, min(p_new / p, 1.0))  # SHRINK
            if q_new > 0:
                new_idx.append(i)
                new_p.append(p_new)
                new_q.append(q_new)
        d_idx, d_p, d_q = new_idx, new_p, new_q
    return np.array(d_idx), np.array(d_p), np.array(d_q), floored


def test_squeak_paper_variant_is_algorithm_1():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, (70, 2))
    lam, q_bar, eps = 1e-3, 3, 0.5
    idx, p, q, floored = literal_squeak(X, lam, q_bar, eps, seed=11)
    assert floored > 0  # line 4's floor binds on this data
    d = kp.leverage.squeak(
        X, kp.Gaussian(SIGMA), lam, q_bar=q_bar, eps=eps, random_state=11, variant="paper"
    )
    assert d.variant == "paper" and d.shift == pytest.approx(lam * len(X))
    np.testing.assert_array_equal(d.indices, idx)
    np.testing.assert_array_equal(d.multiplicities, q)
    np.testing.assert_allclose(d.probabilities, p, rtol=1e-9)
    # the default variant (shift (1 + ε)γ, no floor) keeps a different dictionary
    auto = kp.leverage.squeak(
        X, kp.Gaussian(SIGMA), lam, q_bar=q_bar, eps=eps, random_state=11, batch_size=1
    )
    assert not (len(auto) == len(d) and np.allclose(auto.probabilities, d.probabilities)), (
        "the two variants should differ on this data"
    )


def test_regularized_squeak_is_its_eq3_estimator():
    """SqueakCenters(regularized=True) fits kernel ridge regression with
    K~ = K S (S^T K S + γ I)^-1 S^T K (SQUEAK Eq. 3), the ridge μ = penalty · n."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, (200, 2))
    y = np.sin(2 * X[:, 0]) * X[:, 1] + 0.1 * rng.standard_normal(200)
    lam_dict, mu = 1e-3, 1e-4
    centers = kp.SqueakCenters(lam_dict, q_bar=4, regularized=True)
    est = kp.NystromRegressor(
        kp.Gaussian(SIGMA),
        penalty=mu,
        centers=centers,
        solver="direct",
        validation_fraction=0.0,
        random_state=3,
    ).fit(X, y)
    # the dictionary the estimator drew, rebuilt with the same generator stream
    sel = est._center_info
    assert sel.info["gamma"] == pytest.approx(lam_dict * len(X))
    n = len(X)
    S = np.zeros((n, len(sel.indices)))
    S[sel.indices, np.arange(len(sel.indices))] = sel.weights
    K = gauss(X, X)
    Kt = K @ S @ np.linalg.solve(S.T @ K @ S + lam_dict * n * np.eye(S.shape[1]), S.T @ K)
    yc = y - y.mean()
    c = np.linalg.solve(Kt + mu * n * np.eye(n), yc)
    np.testing.assert_allclose(est.predict(X), Kt @ c + y.mean(), atol=1e-7)
    # and it is not plain Nyström on the same points
    plain = kp.NystromRegressor(
        kp.Gaussian(SIGMA),
        penalty=mu,
        centers=sel.points,
        solver="direct",
        validation_fraction=0.0,
    ).fit(X, y)
    assert np.max(np.abs(plain.predict(X) - est.predict(X))) > 1e-3


def test_regularized_squeak_refuses_a_smaller_n_centers():
    X = np.random.default_rng(0).normal(size=(100, 2))
    y = X[:, 0]
    est = kp.NystromRegressor(
        centers=kp.SqueakCenters(1e-3, regularized=True), n_centers=5, random_state=0
    )
    with pytest.raises(ValueError, match="n_centers"):
        est.fit(X, y)
    with pytest.raises(ValueError, match="variant"):
        kp.SqueakCenters(variant="exact")
    with pytest.raises(TypeError, match="regularized"):
        kp.SqueakCenters(regularized="yes")


# ------------------------------------------------------------ EigenPro (seed paper's rules)
def _eigenpro_fit(seed, n, rule, n_epochs):
    """A q = 5 EigenPro fit on all of n points of a smooth 2-D problem (no hold-out)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.05 * rng.standard_normal(n)
    est = kp.EigenProRegressor(
        kp.Gaussian(SIGMA),
        n_epochs=n_epochs,
        n_components=5,
        rule=rule,
        validation_fraction=0.0,
        n_iter_no_change=None,
        random_state=0,
    ).fit(X, y)
    return X, y, est


def test_eigenpro_reference_rule_is_the_released_codes_step():
    """rule="reference": batch 256, τ = 1 for kernels (1/4 for random features), step
    η_SGD λ_1/λ_{q+1} with η_SGD = 1.5/λ_1 (λ of the covariance K/n), from an independent
    eigendecomposition (s = n: the subsample is the whole training set)."""
    X, y, est = _eigenpro_fit(4, 600, "reference", n_epochs=8)
    q = 5
    lam = np.sort(np.linalg.eigvalsh(gauss(X, X) / len(X)))[::-1]
    eta_sgd = 1.5 / lam[0]
    info = est.path_.info
    assert info["rule"] == "reference" and info["damping"] == 1.0
    assert info["batch_size"] == 256
    np.testing.assert_allclose(info["step_size"], eta_sgd * lam[0] / lam[q], rtol=1e-8)
    np.testing.assert_allclose(info["tail_eigenvalue"], lam[q], rtol=1e-8)
    assert est.path_.train_error[-1] < 0.1 * np.var(y)  # it converges at this q
    rf = kp.EigenProRegressor(
        kp.Gaussian(SIGMA),
        n_features=300,
        n_epochs=2,
        n_components=q,
        rule="reference",
        validation_fraction=0.0,
        random_state=0,
    ).fit(X, y)
    assert rf.path_.info["damping"] == 0.25
    # the default is still EigenPro 2's rule
    ep2 = kp.EigenProRegressor(kp.Gaussian(SIGMA), n_epochs=1, n_components=q, random_state=0)
    assert ep2.fit(X, y).path_.info["damping"] == 0.95
    with pytest.raises(ValueError, match="rule"):
        kp.EigenProRegressor(rule="seed").fit(X, y)
    with pytest.raises(ValueError, match="damping"):
        kp.EigenProRegressor(damping="paper").fit(X, y)


def test_eigenpro_paper_rule_is_the_printed_step():
    """rule="paper": Sec. 6's m = 256, M = 4800 (at most n) and τ = 1, and Sec. 4's
    η = √(m / λ_{k+1}(𝒦)) for the paper's 𝒦 = (2/n) Σ k ⊗ k, whose iteration's gradient is
    twice this solver's: 2 √(256 / (2 λ_{q+1}(K/n)))."""
    X, y, est = _eigenpro_fit(5, 700, "paper", n_epochs=3)
    q = 5
    lam_k = np.sort(np.linalg.eigvalsh(gauss(X, X) / len(X)))[::-1]  # s = min(4800, n) = n
    cov = 2 * lam_k  # the paper's 𝒦
    info = est.path_.info
    assert info["subsample_size"] == 700 and info["batch_size"] == 256
    assert info["damping"] == 1.0 and info["rule"] == "paper"
    np.testing.assert_allclose(info["step_size"], 2 * np.sqrt(256 / cov[q]), rtol=1e-8)


# ------------------------------------------------ incremental RLSC: thesis rule, rebalancing
def _imbalanced_stream(seed=0, n=240):
    rng = np.random.default_rng(seed)
    labels = rng.choice(3, size=n, p=[0.75, 0.2, 0.05])
    means = np.array([[0.0, 0.0, 0.0], [1.2, 0.0, 0.5], [0.0, 1.2, -0.5]])
    X = means[labels] + 0.9 * rng.standard_normal((n, 3))
    return np.hstack([X, np.ones((n, 1))]), labels


def test_thesis_selection_rule_against_brute_force():
    """selection="thesis": every 6th sample held out and classified by every (λ, α) from
    the samples before it (here recomputed in closed form); only classes with at least
    min_class_size held-out samples scored; the largest α not worse than α = 0."""
    X, labels = _imbalanced_stream()
    lams, alphas, every, min_size = (1.0, 0.1, 0.01), (0.0, 0.5, 1.0), 6, 5
    clf = kp.IncrementalRLSClassifier(
        penalty=lams,
        alpha=alphas,
        validation_every=every,
        selection="thesis",
        min_class_size=min_size,
    ).fit(X, labels)
    hits = np.zeros((len(lams), len(alphas), 3))
    totals = np.zeros(3)
    train = []
    for i in range(len(X)):
        if (i + 1) % every:
            train.append(i)
            continue
        if not train:
            continue
        Z, yt = X[train], labels[train]
        Y = np.zeros((len(train), 3))
        Y[np.arange(len(train)), yt] = 1.0
        counts = Y.sum(axis=0)
        gam = np.where(counts > 0, len(train) / np.maximum(counts, 1), 1.0)
        for p, lam in enumerate(lams):
            W = np.linalg.solve(Z.T @ Z + lam * np.eye(4), Z.T @ Y)
            for a, al in enumerate(alphas):
                hits[p, a, labels[i]] += np.argmax((X[i] @ W) * gam**al) == labels[i]
        totals[labels[i]] += 1
    scored = totals >= min_size
    assert 0 < scored.sum() < 3  # the rare class is left out of the score
    scores = (hits[:, :, scored] / totals[scored]).mean(axis=2)
    np.testing.assert_allclose(clf.validation_scores_, scores, atol=1e-12)
    per_alpha = scores.max(axis=0)
    a = max(i for i in range(len(alphas)) if per_alpha[i] >= per_alpha[0])
    assert clf.alpha_ == alphas[a]
    assert clf.penalty_ == lams[int(np.argmax(scores[:, a]))]
    # the default rule keeps the overall best instead
    best = kp.IncrementalRLSClassifier(penalty=lams, alpha=alphas, validation_every=every)
    best.fit(X, labels)
    with pytest.raises(ValueError, match="selection"):
        kp.IncrementalRLSClassifier(selection="paper").fit(X, labels)


def test_rebalanced_rls_is_class_weighted_ridge():
    from sklearn.linear_model import Ridge

    X, labels = _imbalanced_stream(1)
    lam = 0.3
    clf = kp.RebalancedRLSClassifier(penalty=lam)
    for part in np.array_split(np.arange(len(X)), 4):  # partial fits = one fit
        clf.partial_fit(X[part], labels[part])
    Y = np.eye(3)[labels]
    counts = Y.sum(axis=0)
    w = (len(X) / counts)[labels]
    ref = Ridge(alpha=lam, fit_intercept=False, solver="cholesky").fit(X, Y, sample_weight=w)
    order = list(clf.classes_)  # classes in the order they appeared
    assert order == list(dict.fromkeys(labels.tolist()))
    np.testing.assert_allclose(clf.coef_, ref.coef_.T[:, order], rtol=1e-9, atol=1e-12)
    expected = np.array(order)[np.argmax(X @ clf.coef_, axis=1)]
    np.testing.assert_array_equal(clf.predict(X), expected)
    # rebalancing raises the recall of the rarest class over plain RLS
    rare = labels == 2
    plain = kp.IncrementalRLSClassifier(penalty=lam, alpha=0.0, validation_every=None)
    plain.fit(X, labels)
    assert np.mean(clf.predict(X[rare]) == 2) > np.mean(plain.predict(X[rare]) == 2)
    with pytest.raises(ValueError, match="penalty"):
        kp.RebalancedRLSClassifier(penalty=-1).fit(X, labels)


def test_the_reports_streamed_early_stopping_is_the_estimators_landweber_path(monkeypatch):
    # benchmarks/paper/nytro_table2.py runs Early Stopping on ijcnn1 with streamed kernel
    # products (its n x n kernel does not fit in memory): the same iterates as
    # KRLSRegressor(filter="landweber") computes from one eigendecomposition
    from pathlib import Path

    from sklearn.model_selection import PredefinedSplit

    # on the path for this test only (as in test_online: a benchmark's module can shadow a
    # library's in later tests of the same worker)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks" / "paper"))
    from nytro_table2 import holdout, landweber_iterates

    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 5))
    y = np.where(np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(400) > 0, 1.0, -1.0)
    split = holdout(len(X), 3)
    fit = landweber_iterates(X, y, 1.5, split, 80, None, "256MB")
    fold = np.full(len(X), -1)
    fold[split[1]] = 0
    est = kp.KRLSRegressor(
        kp.Gaussian(1.5), filter="landweber", max_iter=80, scale=False, cv=PredefinedSplit(fold)
    ).fit(X, y)
    assert fit["t"] == 80
    np.testing.assert_allclose(fit["val_mse"], est.path_.val_error, rtol=1e-8)
    # stopped by the window rule: a threshold of 1 stops as soon as the window is full; with
    # keep, the iteration goes on past the stop to the kept iterates
    stopped = landweber_iterates(X, y, 1.5, split, 80, 1.0, "256MB", keep=(30,))
    assert stopped["t"] == 10 and len(stopped["val_mse"]) == 30
    np.testing.assert_allclose(stopped["val_mse"], est.path_.val_error[:30], rtol=1e-8)
    tr = split[0]
    last = kp.KRLSRegressor(
        kp.Gaussian(1.5), filter="landweber", max_iter=30, scale=False, validation_fraction=0.0
    ).fit(X[tr], y[tr])
    np.testing.assert_allclose(stopped["kept"][30], last.coef_, rtol=1e-7, atol=1e-10)
    assert stopped["mean"] == pytest.approx(last.intercept_, rel=1e-12)
