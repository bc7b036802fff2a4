"""Bad input gets a ValueError / TypeError naming the argument (property-based where it helps)."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernelpath as kp
from kernelpath import (
    Gaussian,
    KRLSClassifier,
    KRLSRegressor,
    NystromClassifier,
    NystromRegressor,
    NYTROClassifier,
    NYTRORegressor,
)
from kernelpath._backend import resolve_memory_budget
from kernelpath._validation import check_penalty

REGRESSORS = [KRLSRegressor, NystromRegressor, NYTRORegressor]
CLASSIFIERS = [KRLSClassifier, NystromClassifier, NYTROClassifier]
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def small_data(n=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0])


bad_scalars = st.one_of(
    st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=True),
    st.just(float("nan")),
    st.just(float("inf")),
)


@FAST
@given(value=bad_scalars)
def test_bad_penalty_scalar(value):
    with pytest.raises(ValueError, match="penalty"):
        check_penalty(value)


@FAST
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=6))
def test_penalty_sequences(values):
    arr = np.asarray(values)
    if np.all(np.isfinite(arr)) and np.all(arr >= 0):
        out = check_penalty(values)
        assert np.all(np.diff(out) <= 0)  # sorted from the most regularized
    else:
        with pytest.raises(ValueError, match="penalty"):
            check_penalty(values)


@pytest.mark.parametrize("value", ["large", True, [[1.0]], [], ["a"], {"a": 1}])
def test_bad_penalty_kinds(value):
    with pytest.raises((ValueError, TypeError), match="penalty"):
        check_penalty(value)


@pytest.mark.parametrize("Est", REGRESSORS + CLASSIFIERS, ids=lambda e: e.__name__)
@FAST
@given(
    i=st.integers(0, 29),
    j=st.integers(0, 1),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_non_finite_X_is_rejected(Est, i, j, bad):
    """Infinity always; NaN (a missing value, imputed by default) where
    ``missing_values="error"``."""
    X, y = small_data()
    X[i, j] = bad
    y = y if Est in REGRESSORS else (y > 0).astype(int)
    with pytest.raises(ValueError, match="X"):
        Est(Gaussian(1.0), missing_values="error").fit(X, y)
    if np.isinf(bad):
        with pytest.raises(ValueError, match="infinit"):
            Est(Gaussian(1.0)).fit(X, y)


@pytest.mark.parametrize("Est", REGRESSORS, ids=lambda e: e.__name__)
@FAST
@given(i=st.integers(0, 29), bad=st.sampled_from([np.nan, np.inf]))
def test_non_finite_y_is_rejected(Est, i, bad):
    X, y = small_data()
    y[i] = bad
    with pytest.raises(ValueError, match="y"):
        Est(Gaussian(1.0)).fit(X, y)


@FAST
@given(n=st.integers(2, 40), m=st.integers(2, 40))
def test_mismatched_lengths(n, m):
    if n == m:
        return
    X = np.zeros((n, 2))
    y = np.zeros(m)
    with pytest.raises(ValueError, match="samples"):
        NystromRegressor().fit(X, y)


@FAST
@given(X=hnp.arrays(np.float64, hnp.array_shapes(min_dims=3, max_dims=3, max_side=3)))
def test_wrong_dimensions(X):
    with pytest.raises(ValueError):
        NystromRegressor().fit(X, np.zeros(len(X)))


def test_one_dimensional_X_named():
    with pytest.raises(ValueError, match="2D array"):
        NystromRegressor().fit(np.arange(10.0), np.arange(10.0))


def test_empty_data():
    with pytest.raises(ValueError, match="0 sample"):
        NystromRegressor().fit(np.zeros((0, 2)), np.zeros(0))


def test_non_numeric_arrays_are_named():
    X = np.array([["a", "b"], ["c", "d"], ["e", "f"]])
    with pytest.raises((ValueError, TypeError), match="X must contain numbers"):
        NystromRegressor().fit(X, np.arange(3.0))
    with pytest.raises((ValueError, TypeError), match="y must contain numbers"):
        NystromRegressor().fit(np.zeros((3, 2)), np.array(["a", "b", "c"]))
    est = NystromRegressor(n_centers=5, penalty=1e-3, validation_fraction=0.0)
    est.fit(np.random.default_rng(0).random((20, 2)), np.arange(20.0))
    with pytest.raises((ValueError, TypeError), match="X must contain numbers"):
        est.predict(np.array([["a", "b"]]))


@pytest.mark.parametrize("Est", CLASSIFIERS, ids=lambda e: e.__name__)
def test_single_class(Est):
    X, _ = small_data()
    with pytest.raises(ValueError, match="class"):
        Est().fit(X, np.zeros(30))


def test_continuous_targets_for_classifier():
    X, y = small_data()
    with pytest.raises(ValueError, match="Unknown label type"):
        NystromClassifier().fit(X, y)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"n_centers": 0}, "n_centers"),
        ({"n_centers": 2.5}, "n_centers"),
        ({"max_iter": 0}, "max_iter"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"validation_fraction": -0.1}, "validation_fraction"),
        ({"n_iter_no_change": 0}, "n_iter_no_change"),
        ({"tol": -1.0}, "tol"),
        ({"solver": "lbfgs"}, "solver"),
        ({"kernel": "rbff"}, "kernel"),
        ({"kernel": 3}, "kernel"),
        ({"centers": "kmeans"}, "centers"),
        ({"centers": np.zeros((5, 3))}, "centers"),
        ({"memory_budget": "lots"}, "memory_budget"),
        ({"memory_budget": 10}, "memory_budget"),
        ({"random_state": "seed"}, "random_state"),
        ({"refit": "yes"}, "refit"),
    ],
)
def test_bad_parameters_are_named(params, match):
    X, y = small_data()
    with pytest.raises((ValueError, TypeError), match=match):
        NystromRegressor(**params).fit(X, y)


def test_bad_filter_and_unused_penalty():
    X, y = small_data()
    with pytest.raises(ValueError, match="filter"):
        KRLSRegressor(filter="ridge").fit(X, y)
    with pytest.raises(ValueError, match="penalty is not used"):
        KRLSRegressor(filter="landweber", penalty=1e-3).fit(X, y)
    with pytest.raises(ValueError, match="penalty is not used"):
        KRLSRegressor(filter="nu", penalty=[1e-3, 1e-4]).fit(X, y)


def test_bad_sample_weight():
    X, y = small_data()
    with pytest.raises(ValueError, match="sample_weight"):
        NystromRegressor().fit(X, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match="sample_weight"):
        NystromRegressor().fit(X, y, sample_weight=np.zeros(30))
    with pytest.raises(ValueError):
        NystromRegressor().fit(X, y, sample_weight=np.ones(29))


def test_predict_checks_features():
    X, y = small_data()
    est = NystromRegressor(n_centers=10).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.zeros((3, 5)))


UNITS = {
    "": 1,
    "B": 1,
    "kB": 10**3,
    "KiB": 2**10,
    "MB": 10**6,
    "MiB": 2**20,
    "GB": 10**9,
    "GiB": 2**30,
    "TB": 10**12,
    "TiB": 2**40,
}


@FAST
@given(
    st.floats(1.0, 5000.0, allow_nan=False).map(lambda v: round(v, 3)),
    st.sampled_from(["MB", "MiB", "GB", "GiB", "TB"]),
    st.sampled_from(["", " "]),
)
def test_memory_budget_parsing(number, unit, space):
    """A number and a unit: exactly that many bytes (decimal and binary units)."""
    text = f"{number}{space}{unit}"
    want = int(float(number) * UNITS[unit])
    if want < 1024**2:
        with pytest.raises(ValueError, match="at least 1 MiB"):
            resolve_memory_budget(text)
    else:
        assert resolve_memory_budget(text) == want


def test_memory_budget_parsing_examples():
    assert resolve_memory_budget("1GB") == 10**9
    assert resolve_memory_budget("512MB") == 512 * 10**6
    assert resolve_memory_budget("2GiB") == 2 * 2**30
    assert resolve_memory_budget("1.5e9") == 1_500_000_000
    assert resolve_memory_budget(2**20) == 2**20
    assert resolve_memory_budget(3.5e9) == 3_500_000_000
    for bad in ("100kB", 1000, "-1GB", "lots", "1 parsec", float("inf"), float("nan"), 10**400):
        with pytest.raises(ValueError, match="memory_budget"):
            resolve_memory_budget(bad)
    for bad in (True, [1], b"1GB"):
        with pytest.raises(TypeError, match="memory_budget"):
            resolve_memory_budget(bad)


def test_no_nan_model_on_constant_targets():
    X, _ = small_data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for Est in REGRESSORS:
            est = Est(Gaussian(1.0)).fit(X, np.ones(30))
            assert np.all(np.isfinite(est.coef_))
            np.testing.assert_allclose(est.predict(X), 1.0, atol=1e-8)


@pytest.mark.parametrize("top", [3.40282357e38, 1e31, -5e35])
def test_float32_rows_with_targets_past_float32s_range_are_refused_naming_y(top):
    """Float32 X predicts in float32: targets at 3.4e38 (an 8 x 5 X of zeros, one center,
    penalty='auto') fitted normally and predicted infinity. Past 1e30 they are refused,
    naming y and the way out; below, the predictions are finite."""
    X = np.zeros((8, 5), dtype=np.float32)
    est = kp.NystromRegressor(n_centers=1, penalty="auto", random_state=0)
    with pytest.raises(ValueError, match="y has values up to .*float32.*float64"):
        est.fit(X, np.full(8, top))
    est.fit(X, np.full(8, 1e29))
    assert np.all(np.isfinite(est.predict(X)))
    est.fit(X.astype(np.float64), np.full(8, top))  # float64 X: float64 predictions
    assert np.all(np.isfinite(est.predict(X.astype(np.float64))))


@pytest.mark.parametrize("scale", [1e-300, 1e-90, 2.0**-45, 1e40, 1e55])
@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.NystromRegressor(random_state=0),
        lambda: kp.KRLSRegressor(random_state=0),
        lambda: kp.NYTRORegressor(random_state=0),
    ],
    ids=["nystrom", "krls", "nytro"],
)
def test_the_model_is_the_same_at_every_target_scale(make, scale):
    """Targets times ``scale`` give the predictions times ``scale`` (to 1e-6 of their
    spread), the same chosen point, and its validation MSE times ``scale``^2: at 1e-90 the Nyström
    default predicted 19% of the spread off (the screens' squared per-row losses
    underflowed), below 1e-160 every loss was 0."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(600)
    base = make().fit(X, y)
    est = make().fit(X, y * scale)
    spread = np.ptp(base.predict(X))
    np.testing.assert_allclose(est.predict(X) / scale, base.predict(X), atol=1e-6 * spread)
    assert est.path_.best_index == base.path_.best_index
    if scale**2 > 0:  # the path's MSE in the targets' units (1e-600 is no float64)
        best = est.path_.best_val_error / scale**2
        assert best == pytest.approx(base.path_.best_val_error, rel=1e-6)


def _rff():
    return kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=10, random_state=0)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: kp.Gaussian(1.0)(np.ones(5), np.ones(5)), ValueError, "X must be .*2-D"),
        (lambda: kp.Matern(1.0)(np.ones((2, 3)), np.ones(3)), ValueError, "Z must be .*2-D"),
        (
            lambda: kp.Gaussian(1.0)(np.ones((3, 5)), np.ones((2, 4))),
            ValueError,
            "as many features.*5 and 4",
        ),
        (lambda: kp.Polynomial(2)(np.ones((3, 5)), np.ones((2, 4))), ValueError, "5 and 4"),
        (lambda: kp.Gaussian(1.0)(np.array([["a"]]), np.ones((1, 1))), TypeError, "X must"),
        (lambda: kp.Gaussian(1.0).diag(np.ones((3, 2), dtype=complex)), TypeError, "X must"),
        (lambda: kp.Linear().diag(np.ones((3, 2), dtype=complex)), TypeError, "X must"),
        (lambda: kp.Gaussian(1.0).diag(np.ones(3)), ValueError, "X must be .*2-D"),
        (
            lambda: kp.RecursiveRLS(features=_rff()).fit(np.array([["a", "b"]]), [1.0]),
            ValueError,
            "X must contain numbers",
        ),
        (
            lambda: kp.IncrementalRLSClassifier(features=_rff()).partial_fit(
                np.ones((2, 3)), np.array([1 + 1j, 2 + 0j])
            ),
            TypeError,
            "y must be real",
        ),
        (
            lambda: kp.RebalancedRLSClassifier(features=_rff()).partial_fit(
                np.ones((2, 3)), [1 + 1j, 2]
            ),
            TypeError,
            "y must be real",
        ),
    ],
    ids=[
        "1-D X",
        "1-D Z",
        "feature counts",
        "dot-kernel feature counts",
        "text",
        "complex diag",
        "complex linear diag",
        "1-D diag",
        "text to an online learner",
        "complex labels",
        "complex labels, rebalanced",
    ],
)
def test_bad_input_is_refused_at_the_entry_naming_the_argument(call, error, words):
    """Kernel calls, their diagonals and the online learners check their inputs where the
    user passes them: an IndexError, a matmul error or NumPy's conversion error came from
    deep inside, and complex labels and rows were taken."""
    with pytest.raises(error, match=words):
        call()


def test_kernels_and_learn_widths_take_lists_of_rows():
    rows = [[1.0, 2.0], [3.0, 4.0]]
    np.testing.assert_allclose(
        kp.Gaussian(1.0)(rows, rows), kp.Gaussian(1.0)(*[np.array(rows)] * 2)
    )
    X = np.random.default_rng(0).standard_normal((60, 2))
    got = kp.learn_widths(kp.Gaussian(1.0), X.tolist(), np.sin(X[:, 0]).tolist(), n_centers=10,
                          max_iter=2, random_state=0)  # fmt: skip
    want = kp.learn_widths(kp.Gaussian(1.0), X, np.sin(X[:, 0]), n_centers=10, max_iter=2,
                           random_state=0)  # fmt: skip
    np.testing.assert_array_equal(got.sigma, want.sigma)


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize(
    "make",
    [
        lambda: kp.RandomFeaturesRegressor(n_features=20, random_state=0),
        lambda: kp.NystromRegressor(random_state=0),
        lambda: kp.KRLSRegressor(),
        lambda: kp.EigenProRegressor(random_state=0),
    ],
    ids=["rf", "nystrom", "krls", "eigenpro"],
)
def test_a_missing_target_is_refused_naming_y(make):
    """A None in an object column became NaN past scikit-learn's check: random features
    predicted NaN, the others blamed the penalty or the step."""
    X, y = _data(60)
    yo = y.astype(object)
    yo[5] = None
    with pytest.raises(ValueError, match="y must be finite: it has 1 NaN"):
        make().fit(X, yo)
    with pytest.raises(ValueError, match="y contains infinity"):  # scikit-learn's check
        make().fit(X, np.where(np.arange(60) == 3, np.inf, y))


@pytest.mark.parametrize(
    "call",
    [
        lambda X, y: kp.RecursiveRLS().partial_fit(X, y + 5j),
        lambda X, y: kp.learn_widths(kp.Gaussian(1.0), X, y + 5j),
        lambda X, y: kp.learn_widths(kp.Gaussian(1.0), X, y, sample_weight=np.ones(len(y)) + 1j),
        lambda X, y: kp.NystromRegressor(n_centers=5).fit(X, y, sample_weight=y * 0 + 1j),
        lambda X, y: kp.KernelOperator(X + 1j, X[:5], kp.Gaussian(1.0)),
        lambda X, y: kp.Gaussian(1.0)(X + 1j, X),
    ],
    ids=["rls-y", "widths-y", "widths-weights", "fit-weights", "operator", "kernel"],
)
def test_complex_input_to_any_entry_is_refused_not_truncated(call):
    """Complex y, weights and X were cast to float (a ComplexWarning, the imaginary part
    dropped); the kernels returned complex values."""
    import warnings

    X, y = _data(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way
        with pytest.raises(TypeError, match="real numbers"):
            call(X, y)


@pytest.mark.parametrize("scale", [1e308, 5e-324])
def test_weights_at_the_ends_of_the_float_range(scale):
    """All-1e308 sample weights overflowed the rescaling's sum (ZeroDivisionError), all
    5e-324 ones gave LinAlgError: equal weights are no weights, whatever their size."""
    X, y = _data(80)
    ref = kp.NystromRegressor(n_centers=10, random_state=0).fit(X, y).predict(X)
    est = kp.NystromRegressor(n_centers=10, random_state=0)
    np.testing.assert_allclose(est.fit(X, y, sample_weight=np.full(80, scale)).predict(X), ref)
    labels = (y > 0).astype(int)
    clf = kp.NystromClassifier(n_centers=10, random_state=0).fit(X, labels)
    big = kp.NystromClassifier(n_centers=10, random_state=0, class_weight={0: 1e100, 1: 1e100})
    np.testing.assert_allclose(big.fit(X, labels).decision_function(X), clf.decision_function(X))


@pytest.mark.parametrize("scale", [1e77, 1e160])
@pytest.mark.parametrize("make", [kp.NystromRegressor, kp.EigenProRegressor])
def test_targets_whose_squares_overflow_are_refused_naming_y(make, scale):
    """|y| >= 1e77 silently gave another model (the screen's tie rule overflowed) and
    y * 1e160 an IndexError in EigenPro: refused, naming y and the way out."""
    X, y = _data(60)
    with pytest.raises(ValueError, match="y has values up to .*rescale the targets"):
        make(random_state=0).fit(X, y * scale)
    # below the limit the model scales with y: a power of two is exact
    ref = kp.NystromRegressor(n_centers=10, random_state=0).fit(X, y).predict(X)
    big = kp.NystromRegressor(n_centers=10, random_state=0).fit(X, y * 2.0**150).predict(X)
    np.testing.assert_allclose(big / 2.0**150, ref, rtol=1e-9, atol=1e-12)


def test_a_missing_pandas_label_is_named():
    """A pandas ``string`` Series with NA gave "boolean value of NA is ambiguous"."""
    pd = pytest.importorskip("pandas")
    X, _ = _data(4)
    labels = pd.Series(["a", "b", pd.NA, "a"], dtype="string")
    for est in (kp.NystromClassifier(n_centers=2), kp.RebalancedRLSClassifier()):
        with pytest.raises(ValueError, match="missing label"):
            est.fit(X, labels)


def test_messages_name_the_data_not_a_sigma_nobody_gave():
    """Identical rows whose mean is inexact (0.3 in three columns) were refused with "sigma:
    a width of 6.59e-10 is too narrow"; data at 1e150 asked for a sigma beyond range. The
    first is constant data (the width falls back to 1), the second names X."""
    rng = np.random.default_rng(0)
    est = kp.NystromRegressor(random_state=0).fit(np.full((50, 3), 0.3), rng.standard_normal(50))
    assert np.all(np.isfinite(est.predict(np.full((2, 3), 0.3))))
    X = rng.standard_normal((100, 3)) * 1e150
    for kernel in (kp.Gaussian("auto"), kp.Gaussian("median")):
        with pytest.raises(ValueError, match="X: the widths a fit takes from the data"):
            kp.NystromRegressor(kernel=kernel, n_centers=10, scale=False).fit(X, X[:, 0] / 1e150)
    with pytest.raises(ValueError, match="X: the widths a fit takes from the data"):
        kp.NystromRegressor(n_centers=10).fit(X, X[:, 0] / 1e150)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda X, y: kp.KRLSRegressor(max_iter=-1).fit(X, y), "max_iter must be"),
        (lambda X, y: kp.KRLSRegressor(step=np.nan).fit(X, y), "step must be"),
        (lambda X, y: kp.KRLSRegressor(nu=0).fit(X, y), "nu must be"),
        (lambda X, y: kp.LeverageCenters(n_samples=0), "n_samples must be"),
        (lambda X, y: kp.KernelOperator(X, X[:5], kp.Gaussian(1.0), n_jobs=0), "n_jobs must"),
        (lambda X, y: kp.Polynomial(degree=10**6), r"degree must be an integer in \[1, 100\]"),
        (lambda X, y: kp.Gaussian(1.0)(X * np.nan, X), "X contains NaN"),
        (lambda X, y: kp.KernelOperator(X, X[:5] * np.inf, kp.Gaussian(1.0)), "centers contains"),
    ],
    ids=["max_iter", "step", "nu", "n_samples", "n_jobs", "degree", "kernel-nan", "operator-inf"],
)
def test_every_parameter_and_input_is_checked(call, message):
    """Parameters the chosen filter does not use were never checked (KRLS with Tikhonov),
    LeverageCenters(n_samples=0), n_jobs=0 and degree=10**6 were accepted, and kernels and
    the operator returned NaN for NaN input."""
    X, y = _data(60)
    with pytest.raises(ValueError, match=message):
        call(X, y)


def test_weights_held_only_by_validation_rows_are_named():
    """Found by the weights fuzz: when every positive weight fell in the rows held out,
    the training targets' weighted mean divided by 0 (ZeroDivisionError)."""
    X, y = _data(40)
    for i in range(40):  # the one weighted row lands in the hold-out for some i
        w = np.zeros(40)
        w[i] = 1.0
        try:
            kp.KRLSRegressor(random_state=0).fit(X, y, sample_weight=w)
        except ValueError as exc:
            assert "rows this fit trains on have weight 0" in str(exc)
            break
    else:
        pytest.fail("no split put the weighted row in the hold-out")


# ----------------------------------------------------------------------------- input types
def test_complex_input_is_refused_not_truncated():
    import scipy.sparse

    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3)) + 1j
    y = X.real[:, 0]
    calls = {
        "RecursiveRLS": lambda: kp.RecursiveRLS().partial_fit(X[:5], y[:5]),
        "IncrementalRLSClassifier": lambda: kp.IncrementalRLSClassifier().partial_fit(
            X[:4], np.array([0, 1, 0, 1])
        ),
        "RebalancedRLSClassifier": lambda: kp.RebalancedRLSClassifier().partial_fit(
            X[:4], np.array([0, 1, 0, 1])
        ),
        "leverage_scores": lambda: kp.leverage_scores(X, kp.Gaussian(1.0), 1e-3),
        "effective_dimension": lambda: kp.effective_dimension(X, kp.Gaussian(1.0), 1e-3),
        "learn_widths": lambda: kp.learn_widths(kp.Gaussian("ard"), X, y),
    }
    for name, call in calls.items():
        with pytest.raises((TypeError, ValueError), match="[Cc]omplex|real") as info:
            call()
        assert any(w in str(info.value) for w in ("imaginary", "Complex", "real numbers")), name
    with pytest.raises(TypeError, match="sparse matrix"):
        kp.learn_widths(kp.Gaussian("ard"), scipy.sparse.csr_matrix(X.real), y)
