"""Ridge leverage scores and effective dimensions against dense computations."""

import numpy as np
import pytest

import kernelpath
from kernelpath import Gaussian, Laplacian
from kernelpath.leverage import _approximate_scores, squeak
from kernelpath.workspace import Workspace

from .conftest import requires_shared


def _dense_scores(X, kernel, lam):
    K = kernel(X, X)
    n = len(X)
    return np.diag(K @ np.linalg.inv(K + lam * n * np.eye(n))), K


def _two_clusters(rng, n=400):
    # dense at the borders of [0, 1], sparse in the middle (the Alaoui-Mahoney design)
    x = np.concatenate([rng.beta(0.5, 0.5, n - 20), rng.uniform(0.4, 0.6, 20)])
    return x[:, None]


@pytest.mark.parametrize("kernel", [Gaussian(0.1), Laplacian(0.3)])
@pytest.mark.parametrize("lam", [1e-2, 1e-5])
def test_exact_scores_are_the_diagonal_of_the_hat_matrix(rng, kernel, lam):
    X = _two_clusters(rng)
    tau = kernelpath.leverage_scores(X, kernel, lam)
    ref, _ = _dense_scores(X, kernel, lam)
    np.testing.assert_allclose(tau, ref, rtol=1e-8, atol=1e-12)
    d_eff, d_max = kernelpath.effective_dimension(X, kernel, lam)
    assert d_eff == pytest.approx(ref.sum(), rel=1e-10)
    assert d_max == pytest.approx(len(X) * ref.max(), rel=1e-10)
    assert d_eff <= d_max


def test_exact_scores_respect_the_memory_budget(rng):
    X = rng.standard_normal((1000, 2))
    with pytest.raises(ValueError, match="method='approximate'"):
        kernelpath.leverage_scores(X, Gaussian(1.0), 1e-3, memory_budget="2MB")


def test_approximate_scores_never_exceed_the_exact_and_keep_the_band(rng):
    X = rng.standard_normal((600, 3))
    kernel, lam, p = Gaussian(1.5), 1e-3, 120
    tau, K = _dense_scores(X, kernel, lam)
    seed = 7
    approx = _approximate_scores(X, kernel, lam, p, np.random.default_rng(seed), Workspace(2**30))
    assert np.all(approx <= tau + 1e-9)
    # rebuild L = C W^+ C^T from the same draws and check the theorem's band:
    # K - L <= eps λn I  implies  τ~ >= (1 + eps) τ - eps
    draws = np.random.default_rng(seed).choice(len(X), size=p, replace=True, p=np.ones(600) / 600)
    cols = np.unique(draws)
    C = K[:, cols]
    L = C @ np.linalg.pinv(K[np.ix_(cols, cols)], rcond=1e-12) @ C.T
    eps = np.linalg.eigvalsh(K - L).max() / (lam * len(X))
    assert np.all(approx >= (1 + eps) * tau - eps - 1e-8)
    # and τ~ is the hat-matrix diagonal of L itself
    n = len(X)
    ref = np.diag(L @ np.linalg.inv(L + lam * n * np.eye(n)))
    np.testing.assert_allclose(approx, ref, atol=1e-6)


def test_approximate_scores_converge_to_the_exact_with_all_columns(rng):
    X = rng.standard_normal((300, 2))
    tau = kernelpath.leverage_scores(X, Gaussian(1.0), 1e-4)
    approx = kernelpath.leverage_scores(
        X, Gaussian(1.0), 1e-4, method="approximate", n_samples=3000, random_state=0
    )
    np.testing.assert_allclose(approx, tau, atol=1e-8)


def _squeak_check(X, kernel, lam, seed, eps=0.5, q_bar=None):
    n = len(X)
    gamma = lam * n
    d = squeak(X, kernel, lam, q_bar=q_bar, eps=eps, random_state=seed)
    K = kernel(X, X)
    S = np.zeros((n, len(d)))
    S[d.indices, np.arange(len(d))] = d.weights
    KS = K @ S
    K_tilde = KS @ np.linalg.solve(S.T @ KS + gamma * np.eye(len(d)), KS.T)
    ev = np.linalg.eigvalsh(K - K_tilde)
    d_eff = np.trace(K @ np.linalg.inv(K + gamma * np.eye(n)))
    return d, ev, d_eff


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_squeak_dictionary_is_a_gamma_approximation(rng, seed):
    X = _two_clusters(rng, 500)
    # q̄ = 32: on this 1-D design the default q̄ = 16 breaks the bound by up to 15% for some
    # seeds (measured over 15 seeds: 16 -> 1.14, 24 -> 1.06, 32 -> 0.88 of the bound)
    kernel, lam, eps = Gaussian(0.05), 1e-4, 0.5
    d, ev, d_eff = _squeak_check(X, kernel, lam, seed, eps, q_bar=32)
    gamma = lam * len(X)
    assert ev.min() >= -1e-9 * abs(ev).max()
    assert ev.max() <= gamma / (1 - eps)
    # size: at most c d_eff(γ) log n with c = 3 for q̄ = 32 (measured 2.1 on average)
    assert len(d) <= 3 * d_eff * np.log(len(X))
    assert len(np.unique(d.indices)) == len(d)
    assert np.all((d.multiplicities >= 1) & (d.multiplicities <= 32))
    assert np.all((d.probabilities > 0) & (d.probabilities <= 1))


def test_squeak_one_point_at_a_time_is_algorithm_1(rng):
    X = rng.standard_normal((150, 2))
    d = squeak(X, Gaussian(1.0), 1e-3, batch_size=1, random_state=3)
    # any-time: the dictionary only holds points seen, in the order they entered
    assert np.all(np.diff(d.indices) > 0)
    kernel, lam = Gaussian(1.0), 1e-3
    _, ev, _ = _squeak_check(X, kernel, lam, 3)
    assert ev.max() <= 2 * lam * len(X)


def test_squeak_scores_track_the_exact_scores(rng):
    X = _two_clusters(rng, 500)
    kernel, lam = Gaussian(0.05), 1e-4
    tau = kernelpath.leverage_scores(X, kernel, lam)
    est = kernelpath.leverage_scores(X, kernel, lam, method="squeak", random_state=0)
    ratio = est / tau
    assert np.mean((ratio > 0.5) & (ratio < 2)) >= 0.95
    d_eff, _ = kernelpath.effective_dimension(X, kernel, lam, method="squeak", random_state=0)
    assert d_eff == pytest.approx(tau.sum(), rel=0.5)


def test_bad_arguments_are_named(rng):
    X = rng.standard_normal((20, 2))
    with pytest.raises(ValueError, match="method"):
        kernelpath.leverage_scores(X, Gaussian(1.0), 1e-3, method="fast")
    with pytest.raises(ValueError, match="penalty"):
        kernelpath.leverage_scores(X, Gaussian(1.0), 0.0)
    with pytest.raises(TypeError, match="penalty"):
        kernelpath.leverage_scores(X, Gaussian(1.0), "small")
    with pytest.raises(ValueError, match="X"):
        kernelpath.leverage_scores(X[:, :, None], Gaussian(1.0), 1e-3)
    with pytest.raises(ValueError, match="NaN"):
        kernelpath.leverage_scores(np.full((3, 2), np.nan), Gaussian(1.0), 1e-3)
    with pytest.raises(ValueError, match="eps"):
        squeak(X, Gaussian(1.0), 1e-3, eps=1.5)
    with pytest.raises(ValueError, match="q_bar"):
        squeak(X, Gaussian(1.0), 1e-3, q_bar=0)
    with pytest.raises(TypeError, match="n_samples"):
        kernelpath.leverage_scores(X, Gaussian(1.0), 1e-3, method="approximate", n_samples=2.5)


def _cpusmall_subsample():
    from kernelpath.datasets import load_shared

    X = load_shared("cpusmall")["X"]
    X = X[np.random.default_rng(0).choice(len(X), 2000, replace=False)]
    return (X - X.mean(0)) / X.std(0)


@requires_shared
def test_approximate_scores_on_cpusmall_within_factor_two():
    X = _cpusmall_subsample()
    kernel, lam = Gaussian(3.0), 1e-4
    tau = kernelpath.leverage_scores(X, kernel, lam)
    for seed in range(3):
        approx = kernelpath.leverage_scores(X, kernel, lam, "approximate", random_state=seed)
        ratio = approx / tau
        inside = np.mean((ratio >= 0.5) & (ratio <= 2.0))
        # measured 0.98 for seeds 0-2 (ratio range [~0, 1]: the estimate is from below)
        assert inside >= 0.95, inside
        assert ratio.max() <= 1 + 1e-8


@requires_shared
def test_squeak_on_cpusmall_is_a_gamma_approximation():
    X = _cpusmall_subsample()
    kernel, lam, eps = Gaussian(3.0), 1e-4, 0.5
    d, ev, d_eff = _squeak_check(X, kernel, lam, 0, eps)
    assert ev.min() >= -1e-9 * abs(ev).max()
    assert ev.max() <= lam * len(X) / (1 - eps)
    # default q̄ = 16: c = 1 (measured 0.58: 880 points for d_eff = 198, n = 2000)
    assert len(d) <= d_eff * np.log(len(X))
