"""Fits on dask arrays: on a LocalCluster of two worker processes, and on dask's local
scheduler, equal to the fit in this process; the kernel work runs on the workers; a worker
killed in the middle of a fit does not change the result."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import CancelledError

import numpy as np
import pytest

import kernelpath as kp
from kernelpath import distributed as distributed_module
from kernelpath.distributed import DaskKernelOperator
from kernelpath.workspace import Workspace

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
CommClosedError = distributed.comm.core.CommClosedError

N, D, CHUNK = 4000, 5, 500


def _problem() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    return X, np.sin(X.sum(axis=1) / 2) + 0.1 * rng.standard_normal(N)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


CASES = {
    # search="none": the search's steps amplify the summation order's rounding (the
    # metric rounds start from an early-stopped CG model); the products are what is compared
    "cg-path": lambda: kp.NystromRegressor(
        n_centers=200, penalty=[1e-1, 1e-2, 1e-3], random_state=0, max_iter=12, search="none"
    ),
    # a narrow kernel: K_mm well conditioned (the closed forms go through K_mm^(-1/2), which
    # amplifies the rounding of any summation order by its condition number)
    "direct": lambda: kp.NystromRegressor(
        kp.Gaussian(0.8),
        n_centers=200,
        solver="direct",
        penalty=[1e-2, 1e-3],
        refit=False,  # "auto" refits in memory, not on Dask
        random_state=0,
    ),
    "m-path": lambda: kp.NystromRegressor(
        kp.Gaussian(0.8), n_centers=[20, 100, 200], penalty=[1e-2, 1e-3], random_state=0
    ),
    # a given width: the screen on Dask is the default cases' (each product a graph)
    "nytro": lambda: kp.NYTRORegressor(
        kp.Gaussian(0.8), n_centers=200, random_state=0, max_iter=25
    ),
    # refit="auto" refits in memory, not on Dask (one more pass): off for the comparison
    "rf": lambda: kp.RandomFeaturesRegressor(
        kp.Gaussian(0.8), n_features=200, refit=False, random_state=0
    ),
    "leverage-centers": lambda: kp.NystromRegressor(
        n_centers=100,
        centers="approximate-leverage",
        penalty=1e-3,
        random_state=0,
        max_iter=8,
        search="none",
    ),
    "classifier": lambda: kp.NystromClassifier(
        n_centers=150, penalty=[1e-2, 1e-3], random_state=0, max_iter=10, search="none"
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_cluster_fit_equals_in_process_fit(client, case):
    X, y = _problem()
    if case == "classifier":
        y = np.where(y > 0.3, "a", np.where(y < -0.3, "b", "c"))
    Xd = da.from_array(X, chunks=(CHUNK, D))
    yd = da.from_array(y, chunks=CHUNK)
    a = CASES[case]().fit(X, y)
    b = CASES[case]().fit(Xd, yd)
    # the feature scales and the width search read the dask array as the array in memory;
    # the screen's scores differ by rounding (chunk sums in another order, a validation row
    # on the boundary), which can move the vertex by one step of its grid, 2^(1/16)
    assert np.all(np.abs(np.log2(b.kernel_.sigma / a.kernel_.sigma)) <= 1 / 16 + 1e-12)
    if not np.allclose(b.kernel_.sigma, a.kernel_.sigma, rtol=1e-12, atol=0):
        a = CASES[case]().set_params(kernel=b.kernel_).fit(X, y)  # the fit at that width
    if case == "classifier":
        assert _rel(b.decision_function(X), a.decision_function(X)) <= 1e-10
        pred = b.predict(Xd)
        assert isinstance(pred, da.Array)
        np.testing.assert_array_equal(pred.compute(), a.predict(X))
        return
    # the predictions (the coefficients of a small penalty amplify the rounding of the
    # chunk sums' other order in ill-conditioned directions that predictions do not see)
    assert _rel(b.predict(X), a.predict(X)) <= 1e-10
    pred = b.predict(Xd)
    assert isinstance(pred, da.Array) and pred.chunks[0] == Xd.chunks[0]
    assert _rel(pred.compute(), a.predict(X)) <= 1e-10


def test_the_kernel_work_runs_on_the_workers(client):
    X, y = _problem()
    Xd = da.from_array(X, chunks=(CHUNK, D))
    t, c = 10, len(Xd.chunks[0])
    est = kp.NystromRegressor(
        n_centers=200,
        penalty=1e-3,
        max_iter=t,
        tol=0.0,
        n_iter_no_change=None,
        validation_fraction=0.0,
        random_state=0,
    )
    with distributed.get_task_stream(client) as ts:
        est.fit(Xd, y)
    kernel_tasks = [r for r in ts.data if "_apply" in str(r["key"])]
    workers = {r["worker"] for r in kernel_tasks}
    assert len(kernel_tasks) >= t * c
    assert workers <= set(client.scheduler_info()["workers"]) and len(workers) == 2


def test_local_scheduler_without_a_client(monkeypatch):
    import kernelpath.distributed as kd

    monkeypatch.setattr(kd, "active_client", lambda: None)  # as if no Client existed
    X, y = _problem()
    Xd = da.from_array(X, chunks=(CHUNK, D))
    kw = dict(n_centers=100, penalty=1e-3, random_state=0, max_iter=8, search="none")
    a = kp.NystromRegressor(**kw).fit(X, y)
    b = kp.NystromRegressor(**kw).fit(Xd, y)
    assert _rel(b.coef_, a.coef_) <= 1e-10


def _ten_passes() -> kp.NystromRegressor:
    """Ten conjugate-gradient passes on every row, no early stop: the kill tests' model."""
    return kp.NystromRegressor(
        n_centers=200,
        penalty=1e-3,
        max_iter=10,
        tol=0.0,
        n_iter_no_change=None,
        validation_fraction=0.0,
        random_state=0,
    )


def test_a_worker_killed_mid_fit(client, monkeypatch):
    X, y = _problem()
    Xd = da.from_array(X, chunks=(CHUNK, D))
    ref = _ten_passes().fit(X, y)
    pids = client.run(os.getpid)
    victim_address, victim = next(iter(pids.items()))
    calls = {"n": 0}
    original = DaskKernelOperator.fused

    def fused(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:  # after the first pass: kill a worker process outright
            os.kill(victim, signal.SIGKILL)
        return out

    monkeypatch.setattr(DaskKernelOperator, "fused", fused)
    est = _ten_passes().fit(Xd, y)
    assert calls["n"] >= 3
    assert _rel(est.predict(X), ref.predict(X)) <= 1e-10
    _wait_for_new_workers(client, {victim_address})


def test_every_worker_killed_mid_fit(client, monkeypatch):
    """Every worker gone after the first pass takes the scattered centers with it: the
    scheduler cancels the next product for lost data, and the operator scatters the centers
    again and builds the product anew; weighted rows, so the weights' pieces go too."""
    X, y = _problem()
    w = np.random.default_rng(1).uniform(0.5, 2.0, N)
    Xd = da.from_array(X, chunks=(CHUNK, D))
    ref = _ten_passes().fit(X, y, sample_weight=w)
    calls = {"n": 0}
    original = DaskKernelOperator.fused

    def fused(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            killed = set(client.run(os.getpid))
            for pid in client.run(os.getpid).values():
                os.kill(pid, signal.SIGKILL)
            _wait_for_new_workers(client, killed)
        return out

    monkeypatch.setattr(DaskKernelOperator, "fused", fused)
    est = _ten_passes().fit(Xd, y, sample_weight=w)
    assert calls["n"] >= 3
    assert _rel(est.predict(X), ref.predict(X)) <= 1e-10


def _wait_for_new_workers(client, killed: set[str], timeout: float = 60.0) -> None:
    """Until the scheduler lists two workers and none of the ``killed`` ones
    (``wait_for_workers`` alone counts a killed worker the scheduler has not yet dropped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = set(client.scheduler_info()["workers"])
        if len(workers) >= 2 and not workers & killed:
            return
        time.sleep(0.1)
    raise TimeoutError(f"the cluster did not replace its workers in {timeout} s")


def test_a_scatter_that_meets_closing_workers_is_tried_again(client, monkeypatch):
    """A product cancelled for lost data scatters the centers again; when that scatter meets a
    closed connection (workers still going down), the operator waits and scatters again, and
    the fit equals the one on NumPy rows."""
    X, y = _problem()
    Xd = da.from_array(X, chunks=(CHUNK, D))
    ref = _ten_passes().fit(X, y)
    monkeypatch.setattr(distributed_module, "SCATTER_WAIT_S", 0.01)
    computes = {"n": 0}
    original_compute = distributed_module._compute

    def compute(*objs):
        computes["n"] += 1
        if computes["n"] == 3:  # the third product: the cluster lost its data
            raise CancelledError("lost data")
        return original_compute(*objs)

    scatters = {"n": 0, "failed": 0}
    original_scatter = type(client).scatter

    def scatter(self, *args, **kwargs):
        scatters["n"] += 1
        if scatters["n"] in (2, 3):  # the two scatters after the loss meet closed connections
            scatters["failed"] += 1
            raise CommClosedError("in <TCP (closed) ConnectionPool.scatter>: Stream is closed")
        return original_scatter(self, *args, **kwargs)

    monkeypatch.setattr(distributed_module, "_compute", compute)
    monkeypatch.setattr(type(client), "scatter", scatter)
    est = _ten_passes().fit(Xd, y)
    assert computes["n"] > 3 and scatters == {"n": 4, "failed": 2}
    assert _rel(est.predict(X), ref.predict(X)) <= 1e-10

    monkeypatch.setattr(distributed_module, "SCATTER_RETRIES", 1)
    scatters.update(n=0, failed=0)
    computes["n"] = 0
    with pytest.raises(CommClosedError):  # more closed connections than retries: raised
        _ten_passes().fit(Xd, y)


class _BlockKernelpath(distributed.WorkerPlugin):
    """Makes ``import kernelpath`` fail on a worker, as on a worker without the package."""

    def setup(self, worker):  # noqa: D401
        import sys

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name == "kernelpath" or name.startswith("kernelpath."):
                    raise ImportError("No module named 'kernelpath'")
                return None

        for key in [k for k in sys.modules if k == "kernelpath" or k.startswith("kernelpath.")]:
            del sys.modules[key]
        sys.meta_path.insert(0, Blocker())


def test_workers_without_the_package_are_named():
    X, y = _problem()
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        c.register_plugin(_BlockKernelpath())
        with pytest.raises(RuntimeError, match="cannot (import|run) kernelpath"):
            kp.NystromRegressor(n_centers=50, random_state=0).fit(
                da.from_array(X, chunks=(CHUNK, D)), y
            )


def test_bad_dask_input():
    X, y = _problem()
    with pytest.raises(ValueError, match="chunked along features"):
        kp.NystromRegressor().fit(da.from_array(X, chunks=(CHUNK, 2)), y)
    Xu = da.from_array(X, chunks=(CHUNK, D))
    Xu = Xu[da.from_array(y, chunks=CHUNK) > 0]
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        kp.NystromRegressor().fit(Xu, y[y > 0])


@pytest.mark.parametrize(
    "make",
    [
        lambda b: kp.KRLSRegressor(kp.Gaussian(1.0), memory_budget=b, random_state=0),
        lambda b: kp.SGMRegressor(
            kp.Gaussian(1.0), n_features=100, memory_budget=b, random_state=0
        ),
        lambda b: kp.EigenProRegressor(
            kp.Gaussian(1.0), memory_budget=b, random_state=0, n_epochs=2
        ),
    ],
)
def test_families_without_dask_products_gather_a_dask_array_that_fits(make):
    """Exact KRLS, SGM and EigenPro compute in this process: a dask X that fits the budget is
    gathered (the model is the in-memory fit's), one that does not is refused naming the
    input kind, the budget and the estimators that fit on the cluster."""
    X, y = _problem()
    X, y = X[:1500], y[:1500]
    Xd = da.from_array(X, chunks=(CHUNK, D))
    got, want = make("200MB").fit(Xd, y), make("200MB").fit(X, y)
    np.testing.assert_allclose(got.predict(X[:50]), want.predict(X[:50]), rtol=1e-10, atol=1e-12)
    wide = da.from_array(np.random.default_rng(1).standard_normal((3000, 100)), chunks=(500, 100))
    with pytest.raises(ValueError, match=r"X \(a dask array, 0.00 GB\) does not fit .*NystromRe"):
        make("2MB").fit(wide, np.zeros(3000))


def test_a_task_gets_its_share_of_the_worker_budget(monkeypatch):
    """memory_budget is per worker: two threads of one worker run two tasks at once, each
    with half of it (and the local scheduler's tasks share the process's budget)."""
    import kernelpath.distributed as kd
    from kernelpath import _backend as B
    from kernelpath.operators import kernel as ko

    seen: list[tuple[int, int]] = []
    original = ko.KernelOperator.__init__

    def init(self, X, centers, kernel, memory_budget=None, *args, **kwargs):
        seen.append((len(X), memory_budget))
        original(self, X, centers, kernel, memory_budget, *args, **kwargs)

    monkeypatch.setattr(ko.KernelOperator, "__init__", init)
    X, _ = _problem()
    Xd = da.from_array(X, chunks=(CHUNK, D))
    centers, v = X[:50], np.ones(50)
    expected = ko.KernelOperator(X, centers, kp.Gaussian(1.0), 2**26).fused(v)
    budget = 2**26
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        seen.clear()
        got = DaskKernelOperator(
            Xd, centers, kp.Gaussian(1.0), Workspace(budget), cache=False
        ).fused(v)
        assert _rel(got, expected) <= 1e-12
        assert {b for rows, b in seen if rows == CHUNK} == {budget // 2}
    monkeypatch.setattr(kd, "active_client", lambda: None)
    seen.clear()
    got = DaskKernelOperator(Xd, centers, kp.Gaussian(1.0), Workspace(budget), cache=False).fused(v)
    assert _rel(got, expected) <= 1e-12
    assert {b for rows, b in seen if rows == CHUNK} == {budget // B.n_threads()}
