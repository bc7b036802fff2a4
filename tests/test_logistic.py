"""The Newton losses (logistic, multinomial, squared hinge) against scipy.optimize and
scikit-learn, and class probabilities from every classifier."""

import warnings

import numpy as np
import pytest
import scipy.optimize
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

import kernelpath as kp
from kernelpath.calibration import fit_calibration, log_probabilities
from kernelpath.linalg import nystrom_factor
from kernelpath.operators import KernelOperator
from kernelpath.solvers.losses import make_loss
from kernelpath.solvers.newton import NewtonOptions, newton_path

from .conftest import check_estimator

N, M = 300, 25


def problem(k, seed=0):
    """Rows, ±1 codes (one column for two classes), the operator against the first M rows
    and its diagonalized factor."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 3))
    score = X[:, 0] + 0.7 * rng.standard_normal(N)
    labels = (score > 0).astype(int) if k == 2 else np.digitize(score, [-0.5, 0.5])
    Y = (
        np.where(labels == 1, 1.0, -1.0)[:, None]
        if k == 2
        else np.where(labels[:, None] == np.arange(k), 1.0, -1.0)
    )
    op = KernelOperator(X, X[:M], kp.Gaussian(1.5), 2**26)
    fac = nystrom_factor(op.center_gram()).diagonalized()
    return X, labels, Y, op, fac


def objective(Phi, Y, loss_name, w, lam):
    """J(T) and its gradient on the explicit features Phi (N, r), T = (beta; b)."""
    loss = make_loss(loss_name, Y)
    wn = w / w.sum()
    r, k = Phi.shape[1], Y.shape[1]

    def J(t):
        T = t.reshape(r + 1, k)
        F = Phi @ T[:-1] + T[-1]
        G = wn[:, None] * loss.gradient(F)
        g = np.vstack([Phi.T @ G, G.sum(0, keepdims=True)])
        g[:-1] += 2 * lam * T[:-1]
        return float(wn @ loss.values(F) + lam * (T[:-1] ** 2).sum()), g.ravel()

    return J


def our_objective(path, op, Y, loss_name, w, lam, fac):
    coef = path.coef((0,))
    alpha, b = coef[:-1], coef[-1]
    F = op.matvec(alpha).reshape(N, -1) + b
    beta = fac.R.T @ op.center_gram() @ alpha  # R^T K_mm R = I
    wn = w / w.sum()
    return float(wn @ make_loss(loss_name, Y).values(F) + lam * (beta**2).sum())


@pytest.mark.parametrize(
    ("loss", "k"), [("logistic", 2), ("logistic", 3), ("squared_hinge", 2), ("squared_hinge", 3)]
)
@pytest.mark.parametrize("method", ["direct", "cg"])
@pytest.mark.parametrize("weighted", [False, True])
def test_newton_equals_lbfgs(loss, k, method, weighted):
    X, labels, Y, op, fac = problem(k)
    rng = np.random.default_rng(1)
    w = rng.uniform(0.2, 3.0, N) if weighted else np.ones(N)
    lam = 1e-3
    path = newton_path(
        op, Y, loss, np.array([lam]), w if weighted else None, None, fac,
        NewtonOptions(method, tol=1e-12), center_rows=np.arange(M),
    )  # fmt: skip
    Phi = op.dense() @ fac.R
    J = objective(Phi, Y, loss, w, lam)
    ref = scipy.optimize.minimize(
        J, np.zeros((fac.rank + 1) * Y.shape[1]), jac=True, method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 50000},
    )  # fmt: skip
    ours = our_objective(path, op, Y, loss, w, lam, fac)
    assert abs(ours - ref.fun) <= 1e-6 * abs(ref.fun)
    assert path.info["method"] == f"newton-{method}"


def test_cg_switches_to_a_lagged_exact_hessian(monkeypatch):
    """CG's preconditioner becomes the exact Hessian once the products cost one (the ski
    rental): the same minimum in fewer products than with the centers' Hessian alone."""
    import kernelpath.solvers.newton as newton

    X, labels, Y, op, fac = problem(2)
    lam = np.geomspace(1e-2, 1e-7, 8)

    def run():
        path = newton_path(
            op, Y, "logistic", lam, None, None, fac,
            NewtonOptions("cg", tol=1e-10, patience=None), center_rows=np.arange(M),
        )  # fmt: skip
        return path, our_objective(path, op, Y, "logistic", np.ones(N), lam[-1], fac)

    grams = []
    real = newton.Design.gram
    monkeypatch.setattr(newton.Design, "gram", lambda s, *a: grams.append(1) or real(s, *a))
    lagged, J_lagged = run()
    monkeypatch.setattr(newton, "GRAM_RATIO", 1e-12)  # an exact Hessian never worth it
    n_grams = len(grams)
    centers, J_centers = run()
    assert n_grams >= 1 and len(grams) == n_grams
    assert abs(J_lagged - J_centers) <= 1e-8 * J_centers
    assert lagged.info["inner_solves"] < 0.5 * centers.info["inner_solves"]


def test_multinomial_with_two_classes_is_binary_logistic():
    """Softmax over two columns: at the optimum beta_0 = -beta_1, so f_1 - f_0 is the
    binary logit with penalty λ / 2 (||beta_0||^2 + ||beta_1||^2 = ||beta_bin||^2 / 2)."""
    X, labels, Y, op, fac = problem(2)
    two = np.column_stack([-Y[:, 0], Y[:, 0]])
    lam = 1e-3
    tight = NewtonOptions(tol=1e-12)
    multi = newton_path(op, two, "logistic", np.array([lam]), factor=fac, options=tight)
    binary = newton_path(op, Y, "logistic", np.array([lam / 2]), factor=fac, options=tight)
    cm, cb = multi.coef((0,)), binary.coef((0,))
    Fm = op.matvec(cm[:-1]) + cm[-1]
    Fb = op.matvec(cb[:-1]).ravel() + cb[-1]
    np.testing.assert_allclose(Fm[:, 1] - Fm[:, 0], Fb, atol=1e-5)


@pytest.mark.parametrize("k", [2, 3])
def test_logistic_equals_sklearn_on_nystrom_features(k):
    """(1/n) sum w_i l_i + λ ||f||^2 is LogisticRegression's C sum w_i l_i + ||beta||^2 / 2
    with C = 1 / (2 n λ), the intercept unpenalized in both."""
    X, labels, Y, op, fac = problem(k)
    rng = np.random.default_rng(2)
    w = rng.uniform(0.5, 2.0, N)
    w *= N / w.sum()
    lam = 3e-4
    path = newton_path(op, Y, "logistic", np.array([lam]), w, None, fac, NewtonOptions(tol=1e-12))
    coef = path.coef((0,))
    F = op.matvec(coef[:-1]).reshape(N, -1) + coef[-1]
    Phi = op.dense() @ fac.R
    ref = LogisticRegression(C=1 / (2 * N * lam), tol=1e-12, max_iter=100000)
    ref.fit(Phi, labels, sample_weight=w)
    if k == 2:
        np.testing.assert_allclose(F[:, 0], ref.decision_function(Phi), rtol=1e-5, atol=1e-5)
    else:  # logits are defined up to a shift per row: compare the probabilities
        P = np.exp(log_probabilities(F, None))
        np.testing.assert_allclose(P, ref.predict_proba(Phi), atol=1e-6)


def test_path_is_decreasing_warm_started_and_chosen_by_log_loss():
    X, y = make_classification(600, 5, n_informative=3, random_state=0)
    clf = kp.NystromClassifier(loss="logistic", n_centers=60, random_state=0).fit(X, y)
    lam = clf.path_.params["penalty"]
    assert np.all(np.diff(lam) < 0)
    assert clf.path_.scoring == "log_loss"
    reached = np.isfinite(clf.path_.val_error)
    assert clf.path_.best_index[0] == np.nanargmin(clf.path_.val_error)
    assert reached.sum() >= 3 and "val_error_rate" in clf.path_.info
    assert clf.calibration_ == {"method": "logistic"}


ALL_CLASSIFIERS = [
    lambda: kp.NystromClassifier(n_centers=50, random_state=0),
    lambda: kp.NystromClassifier(loss="logistic", n_centers=50, random_state=0),
    lambda: kp.NystromClassifier(loss="squared_hinge", solver="direct", n_centers=50),
    lambda: kp.KRLSClassifier(random_state=0),
    lambda: kp.KRLSClassifier(loss="logistic", random_state=0),
    lambda: kp.RandomFeaturesClassifier(n_features=60, random_state=0),
    lambda: kp.RandomFeaturesClassifier(loss="logistic", n_features=60, random_state=0),
    lambda: kp.NYTROClassifier(random_state=0),
    lambda: kp.EigenProClassifier(n_epochs=2, random_state=0),
    lambda: kp.SGMClassifier(random_state=0),
    lambda: kp.NystromClassifier(n_centers=50, cv=3, solver="direct", random_state=0),
]


@pytest.mark.parametrize("make", ALL_CLASSIFIERS)
@pytest.mark.parametrize("k", [2, 3])
def test_probabilities_of_every_classifier(make, k):
    X, y = make_classification(
        300, 5, n_informative=3, n_classes=k, n_clusters_per_class=1, random_state=k
    )
    clf = make().fit(X[:240], y[:240])
    P = clf.predict_proba(X[240:])
    assert P.shape == (60, k) and np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    # predict is the arg max on every row, ties included (one rule: the first class)
    pred = clf.predict(X[240:])
    np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], pred)
    # and the largest score's class wherever the scores are not tied
    F = clf.decision_function(X[240:]).reshape(60, -1)
    if F.shape[1] == 1:
        F = np.hstack([-F, F])
    top2 = np.sort(F, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-6
    np.testing.assert_array_equal(clf.classes_[F.argmax(axis=1)][clear], pred[clear])
    # rows far from every center: scores ~1e-23 that the map rounds to equal probabilities
    far = X[240:250] + 1e3
    np.testing.assert_array_equal(
        clf.classes_[clf.predict_proba(far).argmax(axis=1)], clf.predict(far)
    )
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X[240:])), P, rtol=1e-12)
    assert clf.calibration_["method"] in ("logistic", "temperature", "power")


def test_calibration_keeps_the_order_and_fits_the_scale():
    """Scores of a known temperature are calibrated back to it."""
    rng = np.random.default_rng(0)
    f = rng.standard_normal(20000) * 2
    y = (rng.random(20000) < 1 / (1 + np.exp(-3 * f))).astype(int)
    cal = fit_calibration(f, y)
    assert cal["method"] == "temperature" and abs(cal["scale"] - 3) < 0.15
    P = np.exp(log_probabilities(f, cal))
    assert np.all(np.diff(P[np.argsort(f), 1]) >= 0)
    # square-loss scores (estimates of 2p - 1) choose the power map
    p = rng.random(20000)
    y = (rng.random(20000) < p).astype(int)
    cal = fit_calibration(2 * p - 1 + 0.01 * rng.standard_normal(20000), y)
    assert cal["method"] == "power" and abs(cal["scale"] - 1) < 0.1


def test_calibrated_classifier_cv_wraps_them():
    X, y = make_classification(300, 5, random_state=0)
    cal = CalibratedClassifierCV(kp.NystromClassifier(n_centers=40, random_state=0), cv=3)
    P = cal.fit(X[:240], y[:240]).predict_proba(X[240:])
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


def test_check_estimator_logistic():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_estimator(
            kp.NystromClassifier(loss="logistic", n_centers=30),
            expected_failed_checks={
                "check_sample_weight_equivalence_on_dense_data": "random split and centers",
                "check_sample_weight_equivalence_on_sparse_data": "random split and centers",
            },
        )


def test_bad_losses_and_missing_hold_out():
    X, y = make_classification(200, 4, random_state=0)
    with pytest.raises(ValueError, match="loss="):
        kp.NYTROClassifier(loss="logistic").fit(X, y)
    with pytest.raises(ValueError, match="loss="):
        kp.EigenProClassifier(loss="logistic").fit(X, y)
    with pytest.raises(ValueError, match="loss must be one of"):
        kp.NystromClassifier(loss="hinge").fit(X, y)
    with pytest.raises(TypeError, match="loss"):
        kp.NystromRegressor(loss="logistic")
    with pytest.raises(ValueError, match="n_centers as a path"):
        kp.NystromClassifier(loss="logistic", n_centers="auto").fit(X, y)
    with pytest.raises(ValueError, match="filter='tikhonov'"):
        kp.KRLSClassifier(loss="logistic", filter="tsvd").fit(X, y)
    clf = kp.NystromClassifier(n_centers=30, solver="direct", cv="gcv").fit(X, y)
    with pytest.raises(ValueError, match="predict_proba calibrates"):
        clf.predict_proba(X)
    # the logistic loss needs no hold-out: its probabilities are its own
    clf = kp.NystromClassifier(
        loss="logistic", n_centers=30, penalty=1e-3, validation_fraction=0
    ).fit(X, y)
    assert clf.predict_proba(X).shape == (200, 2)


def test_model_files_keep_the_loss_and_probabilities(tmp_path):
    X, y = make_classification(200, 4, random_state=0)
    for clf in (
        kp.NystromClassifier(loss="logistic", n_centers=30, random_state=0),
        kp.NystromClassifier(n_centers=30, random_state=0),
    ):
        clf.fit(X, y)
        path = tmp_path / "m.kpm"
        kp.save(clf, path)
        back = kp.load(path)
        assert back.loss == clf.loss
        np.testing.assert_allclose(back.predict_proba(X), clf.predict_proba(X))


def test_logistic_on_rows_from_disk_and_dask(tmp_path):
    """The Newton path reads the rows through the operator: rows on disk and dask arrays
    give the in-memory model."""
    import dask.array as da
    import pandas as pd

    X, y = make_classification(600, 5, random_state=0)
    path = tmp_path / "t.parquet"
    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["y"] = y
    frame.to_parquet(path)
    Xs, ys = kp.read_table(path)
    params = {"loss": "logistic", "n_centers": 40, "random_state": 0, "kernel": kp.Gaussian(2.0)}
    ref = kp.NystromClassifier(**params).fit(X, y)
    for Xin in (Xs, da.from_array(X, chunks=200)):
        clf = kp.NystromClassifier(**params).fit(Xin, y)
        np.testing.assert_allclose(
            clf.predict_proba(frame[list("abcde")]), ref.predict_proba(X), atol=1e-8
        )


@pytest.mark.parametrize("Est", [kp.IncrementalRLSClassifier, kp.RebalancedRLSClassifier])
def test_online_classifiers_give_calibrated_probabilities(Est, tmp_path):
    X, y = make_classification(
        900, 5, n_informative=3, n_classes=3, n_clusters_per_class=1, random_state=0
    )
    clf = Est(features=kp.RandomFourierFeatures(kp.Gaussian(2.0), n_features=60, random_state=0))
    for i in range(0, 800, 50):
        clf.partial_fit(X[i : i + 50], y[i : i + 50])
    assert 60 <= len(clf.heldout_) <= 80  # every 10th sample, scored before it is learned
    P = clf.predict_proba(X[800:])
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], clf.predict(X[800:]))
    # calibrated: the held-out log-loss is better than the uncalibrated codes' reading
    cls = list(clf.classes_)
    yi = np.array([cls.index(v) for v in y[800:]])
    assert -np.mean(np.log(P[np.arange(100), yi])) < np.log(3)
    kp.save(clf, tmp_path / "o.kp")  # the held-out scores travel with the model
    np.testing.assert_allclose(kp.load(tmp_path / "o.kp").predict_proba(X[800:]), P)


def test_online_probabilities_without_held_out_samples_read_the_scores():
    X, y = make_classification(100, 4, random_state=0)
    clf = kp.IncrementalRLSClassifier(validation_every=None).fit(X, y)
    F = clf.decision_function(X)
    P = clf.predict_proba(X)  # the power map with exponent 1: max(f, eps e^(2f - 1)) normalized
    q = np.maximum(F, 1e-4 * np.exp(np.minimum(2 * F - 1, 0)))
    np.testing.assert_allclose(P, q / q.sum(axis=1, keepdims=True), rtol=1e-10)


def test_power_map_is_finite_for_any_finite_score():
    """A diverged fit's scores (-1e4 and below) get finite log-probabilities, which still sum
    to one, and ordinary scores keep the map's values: log q with q = max((1 + F)/2,
    EPS exp(min(F, 0)))."""
    from kernelpath.calibration import EPS, logits

    F = np.array([[-1e4, -2e4, -3e4], [0.5, 0.2, -0.3], [3.0, -1.0, -5.0]])
    Z = logits(F, "power")
    assert np.isfinite(Z).all()
    q = np.maximum((1.0 + F[1:]) / 2.0, EPS * np.exp(np.minimum(F[1:], 0.0)))
    np.testing.assert_allclose(Z[1:], np.log(q), rtol=1e-12)
    P = np.exp(log_probabilities(F, {"method": "power", "scale": 2.0}))
    assert np.isfinite(P).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    Zb = logits(np.array([-1e5, -0.5, 0.9]), "power")
    assert np.isfinite(Zb).all()
    np.testing.assert_allclose(Zb[1], [np.log1p(-0.25), np.log(0.25)], rtol=1e-12)


def test_logistic_newton_cg_stops_when_the_residual_vanishes():
    """Inner CG divided by a preconditioned residual that had underflowed to 0
    (ZeroDivisionError on 11 of 12 seeds of three 30-point blobs)."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=30, random_state=0, n_features=2)
    for seed in range(4):  # the old code failed on 11 of 12
        est = kp.RandomFeaturesClassifier(n_features=50, loss="logistic", random_state=seed)
        P = est.fit(X, y).predict_proba(X)
        assert np.all(np.isfinite(P)) and np.allclose(P.sum(axis=1), 1.0)
        assert est.score(X, y) >= 0.9
