"""BLAS threads during a fit: one thread, the large dense factorizations excepted."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import kernelpath.linalg as linalg_module
from kernelpath import Gaussian, NystromRegressor
from kernelpath._threads import DENSE_MIN_FLOPS, dense_threads, fit_threads


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def two_threads():
    """BLAS on two threads around the test (the machine's own count may be one)."""
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    with threadpool_limits(2, user_api="blas"):
        if _blas_threads() != {2}:
            pytest.skip("BLAS cannot run two threads here")
        yield


def test_fit_threads_holds_blas_to_one_thread_but_in_dense_work(two_threads):
    with fit_threads():
        assert _blas_threads() == {1}
        with dense_threads(DENSE_MIN_FLOPS):
            assert _blas_threads() == {2}  # the count from before the fit
        with dense_threads(DENSE_MIN_FLOPS / 2):
            assert _blas_threads() == {1}
        with fit_threads():  # nested: the outer fit's rule holds
            assert _blas_threads() == {1}
            with dense_threads(DENSE_MIN_FLOPS):
                assert _blas_threads() == {2}
        assert _blas_threads() == {1}
    assert _blas_threads() == {2}
    with dense_threads(1e15):  # outside a fit: the libraries' own count
        assert _blas_threads() == {2}


def test_estimator_fit_runs_blas_on_one_thread(two_threads, monkeypatch, rng):
    """Between its dense factorizations a fit's BLAS calls run on one thread (the projection's
    symmetrization runs after its two products); the eigendecomposition of m = 900 gets the
    threads back; the count is restored after the fit."""
    seen: dict[str, set[int]] = {"symmetrize": set(), "eigh": set()}
    symmetrize, eigh = linalg_module.symmetrize, linalg_module.scipy.linalg.eigh

    def recording_symmetrize(A, *args, **kwargs):
        seen["symmetrize"] |= _blas_threads()
        return symmetrize(A, *args, **kwargs)

    def recording_eigh(A, *args, **kwargs):
        if len(A) >= 900:
            seen["eigh"] |= _blas_threads()
        return eigh(A, *args, **kwargs)

    monkeypatch.setattr(linalg_module, "symmetrize", recording_symmetrize)
    monkeypatch.setattr(linalg_module.scipy.linalg, "eigh", recording_eigh)
    X = rng.standard_normal((1500, 3))
    y = np.sin(X[:, 0])
    est = NystromRegressor(kernel=Gaussian(2.0), n_centers=900, solver="direct", random_state=0)
    est.fit(X, y)
    assert seen["symmetrize"] == {1}
    assert seen["eigh"] == {2}
    assert _blas_threads() == {2}
