"""Solvers: pure functions (operator, targets, options) -> Path.

- ``spectral``: exact KRLS and the spectral filters from one eigendecomposition of K;
- ``nystrom``: Nyström KRLS in closed form, the whole λ path from one eigendecomposition;
- ``iterative``: NYTRO gradient descent, its ν-method acceleration and preconditioned
  conjugate gradient (the FALKON solver), each a path over iterations (and λ);
- ``incremental``: Nyström KRLS for every number of centers m and every λ (thesis
  Algorithm 4.1), the (m, λ) path.
"""

from .incremental import incremental_nystrom_path
from .iterative import ITERATIVE_METHODS, IterativeOptions, IterativeSetup, iterative_path
from .nystrom import nystrom_direct_path
from .spectral import exact_path

__all__ = [
    "exact_path",
    "nystrom_direct_path",
    "incremental_nystrom_path",
    "iterative_path",
    "IterativeOptions",
    "IterativeSetup",
    "ITERATIVE_METHODS",
]
