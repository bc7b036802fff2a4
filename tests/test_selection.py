import numpy as np
import pytest

from kernelpath.path import lex_argmin
from kernelpath.selection import EarlyStopping, error_rate, holdout_split, mse, penalty_grid


def test_per_path_window():
    es = EarlyStopping(2, n_iter_no_change=3, tol=0.0)
    # path 0 keeps improving; path 1 stalls after iteration 2
    for t, errs in enumerate([[5, 5], [4, 3], [3, 3], [2, 3], [1, 3]], start=1):
        es.update(t, np.array(errs, dtype=float))
    assert es.active.tolist() == [True, False]


def test_global_window_stops_everything():
    es = EarlyStopping(2, n_iter_no_change=3, tol=1e-2)
    # path 1 improves a little (by more than tol relative to itself) but never approaches the
    # best point of path 0, reached at iteration 1
    seq = [[1.0, 10.0], [1.5, 9.0], [1.5, 8.0], [1.5, 7.0]]
    for t, errs in enumerate(seq, start=1):
        es.update(t, np.array(errs))
    assert not es.active.any()


def test_tolerance_counts_only_significant_improvements():
    es = EarlyStopping(1, n_iter_no_change=2, tol=0.1)
    for t, e in enumerate([1.0, 0.95, 0.94], start=1):
        improved = es.update(t, np.array([e]))
    assert improved.tolist() == [True]  # still a new best (kept as the chosen point)
    assert not es.active.any()  # but not a significant one: the window ran out


def test_no_window_never_stops():
    es = EarlyStopping(1, n_iter_no_change=None, tol=0.0)
    for t in range(1, 50):
        es.update(t, np.array([1.0]))
    assert es.active.all()


def test_holdout_split_stratified(rng):
    y = np.repeat([0, 1, 2], [50, 30, 5])
    tr, va = holdout_split(len(y), 0.2, rng, stratify=y)
    assert len(np.intersect1d(tr, va)) == 0 and len(tr) + len(va) == len(y)
    for c in range(3):
        assert np.sum(y[tr] == c) >= 1
    assert np.sum(y[va] == 0) == 10 and np.sum(y[va] == 1) == 6


def test_penalty_grid_and_scorers():
    g = penalty_grid(2.0, 5, 1e-4)
    np.testing.assert_allclose(g, [2.0, 2e-1, 2e-2, 2e-3, 2e-4])
    Y = np.array([[1.0], [-1.0], [1.0]])
    F = np.array([[[0.5], [2.0]], [[-0.5], [0.1]], [[1.0], [1.0]]])  # (n, P, k)
    np.testing.assert_allclose(mse(Y, F), [(0.25 + 0.25 + 0) / 3, (1 + 1.21 + 0) / 3])
    np.testing.assert_allclose(error_rate(Y, F), [0.0, 1 / 3])


def test_lex_argmin():
    assert lex_argmin(np.array([0.1, 0.05, 0.05]), np.array([3.0, 2.0, 1.0])) == 2
    assert lex_argmin(np.array([np.nan, 0.2, 0.1])) == 2
    with pytest.raises(ValueError):
        lex_argmin(np.array([]))
