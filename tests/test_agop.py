"""Learned feature metrics (``sigma="agop"``): the kernel's metric against the kernel on
transformed inputs, the average gradient outer product against central finite differences
(exact, and its leading eigenpairs past the dense limit), the factor of the metric against
its definition, and the rounds on problems whose relevant directions are known."""

from __future__ import annotations

import numpy as np
import pytest

import kernelpath as kp
import kernelpath.operators.gradients as gradients
from kernelpath.fitting.agop import METRIC_TAIL, clearly_lower, metric_factor
from kernelpath.operators.gradients import agop_diagonal, agop_factor
from kernelpath.operators.kernel import KernelOperator

RADIAL = {
    "gaussian": lambda **kw: kp.Gaussian(**kw),
    "laplacian": lambda **kw: kp.Laplacian(**kw),
    "cauchy": lambda **kw: kp.Cauchy(**kw),
    "matern15": lambda **kw: kp.Matern(nu=1.5, **kw),
    "matern25": lambda **kw: kp.Matern(nu=2.5, **kw),
}


@pytest.mark.parametrize("name", sorted(RADIAL))
def test_metric_kernel_is_the_kernel_of_the_transformed_inputs(name):
    rng = np.random.default_rng(0)
    X, Z = rng.standard_normal((40, 6)), rng.standard_normal((30, 6))
    L = rng.standard_normal((6, 3))
    K = RADIAL[name](sigma=1.3, metric=L)(X, Z)
    ref = RADIAL[name](sigma=1.3)(X @ L, Z @ L)
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=1e-13)
    # through the operator, in blocks of 7 rows
    op = KernelOperator(X, Z, RADIAL[name](sigma=1.3, metric=L))
    op.block_rows = 7
    b = rng.standard_normal(30)
    np.testing.assert_allclose(op.matvec(b), ref @ b, rtol=1e-11)


def test_metric_kernel_on_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    X, Z, L = rng.standard_normal((20, 5)), rng.standard_normal((9, 5)), rng.standard_normal((5, 2))
    K = kp.Gaussian(0.7, metric=L)(torch.tensor(X), torch.tensor(Z))
    np.testing.assert_allclose(K.numpy(), kp.Gaussian(0.7)(X @ L, Z @ L), rtol=1e-12)


def _finite_difference_agop(kernel, X, C, a, h=1e-6):
    """The AGOP of f = K(., C) a over X by central differences, (d, d)."""
    n, d = X.shape

    def f(Z):
        return kernel(Z, C) @ a

    G = np.zeros((n, d, a.shape[1]))
    for j in range(d):
        e = np.zeros(d)
        e[j] = h
        G[:, j, :] = (f(X + e) - f(X - e)) / (2 * h)
    return np.einsum("ijo,iko->jk", G, G) / n


AXES = np.zeros((5, 3))
AXES[[4, 0, 2], [0, 1, 2]] = [0.7, 1.3, -0.9]  # features 4, 0, 2 scaled; 1 and 3 dropped


@pytest.mark.parametrize(
    "kernel",
    [
        kp.Gaussian(1.5),
        kp.Gaussian(np.array([1.0, 2.0, 0.5, 1.0, 3.0])),
        kp.Gaussian(1.2, metric=np.arange(15.0).reshape(5, 3) / 10 - 0.6),
        kp.Gaussian(1.1, metric=AXES),
        kp.Laplacian(2.0),
        kp.Cauchy(1.1),
        kp.Matern(1.5, nu=1.5),
        kp.Matern(2.0, nu=2.5, metric=np.eye(5)[:, :4] * 0.8),
    ],
    ids=["gaussian", "ard", "metric", "axes", "laplacian", "cauchy", "matern15", "matern25"],
)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_agop_against_finite_differences(kernel, sparse):
    """The factor's F F^T and the diagonal against central differences of the predictor,
    on dense rows and on the same rows sparse (kept sparse: the same numbers)."""
    import scipy.sparse

    rng = np.random.default_rng(0)
    X, C, a = (
        rng.standard_normal((40, 5)),
        rng.standard_normal((25, 5)),
        rng.standard_normal((25, 2)),
    )
    X[X < -0.5] = 0.0  # zeros for the sparse rows to skip
    ref = _finite_difference_agop(kernel, X, C, a)
    rows = scipy.sparse.csr_matrix(X) if sparse else X
    op = KernelOperator(rows, C, kernel)
    op.block_rows = 7  # several blocks
    F = agop_factor(op, a)
    got = F @ F.T
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-8 * np.abs(ref).max())
    np.testing.assert_allclose(agop_diagonal(op, a), np.diag(ref), rtol=1e-7, atol=1e-12)


def test_agop_past_the_dense_limit_keeps_the_leading_eigenpairs(monkeypatch):
    """Past ``DENSE_AGOP_FEATURES`` the factor holds the leading eigenpairs of the AGOP in
    the kernel's coordinates (the inputs divided by the widths: the units the metric is
    learned in), found by the randomized range finder on sparse rows: against the exact
    AGOP (central differences) of a predictor whose AGOP's spectrum decays, its six top
    eigenvalues agree to 1e-4 and its leading three-dimensional subspace is the exact
    one."""
    import scipy.sparse

    rng = np.random.default_rng(3)
    d = 30
    X = scipy.sparse.random(200, d, density=0.3, random_state=1, format="csr")
    C = scipy.sparse.random(60, d, density=0.3, random_state=2, format="csr")
    a = rng.standard_normal((60, 2))
    widths = np.linspace(0.3, 3.0, d)  # a decaying spectrum
    kernel = kp.Gaussian(widths)
    ref = _finite_difference_agop(kernel, X.toarray(), C.toarray(), a)
    vals, vecs = np.linalg.eigh(ref * widths[:, None] * widths[None, :])
    monkeypatch.setattr(gradients, "DENSE_AGOP_FEATURES", 10)
    monkeypatch.setattr(gradients, "AGOP_RANK", 6)
    F = agop_factor(KernelOperator(X, C, kernel), a, random_state=0) * widths[:, None]
    assert F.shape == (d, 6)
    got = np.sort(np.linalg.svd(F, compute_uv=False) ** 2)[::-1]
    np.testing.assert_allclose(got, vals[::-1][:6], rtol=1e-4)
    lead, basis = vecs[:, -3:], np.linalg.svd(F, full_matrices=False)[0][:, :3]
    assert np.linalg.svd(lead.T @ basis, compute_uv=False).min() > 1 - 1e-6


def test_gradients_refuse_a_kernel_without_a_distance():
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="not a function of a distance"):
        agop_factor(KernelOperator(X, X, kp.Polynomial(2)), np.ones(3))
    with pytest.raises(ValueError, match=r"coef must have shape \(3,\) or \(3, k\)"):
        agop_diagonal(KernelOperator(X, X, kp.Gaussian(1.0)), np.ones(6))


def test_a_learned_metric_on_wide_sparse_rows_finishes_in_seconds():
    """800 x 5,000 CSR rows with 0.2% non-zeros: ``sigma="agop"`` and ``"agop_diagonal"``
    each fit in about a second here (the AGOP's factor by the range finder, its diagonal
    block by block, the metric's coordinates selected columns); a d x d AGOP and its
    eigendecomposition took more than 300 s. The bound is a generous 60 s (a loaded machine
    is slower, not 50 times)."""
    import time

    import scipy.sparse

    X = scipy.sparse.random(800, 5000, density=0.002, format="csr", random_state=0)
    y = X @ np.random.default_rng(0).standard_normal(5000)
    for sigma in ("agop", "agop_diagonal"):
        start = time.perf_counter()
        est = kp.NystromRegressor(kp.Gaussian(sigma), random_state=0).fit(X, y)
        assert time.perf_counter() - start < 60, sigma
        assert np.all(np.isfinite(est.predict(X[:10])))
        assert est.metric_ is None  # d x d numbers past DENSE_AGOP_FEATURES
        assert est.feature_relevances_.shape == (5000,)
        assert est.metric_components_.shape[1] == 5000


def _root(M):
    """F with F F^T = M (M symmetric positive semi-definite)."""
    vals, vecs = np.linalg.eigh(M)
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


def test_metric_factor_normalizes_in_scaled_units():
    rng = np.random.default_rng(2)
    G = rng.standard_normal((6, 6))
    M = G @ G.T
    s = np.array([1.0, 2.0, 0.5, 10.0, 1.0, 3.0])
    L = metric_factor(_root(M), s)
    Mu = M * s[:, None] * s[None, :]
    # L L^T is M, normalized to trace d in the units of x / s, back in raw units
    Lu = L * s[:, None]
    np.testing.assert_allclose(Lu @ Lu.T, Mu * (6 / np.trace(Mu)), rtol=1e-10)
    assert L.shape == (6, 6)
    # a rank-2 metric keeps two directions; a zero or non-finite one gives none
    v = rng.standard_normal((6, 2))
    assert metric_factor(v, None).shape == (6, 2)
    assert metric_factor(np.zeros((6, 6)), None) is None
    assert metric_factor(np.zeros((6, 0)), None) is None
    assert metric_factor(np.full((6, 6), np.nan), None) is None
    # the tail left out is at most METRIC_TAIL of the trace
    w = np.diag([1.0, 1e-6, 1e-9, 0.0])
    Lw = metric_factor(_root(w), None)
    assert Lw.shape[1] == 1 and np.trace(w) * METRIC_TAIL > 1e-6 + 1e-9


def test_metric_factor_of_the_diagonal():
    """``diagonal``: L L^T is M's diagonal, normalized to trace d in scaled units, with the
    features of no weight (up to METRIC_TAIL of the trace) dropped, largest first."""
    rng = np.random.default_rng(12)
    G = rng.standard_normal((5, 5))
    M = G @ G.T
    M[3, :] = M[:, 3] = 0.0  # feature 3 carries nothing
    s = np.array([1.0, 2.0, 0.5, 4.0, 3.0])
    L = metric_factor(np.diag(M), s, diagonal=True)
    assert L.shape == (5, 4)
    Lu = L * s[:, None]
    du = np.diag(M) * s**2
    np.testing.assert_allclose(Lu @ Lu.T, np.diag(du * 5 / du.sum()), rtol=1e-12, atol=1e-15)
    # one feature per column, the largest weight first
    assert np.count_nonzero(Lu, axis=0).tolist() == [1, 1, 1, 1]
    assert np.argmax(np.abs(Lu[:, 0])) == int(np.argmax(du))
    assert metric_factor(np.zeros(5), None, diagonal=True) is None


def _single_index(n, d, rng, direction):
    X = rng.standard_normal((n, d))
    u = X @ direction
    return X, np.sin(2 * u) + 0.05 * rng.standard_normal(n)


def test_agop_learns_the_relevant_direction():
    """y = sin(2 u) along one direction u of 10 features: the metric's leading eigenvector
    is that direction, the rounds beat the isotropic round 0 on test data, and the hold-out
    error of the chosen round is below round 0's."""
    rng = np.random.default_rng(0)
    direction = np.zeros(10)
    direction[[0, 3]] = [0.6, 0.8]
    X, y = _single_index(3000, 10, rng, direction)
    Xt, yt = _single_index(2000, 10, rng, direction)
    iso = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    est = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(X, y)
    info = est.agop_info_
    assert info["chosen_round"] >= 1
    errs = [r["val_error"] for r in info["rounds"] if "val_error" in r]
    assert errs[info["chosen_round"]] < errs[0]
    lead = est.metric_components_[0]
    # in the units of the scaled inputs: the features are standard normal, about unscaled
    assert abs(lead @ direction) > 0.98
    assert est.feature_relevances_.sum() == pytest.approx(1.0)
    assert est.feature_relevances_[[0, 3]].sum() > 0.95
    mse = np.mean((est.predict(Xt) - yt) ** 2)
    assert mse < 0.5 * np.mean((iso.predict(Xt) - yt) ** 2)
    # the metric is the fitted kernel's distance, and transform its coordinates
    Z = est.transform(Xt[:5])
    D2 = ((Xt[0] - Xt[1]) @ est.metric_ @ (Xt[0] - Xt[1])).item()
    assert np.sum((Z[0] - Z[1]) ** 2) == pytest.approx(D2, rel=1e-10)


def test_agop_diagonal_selects_the_relevant_features():
    """y depends on features 1 and 4 of 8 through sin and a square: the diagonal metric
    weights those two, drops none it should keep, and beats the isotropic fit; its
    distance is diagonal (per-feature widths)."""
    rng = np.random.default_rng(7)

    def data(n):
        X = rng.standard_normal((n, 8))
        return X, np.sin(2 * X[:, 1]) + 0.5 * X[:, 4] ** 2 + 0.05 * rng.standard_normal(n)

    (X, y), (Xt, yt) = data(3000), data(2000)
    iso = kp.NystromRegressor(search="none", random_state=0).fit(X, y)
    est = kp.NystromRegressor(kp.Gaussian("agop_diagonal"), random_state=0).fit(X, y)
    assert est.agop_info_["diagonal"] and est.agop_info_["chosen_round"] >= 1
    off = est.metric_ - np.diag(np.diag(est.metric_))
    assert np.all(off == 0)
    assert est.feature_relevances_[[1, 4]].sum() > 0.9
    mse = np.mean((est.predict(Xt) - yt) ** 2)
    assert mse < 0.5 * np.mean((iso.predict(Xt) - yt) ** 2)
    assert est.transform(Xt[:3]).shape[0] == 3
    # a diagonal metric is refused in a sequence of kernels, like "agop"
    with pytest.raises(ValueError, match="agop_diagonal"):
        kp.NystromRegressor([kp.Gaussian("agop_diagonal"), kp.Gaussian(1.0)]).fit(X, y)


def test_a_round_is_taken_only_when_clearly_lower():
    rng = np.random.default_rng(9)
    best = rng.uniform(0, 1, 400)
    noise = 0.05 * rng.standard_normal(400)
    assert clearly_lower(best - 0.2 + noise, best, None)
    assert not clearly_lower(best - 0.001 + noise, best, None)  # within the noise
    assert not clearly_lower(best + 0.2 + noise, best, None)
    # weights: the rows that count decide
    w = np.r_[np.zeros(200), np.ones(200)]
    mixed = best + np.r_[np.full(200, -1.0), np.full(200, 0.1)] + noise
    assert not clearly_lower(mixed, best, w) and clearly_lower(mixed, best, None)


def test_agop_on_a_classifier_and_other_families():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((900, 5))
    y = (X[:, 1] - X[:, 2] > 0).astype(int) + (X[:, 1] - X[:, 2] > 1)
    clf = kp.NystromClassifier(kp.Laplacian("agop"), random_state=0).fit(X, y)
    assert clf.metric_.shape == (5, 5)
    assert np.argsort(clf.feature_relevances_)[-2:].tolist() in ([1, 2], [2, 1])
    for cls in (kp.KRLSRegressor, kp.NYTRORegressor, kp.EigenProRegressor):
        est = cls(kp.Gaussian("agop"), random_state=0).fit(X[:400], X[:400, 0] ** 2)
        assert est.metric_.shape == (5, 5)


def test_agop_round_trips_through_a_model_file(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 4))
    est = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(X, np.sin(X[:, 0]))
    path = tmp_path / "m.kpm"
    kp.save(est, path)
    back = kp.load(path)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    np.testing.assert_array_equal(back.metric_, est.metric_)


def test_agop_fallbacks():
    rng = np.random.default_rng(5)
    # one feature: the metric is a width, round 0 is the model
    X1 = rng.standard_normal((300, 1))
    est = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(X1, np.sin(X1[:, 0]))
    assert est.agop_info_["stopped"] == "one feature" and est.agop_info_["chosen_round"] == 0
    assert est.metric_.shape == (1, 1)
    # a flat predictor (constant targets): no gradient, the rounds stop at round 0
    X = rng.standard_normal((300, 3))
    est = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(X, np.full(300, 2.0))
    assert est.agop_info_["chosen_round"] == 0
    assert np.all(np.isfinite(est.predict(X)))
    # fewer rows than the AGOP sample: every training row
    assert est.agop_info_["n_rows"] == len(est.train_indices_)


def test_agop_on_torch_and_dask():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    X = rng.standard_normal((600, 4))
    y = np.sin(X[:, 0] + X[:, 1])
    a = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(X, y)
    b = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(torch.tensor(X), y)
    # rounding differs between the backends (rounds that nearly tie may swap): both learn
    # the one direction (1, 1, 0, 0) / sqrt(2)
    u = np.array([1.0, 1.0, 0.0, 0.0]) / np.sqrt(2)
    for est in (a, b):
        assert est.agop_info_["chosen_round"] >= 1
        assert abs(est.metric_components_[0] @ u) > 0.99
    da = pytest.importorskip("dask.array")
    c = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(
        da.from_array(X, chunks=(150, 4)), y
    )
    assert abs(c.metric_components_[0] @ u) > 0.99


def test_agop_bad_input():
    X, y = np.random.default_rng(7).standard_normal((100, 3)), np.arange(100.0)
    agop = kp.Gaussian("agop")
    with pytest.raises(ValueError, match="hold-out"):
        kp.NystromRegressor(agop, cv="loo").fit(X, y)
    with pytest.raises(ValueError, match="hold-out"):
        kp.NystromRegressor(agop, validation_fraction=0.0).fit(X, y)
    with pytest.raises(ValueError, match="alone"):
        kp.NystromRegressor([agop, kp.Gaussian(1.0)]).fit(X, y)
    with pytest.raises(ValueError, match="kernel expansion over centers"):
        kp.RandomFeaturesRegressor(agop).fit(X, y)
    with pytest.raises(ValueError, match="learned by an estimator"):
        agop(X, X)
    with pytest.raises(ValueError, match="learned from the targets"):
        agop.resolve(X)
    assert not hasattr(kp.NystromRegressor(), "transform")
    with pytest.raises(ValueError, match="r <= n_features"):
        kp.Gaussian(1.0, metric=np.ones((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        kp.Gaussian(1.0, metric=np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="zero"):
        kp.Gaussian(1.0, metric=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="one width"):
        kp.Gaussian(np.ones(3), metric=np.eye(3))
    with pytest.raises(TypeError, match="metric"):
        kp.Gaussian(1.0, metric="eye")
    with pytest.raises(ValueError, match="one per feature"):
        kp.Gaussian(1.0, metric=np.eye(4))(X, X)


def test_plot_metric():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from kernelpath.plotting import plot_metric

    rng = np.random.default_rng(8)
    X = rng.standard_normal((400, 4))
    est = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(X, np.sin(X[:, 2]))
    axes = plot_metric(est, feature_names=["a", "b", "c", "d"], n_directions=1)
    assert len(axes) == 2
    assert [t.get_text() for t in axes[0].get_yticklabels()][-1] == "c"
    with pytest.raises(ValueError, match="sigma='agop'"):
        plot_metric(kp.NystromRegressor(search="none").fit(X, X[:, 0]))
    # 64 features: an 8 x 8 image of the relevances, the two pixels that matter brightest
    X = rng.uniform(0, 1, (600, 64))
    est = kp.NystromRegressor(kp.Gaussian("agop"), random_state=0).fit(
        X, np.sin(3 * X[:, 10] + 2 * X[:, 20])
    )
    axes = plot_metric(est, n_directions=2)
    image = axes[0].get_images()[0].get_array()
    assert image.shape == (8, 8)
    assert sorted(np.argsort(np.ravel(image))[-2:]) == [10, 20]
    assert "of the trace" in axes[1].get_title()
