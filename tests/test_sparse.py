"""Sparse rows (scipy.sparse) through the input adapter: the kernels' sparse block products
against dense blocks, every estimator's CSR fit against its dense fit, the column
statistics without densifying, memory, model files and the refusals."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import kernelpath as kp
from kernelpath.inputs import (
    DENSE_CENTERS_RATIO,
    as_rows,
    center_rows,
    first_of_each_row,
    kind_of,
    nbytes,
)
from kernelpath.kernels import median_distance
from kernelpath.operators import KernelOperator
from kernelpath.scaling import feature_statistics

from .conftest import requires_shared

KERNELS = [
    kp.Gaussian(1.3),
    kp.Laplacian(0.7),
    kp.Matern(1.1, nu=0.5),
    kp.Matern(1.1, nu=2.5),
    kp.Cauchy(0.9),
    kp.Gaussian(np.linspace(0.5, 2.0, 30)),  # one width per feature
    kp.Gaussian(1.0, metric=np.random.default_rng(3).standard_normal((30, 4))),
    kp.Polynomial(2),
    kp.Linear(),
]


def sparse_rows(n, d, density, seed):
    return sp.random(n, d, density=density, random_state=seed, format="csr")


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: repr(k)[:30])
@pytest.mark.parametrize("centers", ["dense", "sparse"])
def test_sparse_blocks_equal_dense_blocks(kernel, centers):
    """K(X, C) of CSR rows (sparse x dense, or sparse x sparse for CSR centers) equals the
    dense rows' block, and the operator's products agree."""
    X = sparse_rows(200, 30, 0.2, 0)
    Csp = sparse_rows(25, 30, 0.3, 1)
    C = Csp if centers == "sparse" else Csp.toarray()
    dense = KernelOperator(X.toarray(), Csp.toarray(), kernel)
    op = KernelOperator(X, C, kernel)
    # kernels of the distance itself take a square root of the Gram trick's rounding
    # (1e-16 -> 1e-8 at coinciding points, as on dense rows): there the paths differ more
    tol = 2e-7 if getattr(kernel, "_uses_distance", False) else 1e-12
    np.testing.assert_allclose(op.dense(), dense.dense(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(op.center_gram(), dense.center_gram(), rtol=1e-12, atol=tol)
    V = np.random.default_rng(0).standard_normal((25, 3))
    np.testing.assert_allclose(op.matvec(V), dense.matvec(V), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(op.fused(V), dense.fused(V), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.diag(), dense.diag(), rtol=1e-13)


def test_the_sparse_gaussian_block_is_the_kernel():
    """An independent reference: exp(-||x - z||^2 / (2 sigma^2)) from explicit differences."""
    X = sparse_rows(60, 12, 0.3, 5)
    C = sparse_rows(9, 12, 0.4, 6)
    Xd, Cd = X.toarray(), C.toarray()
    ref = np.exp(-((Xd[:, None, :] - Cd[None, :, :]) ** 2).sum(-1) / (2 * 0.8**2))
    for centers in (C, Cd):
        np.testing.assert_allclose(kp.Gaussian(0.8)(X, centers), ref, rtol=1e-12, atol=1e-15)


def test_the_adapter_names_every_kind(tmp_path):
    X = np.ones((4, 2))
    assert kind_of(X) == "array"
    assert kind_of(sp.csr_matrix(X)) == "sparse"
    assert kind_of(sp.coo_array(X)) == "sparse"
    assert kind_of(kp.data.as_source(X)) == "source"
    rows = as_rows(sp.coo_matrix(X))
    assert rows.X.format == "csr" and rows.shape == (4, 2)
    assert nbytes(sp.csr_matrix(X)) == 4 * 2 * 8 + 4 * 2 * 4 + 5 * 4


def test_column_statistics_of_sparse_rows_equal_the_dense_ones():
    """Means, spreads, the indicator floor and the shared-unit rule from the stored entries
    (the implicit zeros counted), without densifying."""
    rng = np.random.default_rng(0)
    X = sparse_rows(500, 80, 0.1, 2).toarray()
    X[:, 3] = (rng.random(500) < 0.02).astype(float)  # a rare indicator (0/1)
    X[:, 4] = np.where(rng.random(500) < 0.5, 2.0, 5.0)  # two values, no zero
    X[:, 5] = 7.0  # constant
    X[:, 6] = -X[:, 6]  # negative values
    S = sp.csr_matrix(X)
    for common in (False, True):
        dense = feature_statistics(X, np.random.default_rng(1), common)
        sparse = feature_statistics(S, np.random.default_rng(1), common)
        for a, b in zip(sparse, dense, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    assert median_distance(S, 0) == pytest.approx(median_distance(X, 0), rel=1e-12)
    s = np.linspace(0.5, 2, 80)
    assert median_distance(S, 0, s) == pytest.approx(median_distance(X, 0, s), rel=1e-12)


def _estimators():
    batch = [
        f"{family}{task}"
        for family in ("Nystrom", "KRLS", "NYTRO", "RandomFeatures", "EigenPro", "SGM")
        for task in ("Regressor", "Classifier")
    ]
    online = ["RecursiveRLS", "IncrementalRLSClassifier", "RebalancedRLSClassifier"]
    return [(name, {"random_state": 0}) for name in batch] + [
        (name, {"features": kp.RandomFourierFeatures(n_features=40, random_state=0)})
        for name in online
    ]


@pytest.mark.parametrize(
    ("name", "kw"), _estimators(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_estimator_fits_csr_as_it_fits_the_dense_rows(name, kw):
    """The same random_state on CSR rows (15% stored: densified block by block) and on
    their dense form: the same model, also for a model fitted on dense rows predicting CSR
    rows. Equal up to the products' rounding, not bit for bit: the blocks have other
    shapes than the whole array, and BLAS may sum a product of another shape in another
    order on another CPU (CI's differed by 3.6e-12 relative for RandomFeaturesRegressor
    where this machine's agreed exactly); a wrong densification differs by far more."""
    rng = np.random.default_rng(0)
    X = sparse_rows(500, 40, 0.15, 1)
    y = np.sin(X @ rng.standard_normal(40))
    regression = name.endswith("Regressor") or name == "RecursiveRLS"
    t = y if regression else (y > np.median(y)).astype(int)
    Est = getattr(kp, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a = Est(**kw).fit(X, t)
        b = Est(**kw).fit(X.toarray(), t)
    out = (lambda m, Z: m.predict(Z)) if regression else (lambda m, Z: m.decision_function(Z))
    fa, fb = out(a, X[:100]), out(b, X[:100].toarray())
    assert as_rows(X).dense_blocks
    np.testing.assert_allclose(fa, fb, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(out(b, X[:100]), fb, rtol=1e-8, atol=1e-10)
    if hasattr(a, "best_params_"):
        # the same candidate; a penalty refined by a continuous search may differ in its
        # last digits (CI's did: 1.79198784842887e-05 against 1.7919878484288663e-05)
        assert a.best_params_.keys() == b.best_params_.keys()
        for key, value in a.best_params_.items():
            if isinstance(value, float):
                assert value == pytest.approx(b.best_params_[key], rel=1e-8), key
            else:
                assert value == b.best_params_[key], key


def test_centers_of_very_sparse_rows_stay_sparse_and_the_file_keeps_them(tmp_path):
    """Rows whose dense form is more than DENSE_CENTERS_RATIO times their stored entries
    give CSR centers; the model file stores them as CSR and predicts the same."""
    X = sparse_rows(400, 5000, 0.002, 4)
    assert X.shape[1] * 8 > DENSE_CENTERS_RATIO * as_rows(X).row_bytes()
    y = np.asarray(X.sum(axis=1)).ravel()
    assert sp.issparse(center_rows(X, [0, 1]))
    assert not sp.issparse(center_rows(sparse_rows(10, 20, 0.5, 0), [0, 1]))
    m = kp.NystromRegressor(n_centers=50, random_state=0).fit(X, y)
    assert sp.issparse(m.centers_) and m.centers_.shape == (50, 5000)
    kp.save(m, tmp_path / "m.kp")
    back = kp.load(tmp_path / "m.kp")
    assert sp.issparse(back.centers_)
    np.testing.assert_array_equal(back.predict(X[:50]), m.predict(X[:50]))
    np.testing.assert_allclose(m.predict(X[:50].toarray()), m.predict(X[:50]), rtol=1e-10)


def test_repeated_sparse_centers_are_dropped():
    P = sp.csr_matrix(np.array([[0, 1.0, 0], [0, 1.0, 0], [2.0, 0, 0], [0, 0, 0], [0, 0, 0]]))
    np.testing.assert_array_equal(first_of_each_row(P), [0, 2, 3])
    np.testing.assert_array_equal(first_of_each_row(P.toarray()), [0, 2, 3])


def test_a_sparse_fit_never_densifies_x():
    """20,000 rows x 100,000 features (its dense form: 16 GB): the fit's traced peak stays
    within the budget it is given."""
    rng = np.random.default_rng(0)
    n, d, k = 20_000, 100_000, 20
    X = sp.csr_matrix(
        (rng.random(n * k), (np.repeat(np.arange(n), k), rng.integers(0, d, n * k))),
        shape=(n, d),
    )
    y = np.tanh(X @ rng.standard_normal(d))
    tracemalloc.start()
    try:
        kp.NystromRegressor(n_centers=300, memory_budget="200MB", random_state=0).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6


def test_sparse_bad_input_is_named():
    X = sparse_rows(50, 5, 0.5, 0)
    y = np.arange(50) % 2
    bad = X.copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN|infinity"):
        kp.NystromClassifier().fit(bad, y)
    with pytest.raises(TypeError, match="^y must be a dense"):
        kp.NystromRegressor().fit(X, sp.csr_matrix(y.reshape(-1, 1).astype(float)))
    with pytest.raises(TypeError, match="^sample_weight must be a dense"):
        kp.NystromRegressor().fit(X, y * 1.0, sample_weight=sp.csr_matrix(np.ones((50, 1))))
    with pytest.raises(TypeError, match="X must be real"):
        kp.NystromRegressor().fit(X.astype(complex), y * 1.0)
    # COO, CSC and LIL are converted: the same model as CSR
    ref = kp.NystromClassifier(random_state=0).fit(X, y).decision_function(X)
    for other in (X.tocoo(), X.tocsc(), X.tolil(), sp.csr_array(X)):
        got = kp.NystromClassifier(random_state=0).fit(other, y).decision_function(other)
        np.testing.assert_array_equal(got, ref)
    # 64-bit indices are kept
    X64 = X.copy()
    X64.indices = X64.indices.astype(np.int64)
    X64.indptr = X64.indptr.astype(np.int64)
    got = kp.NystromClassifier(random_state=0).fit(X64, y).decision_function(X64)
    np.testing.assert_array_equal(got, ref)
    # a width per feature learned by gradients takes dense rows: the subsample is densified
    kp.NystromRegressor(kp.Gaussian("ard"), n_centers=10, random_state=0).fit(X, y * 1.0)
    # so many columns that the per-feature vectors leave the budget: refused, naming X
    wide = sp.csr_matrix((np.ones(2), ([0, 1], [0, 2 * 10**9 - 1])), shape=(2, 2 * 10**9))
    with pytest.raises(ValueError, match="X has 2000000000 features"):
        kp.NystromRegressor(memory_budget="1GB").fit(wide, [0.0, 1.0])


def test_a_device_refuses_sparse_rows():
    pytest.importorskip("torch")
    with pytest.raises(TypeError, match="sparse rows are computed with NumPy on the host"):
        kp.NystromRegressor(device="cpu").fit(sparse_rows(30, 4, 0.5, 0), np.arange(30.0))
    assert not kp.NystromRegressor(device="cpu").__sklearn_tags__().input_tags.sparse
    assert kp.NystromRegressor().__sklearn_tags__().input_tags.sparse


def test_load_libsvm_gives_csr(tmp_path):
    from kernelpath.datasets import load_libsvm

    path = tmp_path / "a.svm"
    path.write_text("1 1:0.5 3:2\n-1 2:1\n")
    X, y = load_libsvm(path)
    assert sp.issparse(X) and X.format == "csr" and X.shape == (2, 3)
    np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 2], [0, 1, 0]])
    with pytest.raises(TypeError, match="^dense must be True or False"):
        load_libsvm(path, dense="yes")
    Xd, _ = load_libsvm(path, dense=True)
    np.testing.assert_array_equal(Xd, X.toarray())
    np.testing.assert_array_equal(y, [1, -1])


@requires_shared
def test_adult_from_csr_is_the_dense_fit():
    """adult (123 binary features, 11% stored): the default NystromClassifier on CSR chooses
    the dense fit's point and predicts the same labels; its scores agree to 1e-8 (the blocks
    differ in summation order, and CG amplifies that; measured 7.5e-10)."""
    from sklearn.datasets import load_svmlight_file

    from kernelpath.datasets import shared_data_dir

    base = shared_data_dir() / "adult"
    X, y = load_svmlight_file(str(base / "adult.trn.bz2"), n_features=123)
    X = X.tocsr()[:5000]
    y = y[:5000]
    a = kp.NystromClassifier(random_state=0).fit(X, y)
    b = kp.NystromClassifier(random_state=0).fit(X.toarray(), y)
    assert a.best_params_ == b.best_params_
    fa, fb = a.decision_function(X[:2000]), b.decision_function(X[:2000].toarray())
    np.testing.assert_allclose(fa, fb, atol=1e-8)
    np.testing.assert_array_equal(a.predict(X[:2000]), b.predict(X[:2000].toarray()))


@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_torch_sparse_tensors_fit_as_their_scipy_rows(layout):
    """A torch sparse tensor (CSR or COO) is taken as the scipy CSR matrix of its rows,
    computed on the host: the same model and predictions as the scipy matrix."""
    torch = pytest.importorskip("torch")
    X = sparse_rows(300, 40, 0.1, 0)
    y = np.asarray(X.sum(axis=1)).ravel()
    T = torch.tensor(X.toarray())
    T = T.to_sparse_csr() if layout == "csr" else T.to_sparse()
    got = kp.NystromRegressor(n_centers=50, random_state=0).fit(T, y)
    want = kp.NystromRegressor(n_centers=50, random_state=0).fit(X, y)
    np.testing.assert_array_equal(got.coef_, want.coef_)
    np.testing.assert_array_equal(got.predict(T), want.predict(X))
    with pytest.raises(TypeError, match="y: a torch sparse tensor"):
        kp.NystromRegressor().fit(X, torch.tensor(y)[:, None].to_sparse())


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("NystromRegressor", {"n_centers": 100}),
        ("NYTRORegressor", {"n_centers": 100}),
        ("RandomFeaturesRegressor", {"n_features": 100}),
        ("KRLSRegressor", {}),
        ("SGMRegressor", {"n_features": 100}),
        ("EigenProRegressor", {"n_epochs": 1}),
    ],
)
def test_a_dask_array_of_sparse_chunks_fits_as_its_dense_chunks(name, kw):
    """Chunks that are scipy.sparse matrices stay CSR on the workers (the chunks'
    operators, feature maps and predictions take them as CSR; these rows are very sparse,
    so the Nyström family's centers stay CSR too): the model is the dense chunks' and the
    CSR matrix's in memory up to the rounding of the sparse products and of the chunks'
    summation order, which CG's early stop amplifies to 1e-6 here (docs/design.md,
    "Sparse rows")."""
    da = pytest.importorskip("dask.array")
    X = sparse_rows(1000, 300, 0.05, 0)
    y = np.asarray(X.sum(axis=1)).ravel()
    make = lambda: getattr(kp, name)(random_state=0, **kw)  # noqa: E731
    got = make().fit(da.from_array(X, chunks=(250, 300), asarray=False), y)
    dense = make().fit(da.from_array(X.toarray(), chunks=(250, 300)), y)
    np.testing.assert_allclose(got.predict(X[:20]), dense.predict(X[:20]), rtol=1e-5)
    lazy = got.predict(da.from_array(X[:40], chunks=(20, 300), asarray=False))
    np.testing.assert_allclose(lazy.compute(), got.predict(X[:40]), rtol=1e-12, atol=1e-12)
    if name != "RandomFeaturesRegressor":  # refit="auto" refits in memory, not on dask
        here = make().fit(X, y)
        np.testing.assert_allclose(got.predict(X[:20]), here.predict(X[:20]), rtol=1e-5)
    if name.startswith("Nystrom"):
        assert sp.issparse(got.centers_)


def test_the_semiparametric_protocol_takes_sparse_rows():
    """The protocol's X_train and X_stream went through the online row check under their
    own names, which refused sparse rows as if they were targets; they are densified for
    the physical model, so the protocol gives the dense rows' errors exactly."""
    from kernelpath.datasets import make_arm_dynamics
    from kernelpath.online import semiparametric_protocol

    Xa, ta, reg, _ = make_arm_dynamics(200, "circle-a", random_state=0)
    Xb, tb, _, _ = make_arm_dynamics(100, "circle-b", random_state=1)
    kw = dict(n_parts=2, part_size=50, window=20, n_features=30, random_state=3)
    dense = semiparametric_protocol(reg, Xa, ta, Xb, tb, **kw)
    sparse = semiparametric_protocol(reg, sp.csr_matrix(Xa), ta, sp.csr_matrix(Xb), tb, **kw)
    for name in ("P", "NP", "SP"):
        np.testing.assert_array_equal(sparse["squared_errors"][name], dense["squared_errors"][name])
    with pytest.raises(TypeError, match="^y must be dense"):
        kp.RecursiveRLS().fit(Xa, sp.csr_matrix(ta[:, :1]))
