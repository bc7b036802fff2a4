"""What a fit's ``memory_budget`` covers and how it is shared out: the copies of the data
the fit makes, its n-sized vectors and the solver's own matrices are set aside first, and
the kernel operators (their cached rows of K_nm and their streamed blocks) get what is
left; a budget that leaves them less than ``MIN_OPERATOR_BYTES`` is refused, with the
budget the fit would need (docs/design.md, "Memory")."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..inputs import as_rows, nbytes
from .problem import FitProblem

__all__ = [
    "BudgetError",
    "refuse_largest",
    "MIN_OPERATOR_BYTES",
    "N_VECTORS",
    "SOLVER_SHARE",
    "copied_bytes",
    "fit_rows",
    "main_fits",
    "row_copy_bytes",
    "vector_bytes",
    "operator_budget",
    "held_bytes",
]

#: The least the kernel operators of a fit may be left (their streamed blocks: a few rows
#: per worker; below this the products slow to a row at a time).
MIN_OPERATOR_BYTES = 2**20
#: n-sized float64 vectors per output a fit holds besides the operators: the coded and
#: centered targets, the weights, the operators' row norms, a product's result and the
#: validation targets.
N_VECTORS = 6
#: A solver's faster storage (CG's Cholesky factor per anchor) is kept only while it
#: takes at most this share of what the copies and vectors leave of the budget; the rest
#: goes to the operators' cache, which saves more time.
SOLVER_SHARE = 0.5


def copied_bytes(original: Any, made: Any) -> int:
    """Bytes of ``made`` when it is a copy of (part of) ``original`` in memory: 0 when it is
    ``original`` itself, a view of it, or rows read lazily (a row source, a dask array)."""
    if made is None or made is original:
        return 0
    if isinstance(made, np.ndarray) and isinstance(original, np.ndarray):
        if np.shares_memory(made, original):
            return 0
    return nbytes(made)


def row_copy_bytes(problem: FitProblem, n_rows: int, n_val: int = 0) -> int:
    """Bytes of the copies ``fit_rows`` makes of a fit's ``n_rows`` training and ``n_val``
    validation rows of X held in memory, before they are made: none for rows read lazily,
    and none for a fit on every row (``take_rows`` returns X itself)."""
    if n_val == 0 and n_rows == problem.n:
        return 0
    return int(np.ceil((int(n_rows) + int(n_val)) * as_rows(problem.X).row_bytes()))


def main_fits(problem: FitProblem, plan: Any) -> list[tuple[int, int]]:
    """(training rows, validation rows) of the largest fits a plan runs: the fit on the
    hold-out's training rows, scored on its validation rows, and the refit on every row
    where there is one (k-fold and the closed-form smoothers fit folds of fewer rows)."""
    train = len(plan.train)
    val = 0 if plan.validation is None else len(plan.validation)
    fits = [(train, val)]
    if getattr(plan, "refit", False) and problem.n > train:
        fits.append((problem.n, 0))
    return fits


def vector_bytes(problem: FitProblem, n_rows: int) -> int:
    """Bytes of the ``N_VECTORS`` n-sized vectors per output of a fit on ``n_rows`` rows."""
    return N_VECTORS * 8 * problem.n_outputs * n_rows


def fit_rows(
    problem: FitProblem, rows: np.ndarray, val_rows: np.ndarray | None
) -> tuple[Any, Any, int]:
    """(the training rows, the validation rows or None, the bytes of the copies of X they
    are): what every candidate fit takes from the problem first."""
    Xtr = problem.rows(rows)
    Xva = None if val_rows is None else problem.rows(val_rows)
    return Xtr, Xva, copied_bytes(problem.X, Xtr) + copied_bytes(problem.X, Xva)


def held_bytes(obj: Any, data: Any = None) -> int:
    """Bytes of the NumPy arrays ``obj`` holds (a search's result: its paths' errors and
    stored coefficients, what their coefficient functions keep, the centers), a few levels
    into containers and attributes, leaving out ``data`` (the user's X) and its views."""
    seen: set[int] = set()
    total = 0

    def add(a: Any) -> None:
        nonlocal total
        if id(a) in seen:
            return
        seen.add(id(a))
        if isinstance(data, np.ndarray) and np.shares_memory(a, data):
            return
        if a.base is None or not isinstance(a.base, np.ndarray):
            total += a.nbytes

    def visit(o: Any, depth: int) -> None:
        if isinstance(o, np.ndarray):
            add(o)
        elif depth > 0 and isinstance(o, dict):
            for v in o.values():
                visit(v, depth - 1)
        elif depth > 0 and isinstance(o, (list, tuple)):
            for v in o:
                visit(v, depth - 1)
        elif depth > 0 and hasattr(o, "__dict__") and not isinstance(o, type):
            for v in vars(o).values():
                visit(v, depth - 1)

    visit(obj, 5)
    return total


def operator_budget(
    problem: FitProblem,
    copies: int,
    n_rows: int,
    solver: int,
    what: str,
    floor: int = MIN_OPERATOR_BYTES,
    fewer: str = "centers",
) -> int:
    """The bytes left for the kernel operators of one candidate fit on ``n_rows`` rows
    (training and validation): ``problem.budget`` less what the fit set aside
    (``problem.held``: copies made while validating X, earlier candidates' paths), the
    rows it copied for this fit (``copies``), its n-sized vectors and the solver's own
    memory (``solver``). Refuses a budget that leaves the operators less than ``floor``
    (``MIN_OPERATOR_BYTES``, or what a solver needs them to hold: exact KRLS's whole
    K), naming ``what`` (the centers and solver), the budget it needs, and what to have
    fewer of (``fewer``)."""
    vectors = vector_bytes(problem, n_rows)
    aside = problem.held + copies + vectors + solver
    left = problem.budget - aside
    if left < floor:
        need = aside + floor
        parts = [f"the solver's matrices {solver / 1e6:.0f} MB"]
        if copies + problem.held:
            parts.append(f"copies of the data {(copies + problem.held) / 1e6:.0f} MB")
        parts.append(f"n-sized vectors {vectors / 1e6:.0f} MB")
        raise BudgetError(
            f"memory_budget={problem.budget / 1e6:.0f} MB is too small for {what}: "
            f"{', '.join(parts)}"
            + (f" and at least {floor / 1e6:.0f} MB for the kernel operators" if floor else "")
            + f"; give memory_budget of at least {np.ceil(need / 1e6):.0f}MB, or fewer {fewer}",
            need,
        )
    return int(left)


class BudgetError(ValueError):
    """A ``memory_budget`` too small for a fit; ``need`` is the budget it asks for."""

    def __init__(self, message: str, need: int) -> None:
        super().__init__(message)
        self.need = int(need)


def refuse_largest(checks: Any) -> None:
    """Run every fit's budget check (callables); where some refuse, raise the refusal that
    asks for the most, so that the budget it names is enough for every one of them (the
    refit on all rows draws more centers than the hold-out's fit: advice from the first
    refusal was refused again at the refit)."""
    refused = []
    for check in checks:
        try:
            check()
        except BudgetError as exc:
            refused.append(exc)
    if refused:
        raise max(refused, key=lambda exc: exc.need)
