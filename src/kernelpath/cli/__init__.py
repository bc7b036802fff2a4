"""The ``kernelpath`` command.

    kernelpath fit DATA (--target COLUMN | --target-file FILE) [--output model.kp] [options]
    kernelpath predict MODEL DATA --output PRED [--method predict|decision_function|...]
    kernelpath evaluate MODEL DATA (--target COLUMN | --target-file FILE) [--json]
    kernelpath inspect MODEL [--plot path.png]
    kernelpath demo [--n-train N] [--n-test N] [--solver cg|direct|nytro] [--seed S]
                    [--device auto|cpu|cuda|cuda:N]
    kernelpath info

DATA is a CSV or Parquet table (features by column name; the target a column, or a separate
file), a LIBSVM text file (``.svm``, ``.libsvm``, ``.svmlight``: its own labels), a
``.npy`` matrix (target from ``--target-file``) or a ``.npz`` with arrays ``X`` and ``y``.
``fit`` chooses regression or classification from the target (``--task`` overrides), fits
the estimator's whole path with its automatic selection, and writes a model file
(``kernelpath.save``). User errors print one line on stderr and exit with status 1.

``demo`` fits the foundation benchmark's problem (x ~ N(0, I_20), y = sin(<w, x>) + 0.1 eps)
on generated data: the whole (λ, iteration) path on a 20% hold-out, then prints the path's
best point, its validation error and the test RMSE (``--device`` computes with PyTorch
there). ``info`` prints the version, threads, default memory budget and the PyTorch devices.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
