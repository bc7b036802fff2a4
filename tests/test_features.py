"""Random Fourier features: kernel approximation rate, reproducibility, the transformer contract."""

import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

from kernelpath import Cauchy, Gaussian, Laplacian, Linear, Matern, RandomFourierFeatures


@pytest.mark.parametrize(
    "kernel",
    [Gaussian(2.0), Laplacian(2.0), Cauchy(2.0), Matern(2.0, 1.5), Matern(2.0, 2.5)],
    ids=repr,
)
def test_kernel_error_decays_like_inverse_square_root_of_d(rng, kernel):
    X = rng.standard_normal((200, 4))
    K = kernel(X, X)
    Ds = [64, 256, 1024, 4096]
    errs = []
    for D in Ds:
        e = []
        for seed in range(6):
            P = RandomFourierFeatures(kernel, n_features=D, random_state=seed).fit(X).transform(X)
            e.append(np.abs(K - P @ P.T).mean())
        errs.append(np.mean(e))
    slope = np.polyfit(np.log(Ds), np.log(errs), 1)[0]
    assert -0.6 <= slope <= -0.4, (slope, errs)
    assert errs[-1] < 0.02


def test_orthogonal_features_approximate_the_gaussian(rng):
    X = rng.standard_normal((200, 5))
    K = Gaussian(1.5)(X, X)
    errs = []
    for D in [64, 1024]:
        P = RandomFourierFeatures(Gaussian(1.5), n_features=D, orthogonal=True, random_state=0)
        P = P.fit(X).transform(X)
        errs.append(np.abs(K - P @ P.T).mean())
    assert errs[1] < errs[0] / 2.5
    W = RandomFourierFeatures(Gaussian(1.5), n_features=10, orthogonal=True, random_state=0).fit(X)
    block = W.frequencies_[:5]
    gram = block @ block.T
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-10)


def test_same_seed_same_map_and_prefixes_are_nested(rng):
    X = rng.standard_normal((50, 3))
    a = RandomFourierFeatures(Laplacian(1.0), n_features=300, random_state=7).fit(X)
    b = RandomFourierFeatures(Laplacian(1.0), n_features=300, random_state=7).fit(X)
    c = RandomFourierFeatures(Laplacian(1.0), n_features=120, random_state=7).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    np.testing.assert_array_equal(a.frequencies_[:120], c.frequencies_)
    np.testing.assert_array_equal(a.offsets_[:120], c.offsets_)
    np.testing.assert_allclose(
        a.transform(X)[:, :120] * np.sqrt(300 / 120), c.transform(X), rtol=1e-12
    )
    d = RandomFourierFeatures(Laplacian(1.0), n_features=300, random_state=8).fit(X)
    assert not np.allclose(a.transform(X), d.transform(X))


def test_a_center_is_the_map_of_the_shifted_inputs(rng):
    # literal: φ_c(x) = sqrt(2/D) cos(W (x - c) + b) with the W, b of the map without c
    X = rng.standard_normal((30, 3)) * [1.0, 10.0, 0.1] + [5.0, -40.0, 2.0]
    c = X.mean(axis=0)
    plain = RandomFourierFeatures(Gaussian(2.0), n_features=50, random_state=3).fit(X)
    moved = RandomFourierFeatures(Gaussian(2.0), n_features=50, random_state=3, center=c).fit(X)
    np.testing.assert_array_equal(moved.frequencies_, plain.frequencies_)
    W, b = plain.frequencies_, plain.offsets_
    np.testing.assert_allclose(
        moved.transform(X), np.sqrt(2 / 50) * np.cos((X - c) @ W.T + b), rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(moved.transform(X), plain.transform(X - c), rtol=0, atol=1e-12)
    mean = RandomFourierFeatures(Gaussian(2.0), n_features=50, random_state=3, center="mean").fit(X)
    np.testing.assert_allclose(mean.offsets_, moved.offsets_, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="center must be 'mean'"):
        RandomFourierFeatures(Gaussian(2.0), n_features=5, center="median").fit(X)
    with pytest.raises(ValueError, match="center must have shape"):
        RandomFourierFeatures(Gaussian(2.0), n_features=5, center=[0.0, 1.0]).fit(X)
    with pytest.raises(ValueError, match="center must be finite"):
        RandomFourierFeatures(Gaussian(2.0), n_features=5, center=[0.0, np.nan, 1.0]).fit(X)
    with pytest.raises(TypeError, match="center must be"):
        RandomFourierFeatures(Gaussian(2.0), n_features=5, center=["a", "b", "c"]).fit(X)


def test_float32_stays_float32_and_matches(rng):
    X = rng.standard_normal((40, 3))
    f = RandomFourierFeatures(Gaussian(1.0), n_features=64, random_state=0).fit(X)
    out32 = f.transform(X.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, f.transform(X), atol=1e-5)


def test_median_bandwidth_and_names(rng):
    X = rng.standard_normal((80, 3))
    f = RandomFourierFeatures("gaussian", n_features=32, random_state=0).fit(X)
    assert isinstance(f.kernel_, Gaussian) and f.kernel_.sigma > 0
    assert f.transform(X).shape == (80, 32)


def test_bad_arguments_are_named(rng):
    X = rng.standard_normal((10, 2))
    with pytest.raises(ValueError, match="kernel must be Gaussian"):
        RandomFourierFeatures(Linear(), n_features=10).fit(X)
    with pytest.raises(ValueError, match="orthogonal=True needs the Gaussian"):
        RandomFourierFeatures(Laplacian(1.0), n_features=10, orthogonal=True).fit(X)
    with pytest.raises(ValueError, match="n_features"):
        RandomFourierFeatures(Gaussian(1.0), n_features=0).fit(X)
    with pytest.raises(TypeError, match="orthogonal"):
        RandomFourierFeatures(Gaussian(1.0), n_features=4, orthogonal="yes").fit(X)
    f = RandomFourierFeatures(Gaussian(1.0), n_features=1000, memory_budget="2MB").fit(X)
    with pytest.raises(ValueError, match="memory_budget"):
        f.transform(rng.standard_normal((1000, 2)))
    with pytest.raises(ValueError, match="features"):
        f.transform(rng.standard_normal((3, 5)))


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_estimator(RandomFourierFeatures(Gaussian(1.0), n_features=20))


def test_check_estimator_nystrom_features():
    from kernelpath import NystromFeatures

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_estimator(NystromFeatures(Gaussian(1.0), n_components=10, random_state=0))
