"""The command line on files: fit / predict / evaluate / inspect against the library called
directly, every input format, and user errors as one line on stderr with exit status 1."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import kernelpath as kp
from kernelpath.cli import main
from kernelpath.data import tables
from kernelpath.data.tables import read_table

from .conftest import fitted_nystrom

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1200, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(1200)
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    df["price"] = y
    df.iloc[:1000].to_csv(tmp_path / "train.csv", index=False)
    df.iloc[1000:].to_csv(tmp_path / "test.csv", index=False)
    lab = df.drop(columns="price")
    lab["label"] = np.where(y > 0.2, "up", "down")
    lab.to_parquet(tmp_path / "cls.parquet")
    return tmp_path, X, y


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


FIT = ["--n-centers", "80", "--seed", "0", "--quiet", "--no-progress"]


def test_fit_predict_evaluate_match_the_library(files, capsys):
    d, X, y = files
    code, out, _ = _run(capsys, "fit", d / "train.csv", "--target", "price", "-o", d / "m.kp", *FIT)
    assert code == 0 and out.strip() == str(d / "m.kp")
    ref = kp.NystromRegressor(n_centers=80, random_state=0).fit(
        pd.DataFrame(X[:1000], columns=list("abcd")), y[:1000]
    )
    model = kp.load(d / "m.kp")
    Xt = pd.DataFrame(X[1000:], columns=list("abcd"))
    np.testing.assert_allclose(model.predict(Xt), ref.predict(Xt), rtol=1e-12)
    assert list(model.feature_names_in_) == list("abcd")

    code, _, _ = _run(capsys, "predict", d / "m.kp", d / "test.csv", "-o", d / "p.csv", "--quiet")
    assert code == 0
    pred = pd.read_csv(d / "p.csv", float_precision="round_trip")
    assert list(pred.columns) == ["prediction"]
    np.testing.assert_array_equal(pred["prediction"].to_numpy(), model.predict(Xt))

    code, out, _ = _run(
        capsys, "evaluate", d / "m.kp", d / "test.csv", "--target", "price", "--json"
    )
    assert code == 0
    scores = json.loads(out)
    p, t = model.predict(Xt), y[1000:]
    assert scores["rows"] == 200
    assert scores["rmse"] == pytest.approx(np.sqrt(np.mean((p - t) ** 2)), rel=1e-12)
    assert scores["mae"] == pytest.approx(np.mean(np.abs(p - t)), rel=1e-12)
    r2 = 1 - np.sum((p - t) ** 2) / np.sum((t - t.mean()) ** 2)
    assert scores["r2"] == pytest.approx(r2, rel=1e-12)


def test_classification_is_chosen_for_labels(files, capsys):
    d, X, y = files
    code, _, _ = _run(capsys, "fit", d / "cls.parquet", "--target", "label", "-o", d / "c.kp", *FIT)
    assert code == 0
    model = kp.load(d / "c.kp")
    assert isinstance(model, kp.NystromClassifier) and list(model.classes_) == ["down", "up"]
    code, out, _ = _run(
        capsys, "evaluate", d / "c.kp", d / "cls.parquet", "--target", "label", "--json"
    )
    scores = json.loads(out)
    truth = np.where(y > 0.2, "up", "down")
    X = pd.DataFrame(X, columns=list("abcd"))
    pred = model.predict(X)
    assert scores["accuracy"] == pytest.approx(np.mean(pred == truth), rel=1e-12)
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    assert scores["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(truth, pred))
    assert scores["auc"] == pytest.approx(roc_auc_score(truth == "up", model.decision_function(X)))
    code, _, _ = _run(
        capsys,
        "predict",
        d / "c.kp",
        d / "cls.parquet",
        "-o",
        d / "s.csv",
        "--method",
        "decision_function",
        "--quiet",
    )
    assert code == 0
    scores = pd.read_csv(d / "s.csv", float_precision="round_trip")
    assert list(scores.columns) == ["score_up"]
    np.testing.assert_array_equal(scores["score_up"].to_numpy(), model.decision_function(X))
    code, _, err = _run(
        capsys,
        "predict",
        d / "c.kp",
        d / "cls.parquet",
        "-o",
        d / "p.csv",
        "--method",
        "predict_proba",
    )
    assert code == 0, err  # calibrated on the fit's hold-out
    proba = pd.read_csv(d / "p.csv", float_precision="round_trip")
    assert list(proba.columns) == [str(c) for c in model.classes_]
    np.testing.assert_allclose(proba.to_numpy(), model.predict_proba(X), rtol=1e-6)


def test_other_formats(files, capsys):
    d, X, y = files
    np.save(d / "X.npy", X)
    np.save(d / "y.npy", y)
    np.savez(d / "data.npz", X=X, y=y)
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(X, np.where(y > 0, 1.0, -1.0), str(d / "data.svm"))
    runs = [
        ("X.npy", ["--target-file", d / "y.npy"], kp.NystromRegressor),
        ("data.npz", [], kp.NystromRegressor),
        ("data.svm", [], kp.NystromClassifier),  # ±1 labels: classification
    ]
    for name, extra, cls in runs:
        code, _, err = _run(capsys, "fit", d / name, *extra, "-o", d / "f.kp", *FIT)
        assert code == 0, err
        model = kp.load(d / "f.kp")
        assert type(model) is cls
        code, _, err = _run(capsys, "predict", d / "f.kp", d / name, "-o", d / "f.npy", "--quiet")
        assert code == 0, err
        np.testing.assert_array_equal(np.load(d / "f.npy"), model.predict(X))
    code, _, _ = _run(
        capsys,
        "fit",
        d / "X.npy",
        "--target-file",
        d / "y.npy",
        "--task",
        "regression",
        "--model",
        "rf",
        "--n-features",
        "50",
        "-o",
        d / "r.kp",
        "--seed",
        "0",
        "--quiet",
    )
    assert code == 0 and isinstance(kp.load(d / "r.kp"), kp.RandomFeaturesRegressor)
    assert kp.load(d / "r.kp").n_features == 50


def test_compressed_and_tab_separated_tables(files, capsys):
    """.csv.gz, .csv.bz2, .tsv and --delimiter read the same rows as the plain CSV: the
    same fitted model and predictions."""
    import bz2
    import gzip

    d, X, y = files
    text = (d / "train.csv").read_text()
    with gzip.open(d / "train.csv.gz", "wt") as fh:
        fh.write(text)
    with bz2.open(d / "train.csv.bz2", "wt") as fh:
        fh.write(text)
    (d / "train.tsv").write_text(text.replace(",", "\t"))
    (d / "train.txt").write_text(text.replace(",", ";"))
    (d / "test.tsv").write_text((d / "test.csv").read_text().replace(",", "\t"))
    _run(capsys, "fit", d / "train.csv", "--target", "price", "-o", d / "ref.kp", *FIT)
    want = kp.load(d / "ref.kp").predict(X[1000:])
    for name, extra in [
        ("train.csv.gz", []),
        ("train.csv.bz2", []),
        ("train.tsv", []),
        ("train.txt", ["--delimiter", ";"]),
    ]:
        code, _, err = _run(
            capsys, "fit", d / name, "--target", "price", *extra, "-o", d / "g.kp", *FIT
        )
        assert code == 0, (name, err)
        np.testing.assert_array_equal(kp.load(d / "g.kp").predict(X[1000:]), want, err_msg=name)
    code, _, err = _run(capsys, "predict", d / "ref.kp", d / "test.tsv", "-o", d / "p.npy")
    assert code == 0, err
    np.testing.assert_array_equal(np.load(d / "p.npy"), want)
    code, out, _ = _run(capsys, "evaluate", d / "ref.kp", d / "test.tsv", "--target", "price")
    rmse = float(np.sqrt(np.mean((want - y[1000:]) ** 2)))
    assert code == 0 and f"rmse: {rmse:.6g}" in out
    code, out, _ = _run(
        capsys, "evaluate", d / "ref.kp", d / "test.tsv", "--target", "price", "--quiet"
    )
    assert code == 0 and out.strip() == f"{rmse:.6g}"


def test_inspect_and_plot(files, capsys):
    d, _, _ = files
    _run(capsys, "fit", d / "train.csv", "--target", "price", "-o", d / "m.kp", *FIT)
    model = kp.load(d / "m.kp")
    code, out, _ = _run(capsys, "inspect", d / "m.kp", "--plot", d / "path.png")
    assert code == 0
    assert "model: kernelpath.NystromRegressor" in out
    chosen = ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in model.best_params_.items()
    )
    assert f"chosen point: {chosen} (index {model.path_.best_index})" in out
    assert f"centers: {len(model.centers_)} (uniform)" in out
    d_eff = kp.effective_dimension(model.centers_, model.kernel_, model.penalty_)[0]
    assert f"on the centers: {d_eff:.4g}" in out
    assert (d / "path.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "{d}/train.csv", "--target", "cost"], "no column 'cost'"),
        (["fit", "{d}/missing.csv", "--target", "price"], "no such file"),
        (["fit", "{d}/train.csv"], "--target"),
        (["fit", "{d}/text.csv", "--target", "price"], "not numeric"),
        (["fit", "{d}/nan.csv", "--target", "price"], "NaN"),
        (["fit", "{d}/train.csv", "--target", "price", "--set", "bogus=1"], "no parameter 'bogus'"),
        (["fit", "{d}/train.csv", "--target", "price", "--kernel", "spline"], "--kernel"),
        (
            ["predict", "{d}/train.csv", "{d}/train.csv", "-o", "{d}/p.csv"],
            "train.csv: not a kernelpath model file (it was not written by kernelpath.save)",
        ),
        (["inspect", "{d}/train.csv"], "not a kernelpath model file"),
        (["fit", "{d}/train.csv", "--target", "price", "--delimiter", ";;"], "one character"),
        (["evaluate", "{d}/m.kp", "{d}/cls.parquet", "--target", "label"], "this task"),
        (["predict", "{d}/m.kp", "{d}/cls.parquet", "-o", "{d}/p.txt"], "path:"),
        (["predict", "{d}/m.kp", "{d}/bad_rows.csv", "-o", "{d}/p.csv"], "NaN"),
        (["predict", "{d}/m.kp", "{d}/narrow.npy", "-o", "{d}/p.csv"], "X has 3 features"),
        (["predict", "{d}/m.kp", "{d}/narrow.csv", "-o", "{d}/p.csv"], "no column ['d']"),
        (["fit", "{d}/empty.csv", "--target", "price"], "no data rows"),
        (["inspect", "{d}/missing.kp"], "no such model file"),
        (["evaluate", "{d}/m.kp", "{d}/test.csv"], "--target"),
        # an output that is an input would replace it
        (["predict", "{d}/m.kp", "{d}/test.csv", "-o", "{d}/test.csv"], "is the data this"),
        (["predict", "{d}/m.kp", "{d}/test.csv", "-o", "{d}/m.kp"], "is the model this"),
        (["fit", "{d}/train.csv", "--target", "price", "-o", "{d}/train.csv"], "is the data"),
        (["predict", "{d}/m.kp", "{d}/test.csv", "-o", "{d}/./test.csv"], "is the data this"),
        # --columns names each column once, and names one at least
        (["fit", "{d}/train.csv", "--target", "price", "--columns", "a,a"], "named more than"),
        (["fit", "{d}/train.csv", "--target", "price", "--columns", ""], "empty column name"),
        (["fit", "{d}/train.csv", "--target", "price", "--columns", "a,,b"], "empty column"),
        # inputs that are not regular files, wide LIBSVM indices, broken files
        (["fit", "{d}/fifo.csv", "--target", "price"], "data: '"),
        (["fit", "{d}/folder.csv", "--target", "price"], "is a folder, not a regular file"),
        (["fit", "{d}/wide.svm"], "X has 2000000000 features"),
        (["fit", "{d}/broken.parquet", "--target", "price"], "cannot read "),
        (["fit", "{d}/latin.csv", "--target", "price"], "latin.csv is not UTF-8 text"),
        # only a regular file or a missing path is replaced
        (["predict", "{d}/m.kp", "{d}/test.csv", "-o", "{d}/fifo.csv"], "is a FIFO"),
        (["predict", "{d}/m.kp", "{d}/test.csv", "-o", "{d}/link.csv"], "is a symbolic link"),
        (["fit", "{d}/train.csv", "--target", "price", "-o", "{d}/folder.kp"], "is a folder"),
        (["inspect", "{d}/m.kp", "--plot", "{d}/link.png"], "--plot: "),
        (["inspect", "{d}/m.kp", "--plot", "{d}/m.kp"], "--plot writes a .png"),
    ],
)
def test_user_errors_are_one_line(files, capsys, argv, message):
    d, X, y = files
    _run(capsys, "fit", d / "train.csv", "--target", "price", "-o", d / "m.kp", *FIT)
    with open(d / "text.csv", "w") as fh:
        fh.write("a,b,price\n1,x,2\n3,y,4\n")
    with open(d / "nan.csv", "w") as fh:
        fh.write("a,b,price\n1,2,3\n4,5,\n6,7,8\n")
    bad = pd.read_csv(d / "test.csv")
    bad.loc[150, "b"] = np.nan
    bad.to_csv(d / "bad_rows.csv", index=False)
    np.save(d / "narrow.npy", X[:10, :3])
    bad[["a", "b", "c"]].to_csv(d / "narrow.csv", index=False)
    (d / "empty.csv").write_text("a,b,price\n")
    os.mkfifo(d / "fifo.csv")
    (d / "kept.csv").write_text("kept\n")
    os.symlink(d / "kept.csv", d / "link.csv")
    os.symlink(d / "kept.csv", d / "link.png")
    (d / "folder.kp").mkdir()
    (d / "folder.csv").mkdir()
    (d / "wide.svm").write_text("1 2000000000:1.5\n-1 3:2\n")
    (d / "broken.parquet").write_bytes((d / "cls.parquet").read_bytes()[:300])
    (d / "latin.csv").write_bytes(b"\xe9t\xe9,price\n1,2\n3,4\n")
    before = set(os.listdir(d))
    files = [name for name in before if (d / name).is_file()]  # links: what they point to
    contents = {name: (d / name).read_bytes() for name in files}
    code, _, err = _run(capsys, *[a.format(d=d) for a in argv])
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err
    assert lines[0].startswith(f"kernelpath {argv[0]}: error: ")
    assert set(os.listdir(d)) == before  # nothing half-written
    assert all((d / name).read_bytes() == data for name, data in contents.items())
    assert (d / "link.csv").is_symlink() and (d / "fifo.csv").is_fifo()


def test_demo_rejects_a_negative_seed(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--seed", "-1"])
    assert exc.value.code == 2
    assert "--seed must be a non-negative integer" in capsys.readouterr().err


def test_progress_bar_reports_iterations(files, capsys):
    d, _, _ = files
    code, _, err = _run(
        capsys,
        "fit",
        d / "train.csv",
        "--target",
        "price",
        "-o",
        d / "m.kp",
        "--n-centers",
        "80",
        "--max-iter",
        "7",
        "--seed",
        "0",
        "--progress",
        "--set",
        "n_iter_no_change=null",
    )
    assert code == 0
    assert "fit: cg" in err and "7/7" in err


def test_class_weight_on_the_command_line(files, capsys):
    d, X, y = files
    args = ["fit", d / "cls.parquet", "--target", "label", "-o", d / "w.kp", *FIT]
    code, _, _ = _run(capsys, *args, "--class-weight", "balanced")
    assert code == 0
    model = kp.load(d / "w.kp")
    assert model.get_params()["class_weight"] == "balanced"
    code, _, _ = _run(capsys, *args, "--set", 'class_weight={"up": 3.0}')
    assert code == 0 and kp.load(d / "w.kp").get_params()["class_weight"] == {"up": 3.0}
    code, _, err = _run(
        capsys, "fit", d / "train.csv", "--target", "price", "-o", d / "r.kp", *FIT,
        "--class-weight", "balanced",
    )  # fmt: skip
    assert code == 1 and "--class-weight: the target is numeric" in err


def test_loss_and_probabilities_on_the_command_line(files, capsys):
    d, X, y = files
    args = ["fit", d / "cls.parquet", "--target", "label", "-o", d / "l.kp", *FIT]
    code, _, _ = _run(capsys, *args, "--loss", "logistic")
    assert code == 0
    model = kp.load(d / "l.kp")
    assert model.get_params()["loss"] == "logistic"
    out = d / "l.csv"
    code, _, err = _run(
        capsys, "predict", d / "l.kp", d / "cls.parquet", "-o", out, "--method", "predict_proba"
    )
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(out).to_numpy().sum(axis=1), 1.0, rtol=1e-6)
    code, _, err = _run(
        capsys, "fit", d / "train.csv", "--target", "price", "-o", d / "r.kp", *FIT,
        "--loss", "logistic",
    )  # fmt: skip
    assert code == 1 and "--loss: the target is numeric" in err


def _data(n=90, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_outputs_replace_only_a_regular_file_or_a_missing_path(tmp_path):
    """``save`` and ``write_predictions`` renamed their file onto whatever the path held:
    a FIFO, a symbolic link (the link replaced, not its target) or, as root, a device."""
    import os

    from kernelpath.data import write_predictions

    X, y = _data(60)
    est = kp.NystromRegressor(n_centers=10, random_state=0).fit(X, y)
    target = tmp_path / "target.kp"
    target.write_bytes(b"kept")
    os.symlink(target, tmp_path / "link.kp")
    os.mkfifo(tmp_path / "fifo.kp")
    (tmp_path / "folder.kp").mkdir()
    for name, what in [("link.kp", "symbolic link"), ("fifo.kp", "FIFO"), ("folder.kp", "folder")]:
        with pytest.raises(ValueError, match=f"path: .*{name}' is a {what}"):
            kp.save(est, tmp_path / name)
    for name, what in [("link.npy", "symbolic link"), ("fifo.csv", "FIFO")]:
        os.symlink(target, tmp_path / "link.npy") if "link" in name else os.mkfifo(tmp_path / name)
        with pytest.raises(ValueError, match=f"is a {what}"):
            write_predictions(est, X, tmp_path / name)
    assert target.read_bytes() == b"kept" and (tmp_path / "link.kp").is_symlink()
    assert (tmp_path / "fifo.kp").is_fifo() and (tmp_path / "folder.kp").is_dir()
    # a regular file and a missing path are still written
    kp.save(est, target)
    kp.save(est, tmp_path / "new.kp")
    np.testing.assert_array_equal(kp.load(target).predict(X), est.predict(X))


# ----------------------------------------------------------------------------- CSV
def test_csv_integer_column_that_holds_a_fraction_after_the_first_block(tmp_path, monkeypatch):
    # the types are inferred from the first block; a later 3.5 in an "integer" column is a
    # valid number, not an error
    monkeypatch.setattr(tables, "CSV_BATCH_BYTES", 1024)
    n = 2000
    a = np.arange(n, dtype=float)
    a[-1] = 3.5
    path = tmp_path / "t.csv"
    with open(path, "w") as fh:
        fh.write("a,b,y\n")
        for i in range(n):
            fh.write(f"{a[i]:g},{i % 7},{i % 3}\n")
    X, y = read_table(path, target="y")
    assert X.shape == (n, 2) and y is not None
    np.testing.assert_array_equal(np.asarray(X)[:, 0], a)
    assert np.asarray(y)[-1] == (n - 1) % 3


def test_csv_with_duplicate_column_names_is_a_value_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,a,y\n1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        read_table(path, target="y")


def test_csv_binary_copy_is_unlinked_before_it_is_written(tmp_path, monkeypatch):
    # a signal mid-read (SIGKILL included) can leave nothing behind: the copy has no name
    # from the start
    path = tmp_path / "t.csv"
    path.write_text("a,b,y\n" + "".join(f"{i},{i * 2},{i % 2}\n" for i in range(50)))
    cache = tmp_path / "cache"
    cache.mkdir()
    real = os.fdopen
    seen = []

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            seen.append(sorted(os.listdir(cache)))
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

    monkeypatch.setattr(tables.os, "fdopen", lambda fd, *a, **k: Spy(real(fd, *a, **k)))
    X, _ = read_table(path, target="y", cache_dir=cache)
    assert seen and all(names == [] for names in seen)
    assert np.asarray(X)[49, 1] == 98.0


# ----------------------------------------------------------------------------- outputs
def test_an_output_in_a_missing_folder_is_refused_before_the_fit(tmp_path, capsys, monkeypatch):
    import kernelpath as kp
    from kernelpath.cli import main
    from kernelpath.estimators import NystromRegressor

    est, _ = fitted_nystrom()
    out = tmp_path / "missing" / "m.kp"
    with pytest.raises(ValueError, match="path: no folder"):
        kp.save(est, out)
    path = tmp_path / "t.csv"
    path.write_text("a,b,y\n" + "".join(f"{i},{i % 5},{i % 3}\n" for i in range(40)))
    fits = []
    monkeypatch.setattr(NystromRegressor, "fit", lambda self, *a, **k: fits.append(1))
    code = main(["fit", str(path), "--target", "y", "-o", str(out), "--quiet", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and fits == []  # before: the whole fit, then the temporary file's name
    assert "--output: no folder" in err and ".kernelpath-" not in err
    code = main(["predict", str(path), str(path), "-o", str(tmp_path / "no" / "p.csv")])
    assert code == 1 and "--output: no folder" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "kill") or os.name != "posix", reason="POSIX signals")
def test_sigterm_mid_predict_leaves_no_temporary_file(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    import kernelpath as kp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 8))
    est = kp.NystromRegressor(kp.Gaussian(2.0), n_centers=2000, penalty=1e-3).fit(X, X[:, 0])
    kp.save(est, tmp_path / "m.kp")
    np.save(tmp_path / "big.npy", rng.standard_normal((2_000_000, 8)))
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "kernelpath.cli", "predict", str(tmp_path / "m.kp")]
    cmd += [str(tmp_path / "big.npy"), "-o", str(out / "p.npy"), "--quiet", "--no-progress"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(".kernelpath-") for p in out.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, "no temporary file seen"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "terminated" in err
    assert list(out.iterdir()) == []  # before: .kernelpath-*.npy stayed behind


def test_next_writer_removes_what_a_killed_process_left(tmp_path):
    """SIGKILL runs no handler: a writer killed mid-write leaves its temporary file. The
    next writer in that folder removes it (its process is gone); a live process's
    temporary file, and other hosts', stay."""
    import subprocess
    import sys

    import kernelpath as kp
    from kernelpath.data.files import _host

    code = (
        "import os, sys, tempfile; from kernelpath.data.files import temporary; "
        "temporary(sys.argv[1], '.kp'); temporary(sys.argv[1], directory=True); "
        "os.kill(os.getpid(), 9)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=False)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 2 and all(n.startswith(f".kernelpath-{_host()}-") for n in left)
    mine = tmp_path / f".kernelpath-{_host()}-{os.getpid()}-inflight.kp"
    other = tmp_path / ".kernelpath-otherhost-1-x.kp"
    # the same host name in another PID namespace (a container sharing
    # the volume), whose process 1 is alive there and unknown here
    host = _host().split("_ns")[0]
    if os.path.exists("/proc/self/ns/pid"):  # the names say which namespace wrote them
        assert all(n.startswith(f".kernelpath-{host}_ns") for n in left)
    sibling = tmp_path / f".kernelpath-{host}_ns1-{2**22 + 7}-x.kp"
    mine.write_bytes(b"")
    other.write_bytes(b"")
    sibling.write_bytes(b"")
    X, y = np.random.default_rng(0).standard_normal((60, 2)), np.arange(60.0)
    est = kp.NystromRegressor(kp.Gaussian(1.0), n_centers=10, penalty=1e-3).fit(X, y)
    kp.save(est, tmp_path / "m.kp")
    kept = sorted(["m.kp", mine.name, other.name, sibling.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == kept
