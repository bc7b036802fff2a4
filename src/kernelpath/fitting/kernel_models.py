"""What the families whose model is a kernel expansion on centers share (exact KRLS in
``exact``, Nyström and NYTRO in ``nystrom``): the options, the default number of centers,
the fit of one path and its memory check, the Newton path of the other losses, and the
model's predictions."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .. import _backend as B
from .._validation import check_int, check_size
from ..centers import CenterSelection, chooses_size
from ..inputs import as_rows
from ..kernels import Kernel
from ..operators.protocol import KernelProducts
from ..path import Path
from ..solvers._common import Validation
from ..solvers._loo import SmootherCV
from ..solvers.lowrank import LOWRANK_RANK
from ..solvers.newton import PATH_PATIENCE, NewtonOptions, newton_path
from ..solvers.nystrom import center_factor
from ..solvers.spectral import ITERATION_FILTERS
from ..workspace import Workspace
from .family import (
    Family,
    FittedModel,
    kernel_operators,
    newton_intercept,
    validation,
)
from .memory import (
    MIN_OPERATOR_BYTES,
    BudgetError,
    copied_bytes,
    fit_rows,
    main_fits,
    operator_budget,
    refuse_largest,
    row_copy_bytes,
    vector_bytes,
)
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest

__all__ = [
    "KernelOptions",
    "PathRequest",
    "FitShape",
    "default_n_centers",
    "center_decision",
    "check_n_centers",
    "DEFAULT_MAX_ITER",
    "AUTO_GRID_SIZE",
]

DEFAULT_MAX_ITER = {"gd": 500, "nu": 100, "cg": 100, "landweber": 500}
#: Number of m (or D) values of ``n_centers="auto"`` (geometric from 1 to M).
AUTO_GRID_SIZE = 20
#: A Nyström screening round fits on at least this many rows per center.
SCREEN_CENTER_RATIO = 2


def default_n_centers(n: int) -> int:
    """sqrt(n) log(n) uniform centers (Rudi, Camoriano & Rosasco 2015), at least 100, at most
    n, with no other cap (a cap of 5,000 held every n past ~120,000 rows at the same
    model). Where the budget cannot hold them, the fit is refused before any work,
    naming ``n_centers`` (the most the budget fits) and ``memory_budget``
    (``_KernelModel.check_memory``)."""
    m = int(np.sqrt(n) * np.log(max(n, 2)))
    return int(min(n, max(100, m)))


@dataclass(frozen=True)
class KernelOptions:
    """Checked options of the kernel families.

    ``method``: the filter (exact) or solver; ``max_iter``: the given iteration cap (None:
    the method's default); ``centers``: the center strategy or points; ``nu``, ``step``,
    ``stopping``: the ν-method's order, the step rule and NYTRO's stopping rule (exact:
    ``step`` is Landweber's η, None for its default, or "thesis"); ``stopping_threshold``:
    that rule's threshold (None: its default); ``loss``: "square", or a loss of the Newton
    solver (classifiers, ``solvers.newton``); ``factor_layout``: the form of CG's factor,
    one of ``krylov.CG_LAYOUTS`` or "auto" (the first that fits the budget);
    ``preconditioner_rank``: the rank of the low-rank preconditioner's sketch."""

    method: str
    max_iter: int | None = None
    centers: Any = None
    nu: float = 1.0
    step: Any = "auto"
    stopping: str = "window"
    stopping_threshold: float | None = None
    loss: str = "square"
    factor_layout: str = "auto"
    preconditioner_rank: int = LOWRANK_RANK


def newton_options(
    settings: FitSettings,
    method: str,
    dtype: Any,
    max_inner: int | None = None,
    explicit: bool = False,
) -> NewtonOptions:
    """The options of ``newton_path`` a fit's settings give: the method of its systems,
    its CG cap (``max_inner``, the estimator's ``max_iter`` where it has one; None: CG's
    default), tolerance and the λ path's patience (none in a refit)."""
    if max_inner is None:
        max_inner = DEFAULT_MAX_ITER["cg"]
    return NewtonOptions(
        method=method,
        max_inner=int(check_int(max_inner, "max_iter", 1)),
        tol=settings.tol,
        patience=PATH_PATIENCE if settings.n_iter_no_change is not None else None,
        dtype=dtype,
        explicit=explicit,
    )


@dataclass(frozen=True)
class PathRequest:
    """What one path of a kernel-expansion family is fit on: the training operator, its
    targets and weights, the validation set, the centers (and the m values of a path over
    m, ``grid``), the training rows' count, whether it classifies, and the bytes its solver
    may hold beside its operators."""

    op: KernelProducts
    Y: np.ndarray
    weights: np.ndarray | None
    validation: Validation | None
    centers: CenterSelection
    grid: np.ndarray | None
    n_rows: int
    classifier: bool
    memory_limit: int | None = None


class FitShape(NamedTuple):
    """The sizes a kernel-expansion fit's memory depends on: ``m`` centers (``grid``: the
    m values of a path over m), ``n`` training and ``n_val`` validation rows, and
    ``aside``, the bytes of the budget set aside already (the fit's copies and n-sized
    vectors)."""

    m: int
    n: int
    n_val: int
    grid: np.ndarray | None
    aside: int


class _KernelModel(Family):
    """A kernel expansion f(x) = sum_j k(x, c_j) coef_j + intercept on centers."""

    expands_centers = True
    #: the Newton path's K is the kernel matrix of the training points itself (exact KRLS)
    explicit = False

    def method(self, params: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def iterative(self, method: str) -> bool:
        return method in ("gd", "nu", "cg", *ITERATION_FILTERS)

    def has_path(self, settings: FitSettings, method: str) -> bool:
        if self.size_path(settings) or self.iterative(method):
            return True
        if method == "kols":
            return False
        return not isinstance(settings.penalty, float)

    def max_iter(self, settings: FitSettings) -> int:
        """The iterations of a fit: the refit's fixed count, else ``max_iter`` (checked
        when used), else the method's default."""
        opts: KernelOptions = settings.options
        if settings.n_iter is not None:
            return int(settings.n_iter)
        if opts.max_iter is None:
            return DEFAULT_MAX_ITER.get(opts.method, 100)
        return int(check_int(opts.max_iter, "max_iter", 1))

    def centers(
        self, Xtr: Any, kernel: Kernel, settings: FitSettings, budget: int
    ) -> tuple[CenterSelection, np.ndarray | None]:
        """The centers of a fit on ``Xtr`` and, for a path over m, the m values."""
        raise NotImplementedError

    def solve(self, request: SolveRequest) -> CandidateFit:
        problem, kernel, rows, val_rows, settings = request
        Ytr, wt, intercept = problem.targets(rows)
        Xtr, Xva, copies = fit_rows(problem, rows, val_rows)
        n_va = 0 if Xva is None else Xva.shape[0]
        vectors = vector_bytes(problem, len(rows) + n_va)
        # the center strategy (leverage scores: its own operators) gets what the copies and
        # vectors leave; it is done before the solver's matrices exist
        free = max(problem.budget - problem.held - copies - vectors, MIN_OPERATOR_BYTES)
        sel, grid = self.centers(Xtr, kernel, settings, free)
        copies += copied_bytes(Xtr, sel.points)
        shape = FitShape(sel.points.shape[0], len(rows), n_va, grid, copies + vectors)
        budget, solver = self._operator_budget(problem, settings, shape, copies)
        op, vop = kernel_operators(kernel, Xtr, Xva, sel.points, problem.workspace.share(budget))
        del Xtr, Xva
        val = validation(problem, vop, val_rows, intercept)
        req = PathRequest(op, Ytr, wt, val, sel, grid, len(rows), problem.classifier, solver)
        path = self.path(req, settings)
        if not np.isfinite(path.train_error).any():
            raise ValueError(
                "no point of the path could be computed (the centers' system is numerically "
                "singular at every penalty): give larger penalties or fewer centers"
            )
        return CandidateFit(
            kernel, path, intercept, settings, len(rows), centers=sel, row_indices=rows
        )

    def operator_floor(self, shape: FitShape) -> int:
        """The least the fit's operators may be given (``memory.operator_budget``)."""
        return MIN_OPERATOR_BYTES

    def _operator_budget(
        self, problem: FitProblem, settings: FitSettings, shape: FitShape, copies: int
    ) -> tuple[int, int]:
        """(the operators' budget, the solver's bytes) of a fit of ``shape`` whose copies
        of rows and centers take ``copies`` bytes (``memory.operator_budget``: refused,
        naming what to lower, where the budget cannot hold it)."""
        solver = self.solver_memory(problem, settings, shape)
        how = self.describe(settings, settings.options.method)
        what = f"{problem.estimator} with {shape.m} centers ({how})"
        n_rows = shape.n + shape.n_val
        floor = self.operator_floor(shape)
        return operator_budget(problem, copies, n_rows, solver, what, floor), solver

    def planned_centers(self, settings: FitSettings, n_rows: int) -> int | None:
        """How many centers a fit on ``n_rows`` rows will have, known before it draws them
        (None where the fit decides: a path over m, a strategy that sizes its dictionary)."""
        raise NotImplementedError

    def check_memory(self, problem: FitProblem, plan: Any, settings: FitSettings) -> None:
        """The budget check of ``solve`` on the plan's largest fits with the centers they
        will draw, before the width screen (it refused only after the screen's fits: 2-3.6
        s and 45-68 MB into a 200,000-point fit that could never run)."""
        rows = as_rows(problem.X)
        by_default = self.draws_default_centers(settings)

        def check(n: int, n_va: int, m: int) -> None:
            copies = row_copy_bytes(problem, n, n_va) + rows.center_bytes(m)  # rows, centers
            aside = copies + vector_bytes(problem, n + n_va)
            self._operator_budget(problem, settings, FitShape(m, n, n_va, None, aside), copies)

        def largest(n: int, n_va: int, m: int) -> int:
            """The most centers (at most m) whose fit this budget takes; 0: none."""
            lo, hi = 0, m
            while lo < hi:
                mid = (lo + hi + 1) // 2
                try:
                    check(n, n_va, mid)
                    lo = mid
                except BudgetError:
                    hi = mid - 1
            return lo

        def check_naming_the_largest(n: int, n_va: int, m: int) -> None:
            try:
                check(n, n_va, m)
            except BudgetError as exc:
                most = largest(n, n_va, m)
                hint = (
                    f"; the most centers it fits here is n_centers={most}"
                    if most
                    else "; it fits no centers here"
                )
                if by_default:
                    hint = (
                        f" (n_centers=None draws sqrt(n) log(n) = {m} centers for {n} rows)" + hint
                    )
                raise BudgetError(str(exc) + hint, exc.need) from None

        fits = [
            (n, n_va, self.planned_centers(settings, n)) for n, n_va in main_fits(problem, plan)
        ]
        refuse_largest(
            functools.partial(check_naming_the_largest, n, n_va, min(m, n))
            for n, n_va, m in fits
            if m is not None
        )

    def solver_memory(self, problem: FitProblem, settings: FitSettings, shape: FitShape) -> int:
        """Bytes the solver holds beside its operators in a fit of ``shape``."""
        raise NotImplementedError

    def path(self, req: PathRequest, settings: FitSettings) -> Path:
        """The family's path of ``req`` with ``settings``."""
        raise NotImplementedError

    def newton(
        self, req: PathRequest, settings: FitSettings, method: str, factor: Any = None
    ) -> Path:
        """The λ path of a Newton loss on the centers (``solvers.newton``), in the
        coordinates of the diagonalized Nyström factor (its preconditioner is diagonal)."""
        op, sel = req.op, req.centers
        factor = (center_factor(op) if factor is None else factor).diagonalized()
        return newton_path(
            op,
            req.Y,
            settings.options.loss,
            _grid_or_none(settings.penalty),
            req.weights,
            req.validation,
            factor,
            newton_options(settings, method, op.dtype, settings.options.max_iter, self.explicit),
            center_rows=None if sel.indices is None else np.asarray(sel.indices),
        )

    def model(self, cand: CandidateFit, coef: np.ndarray) -> dict[str, Any]:
        coef, intercept = newton_intercept(cand, coef)
        m = coef.shape[0]  # the (m, λ) path keeps the first m centers
        sel = cand.centers
        assert sel is not None
        return {
            "coef": coef,
            "intercept": intercept,
            "centers_": sel.points[:m],
            "center_strategy_": sel.strategy,
            "center_indices_": None if sel.indices is None else sel.indices[:m],
            "center_scores_": sel.scores,
            "center_weights_": None if sel.weights is None else sel.weights[:m],
            "center_penalty_": sel.penalty,
            "_center_info": sel,
        }

    def decision(self, model: FittedModel, X: Any, workspace: Workspace) -> Any:
        # the higher of the model's and the input's precision: a float64 model's coefficients
        # (large and cancelling at small penalties) must not be rounded to float32
        return center_decision(model, X, model.centers, workspace)


def center_decision(model: FittedModel, X: Any, centers: Any, workspace: Workspace) -> Any:
    """f(X) = K(X, centers) coef_ + intercept_ in the higher of the model's and X's
    precision, on X's device."""
    dtype = np.result_type(B.dtype_of(X), B.dtype_of(model.coef))
    dev = B.array_device(X)
    op = workspace.operator(
        as_rows(X).to(dev, dtype), as_rows(centers).to(dev, dtype), model.kernel, cache=False
    )
    F = op.matvec(B.to_device(model.coef, dev, dtype), native=True)
    return F + B.to_device(np.asarray(model.intercept, dtype=dtype), dev)


def _smoother(settings: FitSettings, classifier: bool) -> SmootherCV | None:
    if settings.cv_mode is None:
        return None
    return SmootherCV(settings.cv_mode, not classifier, "error_rate" if classifier else "mse")


def _grid_or_none(penalty: Any) -> np.ndarray | None:
    return None if isinstance(penalty, str) else np.atleast_1d(penalty)


def check_n_centers(value: Any, n: int, centers: Any) -> tuple[int | None, np.ndarray | None]:
    """(M, grid): the number of centers to draw and, for a path over m, the m values
    (None for one m; empty for "auto", filled once M is known). M is None when the
    strategy chooses it (SQUEAK)."""
    default = None if chooses_size(centers) else default_n_centers(n)
    if value is None:
        return default, None
    size = check_size(value, "n_centers")
    if isinstance(size, str):
        return default, np.array([], dtype=np.int64)
    clip = centers is None or isinstance(centers, str)
    if isinstance(size, np.ndarray):
        if size[-1] > n and clip:
            warnings.warn(
                f"n_centers values larger than the number of training points {n} are dropped",
                UserWarning,
                stacklevel=5,
            )
            size = np.unique(np.minimum(size, n))
        return int(size[-1]), size
    if size > n and clip:
        warnings.warn(
            f"n_centers={size} is larger than the number of training points {n}: "
            f"using n_centers={n}",
            UserWarning,
            stacklevel=5,
        )
        size = n
    return size, None
