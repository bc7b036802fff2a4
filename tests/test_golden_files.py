"""Model files written before the estimators' redesign (tests/data/golden, made by
tests/data/make_golden.py at 46b8d85) still load and predict bit for bit as they did then,
and fitting the same models again gives the same predictions (those of the code before the
fit held BLAS to one thread, at one thread): the redesign changed the code's shape, not what
it computes or stores."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.datasets import make_arm_dynamics

HERE = os.path.join(os.path.dirname(__file__), "data")
GOLDEN = os.path.join(HERE, "golden")
_spec = importlib.util.spec_from_file_location("make_golden", os.path.join(HERE, "make_golden.py"))
make_golden = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(make_golden)  # type: ignore[union-attr]

EXPECTED = dict(np.load(os.path.join(GOLDEN, "predictions.npz")))
#: ``refit_outputs()`` of the code before fits held BLAS to one thread (61b2161), run under
#: ``threadpoolctl.threadpool_limits(1, user_api="blas")``: the CG and leverage refits differ
#: from predictions.npz (made on two BLAS threads) by up to 1.5e-4 relative, the rounding of
#: the threads' partial sums amplified by CG at a small λ; at two threads that code matched
#: predictions.npz to 1e-9 (kernelpath._threads, docs/design.md "BLAS threads").
REFIT_EXPECTED = dict(np.load(os.path.join(GOLDEN, "refits_one_blas_thread.npz")))
BATCH = [name for name, _, _ in make_golden.models()]
ONLINE = [name for name, _, _ in make_golden.online()]
X, y, LABELS, Y2 = make_golden.data()
XT = make_golden.data(80, seed=1)[0]
TARGETS = {"y": y, "labels": LABELS, "Y2": Y2}
#: the environment at collection, before any test ran (tests may set thread variables)
_ENV = dict(os.environ)


def _outputs(est, X):
    out = {"predict": np.asarray(est.predict(X))}
    if hasattr(est, "decision_function"):
        out["decision_function"] = np.asarray(est.decision_function(X))
    return out


@pytest.mark.parametrize("name", BATCH + ONLINE)
def test_old_files_load_and_predict_bit_for_bit(name):
    est = kp.load(os.path.join(GOLDEN, f"{name}.kp"))
    for method, got in _outputs(est, XT).items():
        np.testing.assert_array_equal(got, EXPECTED[f"{name}/{method}"], err_msg=method)


def test_semiparametric_file_loads_and_predicts_bit_for_bit():
    Xa, _, reg, _ = make_arm_dynamics(200, random_state=0)
    sp = kp.load(os.path.join(GOLDEN, "semiparametric.kp"), regressor=reg)
    np.testing.assert_array_equal(sp.predict(Xa[150:]), EXPECTED["semiparametric/predict"])


def refit_outputs() -> dict[str, np.ndarray]:
    """Every batch model fit again with the defaults it had (before issue 24: inputs as they
    are, a named kernel at the median width, no refit), and its outputs on XT."""
    out = {}
    for name, est, target in make_golden.models():
        if name == "nystrom-auto-width":
            continue
        old = {"scale": False}
        if isinstance(est.kernel, str) and est.kernel in ("gaussian", "rbf"):
            old["kernel"] = kp.Gaussian("median")
        if est.get_params().get("refit") == "auto":
            old["refit"] = False
        est.set_params(**old).fit(X, TARGETS[target])
        for method, got in _outputs(est, XT).items():
            out[f"{name}/{method}"] = got
    return out


@pytest.fixture(scope="module")
def refits(tmp_path_factory):
    """``refit_outputs`` in a fresh process with the environment of the suite's start. (The
    Nyström refits of the whole suite's process once differed from the files by up to
    1.5e-4 relative: a test had set BLAS to one thread, and the golden files were made on
    two. A fit now holds BLAS to one thread below ``DENSE_MIN_FLOPS`` whatever the
    environment, so its refits no longer depend on it.)"""
    out = tmp_path_factory.mktemp("golden") / "refits.npz"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[2]); "
        "from tests.test_golden_files import refit_outputs; "
        "np.savez(sys.argv[1], **refit_outputs())"
    )
    cmd = [sys.executable, "-c", code, str(out), root]
    subprocess.run(cmd, check=True, timeout=600, env=_ENV)
    return dict(np.load(out))


@pytest.mark.parametrize("case", make_golden.models(), ids=BATCH)
def test_fitting_again_gives_the_same_model(case, refits):
    name = case[0]
    if name == "nystrom-auto-width":
        pytest.skip("sigma='auto' with a hold-out is the width screen since issue 24")
    methods = [k.split("/", 1)[1] for k in refits if k.startswith(name + "/")]
    assert methods, name
    for method in methods:
        got, want = refits[f"{name}/{method}"], REFIT_EXPECTED[f"{name}/{method}"]
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=method)
        else:
            np.testing.assert_array_equal(got, want, err_msg=method)


def test_files_written_before_scale_load_with_scaling_off():
    for name in BATCH:
        est = kp.load(os.path.join(GOLDEN, f"{name}.kp"))
        assert est.get_params()["scale"] is False, name
        # and their random Fourier maps, written before ``center``, load as drawn
        fmap = getattr(est, "features_", None)
        if isinstance(fmap, kp.RandomFourierFeatures):
            assert fmap.get_params()["center"] is None, name


def test_a_file_saved_now_loads_and_predicts_the_same(tmp_path):
    for name, est, target in make_golden.models():
        est.fit(X, TARGETS[target])
        back = kp.load(kp.save(est, tmp_path / f"{name}.kp"))
        for method, got in _outputs(back, XT).items():
            np.testing.assert_array_equal(got, _outputs(est, XT)[method], err_msg=name)
