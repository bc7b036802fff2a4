"""What the command's parser offers, without importing the library: the model, kernel,
width and solver names and their help (``kernelpath --help`` loads no scikit-learn, Numba or
PyArrow). tests/test_cli.py checks each name against the library's own."""

from __future__ import annotations

#: ``--model`` -> the estimators' name stem (``nystrom`` -> NystromRegressor and
#: NystromClassifier); the library's table is ``cli.models._model_classes``.
MODELS = {
    "nystrom": "Nystrom",
    "nytro": "NYTRO",
    "krls": "KRLS",
    "rf": "RandomFeatures",
    "sgm": "SGM",
    "eigenpro": "EigenPro",
}
#: ``kernels.kernel_names()``
KERNELS = ("auto", "gaussian", "rbf", "laplacian", "matern", "cauchy", "polynomial", "linear")
#: ``kernels.WIDTH_NAMES``
WIDTHS = ("auto", "median", "ard", "agop", "agop_diagonal")
#: ``cli.models.solver_choices()``: ``--solver`` per ``--model``, the default first
SOLVERS = {"nystrom": ("cg", "direct"), "nytro": ("gd", "nu")}


class UserError(Exception):
    """A mistake in the command's input: reported as one line, exit status 1."""


def help_texts() -> dict[str, str]:
    """The help of the options whose values come from the library."""
    solvers = "; ".join(f"{m}: {', '.join(s)}" for m, s in SOLVERS.items())
    return {
        "kernel": f"the kernel: {', '.join(KERNELS)} (default: auto, the Gaussian, whose "
        "family nystrom's --search may change)",
        "sigma": "the width of a radial kernel: a number (in the units of the data, or of "
        f"the scaled features with --scale on), or {', '.join(map(repr, WIDTHS))} "
        "(default: auto, chosen by the fit)",
        "solver": f"the solver, default first ({solvers})",
        "model": "the estimator family: "
        + ", ".join(f"{k} ({v})" for k, v in MODELS.items())
        + " (default: nystrom)",
    }
