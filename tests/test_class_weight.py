"""``class_weight`` on every batch classifier: scikit-learn's meaning,
each sample's weight multiplied by its class's, checked against the same fit given those
weights as ``sample_weight``."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score
from sklearn.utils.class_weight import compute_sample_weight

import kernelpath as kp

FAST = {
    kp.NystromClassifier: {"n_centers": 60},
    kp.NYTROClassifier: {"n_centers": 60, "max_iter": 30},
    kp.KRLSClassifier: {},
    kp.RandomFeaturesClassifier: {"n_features": 80},
    kp.SGMClassifier: {"n_features": 80, "n_passes": 3},
    kp.EigenProClassifier: {"n_epochs": 2},
}


def _imbalanced(n: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    score = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.5 * rng.standard_normal(n)
    y = np.where(score > 1.8, "rare", "common")
    return X, y


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
def test_class_weight_is_a_sample_weight_per_class(cls):
    X, y = _imbalanced()
    kw = dict(kernel=kp.Gaussian(1.5), scale=False, random_state=0, **FAST[cls])
    cw = {"rare": 4.0}
    a = cls(class_weight=cw, **kw).fit(X, y)
    b = cls(**kw).fit(X, y, sample_weight=np.where(y == "rare", 4.0, 1.0))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-8)
    # with a sample_weight too: the two multiply
    sw = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    c = cls(class_weight="balanced", **kw).fit(X, y, sample_weight=sw)
    d = cls(**kw).fit(X, y, sample_weight=sw * compute_sample_weight("balanced", y))
    np.testing.assert_allclose(c.decision_function(X), d.decision_function(X), atol=1e-8)
    assert "class_weight" in cls().get_params()


def test_balanced_weights_find_the_rare_class():
    X, y = _imbalanced(1500)
    Xt, yt = _imbalanced(3000, seed=5)
    assert (y == "rare").mean() < 0.2
    kw = dict(kernel=kp.Gaussian(1.5), n_centers=150, scale=False, random_state=0)
    plain = kp.NystromClassifier(**kw).fit(X, y)
    balanced = kp.NystromClassifier(class_weight="balanced", **kw).fit(X, y)
    rare_plain = (plain.predict(Xt)[yt == "rare"] == "rare").mean()
    rare_bal = (balanced.predict(Xt)[yt == "rare"] == "rare").mean()
    assert rare_bal > rare_plain + 0.1
    assert balanced_accuracy_score(yt, balanced.predict(Xt)) > balanced_accuracy_score(
        yt, plain.predict(Xt)
    )


def test_bad_class_weights_are_named():
    X, y = _imbalanced()
    with pytest.raises(ValueError, match="class_weight"):
        kp.NystromClassifier(class_weight={"unknown": 2.0}, n_centers=20).fit(X, y)
    with pytest.raises(ValueError, match="class_weight must be None, 'balanced' or a dict"):
        kp.NystromClassifier(class_weight="even", n_centers=20).fit(X, y)
    with pytest.raises(ValueError, match="every weight given is 0"):
        kp.NystromClassifier(class_weight={"rare": 0.0, "common": 0.0}, n_centers=20).fit(X, y)
    # weights that leave no sample: the classes named weigh 0, the others are absent
    w = np.where(y == "rare", 0.0, 1.0)
    with pytest.raises(ValueError, match="no sample a positive weight"):
        kp.NystromClassifier(class_weight={"common": 0.0, "rare": 1.0}, n_centers=20).fit(
            X, y, sample_weight=w
        )


def test_class_weight_survives_a_model_file(tmp_path):
    X, y = _imbalanced()
    yi = (y == "rare").astype(int)
    est = kp.NystromClassifier(class_weight={1: 3.0, 0: 1.0}, n_centers=40, random_state=0)
    est.fit(X, yi)
    back = kp.load(kp.save(est, tmp_path / "m.kp"))
    assert back.get_params()["class_weight"] == {1: 3.0, 0: 1.0}
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


def _stream(n: int = 300, seed: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = np.array(["a", "b", "c"])[np.argmax(X[:, :3] + 0.3 * rng.standard_normal((n, 3)), axis=1)]
    return X, y


def _weighted_rls(Z, Y, c, lam):
    """(Z^T C Z + λ I)^-1 Z^T C Y for per-sample weights c."""
    return np.linalg.solve(
        Z.T @ (c[:, None] * Z) + lam * np.eye(Z.shape[1]), Z.T @ (c[:, None] * Y)
    )


def test_online_class_weight_is_weighted_rls():
    X, y = _stream()
    cw = {"b": 3.0, "c": 0.5}
    est = kp.IncrementalRLSClassifier(
        penalty=0.1, alpha=0.0, validation_every=None, class_weight=cw
    ).fit(X, y)
    classes = list(est.classes_)
    Y = (y[:, None] == np.array(classes)[None, :]).astype(float)
    c = np.array([cw.get(label, 1.0) for label in y])
    W = _weighted_rls(X, Y, c, 0.1)
    np.testing.assert_allclose(est.decision_function(X), X @ W, rtol=1e-8, atol=1e-10)
    # the rebalanced learner multiplies its Γ_tt = k / k_t by the class weights
    reb = kp.RebalancedRLSClassifier(penalty=0.1, class_weight=cw).fit(X, y)
    counts = {t: (y == t).sum() for t in classes}
    g = np.array([len(y) / counts[label] * cw.get(label, 1.0) for label in y])
    W = _weighted_rls(
        X, (y[:, None] == np.array(list(reb.classes_))[None, :]).astype(float), g, 0.1
    )
    np.testing.assert_allclose(reb.decision_function(X), X @ W, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("cls", [kp.IncrementalRLSClassifier, kp.RebalancedRLSClassifier])
def test_online_learners_refuse_balanced_and_bad_weights(cls):
    X, y = _stream(40)
    with pytest.raises(ValueError, match="class_weight='balanced' needs every class count"):
        cls(class_weight="balanced").fit(X, y)
    with pytest.raises(ValueError, match=r"class_weight\['a'\] must be >= 0"):
        cls(class_weight={"a": -1.0}).fit(X, y).predict(X)


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize(
    "weights, message",
    [
        ({0: -1.0, 1: 1.0}, r"class_weight\[0\] must be >= 0"),
        ({0: np.nan, 1: 1.0}, r"class_weight\[0\] must be >= 0, finite"),
        ({0: np.inf, 1: 1.0}, r"class_weight\[0\]"),
        ({0: 0.0, 1: 0.0}, "every weight given is 0"),
        ({0: "2", 1: 1.0}, r"class_weight\[0\] must be a real number"),
        ({0: 1e200, 1: 1.0}, r"at most 1e\+100"),
    ],
)
@pytest.mark.parametrize(
    "make",
    [
        lambda cw: kp.NystromClassifier(n_centers=10, class_weight=cw),
        lambda cw: kp.NYTROClassifier(n_centers=10, class_weight=cw),
        lambda cw: kp.EigenProClassifier(class_weight=cw),
        lambda cw: kp.SGMClassifier(class_weight=cw),
        lambda cw: kp.IncrementalRLSClassifier(class_weight=cw),
        lambda cw: kp.RebalancedRLSClassifier(class_weight=cw),
    ],
    ids=["nystrom", "nytro", "eigenpro", "sgm", "incremental", "rebalanced"],
)
def test_class_weights_are_checked_once_for_every_classifier(make, weights, message):
    """Negative class weights were accepted by NYTRO, EigenPro and SGM; NaN and inf ended
    in LinAlgError or "give larger penalties"; the online learners took all-zero and
    1e308 weights (NaN scores)."""
    X, y = _data(80)
    labels = (y > 0).astype(int)
    with pytest.raises((ValueError, TypeError), match=message):
        make(weights).fit(X, labels)
