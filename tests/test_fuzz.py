"""Fuzzing every public entry point with hypothesis: bad input (NaN, inf, empty, wrong
shapes, text, wrong feature counts, use before fit, invalid parameters) gives a
``ValueError`` / ``TypeError`` / ``NotFittedError`` whose message names what is wrong;
nothing else escapes, and no fit that succeeds leaves a NaN model."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.exceptions import NotFittedError

import kernelpath as kp

from .test_model_files import resigned

#: Derandomized in the suite (the same examples on every run); ``KERNELPATH_FUZZ=N`` runs N
#: random examples per entry point instead (a deeper search, outside CI).
_DEEP = int(os.environ.get("KERNELPATH_FUZZ", "0"))
FUZZ = settings(
    max_examples=_DEEP or 25,
    derandomize=not _DEEP,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
ALLOWED = (ValueError, TypeError, NotFittedError)
#: Words one of which the message of a refusal must contain: the argument or the problem.
NAMES = (
    "X", "y", "sample", "feature", "target", "label", "class", "penalty", "kernel", "sigma",
    "n_", "memory_budget", "random_state", "fit", "shape", "NaN", "infinity", "finite",
    "dimension", "dtype", "numeric", "number", "string", "empty", "array", "Input",
)  # fmt: skip

rng = np.random.default_rng(0)
X0 = rng.standard_normal((40, 3))
Y0 = np.sin(X0[:, 0])
L0 = np.where(Y0 > 0, "a", "b")

REGRESSORS = {
    "KRLSRegressor": lambda: kp.KRLSRegressor(),
    "NystromRegressor": lambda: kp.NystromRegressor(n_centers=8, random_state=0),
    "NYTRORegressor": lambda: kp.NYTRORegressor(n_centers=8, random_state=0),
    "RandomFeaturesRegressor": lambda: kp.RandomFeaturesRegressor(n_features=16, random_state=0),
    "SGMRegressor": lambda: kp.SGMRegressor(n_features=16, n_passes=2, random_state=0),
    "EigenProRegressor": lambda: kp.EigenProRegressor(n_epochs=2, random_state=0),
}
CLASSIFIERS = {
    "KRLSClassifier": lambda: kp.KRLSClassifier(),
    "NystromClassifier": lambda: kp.NystromClassifier(n_centers=8, random_state=0),
    "NYTROClassifier": lambda: kp.NYTROClassifier(n_centers=8, random_state=0),
    "RandomFeaturesClassifier": lambda: kp.RandomFeaturesClassifier(n_features=16, random_state=0),
    "SGMClassifier": lambda: kp.SGMClassifier(n_features=16, n_passes=2, random_state=0),
    "EigenProClassifier": lambda: kp.EigenProClassifier(n_epochs=2, random_state=0),
}
TRANSFORMERS = {
    "RandomFourierFeatures": lambda: kp.RandomFourierFeatures(
        kp.Gaussian(1.0), n_features=8, random_state=0
    ),
    "NystromFeatures": lambda: kp.NystromFeatures(n_components=8, random_state=0),
}

floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
bad_matrices = st.one_of(
    arrays(np.float64, st.tuples(st.integers(0, 30), st.integers(0, 4)), elements=floats),
    arrays(np.float64, st.integers(0, 30), elements=floats),  # 1-D
    arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3))),
    st.lists(st.lists(st.text(max_size=3), min_size=1, max_size=4), min_size=1, max_size=6),
    st.lists(st.lists(floats, max_size=4), max_size=6),  # ragged
    st.sampled_from([None, 3.0, "X", [[]], [[np.nan]]]),
)


def _refused_or_sane(call, result_check=None, names=NAMES, allowed=ALLOWED):
    """Run ``call``: a refusal must be an allowed exception naming one of ``names``; a
    success must pass ``result_check``."""
    try:
        out = call()
    except allowed as exc:
        msg = str(exc)
        assert any(w in msg for w in names), f"unnamed refusal: {type(exc).__name__}: {msg}"
        return None
    if result_check is not None:
        result_check(out)
    return out


def _finite_model(est):
    for attr in ("coef_", "centers_"):
        value = getattr(est, attr, None)
        if value is not None:  # EigenPro on random features has no centers
            assert np.all(np.isfinite(np.asarray(value, dtype=float)))


def _finite(out):
    assert np.all(np.isfinite(np.asarray(out, dtype=float)))


@pytest.mark.parametrize("name", list(REGRESSORS))
@FUZZ
@given(X=bad_matrices, y=st.one_of(bad_matrices, st.just(Y0)))
def test_regressors_fit(name, X, y):
    est = REGRESSORS[name]()
    _refused_or_sane(lambda: est.fit(X, y), _finite_model)


@pytest.mark.parametrize("name", list(CLASSIFIERS))
@FUZZ
@given(
    X=st.one_of(bad_matrices, st.just(X0)),
    y=st.one_of(
        bad_matrices,
        st.lists(st.one_of(st.text(max_size=2), floats, st.none()), min_size=40, max_size=40),
    ),
)
def test_classifiers_fit(name, X, y):
    est = CLASSIFIERS[name]()
    _refused_or_sane(lambda: est.fit(X, np.asarray(y, dtype=object)), _finite_model)


@pytest.mark.parametrize("name", [*REGRESSORS, *CLASSIFIERS, *TRANSFORMERS])
@FUZZ
@given(X=bad_matrices)
def test_predict_and_transform(name, X):
    makers = {**REGRESSORS, **CLASSIFIERS, **TRANSFORMERS}
    est = makers[name]()
    method = "transform" if name in TRANSFORMERS else "predict"
    with pytest.raises(NotFittedError):
        getattr(est, method)(X0)
    if name in TRANSFORMERS:
        est.fit(X0)
    else:
        est.fit(X0, L0 if name in CLASSIFIERS else Y0)
    _refused_or_sane(lambda: getattr(est, method)(X), None)
    with pytest.raises(ValueError, match="features"):
        getattr(est, method)(X0[:, :2])


@pytest.mark.parametrize("name", [*REGRESSORS, *TRANSFORMERS])
@FUZZ
@given(
    key=st.sampled_from(
        ["penalty", "n_centers", "n_features", "n_components", "memory_budget",
         "validation_fraction", "random_state", "kernel", "max_iter", "n_epochs", "n_passes"]
    ),
    value=st.one_of(floats, st.integers(-5, 5), st.text(max_size=4), st.none(),
                    st.lists(floats, max_size=3), st.booleans()),
)  # fmt: skip
def test_invalid_parameters(name, key, value):
    est = {**REGRESSORS, **TRANSFORMERS}[name]()
    if key not in est.get_params():
        return
    est.set_params(**{key: value})
    names = (key, "sigma") if key == "kernel" else (key,)
    if name in TRANSFORMERS:
        _refused_or_sane(lambda: est.fit(X0), lambda out: _finite(out.transform(X0)), names)
    else:
        _refused_or_sane(lambda: est.fit(X0, Y0), _finite_model, names)


@FUZZ
@given(
    X=bad_matrices,
    y=st.one_of(bad_matrices, st.just(Y0)),
    penalty=st.one_of(floats, st.integers(-2, 2)),
)
def test_online_learners(X, y, penalty):
    _refused_or_sane(lambda: kp.RecursiveRLS(penalty=penalty).partial_fit(X, y), None)
    labels = np.asarray(y, dtype=object) if not isinstance(y, np.ndarray) else y
    _refused_or_sane(lambda: kp.IncrementalRLSClassifier().partial_fit(X, labels), None)
    rls = kp.RecursiveRLS().partial_fit(X0, Y0)
    _refused_or_sane(lambda: rls.predict(X), _finite)


@FUZZ
@given(X=bad_matrices, y=st.one_of(bad_matrices, st.none()))
def test_semiparametric(X, y):
    from kernelpath.datasets import make_arm_dynamics

    Xa, tau, reg, _ = make_arm_dynamics(30, random_state=0)
    target = tau if y is None else y
    fresh = kp.SemiparametricRegressor(reg, n_features=10, random_state=0)
    _refused_or_sane(lambda: fresh.fit(X, target), None)
    sp = kp.SemiparametricRegressor(reg, n_features=10, random_state=0).fit(Xa, tau)
    _refused_or_sane(lambda: sp.predict(X), _finite)
    _refused_or_sane(lambda: sp.partial_fit(X, target), None)


@FUZZ
@given(X=bad_matrices, penalty=st.one_of(floats, st.integers(-2, 2), st.text(max_size=2)))
def test_leverage_functions(X, penalty):
    _refused_or_sane(lambda: kp.leverage_scores(X, kp.Gaussian(1.0), penalty), _finite)
    _refused_or_sane(lambda: kp.effective_dimension(X, kp.Gaussian(1.0), penalty), _finite)
    _refused_or_sane(
        lambda: kp.leverage_scores(X0, kp.Gaussian(1.0), 1e-2, method=penalty), names=("method",)
    )


@FUZZ
@given(blob=st.binary(max_size=400))
def test_load_random_bytes(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("blob") / "x.kp"
    path.write_bytes(blob)
    with pytest.raises(kp.ModelFileError):
        kp.load(path)


def test_incremental_classifier_refuses_missing_labels():
    """Was: 12 NaN labels became 12 new classes."""
    clf = kp.IncrementalRLSClassifier()
    with pytest.raises(ValueError, match="y contains a missing label"):
        clf.partial_fit(X0[:12], np.full(12, np.nan))
    with pytest.raises(ValueError, match="missing label"):
        clf.partial_fit(X0[:3], np.array(["a", None, "b"], dtype=object))
    with pytest.raises(ValueError, match="classes contains a missing label"):
        kp.IncrementalRLSClassifier().partial_fit(X0[:3], ["a", "b", "a"], classes=["a", np.nan])
    assert not hasattr(clf, "classes_") or len(clf.classes_) == 0


def test_semiparametric_checks_the_feature_count():
    """Was: "not enough values to unpack" from inside the user's regressor."""
    from kernelpath.datasets import make_arm_dynamics

    Xa, tau, reg, _ = make_arm_dynamics(40, random_state=0)
    sp = kp.SemiparametricRegressor(reg, n_features=20, random_state=0)
    with pytest.raises(NotFittedError):
        sp.predict(Xa)
    sp.fit(Xa, tau)
    for method in (sp.predict, sp.predict_parametric):
        with pytest.raises(ValueError, match="X has 3 features, but SemiparametricRegressor"):
            method(Xa[:, :3])
    with pytest.raises(ValueError, match="X has 3 features"):
        sp.partial_fit(Xa[:5, :3], tau[:5])


BAD_CALLS = [
    (lambda X, y: kp.NystromFeatures(n_components=0).fit(X), ValueError, "n_components"),
    (lambda X, y: kp.NystromFeatures(kernel="nope").fit(X), ValueError, "kernel"),
    (lambda X, y: kp.NystromFeatures(n_components=5).transform(X), NotFittedError, "fit"),
    (
        lambda X, y: kp.NystromFeatures(n_components=5).fit(X).transform(X[:, :2]),
        ValueError,
        "X has 2 features",
    ),
    (lambda X, y: kp.RecursiveRLS(penalty=-1).partial_fit(X, y), ValueError, "penalty"),
    (lambda X, y: kp.RecursiveRLS(forgetting=0).partial_fit(X, y), ValueError, "forgetting"),
    (lambda X, y: kp.RecursiveRLS().partial_fit(X, y[:5]), ValueError, "numbers of samples"),
    (lambda X, y: kp.RecursiveRLS().predict(X), NotFittedError, "fit"),
    (
        lambda X, y: kp.RecursiveRLS().partial_fit(X, y).predict(X[:, :2]),
        ValueError,
        "X has 2 features",
    ),
    (
        lambda X, y: kp.RecursiveRLS().partial_fit(X, np.where(y > 0, "a", "b")),
        TypeError,
        "y must contain numbers",
    ),
    (lambda X, y: kp.leverage_scores(X, kp.Gaussian(1.0), 0.0), ValueError, "penalty"),
    (lambda X, y: kp.leverage_scores(X, "nope", 1e-3), ValueError, "kernel"),
    (
        lambda X, y: kp.leverage_scores(X, kp.Gaussian(1.0), 1e-3, "approximate", n_samples=-3),
        ValueError,
        "n_samples",
    ),
    (
        lambda X, y: kp.effective_dimension(X, kp.Gaussian(1.0), 1e-3, random_state="x"),
        TypeError,
        "random_state",
    ),
    (lambda X, y: kp.effective_dimension(X[:0], kp.Gaussian(1.0), 1e-3), ValueError, "X"),
]


@pytest.mark.parametrize("call, error, words", BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_feature_maps_online_and_leverage_bad_input(call, error, words):
    with pytest.raises(error, match=words):
        call(X0, Y0)


@settings(
    max_examples=_DEEP or 20,
    derandomize=not _DEEP,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab,y\n0123456789.-e \"nan")), max_size=300),
    argv=st.lists(
        st.sampled_from(["--target", "y", "a", "--model", "krls", "rf", "--penalty", "x",
                         "1e-3", "--n-centers", "0", "--task", "classification", "--sigma",
                         "-1", "--set", "tol=1", "--columns", "a,b"]),
        max_size=6,
    ),
)  # fmt: skip
def test_cli_fit_on_arbitrary_files(tmp_path_factory, text, argv):
    """Whatever the file and options: exit 0 with a model, or one error line and exit 1 or
    2 (argparse); never an exception."""
    from kernelpath.cli import main

    folder = tmp_path_factory.mktemp("cli")
    data = folder / "d.csv"
    data.write_text(text)
    try:
        code = main(["fit", str(data), "-o", str(folder / "m.kp"), "--quiet", *argv])
    except SystemExit as exc:  # argparse's usage errors
        assert exc.code == 2
        return
    assert code in (0, 1)
    assert (folder / "m.kp").exists() == (code == 0)


# --------------------------------------------------------------------- files and widths
_MODEL = kp.NystromRegressor(kp.Gaussian(1.0), n_centers=8, random_state=0).fit(X0, Y0)


@FUZZ
@given(
    attr=st.sampled_from(["coef_", "centers_"]),
    shape=st.lists(st.integers(0, 10**12), min_size=0, max_size=3),
    value=st.sampled_from([0.0, np.nan, np.inf, 1e308]),
)
def test_load_resigned_files_with_any_array(tmp_path_factory, attr, shape, value):
    # a re-signed file passes the checksum: whatever array it holds, load refuses it with
    # ModelFileError or loads a model that predicts finite values, within bounded memory
    import tracemalloc

    path = tmp_path_factory.mktemp("m") / "m.kp"
    kp.save(_MODEL, path)

    def edit(header, tree, tensors):
        key = tree["state"][attr]["$array"]
        if np.prod(shape, dtype=float) * 8 <= 2**20:
            tensors[key] = np.full(shape, value)
        else:  # too big to write: an empty array that claims the shape's largest dimension
            tensors[key] = np.zeros((0, max(shape)))

    path.write_bytes(resigned(path.read_bytes(), edit))
    tracemalloc.start()
    try:
        model = kp.load(path)
    except kp.ModelFileError:
        model = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak <= 2 * path.stat().st_size + 64 * 2**20
    if model is not None:
        assert np.all(np.isfinite(model.predict(X0)))


@FUZZ
@given(
    log_sigma=st.floats(-320, 320),
    log_scale=st.floats(-300, 300),
    offset=st.sampled_from([0.0, 1.0, 1e6, 1e100]),
)
def test_widths_against_data_magnitudes(log_sigma, log_scale, offset):
    # any width on any data: a ValueError naming sigma or X, or a finite model
    with np.errstate(over="ignore"):
        X = X0 * np.power(10.0, log_scale) + offset
        sigma = float(np.power(10.0, log_sigma))  # inf and 0 included
    try:
        est = kp.NystromRegressor(kp.Gaussian(sigma), n_centers=8, scale=False)
        est.fit(X, Y0)
    except ValueError as exc:
        assert "sigma" in str(exc) or "X" in str(exc), str(exc)
        return
    assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.predict(X)))


@FUZZ
@given(
    header=st.lists(st.sampled_from(["a", "b", "y", "c"]), min_size=1, max_size=4),
    cells=st.lists(
        st.sampled_from(["1", "2.5", "-3", "", "x", "1e200", "nan", "true", "3.5"]),
        min_size=0,
        max_size=24,
    ),
)
def test_read_table_on_arbitrary_csv(tmp_path_factory, header, cells):
    from kernelpath.data.tables import read_table

    path = tmp_path_factory.mktemp("c") / "t.csv"
    k = len(header)
    rows = [cells[i : i + k] for i in range(0, len(cells) - len(cells) % k, k)]
    path.write_text(",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows))
    try:
        X, y = read_table(path, target="y")
        np.asarray(X)
    except (ValueError, TypeError) as exc:
        assert str(exc), "an empty message"


# ------------------------------------------------------------------ targets, weights, labels
extreme = st.one_of(
    floats,
    st.sampled_from([1e308, 5e-324, -1.0, 0.0, 1e-300, 1e300, 1e200, 1e60, 1e61]),
)


@pytest.mark.parametrize("name", list(REGRESSORS))
@FUZZ
@given(
    weights=st.one_of(
        arrays(np.float64, 40, elements=extreme),
        st.builds(lambda v: np.full(40, v), extreme),
        st.just(np.ones(40) + 1j),
    ),
    scale=st.sampled_from([1.0, 1e-200, 1e59, 1e61, 1e160]),
)
def test_weights_and_target_scales(name, weights, scale):
    """Sample weights anywhere in (and beyond) the float range, complex weights, and
    targets from 1e-200 to 1e160 : a named refusal or a finite model."""
    est = REGRESSORS[name]()
    _refused_or_sane(lambda: est.fit(X0, Y0 * scale, sample_weight=weights), _finite_model)


@pytest.mark.parametrize(
    "name", [*CLASSIFIERS, "IncrementalRLSClassifier", "RebalancedRLSClassifier"]
)
@FUZZ
@given(
    weights=st.one_of(
        st.dictionaries(st.sampled_from(["a", "b", "c"]), extreme, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.text(max_size=2), st.none())),
        st.sampled_from(["balanced", "even", 3, None]),
    )
)
def test_class_weights(name, weights):
    """Class weights of every kind for the batch and online classifiers."""
    online = {
        "IncrementalRLSClassifier": lambda: kp.IncrementalRLSClassifier(class_weight=weights),
        "RebalancedRLSClassifier": lambda: kp.RebalancedRLSClassifier(class_weight=weights),
    }
    est = online[name]() if name in online else CLASSIFIERS[name]().set_params(class_weight=weights)
    _refused_or_sane(lambda: est.fit(X0, L0), _finite_model)


@pytest.mark.parametrize("name", ["IncrementalRLSClassifier", "RebalancedRLSClassifier"])
@FUZZ
@given(
    first=st.lists(
        st.one_of(st.text(max_size=2), st.integers(0, 3), floats), min_size=10, max_size=10
    ),
    second=st.lists(
        st.one_of(st.text(max_size=2), st.integers(0, 3), floats, st.none()), min_size=3, max_size=3
    ),
)
def test_streamed_labels(name, first, second):
    """Two batches of labels of any mix of types: refused naming the labels,
    or a classifier whose classes are of one type."""
    est = getattr(kp, name)()

    def run():
        est.partial_fit(X0[:10], np.asarray(first, dtype=object))
        est.partial_fit(X0[10:13], np.asarray(second, dtype=object))
        return est

    def one_type(out):
        kinds = {isinstance(c, (str, np.str_)) for c in out.classes_}
        assert len(kinds) == 1

    _refused_or_sane(run, one_type)


# ------------------------------------------------------------------ the newer classes
_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.sampled_from(["NaN", "Infinity", "$float", "$array", "$class", "kernelpath.Gaussian"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node, prefix=()):
    """Every path of keys into a JSON tree (dict keys and list positions)."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


_MODEL_PATHS = None


@FUZZ
@given(data=st.data(), value=_json)
def test_load_resigned_headers(tmp_path_factory, data, value):
    """A re-signed file (the checksum is not keyed) whose header tree has any value at any
    place: ``load`` raises ``ModelFileError`` or gives a model whose predictions are
    finite or refused with a ValueError / TypeError; nothing else escapes."""
    import json

    from kernelpath import model_files as mf

    path = tmp_path_factory.mktemp("h") / "m.kp"
    kp.save(_MODEL, path)
    raw = path.read_bytes()
    tree = json.loads(mf._header(raw)["model"])
    paths = [p for p in _paths(tree) if p]
    where = data.draw(st.sampled_from(paths))

    def edit(header, tree, tensors):
        node = tree
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = value

    path.write_bytes(resigned(raw, edit))
    try:
        model = kp.load(path)
    except kp.ModelFileError:
        return
    try:
        pred = model.predict(X0)
    except (ValueError, TypeError):
        return
    assert np.all(np.isfinite(np.asarray(pred, dtype=float)))


@FUZZ
@given(
    command=st.sampled_from(["fit", "predict"]),
    target=st.sampled_from(["data", "model", "folder", "link", "fifo", "fresh"]),
)
def test_cli_outputs_refuse_inputs_and_special_files(tmp_path_factory, command, target):
    """``-o`` is refused, before any work and with one error line, when it names an input
    of the same command, a folder, a symbolic link or a FIFO; the input is left as it was."""
    from kernelpath.cli import main

    folder = tmp_path_factory.mktemp("o")
    data = folder / "d.csv"
    data.write_text("a,b,y\n" + "\n".join(f"{i % 7},{i % 5},{i % 3}" for i in range(60)) + "\n")
    model = folder / "m.kp"
    assert main(["fit", str(data), "--target", "y", "-o", str(model), "--quiet"]) == 0
    fresh = folder / ("new.kp" if command == "fit" else "new.csv")
    places = {"data": data, "model": model, "folder": folder / "sub", "fresh": fresh}
    (folder / "sub").mkdir()
    places["link"] = folder / "link"
    places["link"].symlink_to(folder / "elsewhere")
    places["fifo"] = folder / "fifo"
    os.mkfifo(places["fifo"])
    before = {p: p.read_bytes() for p in (data, model)}
    out = places[target]
    if command == "fit":
        argv = ["fit", str(data), "--target", "y", "-o", str(out), "--quiet"]
    else:
        argv = ["predict", str(model), str(data), "-o", str(out)]
    code = main(argv)
    refused = target != "fresh" and not (target == "model" and command == "fit")
    assert code == (1 if refused else 0), (command, target, code)
    for p, content in before.items():
        if p != out or refused:
            assert p.read_bytes() == content  # an input is never written over
    assert not (folder / "elsewhere").exists()  # a link is not followed


@pytest.mark.parametrize(
    "state", [{}, {"sigma": "wide"}, {"sigma": -1.0}], ids=["empty", "word", "negative"]
)
def test_load_refuses_a_kernel_without_valid_parameters(tmp_path, state):
    """Found by ``test_load_resigned_headers``: a re-signed file whose fitted kernel's state
    is ``{}`` loaded (no constructor runs) and its ``predict`` raised AttributeError. A
    restored kernel must have every parameter, valid, else ``ModelFileError`` at load."""
    import json

    from kernelpath import model_files as mf

    path = tmp_path / "m.kp"
    kp.save(_MODEL, path)
    raw = path.read_bytes()

    def edit(header, tree, tensors):
        tree["state"]["kernel_"]["state"] = dict(state)

    assert json.loads(mf._header(raw)["model"])["state"]["kernel_"]["$object"] == (
        "kernelpath.Gaussian"
    )
    path.write_bytes(resigned(raw, edit))
    with pytest.raises(kp.ModelFileError, match="kernelpath.Gaussian"):
        kp.load(path)
