import os
import sys

import numpy as np
import pytest

from kernelpath.datasets import shared_data_dir

_limits: list = []  # the worker's thread limits, kept for the session


def pytest_collection_finish(session):
    """Where several pytest-xdist workers share the machine, each runs BLAS (both OpenBLAS
    copies NumPy and SciPy bundle, and torch's pool where a test module imported it) on its
    share of the cores. With the libraries' own counts each worker ran as many BLAS
    threads as the machine has cores, and the tests that call the solvers directly (only
    the estimators' fits hold BLAS to one thread: ``kernelpath._threads``) spun against the
    other worker: test_compact.py and test_lowrank.py took 119 s on this project's 2-core
    machine against 30 s with one thread each. Child processes that tests start keep the
    libraries' own counts (nothing is set in the environment)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1:
        return
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores = len(usable) if usable else (os.cpu_count() or 1)
    share = max(1, cores // workers)
    import scipy.linalg  # noqa: F401  (SciPy's OpenBLAS, loaded before the limit)
    from threadpoolctl import ThreadpoolController

    _limits.append(ThreadpoolController().limit(limits=share))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(share)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def calls(monkeypatch):
    """How many blocks the fused Triton kernel computed (``kernelpath._fused``; a fit must
    use it, not fall back). Shared by ``test_fused.py`` (on CUDA) and ``fused_checks.py``
    (through Triton's interpreter)."""
    import kernelpath._fused as F

    count = {"fused": 0}
    real = F.exp_block

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        count["fused"] += out is not None
        return out

    monkeypatch.setattr(F, "exp_block", spy)
    return count


def _shared():
    return shared_data_dir()


requires_shared = pytest.mark.skipif(_shared() is None, reason="../shared/data is absent")


def check_estimator(estimator, expected_failed_checks=None):
    """scikit-learn's ``check_estimator`` with the checks expected to fail skipped, not run.

    ``sklearn.utils.estimator_checks.check_estimator`` runs an expected failure and only
    forgives it; the weight-equivalence checks (dense and sparse) each refit on repeated
    rows and cost 4-7 s per estimator (the reason they fail is declared where they are
    listed). Every other check runs and raises as there."""
    from sklearn.utils._testing import SkipTest
    from sklearn.utils.estimator_checks import estimator_checks_generator

    for est, check in estimator_checks_generator(
        estimator, legacy=True, expected_failed_checks=expected_failed_checks, mark="skip"
    ):
        try:
            check(est)
        except SkipTest:
            pass


def fitted_nystrom(classes=None):
    """(a small fitted Nyström model, its X): a regressor, or with ``classes`` (two labels) a
    classifier on the sign of the first feature; for the model-file and command-line tests."""
    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    if classes is None:
        return kp.NystromRegressor(kp.Gaussian(1.0), n_centers=20).fit(X, X[:, 0]), X
    y = np.asarray(classes)[(X[:, 0] > 0).astype(int)]
    return kp.NystromClassifier(kp.Gaussian(1.0), n_centers=20).fit(X, y), X
