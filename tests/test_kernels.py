"""Kernels against brute-force formulas computed point by point."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import kernelpath
from kernelpath import kernels as K


def brute(name, X, Z, **p):
    D = cdist(X, Z)  # Euclidean, independent of the library's Gram trick
    s = p.get("sigma", 1.0)
    if name == "gaussian":
        return np.exp(-(D**2) / (2 * s**2))
    if name == "laplacian":
        return np.exp(-D / s)
    if name == "cauchy":
        return 1 / (1 + D**2 / s**2)
    if name == "matern":
        r = D / s
        nu = p["nu"]
        if nu == 0.5:
            return np.exp(-r)
        if nu == 1.5:
            return (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
        return (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)
    if name == "polynomial":
        g = p["gamma"] if p.get("gamma") is not None else 1 / X.shape[1]
        return (g * X @ Z.T + p["coef0"]) ** p["degree"]
    return X @ Z.T


CASES = [
    ("gaussian", K.Gaussian(sigma=1.3), {"sigma": 1.3}),
    ("laplacian", K.Laplacian(sigma=0.7), {"sigma": 0.7}),
    ("cauchy", K.Cauchy(sigma=2.0), {"sigma": 2.0}),
    ("matern", K.Matern(sigma=1.1, nu=0.5), {"sigma": 1.1, "nu": 0.5}),
    ("matern", K.Matern(sigma=1.1, nu=1.5), {"sigma": 1.1, "nu": 1.5}),
    ("matern", K.Matern(sigma=1.1, nu=2.5), {"sigma": 1.1, "nu": 2.5}),
    (
        "polynomial",
        K.Polynomial(degree=3, gamma=0.5, coef0=1.0),
        {"degree": 3, "gamma": 0.5, "coef0": 1.0},
    ),
    ("polynomial", K.Polynomial(degree=2), {"degree": 2, "gamma": None, "coef0": 1.0}),
    ("linear", K.Linear(), {}),
]


@pytest.mark.parametrize("name,kern,params", CASES)
def test_kernel_block_matches_brute_force(name, kern, params, rng):
    X = rng.standard_normal((37, 4))
    Z = rng.standard_normal((23, 4))
    np.testing.assert_allclose(kern(X, Z), brute(name, X, Z, **params), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kern.diag(X), np.diag(brute(name, X, X, **params)), rtol=1e-10)


@pytest.mark.parametrize("name,kern,params", CASES)
def test_kernel_float32_stays_float32(name, kern, params, rng):
    X = rng.standard_normal((20, 3)).astype(np.float32)
    B = kern(X, X)
    assert B.dtype == np.float32
    np.testing.assert_allclose(
        B, brute(name, X.astype(float), X.astype(float), **params), rtol=2e-4, atol=2e-5
    )


def test_squared_distances_never_negative_far_from_origin(rng):
    # duplicates far from the origin: the Gram trick cancels catastrophically
    X = 1e4 + rng.standard_normal((50, 3)) * 1e-3
    X = np.vstack([X, X])
    D = K.squared_distances(X, X)
    assert D.min() >= 0
    G = K.Gaussian(sigma=0.1)(X, X)
    assert np.all(G <= 1.0) and np.all(G >= 0.0)
    # a width of the data's spread, 1e-3, is below what norms of 1e4 resolve (the rounding
    # of d^2, 1e-6, is a whole width^2): refused with the smallest safe width
    with pytest.raises(ValueError, match=r"too narrow .* give sigma >= 0.00\d+ .* or center"):
        K.Gaussian(sigma=1e-3)(X, X)
    L = K.Laplacian(sigma=1.0)(X, X)
    assert np.all(np.isfinite(L)) and L.max() <= 1.0


def test_importable_from_package_and_module():
    for name in ["Gaussian", "Laplacian", "Matern", "Cauchy", "Polynomial", "Linear"]:
        assert getattr(kernelpath, name) is getattr(K, name)


def test_median_heuristic(rng):
    X = rng.standard_normal((300, 5))
    k = K.Gaussian(sigma="median").resolve(X)
    D = cdist(X, X)[np.triu_indices(300, 1)]
    assert k.sigma == pytest.approx(np.median(D))
    # called on data directly, "median" and "auto" (the classes' default) take X's median
    np.testing.assert_array_equal(K.Gaussian(sigma="median")(X, X), k(X, X))
    np.testing.assert_array_equal(K.Gaussian()(X, X), k(X, X))
    assert K.Laplacian().sigma == K.Matern().sigma == K.Cauchy().sigma == "auto"


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: K.Gaussian(sigma=-1.0), "sigma"),
        (lambda: K.Gaussian(sigma=0.0), "sigma"),
        (lambda: K.Gaussian(sigma=float("nan")), "sigma"),
        (lambda: K.Gaussian(sigma="mean"), "sigma"),
        (lambda: K.Matern(nu=1.0), "nu"),
        (lambda: K.Polynomial(degree=0), "degree"),
        (lambda: K.Polynomial(gamma=-2.0), "gamma"),
        (lambda: K.make_kernel("nope"), "kernel"),
    ],
)
def test_bad_kernel_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_kernel_type_errors():
    with pytest.raises(TypeError, match="sigma"):
        K.Gaussian(sigma={"width": 1.0})  # a list or array is one width per feature
    with pytest.raises(TypeError, match="kernel"):
        K.make_kernel(3.0)


def test_kernel_params_roundtrip():
    k = K.Matern(sigma=2.0, nu=2.5)
    assert k.get_params() == {"sigma": 2.0, "nu": 2.5, "metric": None}
    assert K.Matern(**k.get_params()) == k
    assert "Matern(sigma=2.0, nu=2.5)" == repr(k)
    assert (
        repr(K.Gaussian(1.0, metric=np.ones((3, 2))))
        == "Gaussian(sigma=1.0, metric=<3 x 2 matrix>)"
    )
    with pytest.raises(ValueError, match="invalid parameter"):
        k.set_params(bandwidth=1.0)


# ----------------------------------------------------------------------------- widths
@pytest.mark.parametrize("sigma", [1e-200, 1e-155, 1e155, 1e200])
def test_an_unrepresentable_width_is_refused_where_it_is_given(sigma):
    import kernelpath as kp

    with pytest.raises(ValueError, match=r"sigma must be in \[1e-150, 1e\+150\]"):
        kp.Gaussian(sigma)
    with pytest.raises(ValueError, match=r"per-feature width must be in \[1e-150"):
        kp.Laplacian(np.array([1.0, sigma]))


def test_a_width_that_overflows_the_data_in_widths_is_refused_at_fit():
    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3)) * 1e150
    y = rng.standard_normal(200)
    for est in (
        kp.EigenProRegressor(kp.Gaussian(1e-82), scale=False),  # ZeroDivisionError before
        kp.NystromRegressor(kp.Gaussian(1e-82), scale=False, n_centers=20),
    ):
        with pytest.raises(
            ValueError, match=r"sigma: a width of 1e-82 is too narrow .* give sigma >="
        ):
            est.fit(X, y)


def test_a_narrow_width_is_a_nearly_diagonal_kernel_and_a_too_narrow_one_an_error():
    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))  # |x| up to about 3, distances at least 0.01
    K = kp.Gaussian(1e-5)(X, X)  # ||x / sigma|| up to 4e5: the kernel is exact, diagonal
    np.testing.assert_allclose(K, np.eye(60), rtol=0, atol=1e-3)  # rounding 4(d+2) eps |x/s|^2
    est = kp.NystromRegressor(kp.Gaussian(1e-5), n_centers=20, scale=False).fit(X, X[:, 0])
    assert np.all(np.isfinite(est.coef_))
    # at 1e-140 the rounding of the norms, in widths, made k(x, x) = 0 (before the fix)
    with pytest.raises(ValueError, match="too narrow for the values of the centers"):
        kp.Gaussian(1e-140)(X, X)
    with pytest.raises(ValueError, match="too narrow for the values of X"):
        kp.NystromRegressor(kp.Gaussian(1e-140), n_centers=20, scale=False).fit(X, X[:, 0])
    # far from the origin the same spread needs a wider kernel: centering fixes it
    far = X + 1e6
    with pytest.raises(ValueError, match="or center the data"):
        kp.NystromRegressor(kp.Gaussian(1e-2), n_centers=20, scale=False).fit(far, X[:, 0])
