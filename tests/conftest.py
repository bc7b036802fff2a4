import numpy as np
import pytest

from kernelpath.datasets import shared_data_dir


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
