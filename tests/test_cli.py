import pytest

from kernelpath.cli import main


def test_demo_reports_what_the_library_computes(capsys):
    """The demo's best point and test RMSE are those of the same fit made directly."""
    import numpy as np

    from kernelpath import Gaussian, NystromRegressor
    from kernelpath.datasets import make_sin_regression

    assert main(["demo", "--n-train", "800", "--n-test", "200", "--n-centers", "100"]) == 0
    out = capsys.readouterr().out
    X, y, w = make_sin_regression(800, 20, 0.1, random_state=0)
    Xt, yt, _ = make_sin_regression(200, 20, 0.1, random_state=1, w=w)
    est = NystromRegressor(Gaussian(sigma=5.0), n_centers=100, solver="cg", random_state=0)
    est.fit(X, y)
    rmse = float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))
    best = ", ".join(f"{k}={v:.3g}" for k, v in est.best_params_.items())
    assert f"best point: {best}  (validation MSE {est.path_.best_val_error:.4f})" in out
    assert f"test RMSE: {rmse:.4f}" in out
    own = np.sqrt(max(rmse**2 - 0.01, 0.0))  # what the noise floor leaves of the RMSE
    assert "noise floor of 0.1000" in out and f"the model's own error {own:.4f}" in out
    assert f"path: shape {est.path_.shape}" in out


def test_info(capsys):
    assert main(["info"]) == 0
    assert "memory_budget" in capsys.readouterr().out


def test_bad_arguments():
    with pytest.raises(SystemExit):
        main(["demo", "--n-train", "1"])
    with pytest.raises(SystemExit):
        main(["demo", "--solver", "sgd"])


def test_demo_on_a_torch_device(capsys):
    pytest.importorskip("torch")
    args = ["demo", "--n-train", "800", "--n-test", "200", "--n-centers", "100"]
    assert main([*args, "--device", "cpu"]) == 0
    assert "computed on cpu" in capsys.readouterr().out


def test_demo_bad_device(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--device", "tpu"])
    assert exc.value.code == 2
    assert "--device" in capsys.readouterr().err


def test_help_lists_every_value_from_the_library():
    """The help of --kernel, --sigma, --model, --solver and --method is written from the
    library's own tables (issue 27): every value appears."""
    import argparse

    from kernelpath.cli.main import build_parser
    from kernelpath.cli.models import _model_classes, solver_choices
    from kernelpath.kernels import WIDTH_NAMES, kernel_names

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    fit_help = " ".join(sub.choices["fit"].format_help().split())
    for value in [*kernel_names(), *WIDTH_NAMES, *_model_classes()]:
        assert value in fit_help, value
    for model, solvers in solver_choices().items():
        assert f"{model}: {', '.join(solvers)}" in fit_help
    assert solver_choices()["nystrom"][0] == "cg" and solver_choices()["nytro"][0] == "gd"
    predict_help = sub.choices["predict"].format_help()
    for method in ("predict", "decision_function", "predict_proba"):
        assert method in predict_help
