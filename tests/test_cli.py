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
    spread = float(np.std(yt))
    learned = 100 * (spread**2 - rmse**2) / (spread**2 - 0.01)  # of what the noise leaves
    assert f"result: the fit learned {learned:.1f}% of the signal (test RMSE {rmse:.4f}; " in out
    assert "the noise alone gives 0.1000" in out and f"the mean {spread:.4f})" in out
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
    """The parser's names (cli.names, which imports nothing of the library so that
    --help starts at once) are the library's own: kernels, widths, models, solvers."""
    import argparse

    from kernelpath.cli import names
    from kernelpath.cli.main import build_parser
    from kernelpath.cli.models import _model_classes, solver_choices
    from kernelpath.kernels import WIDTH_NAMES, kernel_names

    assert names.KERNELS == tuple(kernel_names()) and names.WIDTHS == tuple(WIDTH_NAMES)
    assert names.SOLVERS == solver_choices()
    assert {k: v[0].__name__.removesuffix("Regressor") for k, v in _model_classes().items()} == (
        names.MODELS
    )
    assert all(v[1].__name__ == names.MODELS[k] + "Classifier" for k, v in _model_classes().items())
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


def _parsers():
    import argparse

    from kernelpath.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_command_and_option_has_help():
    parser, commands = _parsers()
    assert "docstring" not in parser.format_help() and "entry point" not in parser.format_help()
    for name, p in commands.items():
        assert p.description, name
        for action in p._actions:
            assert action.help, f"kernelpath {name} {action.option_strings or action.dest}"


def test_options_are_not_abbreviated(capsys):
    """--n-center is refused, not taken as --n-centers (argparse's abbreviations off)."""
    with pytest.raises(SystemExit) as exc:
        main(["fit", "data.csv", "--target", "y", "--n-center", "10"])
    assert exc.value.code == 2 and "--n-center" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--n-tr", "100"])


@pytest.mark.parametrize("argv", [["--help"], ["info"], ["fit", "--help"]])
def test_help_and_info_load_no_heavy_library(argv):
    """``kernelpath --help`` and ``info`` import neither scikit-learn, Numba nor PyArrow."""
    import subprocess
    import sys

    code = (
        "import sys; from kernelpath.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('sklearn', 'numba', 'pyarrow', 'pandas') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "HEAVY []", out


def test_import_kernelpath_loads_names_on_first_use():
    import subprocess
    import sys

    code = (
        "import sys, kernelpath as kp\n"
        "print(sorted(m for m in ('sklearn', 'numba', 'pyarrow', 'scipy.optimize') "
        "if m in sys.modules))\n"
        "kp.NystromRegressor; kp.datasets.make_sin_regression; print('sklearn' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True"
    import kernelpath as kp

    assert set(kp.__all__) <= set(dir(kp))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        kp.nothing  # noqa: B018
