"""Progress reports: silent by default; verbose= lines on stderr; the kernelpath logger."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.progress import listening


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 8))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(800)


def _nystrom(**kw):
    return kp.NystromRegressor(
        kp.Gaussian(1.0),
        n_centers=40,
        max_iter=12,
        n_iter_no_change=None,
        tol=0.0,
        random_state=0,
        **kw,
    )


def test_silent_by_default(capsys):
    X, y = _data()
    _nystrom().fit(X, y)
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_reports_follow_the_iterations():
    X, y = _data()
    seen = []
    with listening(lambda stage, done, total, info: seen.append((stage, done, total, info))):
        est = _nystrom().fit(X, y)
    T = est.path_.shape[1]  # the iterations CG ran (fewer when its Krylov space is exhausted)
    assert T >= 5
    assert [s[:3] for s in seen] == [("cg", t, 12) for t in range(1, T + 1)]
    # the reported best validation error is the path's
    assert seen[-1][3]["best_val"] == pytest.approx(np.nanmin(est.path_.val_error))
    seen.clear()
    with listening(lambda stage, done, total, info: seen.append((stage, done, total))):
        kp.EigenProRegressor(n_epochs=4, n_iter_no_change=None, random_state=0).fit(X, y)
        kp.SGMRegressor(n_passes=3, n_iter_no_change=None, random_state=0).fit(X, y)
    assert [s for s in seen if s[0] == "epochs"] == [("epochs", e, 4) for e in range(1, 5)]
    assert [s for s in seen if s[0] == "passes"] == [("passes", p, 3) for p in range(1, 4)]


def test_verbose_levels(capsys):
    X, y = _data()
    ep = kp.EigenProRegressor(n_epochs=30, n_iter_no_change=None, random_state=0, verbose=1)
    ep.fit(X, y)
    lines = capsys.readouterr().err.strip().splitlines()
    # the width screen reports each width it scores (its fits' own epochs are quiet)
    screen = [s for s in lines if "width screen" in s]
    assert len(screen) == len(ep.path_.info["width_search"][0]["factors"])
    lines = [s for s in lines if "width screen" not in s]
    assert lines[0].startswith("[EigenProRegressor") and "epochs 1/30" in lines[0]
    assert "epochs 30/30" in lines[-2] and lines[-1].endswith("done")
    assert 5 <= len(lines) <= 13  # about every tenth epoch
    T = _nystrom().fit(X, y).path_.shape[1]
    capsys.readouterr()
    _nystrom(verbose=2).fit(X, y)
    lines = capsys.readouterr().err.strip().splitlines()
    lines = [s for s in lines if "width screen" not in s]
    assert len(lines) == T + 1  # every iteration, then done
    with pytest.raises(ValueError, match="verbose"):
        _nystrom(verbose=-1).fit(X, y)
    with pytest.raises(TypeError, match="verbose"):
        _nystrom(verbose="loud").fit(X, y)


def test_the_logger_gets_the_reports(caplog):
    X, y = _data()
    with caplog.at_level(logging.DEBUG, logger="kernelpath"):
        _nystrom().fit(X, y)
    msgs = [r.getMessage() for r in caplog.records if r.name == "kernelpath"]
    assert msgs[0].startswith("cg 1/12") and len(msgs) >= 5


def test_exact_krls_announces_its_cost_and_warns_when_slow(capsys, monkeypatch):
    """verbose prints the estimate (one eigendecomposition of the training part, one of
    all rows for the refit); above EXACT_WARN_SECONDS the fit warns and names Nyström."""
    import warnings

    import numpy as np

    from kernelpath import KRLSRegressor
    from kernelpath.fitting import exact

    rng = np.random.default_rng(0)
    X = rng.standard_normal((250, 3))
    y = np.sin(X[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a small fit does not warn
        est = KRLSRegressor(verbose=1, random_state=0).fit(X, y)
    err = capsys.readouterr().err
    n_tr = len(est.train_indices_)
    assert n_tr == 200 and len(est.coef_) == 250  # what the estimate counts
    seconds = exact.EXACT_SECONDS_PER_N3 * (200.0**3 + 250.0**3)
    line = next(s for s in err.splitlines() if "estimated cost" in s)
    assert f"about {seconds:.0f} s and 0.0 GB" in line and "of 200 + 250 rows" in line
    KRLSRegressor(random_state=0, cv=4, refit=False).fit(X, y)  # verbose=0: silent
    assert "estimated cost" not in capsys.readouterr().err
    monkeypatch.setattr(exact, "EXACT_SECONDS_PER_N3", 1e-5)
    with pytest.warns(UserWarning, match=r"about \d+ min .* NystromRegressor") as record:
        KRLSRegressor(random_state=0, cv=4, refit=False).fit(X, y)
    assert record[0].filename == __file__  # the warning points at the user's fit call
