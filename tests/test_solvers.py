"""Every solver against an independent dense computation."""

import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import kernelpath as kp
from kernelpath import Gaussian, KernelOperator
from kernelpath.linalg import nu_method_coefficients
from kernelpath.solvers import IterativeOptions, exact_path, iterative_path, nystrom_direct_path
from kernelpath.solvers._common import Validation

SIGMA = 0.8


def gauss(X, Z, sigma=SIGMA):
    """Reference kernel, computed independently of the library (scipy's cdist)."""
    return np.exp(-cdist(X, Z, "sqeuclidean") / (2 * sigma**2))


def problem(rng, n=160, m=40, k=2, d=2):
    X = rng.uniform(-2, 2, (n, d))
    Y = np.column_stack([np.sin(X.sum(1) + j) for j in range(k)]) + 0.1 * rng.standard_normal(
        (n, k)
    )
    C = X[rng.choice(n, m, replace=False)]
    return X, Y, C


def nystrom_reference(X, Y, C, lam, w=None):
    """alpha = (K_nm' W K_nm + λ n K_mm)^-1 K_nm' W y, solved densely."""
    n = len(X)
    w = np.ones(n) if w is None else w
    Knm, Kmm = gauss(X, C), gauss(C, C)
    return np.linalg.solve(Knm.T @ (w[:, None] * Knm) + lam * n * Kmm, Knm.T @ (w[:, None] * Y))


def inv_sqrt(K):
    s, U = np.linalg.eigh(K)
    return U / np.sqrt(s)


def test_nystrom_with_all_points_equals_exact_krls(rng):
    # sigma = 0.3 keeps K well enough conditioned (smallest eigenvalue ~1e-4): Nyström works
    # through K_mm^+ and squares K, so its accuracy is ~ eps * cond(K_mm) / λ
    sig = 0.3
    X, Y, _ = problem(rng, n=120)
    lams = np.array([1e-1, 1e-3, 1e-5])
    Xt = rng.uniform(-2, 2, (50, 2))
    K = gauss(X, X, sig)
    ny = nystrom_direct_path(KernelOperator(X, X, Gaussian(sig)), Y, lams)
    ex = exact_path(KernelOperator(X, X, Gaussian(sig)), Y, "tikhonov", lams)
    cg = iterative_path(
        KernelOperator(X, X, Gaussian(sig)),
        Y,
        lams,
        IterativeOptions(method="cg", max_iter=300, n_iter_no_change=None, tol=1e-14),
    )
    for p, lam in enumerate(lams):
        ref = np.linalg.solve(K + lam * len(X) * np.eye(len(X)), Y)
        f_ref = gauss(Xt, X, sig) @ ref
        last = np.flatnonzero(np.isfinite(cg.train_error[p]))[-1]
        for a in (ny.coef((p,)), ex.coef((p,)), cg.coef((p, last))):
            f = gauss(Xt, X, sig) @ a
            np.testing.assert_allclose(f, f_ref, rtol=1e-8, atol=1e-8 * np.abs(f_ref).max())


def test_direct_lambda_path_equals_separate_fits(rng):
    X, Y, C = problem(rng)
    lams = np.geomspace(1.0, 1e-6, 7)
    w = rng.uniform(0.2, 2.0, len(X))
    Xt = rng.uniform(-2, 2, (50, 2))
    for weights in (None, w):
        path = nystrom_direct_path(KernelOperator(X, C, Gaussian(SIGMA)), Y, lams, weights)
        assert path.shape == (7,)
        for p, lam in enumerate(lams):
            # coefficients are ill-determined when K_mm is ill-conditioned (both here and in
            # the reference): compare the functions, on the training and on new points
            ref = nystrom_reference(X, Y, C, lam, weights)
            f = gauss(X, C) @ ref
            scale = np.abs(f).max()
            np.testing.assert_allclose(
                gauss(X, C) @ path.coef((p,)), f, rtol=1e-7, atol=1e-7 * scale
            )
            np.testing.assert_allclose(
                gauss(Xt, C) @ path.coef((p,)), gauss(Xt, C) @ ref, rtol=1e-7, atol=1e-7 * scale
            )
            ww = np.ones(len(X)) if weights is None else weights
            mse = (ww[:, None] * (f - Y) ** 2).sum() / (ww.sum() * 2)
            assert path.train_error[p] == pytest.approx(mse, rel=1e-8, abs=1e-12)


def test_exact_tikhonov_tsvd_kols_paths(rng):
    X, Y, _ = problem(rng, n=90)
    K = gauss(X, X)
    n = len(X)
    lams = np.geomspace(1.0, 1e-6, 5)
    w = rng.uniform(0.5, 1.5, n)
    path = exact_path(KernelOperator(X, X, Gaussian(SIGMA)), Y, "tikhonov", lams, weights=w)
    for p, lam in enumerate(lams):
        ref = np.linalg.solve(w[:, None] * K + lam * n * np.eye(n), w[:, None] * Y)
        np.testing.assert_allclose(path.coef((p,)), ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())
    s, Q = np.linalg.eigh(K / n)
    tsvd = exact_path(KernelOperator(X, X, Gaussian(SIGMA)), Y, "tsvd", lams)
    for p, lam in enumerate(lams):
        keep = s >= lam
        ref = Q[:, keep] @ ((Q[:, keep].T @ Y) / s[keep, None]) / n
        np.testing.assert_allclose(tsvd.coef((p,)), ref, rtol=1e-6, atol=1e-9 * np.abs(ref).max())
    kols = exact_path(KernelOperator(X, X, Gaussian(SIGMA)), Y, "kols", None)
    f = K @ kols.coef()
    np.testing.assert_allclose(f, Y, atol=1e-6)  # interpolates (K is full rank here)


def test_exact_iteration_filters_are_the_iterations(rng):
    X, Y, _ = problem(rng, n=70)
    K = gauss(X, X)
    n = len(X)
    L = np.linalg.eigvalsh(K / n).max()
    T = 40
    lw = exact_path(KernelOperator(X, X, Gaussian(SIGMA)), Y, "landweber", np.arange(1, T + 1))
    nu = exact_path(KernelOperator(X, X, Gaussian(SIGMA)), Y, "nu", np.arange(1, T + 1))
    a = np.zeros_like(Y)
    b, b_prev = np.zeros_like(Y), np.zeros_like(Y)
    for t in range(1, T + 1):
        a = a + (Y - K @ a) / (n * L)  # Landweber on (K / n) a = y / n with step 1 / L
        np.testing.assert_allclose(lw.coef((t - 1,)), a, rtol=1e-8, atol=1e-8 * np.abs(a).max())
        mu, om = nu_method_coefficients(t, 1.0)
        b, b_prev = b + mu * (b - b_prev) + om * (Y - K @ b) / (n * L), b
        np.testing.assert_allclose(nu.coef((t - 1,)), b, rtol=1e-7, atol=1e-8 * np.abs(b).max())


@pytest.mark.parametrize("lam", [0.0, 1e-3])
def test_nytro_gd_path_is_the_landweber_filter(rng, lam):
    """GD iterate t equals R (I - (I - η(H + λ))^t) (H + λ)^-1 b  (NYTRO eq. 17-19)."""
    X, Y, C = problem(rng)
    n = len(X)
    T = 25
    path = iterative_path(
        KernelOperator(X, C, Gaussian(SIGMA)),
        Y,
        lam,
        IterativeOptions(method="gd", max_iter=T, n_iter_no_change=None, tol=0.0, store_coefs=True),
    )
    eta = path.info["step"]  # 1 / (L + λ), L the top eigenvalue of H0
    R = inv_sqrt(gauss(C, C))
    A = gauss(X, C) @ R
    H = A.T @ A / n + lam * np.eye(len(C))
    b = A.T @ Y / n
    s, V = np.linalg.eigh(H)
    for t in range(1, T + 1):
        g = (1 - (1 - eta * s) ** t) / s
        ref = R @ (V @ (g[:, None] * (V.T @ b)))
        np.testing.assert_allclose(
            path.coef((0, t - 1)), ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max()
        )
        # training error is the dense one
        f = gauss(X, C) @ ref
        assert path.train_error[0, t - 1] == pytest.approx(np.mean((f - Y) ** 2), rel=1e-7)


def test_nytro_nu_method_is_the_recursion(rng):
    X, Y, C = problem(rng)
    n = len(X)
    T = 20
    path = iterative_path(
        KernelOperator(X, C, Gaussian(SIGMA)),
        Y,
        0.0,
        IterativeOptions(method="nu", max_iter=T, n_iter_no_change=None, tol=0.0, store_coefs=True),
    )
    L = 1 / path.info["step"]
    R = inv_sqrt(gauss(C, C))
    A = gauss(X, C) @ R
    H, b = A.T @ A / n, A.T @ Y / n
    x, x_prev = np.zeros_like(b), np.zeros_like(b)
    for t in range(1, T + 1):
        mu, om = nu_method_coefficients(t, 1.0)
        x, x_prev = x + mu * (x - x_prev) + om * (b - H @ x) / L, x
        np.testing.assert_allclose(
            path.coef((0, t - 1)), R @ x, rtol=1e-6, atol=1e-8 * np.abs(R @ x).max()
        )


@pytest.mark.parametrize("method,iters", [("cg", 200), ("nu", 3000), ("gd", 20000)])
def test_iterative_solvers_reach_the_direct_solution(rng, method, iters):
    X, Y, C = problem(rng, n=120, m=25)
    lams = np.array([1e-1, 1e-3])
    path = iterative_path(
        KernelOperator(X, C, Gaussian(SIGMA)),
        Y,
        lams,
        IterativeOptions(method=method, max_iter=iters, n_iter_no_change=None, tol=1e-12),
    )
    for p, lam in enumerate(lams):
        ref = nystrom_reference(X, Y, C, lam)
        last = np.flatnonzero(np.isfinite(path.train_error[p]))[-1]
        f, f_ref = gauss(X, C) @ path.coef((p, last)), gauss(X, C) @ ref
        np.testing.assert_allclose(f, f_ref, rtol=1e-6, atol=1e-6 * np.abs(f_ref).max())
    if method == "cg":  # preconditioned: far fewer iterations than the problem size
        assert path.shape[1] < 60


def test_recomputed_iterates_equal_stored(rng):
    X, Y, C = problem(rng)
    for method in ("gd", "nu"):
        kw = dict(n_iter_no_change=None, tol=0.0)
        stored = iterative_path(
            KernelOperator(X, C, Gaussian(SIGMA)),
            Y,
            [1e-2, 1e-4],
            IterativeOptions(method=method, max_iter=12, store_coefs=True, **kw),
        )
        lazy = iterative_path(
            KernelOperator(X, C, Gaussian(SIGMA)),
            Y,
            [1e-2, 1e-4],
            IterativeOptions(method=method, max_iter=12, **kw),
        )
        for idx in [(0, 0), (1, 5), (0, 11), (1, 11)]:
            np.testing.assert_allclose(lazy.coef(idx), stored.coef(idx), rtol=1e-9, atol=1e-12)


def test_validation_errors_and_early_stopping(rng):
    X, Y, C = problem(rng, n=300, m=60)
    Y = Y + 0.5 * rng.standard_normal(Y.shape)  # noisy: early stopping must kick in
    Xv, Yv, _ = problem(np.random.default_rng(7), n=200)
    val = Validation(KernelOperator(Xv, C, Gaussian(SIGMA)), Yv)
    path = iterative_path(
        KernelOperator(X, C, Gaussian(SIGMA)),
        Y,
        0.0,
        IterativeOptions(method="nu", max_iter=400, n_iter_no_change=5, tol=1e-4),
        validation=val,
    )
    T = path.shape[1]
    assert T < 400  # stopped early
    errs = path.val_error[0]
    best = int(np.nanargmin(errs))
    assert path.best_index == (0, best)
    assert T - 1 - best >= 5 - 1  # stopped after the window without improvement
    for t in (0, best, T - 1):  # validation error = error of that iterate's predictions
        f = gauss(Xv, C) @ path.coef((0, t))
        assert errs[t] == pytest.approx(np.mean((f - Yv) ** 2), rel=1e-8)


def test_direct_validation_errors(rng):
    X, Y, C = problem(rng)
    Xv, Yv, _ = problem(np.random.default_rng(3), n=80)
    lams = np.geomspace(1, 1e-8, 9)
    val = Validation(KernelOperator(Xv, C, Gaussian(SIGMA)), Yv)
    path = nystrom_direct_path(KernelOperator(X, C, Gaussian(SIGMA)), Y, lams, validation=val)
    ref = [np.mean((gauss(Xv, C) @ nystrom_reference(X, Y, C, lam) - Yv) ** 2) for lam in lams]
    np.testing.assert_allclose(path.val_error, ref, rtol=1e-6)
    assert path.best_index == (int(np.argmin(ref)),)


def test_rank_deficient_centers(rng):
    """Duplicate centers: K_mm is singular, the factor drops the null space."""
    X, Y, C = problem(rng, m=20)
    C2 = np.vstack([C, C[:7]])
    a = nystrom_direct_path(KernelOperator(X, C2, Gaussian(SIGMA)), Y, [1e-3]).coef()
    b = nystrom_reference(X, Y, C, 1e-3)
    np.testing.assert_allclose(gauss(X, C2) @ a, gauss(X, C) @ b, rtol=1e-6, atol=1e-7)
    cg = iterative_path(
        KernelOperator(X, C2, Gaussian(SIGMA)),
        Y,
        1e-3,
        IterativeOptions(method="cg", max_iter=100, n_iter_no_change=None, tol=1e-12),
    )
    np.testing.assert_allclose(gauss(X, C2) @ cg.coef(), gauss(X, C) @ b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("lam,exact_upto", [(1e-2, 12), (1e-4, 6)])
def test_cg_iterates_are_textbook_pcg(rng, lam, exact_upto):
    """One penalty: the Krylov-Galerkin iterates are the preconditioned CG iterates with
    P = diag(s) / m + λ in the eigenbasis of K_mm (FALKON's preconditioner). Textbook CG loses
    orthogonality in floating point after a few iterations on harder problems (the re-
    orthogonalized basis does not), so later iterates are checked by CG's optimality: the
    energy-norm error decreases monotonically."""
    sig = 0.3  # K_mm well conditioned: the factor keeps every direction
    X, Y, C = problem(rng, n=200, m=30, k=1)
    path = iterative_path(
        KernelOperator(X, C, Gaussian(sig)),
        Y,
        lam,
        IterativeOptions(method="cg", max_iter=12, n_iter_no_change=None, tol=0.0),
    )
    n, m = len(X), len(C)
    s, U = np.linalg.eigh(gauss(C, C, sig))
    R = U / np.sqrt(s)
    A = gauss(X, C, sig) @ R
    H = A.T @ A / n + lam * np.eye(m)
    b = (A.T @ Y / n)[:, 0]
    x_star = np.linalg.solve(H, b)
    Pinv = 1 / (s / m + lam)
    x = np.zeros(m)
    r_ = b.copy()
    z = Pinv * r_
    p = z.copy()
    energy = []
    for t in range(path.shape[1]):
        Hp = H @ p
        a = (r_ @ z) / (p @ Hp)
        x = x + a * p
        r_new = r_ - a * Hp
        z_new = Pinv * r_new
        p = z_new + (r_new @ z_new) / (r_ @ z) * p
        r_, z = r_new, z_new
        ours = path.coef((0, t))[:, 0]
        if t < exact_upto:
            ref = R @ x
            np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
        e = np.linalg.solve(R.T @ R, R.T @ ours) - x_star  # back to beta coordinates
        energy.append(e @ H @ e)
    assert np.all(np.diff(energy) <= 1e-12 * energy[0])


def test_cg_path_over_penalties_shares_one_space(rng):
    """Many penalties cost one Krylov space: every point equals the Galerkin solution, and
    converged points equal the direct solution."""
    X, Y, C = problem(rng, n=150, m=30)
    lams = np.geomspace(1e-1, 1e-7, 13)
    path = iterative_path(
        KernelOperator(X, C, Gaussian(SIGMA)),
        Y,
        lams,
        IterativeOptions(method="cg", max_iter=200, n_iter_no_change=None, tol=1e-10),
    )
    # anchors spread evenly in log scale, at most ANCHOR_RATIO = 100 apart, both ends in
    assert path.info["anchor_penalties"] == pytest.approx([1e-7, 1e-5, 1e-3, 1e-1])
    for p, lam in enumerate(lams):
        last = np.flatnonzero(np.isfinite(path.train_error[p]))[-1]
        f = gauss(X, C) @ path.coef((p, last))
        f_ref = gauss(X, C) @ nystrom_reference(X, Y, C, lam)
        np.testing.assert_allclose(f, f_ref, rtol=1e-6, atol=1e-6 * np.abs(f_ref).max())


def test_exact_single_penalty_cholesky_equals_eigen_path(rng):
    X, Y, _ = problem(rng, n=90)
    w = rng.uniform(0.5, 1.5, len(X))
    Xv, Yv, _ = problem(np.random.default_rng(5), n=40)
    lams = np.array([1e-2, 1e-5])
    both = exact_path(
        KernelOperator(X, X, Gaussian(SIGMA)),
        Y,
        "tikhonov",
        lams,
        weights=w,
        validation=Validation(KernelOperator(Xv, X, Gaussian(SIGMA)), Yv),
    )
    for p, lam in enumerate(lams):
        one = exact_path(
            KernelOperator(X, X, Gaussian(SIGMA)),
            Y,
            "tikhonov",
            [lam],
            weights=w,
            validation=Validation(KernelOperator(Xv, X, Gaussian(SIGMA)), Yv),
        )
        np.testing.assert_allclose(one.coef(), both.coef((p,)), rtol=1e-7, atol=1e-9)
        assert one.train_error[0] == pytest.approx(both.train_error[p], rel=1e-6, abs=1e-12)
        assert one.val_error[0] == pytest.approx(both.val_error[p], rel=1e-8)


def test_direct_solver_warns_below_its_rounding_level():
    """A penalty far under the size of the most negative computed eigenvalue of the (PSD)
    whitened normal equations fits rounding (almost all of the solution's norm in the
    unresolved directions). The direct solver then takes the QR route, silently;
    where the budget has no room for it the fit keeps the rounding and says so; a penalty
    above that level does not."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.uniform(size=(150, 4)), 0.5 + 0.1 * rng.standard_normal((450, 4))])
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(len(X))
    kw = dict(n_centers=500, solver="direct", scale=False, validation_fraction=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = kp.NystromRegressor(kp.Gaussian(0.3), penalty=1e-14, **kw).fit(X, y)
    assert est.path_.info["spectrum"] == "qr" and est.path_.info["rounding_share"][0] < 0.5
    with pytest.warns(UserWarning, match="rounding level.*did not fit memory_budget"):
        est = kp.NystromRegressor(kp.Gaussian(0.3), penalty=1e-14, memory_budget="12MB", **kw).fit(
            X, y
        )
    floor = est.path_.info["rounding_floor"]
    assert est.path_.info["spectrum"] == "normal"
    assert floor > 1e-14 and est.path_.info["rounding_share"][0] > 0.9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kp.NystromRegressor(kp.Gaussian(0.3), penalty=10 * floor, **kw).fit(X, y)


@pytest.mark.parametrize("layout", ["cholesky", "compact"])
def test_cg_validation_errors_with_and_without_the_kept_image(rng, layout):
    """CG scores its points on the validation rows either from the kept image K_vm R V of
    its basis (where ``cg_memory(images=True)`` fits the limit) or from a fresh product per
    iteration: both give each point's validation error of its own coefficients, computed
    here densely, and the same path."""
    from kernelpath.solvers.krylov import cg_memory

    X, Y, C = problem(rng, n=300, m=60, k=3)
    Xv, Yv, _ = problem(np.random.default_rng(11), n=120, k=3)
    lams = np.geomspace(1e-1, 1e-6, 7)
    args = (len(C), 3, lams, 25, len(Yv))
    lean = cg_memory(*args, True, layout)
    full = cg_memory(*args, True, layout, images=True)
    assert full - lean >= 8 * len(Yv) * 3  # the image: n_val x d, d >= k
    paths = {}
    for limit in (None, full, full - 1):
        paths[limit] = iterative_path(
            KernelOperator(X, C, Gaussian(SIGMA)),
            Y,
            lams,
            IterativeOptions(
                method="cg",
                max_iter=25,
                n_iter_no_change=None,
                memory_limit=limit,
                factor_layout=layout,
            ),
            validation=Validation(KernelOperator(Xv, C, Gaussian(SIGMA)), Yv),
        )
    assert paths[None].info["validation_images"] and paths[full].info["validation_images"]
    assert not paths[full - 1].info["validation_images"]
    Kv = gauss(Xv, C)
    for path in paths.values():
        assert path.shape[1] >= 3
        for idx in zip(*np.nonzero(np.isfinite(path.val_error)), strict=True):
            err = np.mean((Kv @ path.coef(idx) - Yv) ** 2)
            assert path.val_error[idx] == pytest.approx(err, rel=1e-8)
    np.testing.assert_allclose(paths[None].val_error, paths[full - 1].val_error, rtol=1e-9)
    assert paths[None].best_index == paths[full - 1].best_index


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_exact_krls_at_a_penalty_below_rounding_on_duplicated_rows():
    """penalty=1e-20 on duplicated rows: the Cholesky factor of a singular K + λI failed
    (LinAlgError); now the eigendecomposition takes over and agrees with penalty=0."""
    X, y = _data(100)
    X2, y2 = np.vstack([X, X]), np.r_[y, y]
    tiny = kp.KRLSRegressor(penalty=1e-20, random_state=0).fit(X2, y2).predict(X)
    # the same penalty twice is a path: the eigendecomposition, which the fallback is
    path = kp.KRLSRegressor(penalty=[1e-20, 1e-20], random_state=0).fit(X2, y2).predict(X)
    np.testing.assert_allclose(tiny, path, rtol=1e-8, atol=1e-10)
    assert np.all(np.isfinite(tiny))


def test_extreme_penalties_and_tolerances_do_not_overflow():
    """penalty=[1e-300, 1e300] overflowed the CG anchors' span (OverflowError); a logistic
    tol of 1e300 overflowed tol**2."""
    X, y = _data(100)
    est = kp.NystromRegressor(n_centers=10, penalty=[1e-300, 1e300], random_state=0).fit(X, y)
    assert est.penalty_ in (1e-300, 1e300) and np.all(np.isfinite(est.predict(X)))
    clf = kp.NystromClassifier(n_centers=10, loss="logistic", tol=1e300, random_state=0)
    assert np.all(np.isfinite(clf.fit(X, y > 0).predict_proba(X)))


def test_a_huge_penalty_gives_the_zero_model_not_an_overflow():
    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 2))
    y = X[:, 0] + 3.0
    est = kp.KRLSRegressor(kp.Gaussian(1.0), penalty=1e200).fit(X, y)  # OverflowError before
    assert np.all(np.isfinite(est.coef_)) and np.abs(est.coef_).max() < 1e-150
    assert np.isfinite(est.path_.train_error).all()
