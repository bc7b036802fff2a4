"""The low-rank preconditioner of CG (``solvers.lowrank``), checked against dense float64
algebra: its sketch and preconditioner, the path's solutions against the closed-form
Nyström solution, and the layout rule that takes it where no m x m matrix fits."""

from dataclasses import replace

import numpy as np
import pytest

from kernelpath.kernels import Gaussian
from kernelpath.operators.kernel import KernelOperator
from kernelpath.solvers._common import Validation
from kernelpath.solvers.iterative import IterativeOptions, iterative_path
from kernelpath.solvers.krylov import cg_memory
from kernelpath.solvers.lowrank import lowrank_factor


def _problem(n=3000, m=300, d=4, k=1, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 3])][:k])
    Y = Y + 0.1 * rng.standard_normal(Y.shape)
    C = X[rng.choice(n, m, replace=False)]
    return X.astype(dtype), Y, C.astype(dtype)


def _dense(X, C, kernel):
    op = KernelOperator(X, C, kernel)
    return op.dense(), op.center_gram()


def test_center_operator_products_are_those_of_k_mm():
    X, _, C = _problem(n=500, m=120)
    op = KernelOperator(X, C, Gaussian(1.5))
    Kmm = op.center_gram()
    V = np.random.default_rng(1).standard_normal((120, 3))
    gram = op.center_operator(2**20)  # a small budget: many blocks
    np.testing.assert_allclose(gram.matvec(V), Kmm @ V, rtol=1e-12, atol=1e-12)
    cols = np.array([5, 0, 77])
    np.testing.assert_allclose(op.center_operator(2**20, cols).dense(), Kmm[:, cols])
    for bad in ([0, 120], [-1], [[1, 2]], [0.5]):
        with pytest.raises(ValueError, match="columns"):
            op.center_operator(2**20, bad)


@pytest.mark.parametrize("sketch", ["gaussian", "columns"])
@pytest.mark.parametrize("rank", [40, 300])
def test_the_factor_is_the_sketch_scaled_and_falkons_preconditioner(rank, sketch):
    X, _, C = _problem(m=300)
    op = KernelOperator(X, C, Gaussian(0.6))  # K_mm well conditioned: R's entries exact
    fac = lowrank_factor(op, rank, sketch)
    Kmm = op.center_gram()
    if sketch == "columns":  # K_mS K_SS^-1 K_Sm of the first r centers
        S = np.arange(rank)
        sketch = Kmm[:, S] @ np.linalg.pinv(Kmm[np.ix_(S, S)], rcond=1e-13) @ Kmm[S]
    else:  # (K Omega) (Omega^T K Omega)^-1 (K Omega)^T, Omega orthonormal Gaussian (seed 0)
        Omega = np.linalg.qr(np.random.default_rng(0).standard_normal((300, rank)))[0]
        KO = Kmm @ Omega
        sketch = KO @ np.linalg.pinv(Omega.T @ KO, rcond=1e-13) @ KO.T
    mu, U = np.linalg.eigh(sketch)
    r = fac.preconditioner_rank
    mu, U = mu[::-1][:r], U[:, ::-1][:, :r]
    np.testing.assert_allclose(fac.mu[:20], mu[:20], rtol=1e-8)
    top = np.linalg.eigvalsh(Kmm)[-1]  # a Nystrom sketch's is at most K_mm's
    assert fac.top()[0] <= top * (1 + 1e-12)
    if rank == 300:
        assert fac.top()[0] == pytest.approx(top, rel=1e-10)
    # R = U diag(mu)^-1/2 U^T + mu_r^-1/2 (I - U U^T), applied to vectors
    Pu = U @ U.T
    R = U @ np.diag(mu**-0.5) @ U.T + (np.eye(300) - Pu) / np.sqrt(mu[-1])
    v = np.random.default_rng(2).standard_normal((300, 2))
    np.testing.assert_allclose(fac.apply(v), R @ v, rtol=1e-6, atol=1e-8 * np.abs(R @ v).max())
    RKR = R @ Kmm @ R
    np.testing.assert_allclose(fac.inner(v), RKR @ v, atol=1e-7 * np.abs(RKR @ v).max())
    # FALKON's preconditioner scale R K^2 R + shift R K R on the sketch, its r-th value beyond
    scale, shift = 1.0 / 300, 1e-3
    d = scale * mu + shift
    want = U @ ((U.T @ v) / d[:, None]) + (v - Pu @ v) / (scale * mu[-1] + shift)
    got = fac.preconditioner(scale, shift)(v)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9 * np.abs(want).max())
    if rank == 300:  # the whole sketch: R K R = I and the preconditioner is FALKON's
        np.testing.assert_allclose(RKR, np.eye(300), atol=1e-6)
        P = scale * R @ Kmm @ Kmm @ R + shift * RKR
        np.testing.assert_allclose(P @ got, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rank", [30, 150])
def test_the_path_reaches_the_nystrom_solution_at_every_penalty(rank):
    X, Y, C = _problem(k=2)
    kernel = Gaussian(0.7)  # K_mm well conditioned: a complete basis is accurate
    n = len(X)
    Knm, Kmm = _dense(X, C, kernel)
    lam = np.array([1e-4, 1e-3, 1e-2, 1e-1])
    op = KernelOperator(X, C, kernel)
    path = iterative_path(
        op,
        Y,
        lam,
        IterativeOptions(
            method="cg", max_iter=120, tol=1e-10, factor_layout="lowrank", preconditioner_rank=rank
        ),
    )
    assert path.info["preconditioners"] == "lowrank"
    assert path.info["preconditioner_rank"] == rank
    for p, la in enumerate(lam):
        alpha = np.linalg.solve(Knm.T @ Knm + la * n * Kmm, Knm.T @ Y)
        last = int(np.flatnonzero(~np.isnan(path.train_error[p]))[-1])
        F = Knm @ path.coef((p, last))
        np.testing.assert_allclose(F, Knm @ alpha, atol=1e-6 * np.abs(Y).max())
        # the training error the path reports is that of its coefficients
        err = np.mean((F - Y) ** 2)
        assert path.train_error[p, last] == pytest.approx(err, rel=1e-6)


def test_its_iterates_match_the_full_factors_path():
    """The same Krylov spaces (preconditioner of full rank) give the same iterates in alpha
    as the Cholesky factor's path in beta, at a well-conditioned penalty."""
    X, Y, C = _problem(m=200)
    kernel = Gaussian(1.5)
    lam = 1e-2
    opts = IterativeOptions(max_iter=6, tol=0.0, preconditioner_rank=200, n_iter_no_change=None)
    paths = {
        layout: iterative_path(
            KernelOperator(X, C, kernel), Y, lam, replace(opts, factor_layout=layout)
        )
        for layout in ("cholesky", "lowrank")
    }
    Knm = KernelOperator(X, C, kernel).dense()
    for t in range(1, 6):
        a, b = (Knm @ paths[lay].coef((0, t)) for lay in ("cholesky", "lowrank"))
        np.testing.assert_allclose(b, a, atol=1e-6 * np.abs(a).max())


def test_validation_and_float32_data():
    """With early stopping on validation rows, the low-rank preconditioner (r = m / 4) reaches
    the full factor's best validation error within 40 iterations, in float64 and float32
    (it is below it here: the slower iteration stops earlier at the smallest penalties)."""
    X, Y, C = _problem(n=4000, m=400)
    kernel = Gaussian(1.5)
    Xv, Yv = X[3000:], Y[3000:]
    X, Y = X[:3000], Y[:3000]
    lam = np.geomspace(1e-6, 1e-1, 6)
    best = {}
    for layout, dt in [("cholesky", np.float64), ("lowrank", np.float64), ("lowrank", np.float32)]:
        op = KernelOperator(X.astype(dt), C.astype(dt), kernel)
        val = Validation(KernelOperator(Xv.astype(dt), C.astype(dt), kernel), Yv)
        path = iterative_path(
            op,
            Y,
            lam,
            IterativeOptions(
                method="cg", max_iter=40, factor_layout=layout, preconditioner_rank=100
            ),
            validation=val,
        )
        best[layout, dt] = np.nanmin(path.val_error, axis=1)
    full = best["cholesky", np.float64]
    assert full.min() < 0.05 * np.var(Yv)  # the noise is 0.01 of a variance near 1
    assert best["lowrank", np.float64].min() <= 1.05 * full.min()
    # at the large penalties (the fastest to converge) every point agrees
    np.testing.assert_allclose(best["lowrank", np.float64][2:], full[2:], rtol=0.05)
    # float32: the full factor's own float32 path is 10% off at the smallest penalties here
    assert best["lowrank", np.float32].min() <= 1.15 * full.min()


def test_a_budget_without_room_for_an_m_by_m_matrix_takes_the_low_rank_factor():
    m = 5000
    X, Y, C = _problem(n=6000, m=m)
    lam = np.array([1e-3])
    low = cg_memory(m, 1, lam, 5, 0, layout="lowrank", rank=200)
    assert low < cg_memory(m, 1, lam, 5, 0, True, "compact", 4, 1)  # not even float32's
    op = KernelOperator(X, C, Gaussian(1.5))
    path = iterative_path(
        op,
        Y,
        lam,
        IterativeOptions(method="cg", max_iter=5, memory_limit=low, preconditioner_rank=200),
    )
    assert path.info["preconditioners"] == "lowrank"
    # the rank's memory decides: the default's (1,000) exceeds a float32 buffer here
    big = cg_memory(m, 1, lam, 5, 0, layout="lowrank")
    assert big > cg_memory(m, 1, lam, 5, 0, True, "compact", 4, 1)
    path = iterative_path(op, Y, lam, IterativeOptions(method="cg", max_iter=5, memory_limit=big))
    assert (path.info["preconditioners"], path.info["factor_dtype"]) == ("compact", "float32")
    with pytest.raises(ValueError, match="preconditioner_rank"):
        iterative_path(
            op,
            Y,
            lam,
            IterativeOptions(
                method="cg", max_iter=5, factor_layout="lowrank", preconditioner_rank=0
            ),
        )
    with pytest.raises(ValueError, match="sketch"):
        lowrank_factor(op, 10, "uniform")
