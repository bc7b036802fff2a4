"""Solvers: pure functions (operator, targets, options) -> Path.

- ``spectral``: exact KRLS and the spectral filters from one eigendecomposition of K;
- ``nystrom``: Nyström KRLS in closed form, the whole λ path from one eigendecomposition;
- ``iterative``: NYTRO gradient descent, its ν-method acceleration and preconditioned
  conjugate gradient (the FALKON solver), each a path over iterations (and λ).
"""

from .iterative import ITERATIVE_METHODS, iterative_path
from .nystrom import nystrom_direct_path
from .spectral import exact_path

__all__ = ["exact_path", "nystrom_direct_path", "iterative_path", "ITERATIVE_METHODS"]
