"""Tables as users hold them: text (categorical) columns and missing values encoded inside
the fitted model (``kernelpath.tabular``), checked against an encoding made by hand."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import kernelpath as kp
from kernelpath import tabular

pd = pytest.importorskip("pandas")


def _frame(n: int, seed: int) -> tuple:
    r = np.random.default_rng(seed)
    color = r.choice(["red", "green", "blue"], size=n)
    size = pd.Categorical(r.choice(["S", "M", "L"], size=n))
    flag = r.uniform(size=n) < 0.3
    x = r.normal(size=n)
    z = r.normal(size=n) * 10
    x_missing = r.uniform(size=n) < 0.15
    frame = pd.DataFrame(
        {
            "x": np.where(x_missing, np.nan, x),
            "color": np.where(r.uniform(size=n) < 0.1, None, color),
            "size": size,
            "flag": flag,
            "z": z,
        }
    )
    effect = {"red": 1.0, "green": -1.0, "blue": 0.0}
    y = np.sin(x) + np.array([effect[c] for c in color]) + 0.5 * flag + 0.01 * z
    return frame, y + 0.1 * r.normal(size=n)


def _by_hand(frame, train) -> np.ndarray:
    """The module's encoding written out: numeric columns filled with the training median,
    an indicator beside a column that had missing values, standardized on the training
    rows; categories sorted (missing last), one-hot entries sqrt(1/2)."""
    cols = []
    x = frame["x"].to_numpy(dtype=float)
    med = np.nanmedian(train["x"].to_numpy(dtype=float))
    filled = np.where(np.isnan(x), med, x)
    tr_filled = np.where(train["x"].isna(), med, train["x"].to_numpy(dtype=float))
    cols.append((filled - tr_filled.mean()) / tr_filled.std())
    cols.append(np.isnan(x).astype(float))
    for name in ("color", "size", "flag"):
        values = frame[name].astype(object).where(frame[name].notna(), None)
        seen = train[name].astype(object).where(train[name].notna(), None)
        cats = sorted({str(v) for v in seen if v is not None})
        if any(v is None for v in seen):
            cats.append(None)
        for c in cats:
            hit = [(v is None and c is None) or (v is not None and str(v) == c) for v in values]
            cols.append(np.sqrt(0.5) * np.asarray(hit, dtype=float))
    z = frame["z"].to_numpy(dtype=float)
    tz = train["z"].to_numpy(dtype=float)
    cols.append((z - tz.mean()) / tz.std())
    return np.column_stack(cols)


def test_a_frame_fits_as_its_encoding_by_hand_does():
    frame, y = _frame(800, 0)
    test, _ = _frame(300, 1)
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    enc = est.encoder_
    assert enc.kinds_ == ["numeric", "onehot", "onehot", "onehot", "numeric"]
    np.testing.assert_allclose(enc.transform(test), _by_hand(test, frame), atol=1e-12)
    manual = kp.NystromRegressor(search="none", scale=False, random_state=0)
    manual.fit(_by_hand(frame, frame), y)
    np.testing.assert_allclose(est.predict(test), manual.predict(_by_hand(test, frame)), atol=1e-9)
    assert est.n_features_in_ == 5
    assert list(est.feature_names_in_) == ["x", "color", "size", "flag", "z"]
    assert "color=missing" in enc.feature_names_out_ and "x_missing" in enc.feature_names_out_


def test_a_category_seen_only_at_predict_time_has_no_column():
    frame, y = _frame(600, 0)
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    test = frame.iloc[:5].copy()
    test["color"] = ["purple", "red", "purple", None, "blue"]
    encoded = est.encoder_.transform(test)
    names = est.encoder_.feature_names_out_
    color = [i for i, n in enumerate(names) if n.startswith("color=")]
    np.testing.assert_array_equal(encoded[[0, 2]][:, color], 0.0)
    assert np.isfinite(est.predict(test)).all()


def test_missing_values_error_refuses_naming_the_column():
    frame, y = _frame(300, 0)
    with pytest.raises(ValueError, match="column 'x'.*missing_values='error'"):
        kp.NystromRegressor(missing_values="error").fit(frame, y)
    with pytest.raises(ValueError, match="missing_values must be one of"):
        kp.NystromRegressor(missing_values="drop").fit(frame, y)
    # a float array's NaN: imputed by default, refused on request
    X = np.random.default_rng(0).normal(size=(300, 3))
    X[::7, 1] = np.nan
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, X[:, 0] ** 2)
    assert est.encoder_.indicator_ == [False, True, False] and est.n_features_in_ == 3
    assert np.isfinite(est.predict(X)).all()
    with pytest.raises(ValueError, match="X contains NaN"):
        kp.NystromRegressor(missing_values="error").fit(X, X[:, 0])


def test_bad_tables_are_refused_naming_what_is_wrong():
    frame, y = _frame(300, 0)
    mixed = frame.assign(z=frame["z"].astype(object))
    mixed.loc[3, "z"] = "n/a"
    with pytest.raises(ValueError, match="column 'z' mixes numbers"):
        kp.NystromRegressor(categorical_features=["color", "size", "flag"]).fit(mixed, y)
    with pytest.raises(ValueError, match="names column 'colour'"):
        kp.NystromRegressor(categorical_features=["colour"]).fit(frame, y)
    with pytest.raises(TypeError, match="column 'color' is not numeric"):
        kp.NystromRegressor(categorical_features=None).fit(frame, y)
    with pytest.raises(ValueError, match="boolean mask"):
        kp.NystromRegressor(categorical_features=[True, False]).fit(frame, y)
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    with pytest.raises(ValueError, match="missing \\['z'\\]"):
        est.predict(frame.drop(columns="z"))


def test_a_column_missing_everywhere_is_left_out_with_a_warning():
    frame, y = _frame(300, 0)
    frame["empty"] = np.nan
    with pytest.warns(UserWarning, match="column 'empty' is missing in every row"):
        est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    assert est.encoder_.kinds_[-1] == "dropped"
    assert np.isfinite(est.predict(frame)).all()


def test_many_categories_are_target_encoded_with_cross_fitting():
    r = np.random.default_rng(0)
    n, k = 1500, tabular.MAX_ONE_HOT + 8
    cat = r.integers(0, k, size=n)
    effect = r.normal(size=k)
    frame = pd.DataFrame({"c": [f"c{v}" for v in cat], "x": r.normal(size=n)})
    y = effect[cat] + 0.2 * frame["x"].to_numpy() + 0.1 * r.normal(size=n)
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    enc = est.encoder_
    assert enc.kinds_ == ["target", "numeric"]
    table = enc.encodings_[0][:, 0]
    # the codes are the categories' (shrunk) means of y ...
    means = np.array([y[cat == int(c[1:])].mean() for c in enc.categories_[0]])
    assert np.corrcoef(table, means)[0, 1] > 0.99
    # ... and a training row's own code was learned without it (cross fitting)
    train_codes = enc.fit_transform(frame, y, False)[:, 0] * enc.spreads_[0] + enc.offsets_[0]
    lookup = table[[enc.categories_[0].index(v) for v in frame["c"]]]
    assert not np.allclose(train_codes, lookup)
    unseen = enc.transform(pd.DataFrame({"c": ["new"], "x": [0.0]}))
    assert unseen[0, 0] == pytest.approx((enc.target_mean_[0] - enc.offsets_[0]) / enc.spreads_[0])


def test_a_wide_encoding_is_sparse_past_its_share_of_the_budget():
    frame, y = _frame(2000, 0)
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    dense = est.encoder_.transform(frame)
    sparse = est.encoder_.transform(frame, dense_limit=dense.nbytes // 2)
    assert sp.issparse(sparse)
    np.testing.assert_allclose(sparse.toarray(), dense)


def test_relevances_are_reported_per_column_of_the_table():
    frame, y = _frame(800, 0)
    est = kp.NystromRegressor(kernel=kp.Gaussian("agop"), random_state=0).fit(frame, y)
    assert est.feature_relevances_.shape == (5,)
    assert est.feature_relevances_.sum() == pytest.approx(1.0)
    enc = est.encoder_
    np.testing.assert_allclose(
        est.feature_relevances_,
        np.bincount(enc.feature_columns_, est.encoded_feature_relevances_, minlength=5),
    )


def test_the_classifier_takes_text_labels_and_columns():
    frame, y = _frame(800, 0)
    labels = np.where(y > np.median(y), "high", "low")
    clf = kp.NystromClassifier(search="none", random_state=0).fit(frame, labels)
    assert set(clf.predict(frame)) <= {"high", "low"}
    assert clf.score(frame, labels) > 0.8
    assert clf.predict_proba(frame).shape == (800, 2)


def test_numeric_arrays_and_sparse_rows_are_not_encoded():
    X = np.random.default_rng(0).normal(size=(200, 3))
    est = kp.NystromRegressor(search="none", random_state=0).fit(X, X[:, 0])
    assert not hasattr(est, "encoder_")
    est = kp.NystromRegressor(search="none", random_state=0).fit(sp.csr_matrix(X), X[:, 0])
    assert not hasattr(est, "encoder_")
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, X[:, 0])
    assert not hasattr(est, "encoder_") and list(est.feature_names_in_) == ["a", "b", "c"]


def test_the_estimators_keep_scikit_learns_contract():
    frame, y = _frame(300, 0)
    for Est in (kp.NystromRegressor, kp.KRLSRegressor, kp.RandomFeaturesRegressor):
        est = Est(categorical_features=["color"], missing_values="impute")
        assert clone(est).get_params()["categorical_features"] == ["color"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = Est(random_state=0).fit(frame, y)
        assert np.isfinite(fitted.predict(frame)).all()
        with pytest.raises(TypeError, match="predicts a DataFrame or an array"):
            fitted.predict(sp.csr_matrix(np.zeros((2, 5))))


def test_a_model_file_keeps_the_encoding(tmp_path):
    frame, y = _frame(500, 0)
    est = kp.NystromRegressor(search="none", random_state=0).fit(frame, y)
    path = tmp_path / "m.kp"
    kp.save(est, path)
    back = kp.load(path)
    np.testing.assert_array_equal(back.predict(frame), est.predict(frame))
    assert list(back.feature_names_in_) == list(est.feature_names_in_)


def test_polars_and_pyarrow_tables_are_taken():
    frame, y = _frame(300, 0)
    frame = frame.assign(size=frame["size"].astype(str))
    ref = kp.NystromRegressor(search="none", random_state=0).fit(frame, y).predict(frame)
    for lib in ("pyarrow", "polars"):
        try:
            mod = pytest.importorskip(lib)
        except pytest.skip.Exception:
            continue
        table = mod.Table.from_pandas(frame) if lib == "pyarrow" else mod.from_pandas(frame)
        est = kp.NystromRegressor(search="none", random_state=0).fit(table, y)
        np.testing.assert_allclose(est.predict(table), ref)
