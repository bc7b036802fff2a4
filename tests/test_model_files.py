"""Model files: every estimator, feature map and online learner round-trips bit for bit;
an online learner continues its stream; damaged, edited or foreign files are refused; no
file, however crafted, makes ``load`` run code."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.model_files import FORMAT_NAME, _checksum, _header

from .conftest import fitted_nystrom

safetensors = pytest.importorskip("safetensors.numpy")


def _data(n=240, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    labels = np.where(y > 0.3, "a", np.where(y < -0.3, "b", "c"))
    return X, y, labels


MODELS = {
    "krls": (lambda: kp.KRLSRegressor(), "y"),
    "krls-classifier": (lambda: kp.KRLSClassifier(), "labels"),
    "nystrom-cg": (lambda: kp.NystromRegressor(n_centers=30, random_state=0), "y"),
    "nystrom-direct-m-path": (
        lambda: kp.NystromRegressor(n_centers=[10, 30], solver="direct", random_state=0),
        "y",
    ),
    "nystrom-leverage": (
        lambda: kp.NystromRegressor(n_centers=30, centers="approximate-leverage", random_state=0),
        "y",
    ),
    "nystrom-classifier": (lambda: kp.NystromClassifier(n_centers=30, random_state=0), "labels"),
    "nytro": (lambda: kp.NYTRORegressor(n_centers=30, random_state=0), "y"),
    "nytro-classifier": (lambda: kp.NYTROClassifier(n_centers=30, random_state=0), "labels"),
    "rf": (lambda: kp.RandomFeaturesRegressor(n_features=30, random_state=0), "y"),
    "rf-classifier": (
        lambda: kp.RandomFeaturesClassifier(n_features=30, random_state=0),
        "labels",
    ),
    "sgm": (lambda: kp.SGMRegressor(random_state=0), "y"),
    "sgm-classifier": (lambda: kp.SGMClassifier(random_state=0), "labels"),
    "eigenpro": (lambda: kp.EigenProRegressor(random_state=0), "y"),
    "eigenpro-classifier": (lambda: kp.EigenProClassifier(random_state=0), "labels"),
    "kernel-list": (
        lambda: kp.NystromRegressor(
            [kp.Gaussian(0.5), kp.Laplacian(1.0), kp.Matern(1.0, nu=1.5)],
            n_centers=30,
            random_state=0,
        ),
        "y",
    ),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_round_trip_predicts_bit_for_bit(tmp_path, name):
    make, target = MODELS[name]
    X, y, labels = _data()
    est = make().fit(X, y if target == "y" else labels)
    path = kp.save(est, tmp_path / "model.kp")
    back = kp.load(path)
    assert type(back) is type(est)
    assert back.get_params().keys() == est.get_params().keys()
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    if hasattr(est, "decision_function"):
        np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
    assert back.best_params_ == est.best_params_
    np.testing.assert_array_equal(back.path_.val_error, est.path_.val_error)
    assert back.path_.best_index == est.path_.best_index
    np.testing.assert_array_equal(back.path_.coef(), est.path_.coef())
    if target == "labels":
        np.testing.assert_array_equal(back.classes_, est.classes_)


def test_the_header_describes_the_model(tmp_path):
    X, y, _ = _data()
    est = kp.NystromRegressor(kp.Gaussian(1.5), n_centers=30, random_state=0).fit(X, y)
    kp.save(est, tmp_path / "m.kp")
    header = _header((tmp_path / "m.kp").read_bytes())
    assert header["format"] == FORMAT_NAME and header["format_version"] == "1"
    assert header["kernelpath_version"] == kp.__version__
    assert header["class"] == "kernelpath.NystromRegressor"
    assert json.loads(header["params"])["n_centers"] == 30
    summary = json.loads(header["summary"])
    assert summary["kernel_"] == repr(est.kernel_)
    assert summary["centers_shape"] == [30, 3] and summary["n_features_in_"] == 3
    assert summary["path"]["best_index"] == list(est.path_.best_index)


def test_feature_maps_and_unfitted_estimators(tmp_path):
    X, y, _ = _data()
    for fm in (
        kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=20, random_state=0),
        kp.NystromFeatures(n_components=20, random_state=0),
    ):
        fm.fit(X)
        back = kp.load(kp.save(fm, tmp_path / "f.kp"))
        np.testing.assert_array_equal(back.transform(X), fm.transform(X))
    est = kp.NystromRegressor(n_centers=17, penalty=1e-3, random_state=3)
    back = kp.load(kp.save(est, tmp_path / "u.kp"))
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.fit(X, y).predict(X), est.fit(X, y).predict(X))


def test_feature_names_are_kept(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y, _ = _data()
    df = pd.DataFrame(X, columns=["speed", "load", "temp"])
    est = kp.NystromRegressor(n_centers=20, random_state=0).fit(df, y)
    back = kp.load(kp.save(est, tmp_path / "m.kp"))
    assert list(back.feature_names_in_) == ["speed", "load", "temp"]
    np.testing.assert_array_equal(back.predict(df), est.predict(df))


@pytest.mark.parametrize("kind", ["rls", "rls-features", "rlsc", "rebalanced"])
def test_online_learners_continue_their_stream(tmp_path, kind):
    X, y, labels = _data(300)
    make = {
        "rls": lambda: kp.RecursiveRLS(1e-2),
        "rls-features": lambda: kp.RecursiveRLS(
            1e-2, features=kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=40, random_state=0)
        ),
        "rlsc": lambda: kp.IncrementalRLSClassifier(selection="thesis"),
        "rebalanced": lambda: kp.RebalancedRLSClassifier(
            1e-2, features=kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=40, random_state=0)
        ),
    }[kind]
    t = labels if kind in ("rlsc", "rebalanced") else y
    a, b = make(), make()
    a.partial_fit(X[:150], t[:150])
    b.partial_fit(X[:150], t[:150])
    kp.save(b, tmp_path / "mid.kp")
    b = kp.load(tmp_path / "mid.kp")
    for s in range(150, 300, 50):  # both see the rest of the stream
        a.partial_fit(X[s : s + 50], t[s : s + 50])
        b.partial_fit(X[s : s + 50], t[s : s + 50])
    np.testing.assert_array_equal(b.predict(X), a.predict(X))
    assert b.n_samples_seen_ == a.n_samples_seen_ == 300 if hasattr(a, "n_samples_seen_") else True


def test_semiparametric_gets_its_regressor_back(tmp_path):
    from kernelpath.datasets import make_arm_dynamics

    X, tau, reg, _ = make_arm_dynamics(300, random_state=0)
    sp = kp.SemiparametricRegressor(reg, n_features=50, random_state=0).fit(X[:200], tau[:200])
    kp.save(sp, tmp_path / "sp.kp")
    with pytest.raises(ValueError, match="regressor=f"):
        kp.load(tmp_path / "sp.kp")
    back = kp.load(tmp_path / "sp.kp", regressor=reg)
    assert back.regressor is reg
    np.testing.assert_array_equal(back.predict(X), sp.predict(X))
    sp.partial_fit(X[200:], tau[200:])
    back.partial_fit(X[200:], tau[200:])
    np.testing.assert_array_equal(back.predict(X), sp.predict(X))
    with pytest.raises(ValueError, match="needs no code"):
        kp.load(kp.save(kp.RecursiveRLS(), tmp_path / "r.kp"), regressor=reg)


def test_code_is_refused_at_save(tmp_path):
    X, y, _ = _data()

    class MyKernel(kp.Gaussian):
        pass

    est = kp.NystromRegressor(MyKernel(1.0), n_centers=20, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="user-defined Kernel subclass"):
        kp.save(est, tmp_path / "k.kp")
    rls = kp.RecursiveRLS(features=lambda A: np.hstack([A, A**2])).partial_fit(X, y)
    with pytest.raises(TypeError, match="model.features is a function"):
        kp.save(rls, tmp_path / "f.kp")
    with pytest.raises(TypeError, match="model must be a kernelpath estimator"):
        kp.save({"coef": np.ones(3)}, tmp_path / "d.kp")
    assert sorted(os.listdir(tmp_path)) == []  # nothing written, not even a temporary file


def _small_file(tmp_path):
    X, y, _ = _data(100)
    est = kp.NystromRegressor(n_centers=10, penalty=1e-3, max_iter=3, random_state=0).fit(X, y)
    return est, kp.save(est, tmp_path / "m.kp")


def test_every_flipped_byte_and_every_truncation_is_refused(tmp_path):
    _, path = _small_file(tmp_path)
    raw = open(path, "rb").read()
    q = tmp_path / "bad.kp"
    rng = np.random.default_rng(0)
    for i in range(len(raw)):  # every byte, a random bit
        b = bytearray(raw)
        b[i] ^= 1 << int(rng.integers(8))
        q.write_bytes(bytes(b))
        with pytest.raises(kp.ModelFileError):
            kp.load(q)
    for k in range(0, len(raw), 37):
        q.write_bytes(raw[:k])
        with pytest.raises(kp.ModelFileError):
            kp.load(q)
    q.write_bytes(b"not a model at all")
    with pytest.raises(kp.ModelFileError):
        kp.load(q)
    with pytest.raises(ValueError, match="no such file"):
        kp.load(tmp_path / "missing.kp")


def _rewrite(src, dst, edit, fix_checksum):
    """A file with its header edited by ``edit(header)``, re-signed or not."""
    tensors = safetensors.load(open(src, "rb").read())
    header = _header(open(src, "rb").read())
    edit(header)
    if fix_checksum:
        header["checksum"] = _checksum(header, tensors)
    dst.write_bytes(safetensors.save(tensors, metadata=header))
    return dst


def test_edited_headers(tmp_path):
    est, path = _small_file(tmp_path)
    X, _, _ = _data(100)

    def change_penalty(h):
        tree = json.loads(h["model"])
        tree["state"]["penalty"] = 0.5
        h["model"] = json.dumps(tree)

    with pytest.raises(kp.ModelFileError, match="checksum"):
        kp.load(_rewrite(path, tmp_path / "e.kp", change_penalty, fix_checksum=False))
    # a file rewritten consistently loads as the model it describes
    back = kp.load(_rewrite(path, tmp_path / "c.kp", change_penalty, fix_checksum=True))
    assert back.penalty == 0.5
    np.testing.assert_array_equal(back.predict(X), est.predict(X))

    def newer(h):
        h["kernelpath_version"] = "9.0.0"

    with pytest.raises(kp.ModelFileError, match="written by kernelpath 9.0.0"):
        kp.load(_rewrite(path, tmp_path / "v.kp", newer, fix_checksum=True))


_NYS = "kernelpath.NystromRegressor"
CRAFTED = [
    {"$object": "builtins.eval", "id": 0, "state": {}},
    {"$object": "os.system", "id": 0, "state": {}},
    {"$object": "subprocess.Popen", "id": 0, "state": {"args": ["touch", "PWNED"]}},
    {"$object": _NYS, "id": 0, "state": {"k": {"$ref": 7}}},
    {"$object": _NYS, "id": 0, "state": {"k": {"__reduce__": 1}}},
    {"$object": _NYS, "id": 0, "state": {"k": {"$scalar": "O", "value": 1}}},
    {"$object": _NYS, "id": 0, "state": {"k": {"$array": "zzz"}}},
]


@pytest.mark.parametrize("tree", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_files_run_no_code(tmp_path, monkeypatch, tree):
    """Consistently signed files that name other classes, or hold a pickle-like entry: refused
    before anything outside the allowlist is touched."""
    _, path = _small_file(tmp_path)
    monkeypatch.chdir(tmp_path)

    def craft(h):
        h["model"] = json.dumps(tree)

    with pytest.raises(kp.ModelFileError):
        kp.load(_rewrite(path, tmp_path / "x.kp", craft, fix_checksum=True))
    assert not (tmp_path / "PWNED").exists()


def test_squeak_regularized_estimator_round_trips(tmp_path):
    X, y, _ = _data(300)
    est = kp.NystromRegressor(
        kp.Gaussian(1.0),
        centers=kp.SqueakCenters(1e-3, variant="paper", regularized=True),
        solver="direct",
        random_state=0,
    ).fit(X, y)
    back = kp.load(kp.save(est, tmp_path / "sq.kp"))
    assert back.centers.regularized and back.centers.variant == "paper"
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


def test_a_model_selected_by_k_fold_round_trips(tmp_path):
    """A k-fold path keeps no coefficients (the model is refit on all the data): saving it
    used to fail asking the path for its chosen point's coefficients."""
    X, y, _ = _data()
    est = kp.NystromRegressor(n_centers=30, cv=3, random_state=0).fit(X, y)
    back = kp.load(kp.save(est, tmp_path / "kfold.kp"))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    np.testing.assert_array_equal(back.path_.val_error, est.path_.val_error)
    with pytest.raises(IndexError, match="not kept"):
        back.path_.coef()


# ------------------------------------------------------------------ scikit-learn pipelines
def safe_open_metadata(path):
    """The header (string metadata) of a model file."""
    with open(path, "rb") as fh:
        return _header(fh.read())


def _frame(n=300, seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(5, 2, n),
            "c": rng.choice(["x", "y", "z"], n),
            "d": rng.uniform(0, 10, n),
        }
    )
    df.loc[3, "a"] = np.nan
    y = np.sin(df["a"].fillna(0)) + (df["c"] == "x") + 0.1 * rng.standard_normal(n)
    return df, np.asarray(y)


def _preprocessor():
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, OneHotEncoder, StandardScaler

    return ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), ["a"]),
            ("mm", MinMaxScaler(), ["b"]),
            ("cat", OneHotEncoder(handle_unknown="ignore"), ["c"]),
        ],
        remainder=MaxAbsScaler(),
    )


@pytest.mark.parametrize("make", [lambda: kp.NystromRegressor(n_centers=40), kp.KRLSClassifier])
def test_a_pipeline_saves_without_pickle_and_predicts_the_same(make, tmp_path):
    """Every allowlisted preprocessor behind a kernelpath estimator: the loaded pipeline
    predicts bit for bit (an unseen category and a missing value included)."""
    from sklearn.pipeline import Pipeline

    df, y = _frame()
    target = y if make().__class__.__name__.endswith("Regressor") else (y > 0.5)
    pipe = Pipeline([("prep", _preprocessor()), ("model", make().set_params(random_state=0))])
    pipe.fit(df, target)
    back = kp.load(kp.save(pipe, tmp_path / "p.kp"))
    assert isinstance(back, Pipeline) and [n for n, _ in back.steps] == ["prep", "model"]
    test, _ = _frame(50, seed=1)
    test.loc[0, "c"], test.loc[1, "a"] = "never seen", np.nan
    np.testing.assert_array_equal(back.predict(test), pipe.predict(test))
    if hasattr(pipe, "predict_proba"):
        np.testing.assert_array_equal(back.predict_proba(test), pipe.predict_proba(test))
    header = json.loads(safe_open_metadata(tmp_path / "p.kp")["summary"])
    assert header["steps"] == [["prep", "ColumnTransformer"], ["model", type(make()).__name__]]


def test_pipelines_that_carry_code_or_end_elsewhere_are_refused(tmp_path):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    df, y = _frame()
    X = df[["b", "d"]]
    code = make_pipeline(FunctionTransformer(np.log1p), kp.NystromRegressor(n_centers=20))
    with pytest.raises(TypeError, match="FunctionTransformer: it carries code"):
        kp.save(code.fit(X.abs(), y), tmp_path / "f.kp")
    with pytest.raises(
        TypeError, match="Pipeline ending in one, got .* ending in a StandardScaler"
    ):
        kp.save(make_pipeline(StandardScaler()).fit(X), tmp_path / "s.kp")
    with pytest.raises(TypeError, match="model must be"):
        kp.save(StandardScaler().fit(X), tmp_path / "s.kp")
    assert not list(tmp_path.iterdir())


def test_a_pipeline_file_from_another_scikit_learn_version_warns(tmp_path, monkeypatch):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from kernelpath import model_files

    df, y = _frame()
    pipe = make_pipeline(StandardScaler(), kp.NystromRegressor(n_centers=20, random_state=0))
    path = kp.save(pipe.fit(df[["b", "d"]], y), tmp_path / "p.kp")
    assert safe_open_metadata(path)["sklearn_version"] == model_files.sklearn_version
    monkeypatch.setattr(model_files, "sklearn_version", "0.0.1")
    with pytest.warns(UserWarning, match="written by scikit-learn .* this is 0.0.1"):
        kp.load(path)


def test_stored_types_name_only_numpy_and_builtin_types():
    from kernelpath.model_files import ModelFileError
    from kernelpath.model_files._codec import _decode_type

    assert (
        _decode_type({"$type": "<f8"}) is np.float64 and _decode_type({"$type": "float"}) is float
    )
    assert _decode_type({"$dtype": "<i8"}) == np.dtype(np.int64)
    for bad in ({"$type": "builtins.eval"}, {"$type": "os.system"}, {"$dtype": "V8"}):
        with pytest.raises(ModelFileError, match="bad type"):
            _decode_type(bad)


def test_the_command_line_inspects_and_predicts_a_pipeline_file(tmp_path, capsys):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from kernelpath.cli import main

    df, y = _frame()
    X = df[["b", "d"]]
    pipe = make_pipeline(StandardScaler(), kp.NystromRegressor(n_centers=20, random_state=0))
    kp.save(pipe.fit(X, y), tmp_path / "p.kp")
    X.to_csv(tmp_path / "x.csv", index=False)
    assert main(["inspect", str(tmp_path / "p.kp")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "pipeline: StandardScaler -> NystromRegressor",
        "model: kernelpath.NystromRegressor",
    ]
    args = [
        "predict",
        str(tmp_path / "p.kp"),
        str(tmp_path / "x.csv"),
        "-o",
        str(tmp_path / "p.npy"),
    ]
    assert main([*args, "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), pipe.predict(X))


def _paths(tree, at=()):
    """Every place in a model tree (JSON), as a path of keys and indices."""
    yield at
    children = (
        tree.items()
        if isinstance(tree, dict)
        else enumerate(tree)
        if isinstance(tree, list)
        else ()
    )
    for key, child in children:
        yield from _paths(child, (*at, key))


#: What a tampered entry becomes: numbers out of range, other types, other entries' forms.
REPLACEMENTS = [
    0, -1, 2**63, 10**400, 1e308, -1e308, "x", [], {}, None, True, [1, 2],
    {"$array": "a0"}, {"$ref": 0}, {"$scalar": "<f8", "value": 1e308}, {"$tuple": []},
    {"$dict": {}}, {"$items": [1], "kind": "U", "shape": [1]}, {"$slice": [0, 1, 0]},
    {"$type": "float"}, {"$csr": []}, {"$pairs": [[1, 2]]},
    {"$object": "kernelpath.Gaussian", "id": 99, "state": {}},
]  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [
        lambda X, y, labels: kp.NystromRegressor(n_centers=20, random_state=0).fit(X, y),
        lambda X, y, labels: kp.NystromClassifier(n_centers=20, random_state=0).fit(X, labels),
        lambda X, y, labels: kp.RecursiveRLS(
            features=kp.RandomFourierFeatures(kp.Gaussian(1.0), n_features=20, random_state=0)
        ).fit(X, y),
    ],
    ids=["regressor", "classifier", "online"],
)
def test_a_tampered_consistent_file_fails_only_with_model_file_error(tmp_path, make):
    """Every entry of the model's tree replaced by each of ``REPLACEMENTS`` (the checksum
    recomputed, as a forger or a re-signing tool would): ``load`` refuses it with a
    ``ModelFileError`` that names the file, or returns a model whose predictions are
    finite. Before, tampered entries surfaced as AttributeError, OverflowError, KeyError
    or IndexError, at load or at the first prediction."""
    X, y, labels = _data(120)
    path = kp.save(make(X, y, labels), tmp_path / "m.kp")
    tree = json.loads(_header(open(path, "rb").read())["model"])
    places = list(_paths(tree))[1:]
    rng = np.random.default_rng(0)
    refused = 0
    for k, at in enumerate(places):
        replacement = REPLACEMENTS[
            (k * 7 + int(rng.integers(len(REPLACEMENTS)))) % len(REPLACEMENTS)
        ]

        def edit(h, at=at, replacement=replacement):
            t = json.loads(h["model"])
            parent = t
            for key in at[:-1]:
                parent = parent[key]
            parent[at[-1]] = replacement
            h["model"] = json.dumps(t)

        bad = _rewrite(path, tmp_path / "t.kp", edit, fix_checksum=True)
        try:
            model = kp.load(bad)
        except kp.ModelFileError as exc:
            assert str(bad) in str(exc)
            refused += 1
            continue
        for name in ("predict", "predict_proba"):
            if hasattr(model, name):
                out = getattr(model, name)(X)
                if np.asarray(out).dtype.kind == "f":
                    assert np.all(np.isfinite(out)), (at, replacement)
    assert refused > len(places) // 4


def test_coefficients_whose_predictions_overflow_are_refused(tmp_path):
    """A re-signed file whose coefficients are 1e308 (finite, each of them) predicted
    infinity; ``load`` refuses it, naming the file and coef_."""
    X, y, _ = _data(120)
    est = kp.NystromRegressor(n_centers=20, random_state=0).fit(X, y)
    path = kp.save(est, tmp_path / "m.kp", key="secret")
    raw = open(path, "rb").read()
    tensors = safetensors.load(raw)
    header = _header(raw)
    for name, a in tensors.items():
        if a.shape == est.coef_.shape and np.array_equal(a, est.coef_):
            tensors[name] = np.full_like(a, 1e308)
    from kernelpath.model_files import _signature

    header["checksum"] = _checksum(header, tensors)
    header["signature"] = _signature(header["checksum"], b"secret")
    bad = tmp_path / "big.kp"
    bad.write_bytes(safetensors.save(tensors, metadata=header))
    with pytest.raises(kp.ModelFileError, match=r"big\.kp.*coef_"):
        kp.load(bad, key="secret")


def _resigned(src, dst, edit):
    """``src`` with its header edited by ``edit(header)`` and its (unkeyed) checksum
    recomputed: what anyone can forge."""
    import safetensors.numpy as st

    from kernelpath.model_files import _checksum, _header

    data = open(src, "rb").read()
    tensors, header = st.load(data), _header(data)
    edit(header)
    header["checksum"] = _checksum(header, tensors)
    dst.write_bytes(st.save(tensors, metadata=header))
    return dst


def _model_edit(path, text):
    """An edit of the model tree: the first occurrence of ``path`` (a JSON fragment)
    replaced by ``text``."""

    def edit(header):
        assert path in header["model"], path
        header["model"] = header["model"].replace(path, text, 1)

    return edit


def test_load_checks_the_header_against_the_file_before_reading_it(tmp_path):
    """``load`` read the whole file before looking at its header: an 8 GB sparse file
    cost 8.6 GB. Now bytes after the arrays the header describes are refused first."""
    import os
    import tracemalloc

    X, y, _ = _data(60)
    path = tmp_path / "m.kp"
    kp.save(kp.NystromRegressor(n_centers=10, random_state=0).fit(X, y), path)
    size = os.path.getsize(path)
    os.truncate(path, size + 2**30)  # a sparse gigabyte after the arrays
    tracemalloc.start()
    try:
        with pytest.raises(kp.ModelFileError, match="follow the header"):
            kp.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    os.truncate(path, size - 1)  # cut short: the last array's bytes are missing
    with pytest.raises(kp.ModelFileError, match="do not fit a file"):
        kp.load(path)


def test_a_wide_header_is_checked_in_linear_time(tmp_path):
    """The duplicate-column check counted each name in the list (60,000 columns: 125 s).
    Now the names are counted once: no per-name scan of the list (``count``, ``in``);
    the messages list 20 of them."""
    from kernelpath.data.tables import _choose_columns

    class Names(list):
        """A header whose per-name scans (quadratic over all names) fail the test."""

        def count(self, value):
            raise AssertionError("a scan of every name per name")

        def __contains__(self, value):
            raise AssertionError("a scan of every name per name")

    names = Names(f"c{i}" for i in range(40_000))
    assert _choose_columns(names, "c7", None, "t.csv")[:2] == ["c0", "c1"]
    assert _choose_columns(names, "c7", ["c9", "c1"], "t.csv") == ["c9", "c1"]
    with pytest.raises(ValueError, match=r"duplicate column names \['c0', 'c5'\]"):
        _choose_columns(Names([*names, "c5", "c0"]), None, None, "t.csv")
    with pytest.raises(ValueError, match=r"no column \[.*\] and 19980 more"):
        _choose_columns(names, None, [f"x{i}" for i in range(20_000)], "t.csv")
    with pytest.raises(ValueError, match=r"columns: \['c3'\] named more than once"):
        _choose_columns(names, None, ["c3", "c4", "c3"], "t.csv")


def test_forged_headers_are_model_file_errors(tmp_path):
    """Re-signed files (the checksum is unkeyed): a NaN intercept or calibration loaded
    (NaN predictions), a deeply nested header raised RecursionError, a non-ASCII signature
    TypeError, a non-JSON user_code JSONDecodeError, three classes over two-class
    coefficients loaded. Each is now a ModelFileError at load."""
    import json

    X, y, _ = _data(80)
    reg = tmp_path / "r.kp"
    kp.save(kp.NystromRegressor(n_centers=10, random_state=0).fit(X, y), reg)
    clf = tmp_path / "c.kp"
    kp.save(kp.NystromClassifier(n_centers=10, random_state=0).fit(X, y > 0), clf)
    tree = json.loads(kp.model_files._header(open(reg, "rb").read())["model"])
    intercept = json.dumps(tree["state"]["intercept_"])
    cases = {
        "nan intercept": (
            reg,
            _model_edit(f'"intercept_": {intercept}', '"intercept_": {"$float": "nan"}'),
        ),
        "nan literal": (reg, _model_edit(f'"intercept_": {intercept}', '"intercept_": NaN')),
        "deep": (reg, lambda h: h.__setitem__("model", "[" * 100_000 + "]" * 100_000)),
        "user code": (reg, lambda h: h.__setitem__("user_code", "not json")),
        "classes": (
            clf,
            _model_edit(
                '"classes_": {"$array"',
                '"classes_": {"$items": [0, 1, 2], "shape": [3], "kind": "O"}, "x": {"$array"',
            ),
        ),
    }
    for name, (src, edit) in cases.items():
        with pytest.raises(kp.ModelFileError):
            kp.load(_resigned(src, tmp_path / f"{name}.kp", edit))
    signed = tmp_path / "s.kp"
    kp.save(kp.load(reg), signed, key="k")
    forged = _resigned(signed, tmp_path / "sig.kp", lambda h: h.__setitem__("signature", "é" * 64))
    with pytest.raises(kp.ModelFileError, match="signature does not match"):
        kp.load(forged, key="k")


# ----------------------------------------------------------------------------- model files
def resigned(data, edit):
    """The bytes of a model file whose contents ``edit(header, model_tree, tensors)``
    changed, with its checksum recomputed, as anyone can (the checksum is not keyed)."""
    import json

    from safetensors.numpy import load as st_load
    from safetensors.numpy import save as st_save

    from kernelpath import model_files as mf

    tensors, header = dict(st_load(data)), mf._header(data)
    tree = json.loads(header["model"])
    edit(header, tree, tensors)
    header["model"] = json.dumps(tree)
    header["checksum"] = mf._checksum(header, tensors)
    return st_save(tensors, metadata=header)


def _resign(src, dst, edit):
    """``resigned`` from the file ``src`` to the file ``dst``."""
    open(dst, "wb").write(resigned(open(src, "rb").read(), edit))


def _peak(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error is checked by the caller
        err = exc
    else:
        err = None
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, err


def _state_array(tree, attr):
    return tree["state"][attr]["$array"]


def test_a_resigned_file_with_a_text_array_bomb_is_refused_within_bounded_memory(tmp_path):
    import kernelpath as kp
    from kernelpath.model_files import ModelFileError

    est, _ = fitted_nystrom(classes=["no", "yes"])
    kp.save(est, tmp_path / "m.kp")

    def bomb(header, tree, tensors):
        # 40,000 short items and one of 20,000 characters: a few hundred kB of JSON, 3 GB as
        # a fixed-width array
        tree["state"]["classes_"] = {
            "$items": ["a"] * 40_000 + ["b" * 20_000],
            "kind": "U",
            "shape": [40_001],
        }

    _resign(tmp_path / "m.kp", tmp_path / "bomb.kp", bomb)
    size = os.path.getsize(tmp_path / "bomb.kp")
    peak, err = _peak(lambda: kp.load(tmp_path / "bomb.kp"))
    assert isinstance(err, ModelFileError) and "text array" in str(err)
    assert peak <= 2 * size + 64 * 2**20, peak


def test_a_resigned_file_with_an_empty_but_huge_coefficient_array_is_refused(tmp_path):
    import kernelpath as kp
    from kernelpath.model_files import ModelFileError

    est, _ = fitted_nystrom()
    kp.save(est, tmp_path / "m.kp")

    def huge(header, tree, tensors):
        tensors[_state_array(tree, "coef_")] = np.zeros((0, 10**9))

    _resign(tmp_path / "m.kp", tmp_path / "huge.kp", huge)
    with pytest.raises(ModelFileError, match="do not fit a file"):
        kp.load(tmp_path / "huge.kp")


def test_a_resigned_file_with_nan_or_inconsistent_coefficients_is_refused(tmp_path):
    import kernelpath as kp
    from kernelpath.model_files import ModelFileError

    est, X = fitted_nystrom()
    kp.save(est, tmp_path / "m.kp")

    def nan(header, tree, tensors):
        key = _state_array(tree, "coef_")
        tensors[key] = tensors[key].copy()
        tensors[key][3] = np.nan

    def short(header, tree, tensors):
        key = _state_array(tree, "coef_")
        tensors[key] = tensors[key][:5].copy()

    _resign(tmp_path / "m.kp", tmp_path / "nan.kp", nan)
    with pytest.raises(ModelFileError, match="NaN or infinity"):
        kp.load(tmp_path / "nan.kp")
    _resign(tmp_path / "m.kp", tmp_path / "short.kp", short)
    with pytest.raises(ModelFileError, match="does not fit 20 centers"):
        kp.load(tmp_path / "short.kp")
    # the untouched file still loads and predicts as saved
    np.testing.assert_array_equal(kp.load(tmp_path / "m.kp").predict(X), est.predict(X))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")
def test_load_refuses_devices_and_fifos_without_reading_them(tmp_path):
    import kernelpath as kp
    from kernelpath.model_files import ModelFileError

    os.symlink("/dev/zero", tmp_path / "zero.kp")
    with pytest.raises(ModelFileError, match="not a regular file"):
        kp.load(tmp_path / "zero.kp")
    os.mkfifo(tmp_path / "fifo.kp")
    with pytest.raises(ModelFileError, match="not a regular file"):
        kp.load(tmp_path / "fifo.kp")  # before the fix: blocked forever in open()


def test_keyed_signature(tmp_path):
    import kernelpath as kp
    from kernelpath.model_files import ModelFileError

    est, X = fitted_nystrom()
    kp.save(est, tmp_path / "signed.kp", key="s3cret")
    kp.save(est, tmp_path / "plain.kp")
    np.testing.assert_array_equal(
        kp.load(tmp_path / "signed.kp", key="s3cret").predict(X), est.predict(X)
    )
    kp.load(tmp_path / "signed.kp")  # without a key: the checksum only
    with pytest.raises(ModelFileError, match="signature does not match"):
        kp.load(tmp_path / "signed.kp", key=b"other")
    with pytest.raises(ModelFileError, match="not signed"):
        kp.load(tmp_path / "plain.kp", key="s3cret")

    def forge(header, tree, tensors):  # the checksum is recomputed; the signature cannot be
        key = _state_array(tree, "coef_")
        tensors[key] = tensors[key] * 2

    _resign(tmp_path / "signed.kp", tmp_path / "forged.kp", forge)
    kp.load(tmp_path / "forged.kp")  # the checksum alone cannot tell
    with pytest.raises(ModelFileError, match="signature does not match"):
        kp.load(tmp_path / "forged.kp", key="s3cret")
    with pytest.raises(TypeError, match="key must be"):
        kp.save(est, tmp_path / "x.kp", key=123)
