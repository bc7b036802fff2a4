"""The families whose model is a kernel expansion on centers: exact KRLS (every training
point a center), Nyström (direct, CG and the (m, λ) path) and NYTRO."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import _backend as B
from .._validation import check_choice, check_float, check_int, check_size
from ..centers import CenterSelection, chooses_size, select_centers, without_repeats
from ..inputs import as_rows, center_rows
from ..kernels import Kernel
from ..linalg import factor_on_device, regularized_factor
from ..operators.kernel import stream_bytes
from ..operators.protocol import KernelProducts
from ..path import Path
from ..selection import STOPPING_RULES
from ..solvers import incremental_nystrom_path, iterative_path, nystrom_direct_path
from ..solvers._common import Validation
from ..solvers._loo import SmootherCV
from ..solvers.incremental import incremental_memory
from ..solvers.iterative import (
    CG_LAYOUTS,
    STEP_RULES,
    IterativeOptions,
    IterativeSetup,
    cg_layout,
    cg_memory,
    compact_first_for,
    compact_in_reach,
    forced_compact,
    gradient_memory,
)
from ..solvers.lowrank import LOWRANK_RANK
from ..solvers.newton import PATH_PATIENCE, NewtonOptions, newton_memory, newton_path
from ..solvers.nystrom import center_factor, direct_memory
from ..solvers.spectral import ITERATION_FILTERS
from ..workspace import Workspace
from .family import (
    Family,
    FittedModel,
    check_loss,
    kernel_operators,
    newton_intercept,
    validation,
)
from .memory import (
    MIN_OPERATOR_BYTES,
    SOLVER_SHARE,
    BudgetError,
    copied_bytes,
    fit_rows,
    main_fits,
    operator_budget,
    refuse_largest,
    row_copy_bytes,
    vector_bytes,
)
from .problem import CandidateFit, FitProblem, FitSettings

__all__ = [
    "NystromFamily",
    "NYTROFamily",
    "default_n_centers",
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
    n, with no other cap (issue 45: a cap of 5,000 held every n past ~120,000 rows at the
    same model). Where the budget cannot hold them, the fit is refused before any work,
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

    def solve(
        self,
        problem: FitProblem,
        kernel: Kernel,
        rows: np.ndarray,
        val_rows: np.ndarray | None,
        settings: FitSettings,
    ) -> CandidateFit:
        Ytr, wt, intercept = problem.targets(rows)
        Xtr, Xva, copies = fit_rows(problem, rows, val_rows)
        n_va = 0 if Xva is None else Xva.shape[0]
        vectors = vector_bytes(problem, len(rows) + n_va)
        # the center strategy (leverage scores: its own operators) gets what the copies and
        # vectors leave; it is done before the solver's matrices exist
        free = max(problem.budget - problem.held - copies - vectors, MIN_OPERATOR_BYTES)
        sel, grid = self.centers(Xtr, kernel, settings, free)
        copies += copied_bytes(Xtr, sel.points)
        m = sel.points.shape[0]
        aside = copies + vectors
        solver = self.solver_memory(problem, settings, m, n_va, grid, aside)
        how = self.describe(settings, settings.options.method)
        what = f"{problem.estimator} with {m} centers ({how})"
        floor = self.operator_floor(m, len(rows), n_va)
        budget = operator_budget(problem, copies, len(rows) + n_va, solver, what, floor)
        op, vop = kernel_operators(kernel, Xtr, Xva, sel.points, problem.workspace.share(budget))
        del Xtr, Xva
        val = validation(problem, vop, val_rows, intercept)
        path = self.path(
            op, Ytr, wt, val, sel, grid, settings, len(rows), problem.classifier, solver
        )
        if not np.isfinite(path.train_error).any():
            raise ValueError(
                "no point of the path could be computed (the centers' system is numerically "
                "singular at every penalty): give larger penalties or fewer centers"
            )
        return CandidateFit(
            kernel, path, intercept, settings, len(rows), centers=sel, row_indices=rows
        )

    def operator_floor(self, m: int, n_tr: int, n_val: int) -> int:
        """The least the fit's operators may be given (``memory.operator_budget``)."""
        return MIN_OPERATOR_BYTES

    def planned_centers(self, settings: FitSettings, n_rows: int) -> int | None:
        """How many centers a fit on ``n_rows`` rows will have, known before it draws them
        (None where the fit decides: a path over m, a strategy that sizes its dictionary)."""
        raise NotImplementedError

    def draws_default_centers(self, settings: FitSettings) -> bool:
        """Whether the fit draws ``default_n_centers`` centers (``n_centers=None``): what a
        refusal names as the default's m."""
        return False

    def check_memory(self, problem: FitProblem, plan: Any, settings: FitSettings) -> None:
        """The budget check of ``solve`` on the plan's largest fits with the centers they
        will draw, before the width screen (it refused only after the screen's fits: 2-3.6
        s and 45-68 MB into a 200,000-point fit that could never run)."""
        rows = as_rows(problem.X)
        by_default = self.draws_default_centers(settings)

        def check(n: int, n_va: int, m: int) -> None:
            copies = row_copy_bytes(problem, n, n_va) + rows.center_bytes(m)  # rows, centers
            aside = copies + vector_bytes(problem, n + n_va)
            solver = self.solver_memory(problem, settings, m, n_va, None, aside)
            how = self.describe(settings, settings.options.method)
            what = f"{problem.estimator} with {m} centers ({how})"
            floor = self.operator_floor(m, n, n_va)
            operator_budget(problem, copies, n + n_va, solver, what, floor)

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

    def solver_memory(
        self,
        problem: FitProblem,
        settings: FitSettings,
        m: int,
        n_val: int,
        grid: np.ndarray | None,
        aside: int,
    ) -> int:
        """Bytes the solver holds beside its operators for ``m`` centers (``grid``: the m
        values of a path over m) and ``n_val`` validation rows, with ``aside`` bytes of the
        budget set aside already (the fit's copies and n-sized vectors)."""
        raise NotImplementedError

    def path(
        self,
        op: KernelProducts,
        Ytr: np.ndarray,
        wt: np.ndarray | None,
        val: Validation | None,
        sel: CenterSelection,
        grid: np.ndarray | None,
        settings: FitSettings,
        n_tr: int,
        classifier: bool,
        memory_limit: int | None = None,
    ) -> Path:
        raise NotImplementedError

    def newton(
        self,
        op: KernelProducts,
        Ytr: np.ndarray,
        wt: np.ndarray | None,
        val: Validation | None,
        settings: FitSettings,
        method: str,
        sel: CenterSelection,
        factor: Any = None,
    ) -> Path:
        """The λ path of a Newton loss on the centers (``solvers.newton``), in the
        coordinates of the diagonalized Nyström factor (its preconditioner is diagonal)."""
        factor = (center_factor(op) if factor is None else factor).diagonalized()
        return newton_path(
            op,
            Ytr,
            settings.options.loss,
            _grid_or_none(settings.penalty),
            wt,
            val,
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


class NystromFamily(_KernelModel):
    """Nyström KRLS: the direct λ path, CG with the FALKON preconditioner, or the
    incremental (m, λ) path."""

    #: How the direct path computes its spectrum (``solvers.nystrom.DIRECT_METHODS``).
    direct_spectrum = "auto"

    takes_dask = True
    _solvers: tuple[str, ...] = ("direct", "cg")

    def method(self, params: Mapping[str, Any]) -> str:
        return check_choice(params["solver"], "solver", self._solvers)

    def closed_form(self, method: str) -> bool:
        return method == "direct"

    def options(self, params: Mapping[str, Any]) -> KernelOptions:
        method, loss = self.method(params), check_loss(params)
        layout = check_choice(
            params.get("factor_layout", "auto"), "factor_layout", ("auto", *CG_LAYOUTS)
        )
        rank = params.get("preconditioner_rank")
        rank = LOWRANK_RANK if rank is None else check_int(rank, "preconditioner_rank", 1)
        if layout != "auto" and (method != "cg" or loss != "square"):
            raise ValueError(
                f"factor_layout={layout!r} is the form of CG's factor: it needs solver='cg' "
                f"and the square loss, got solver={method!r}, loss={loss!r} (or "
                "factor_layout='auto')"
            )
        return KernelOptions(
            method,
            params.get("max_iter"),
            params["centers"],
            loss=loss,
            factor_layout=layout,
            preconditioner_rank=int(rank),
        )

    def settings(self, params: Mapping[str, Any]) -> FitSettings:
        settings = super().settings(params)
        layout = settings.options.factor_layout
        if layout != "auto" and self.size_path(settings):
            raise ValueError(
                f"factor_layout={layout!r} is the form of CG's factor: n_centers as a path "
                "('auto' or a sequence) fits the (m, λ) path in closed form instead; give one "
                "number of centers (or factor_layout='auto')"
            )
        return settings

    def iteration_options(
        self, settings: FitSettings, memory_limit: int | None
    ) -> IterativeOptions:
        """The iterative path's options: the method and its iteration cap, the stopping
        rule while selecting (a refit runs its fixed count), and CG's factor: the layout
        asked for (else the budget's) and the low-rank rank."""
        opts: KernelOptions = settings.options
        selecting = settings.n_iter is None
        return IterativeOptions(
            method=opts.method,
            max_iter=self.max_iter(settings),
            n_iter_no_change=settings.n_iter_no_change if selecting else None,
            tol=settings.tol if selecting else 0.0,
            random_state=settings.rng,
            memory_limit=memory_limit,
            factor_layout=opts.factor_layout,
            preconditioner_rank=opts.preconditioner_rank,
        )

    def smoother_modes(self, settings: FitSettings, method: str) -> tuple[str, ...]:
        if self.size_path(settings) or settings.options.loss != "square":
            return ()
        return ("loo", "gcv") if method == "direct" else ()

    def drawn_centers(self, settings: FitSettings, n_rows: int) -> int | None:
        """The number of centers a fit on ``n_rows`` rows draws at one m (None when the
        centers are given, the strategy sizes its dictionary, or m is a path)."""
        centers = settings.options.centers
        if self.size_path(settings) or not (centers is None or isinstance(centers, str)):
            return None
        if chooses_size(centers):
            return None
        nc = settings.size
        return default_n_centers(n_rows) if nc is None else int(nc)

    def draws_default_centers(self, settings: FitSettings) -> bool:
        return settings.size is None and self.drawn_centers(settings, 1) is not None

    def planned_centers(self, settings: FitSettings, n_rows: int) -> int | None:
        m = self.drawn_centers(settings, n_rows)
        centers = settings.options.centers
        if m is None and not self.size_path(settings) and hasattr(centers, "__len__"):
            if not isinstance(centers, str):
                m = len(centers)  # given centers
        return m

    def screen(self, settings: FitSettings, fraction: float, n_rows: int) -> FitSettings:
        """A Nyström screening round with a number of centers m drawn by the estimator
        itself keeps m / sqrt(n) (the regime of Rudi et al.: a fraction f of the rows with
        sqrt(f) m centers is the same problem at a smaller scale, at f^2 of the cost of the
        Gram matrix and f^1.5 of the m x m algebra)."""
        m = self.drawn_centers(settings, n_rows)
        if m is None:
            return settings
        return replace(settings, size=max(1, int(round(m * np.sqrt(fraction)))))

    def screen_floor(self, settings: FitSettings, n_rows: int) -> int:
        """At least ``SCREEN_CENTER_RATIO`` rows per center: a subsample much smaller than
        that would change the model, not just its noise."""
        floor = super().screen_floor(settings, n_rows)
        if self.size_path(settings):
            return floor
        m = self.drawn_centers(settings, n_rows)
        centers = settings.options.centers
        if m is None and hasattr(centers, "__len__") and not isinstance(centers, str):
            m = len(centers)  # given centers
        return floor if m is None else max(floor, SCREEN_CENTER_RATIO * m)

    def centers(
        self, Xtr: Any, kernel: Kernel, settings: FitSettings, budget: int
    ) -> tuple[CenterSelection, np.ndarray | None]:
        strategy = settings.options.centers
        m, grid = check_n_centers(settings.size, Xtr.shape[0], strategy)
        if grid is not None and isinstance(self, NYTROFamily):
            raise ValueError(
                "n_centers as a path ('auto' or a sequence) needs the Nyström closed form: "
                "use NystromRegressor / NystromClassifier (NYTRO's path is over iterations)"
            )
        pen = settings.penalty
        sel = select_centers(
            strategy, Xtr, m, settings.rng, kernel, pen if isinstance(pen, float) else None, budget
        )
        if grid is None and sel.strategy == "uniform" and sel.weights is None:
            sel = without_repeats(sel)  # the same span, K_mm no longer singular
        M = sel.points.shape[0]
        if grid is not None:
            if grid.size == 0:  # "auto"
                grid = np.unique(np.geomspace(1, M, AUTO_GRID_SIZE).round().astype(np.int64))
            grid = grid[grid <= M] if (grid <= M).any() else np.array([M])
        return sel, grid

    def solver_memory(
        self,
        problem: FitProblem,
        settings: FitSettings,
        m: int,
        n_val: int,
        grid: np.ndarray | None,
        aside: int,
    ) -> int:
        """The solver's own memory: the (m, λ) path's, the direct path's, gradient
        descent's, or CG's, with one Cholesky factor per anchor when that takes at most
        ``memory.SOLVER_SHARE`` of what the copies and n-sized vectors leave of the budget
        (else one eigendecomposition for all of them, else the compact factor in the
        data's precision, else in float32 under float64 data, else one float32 compact
        buffer beyond the share where the budget holds it beside the operators' streamed
        blocks (``solver_room``), else the low-rank preconditioner: ``krylov.cg_layout``)."""
        pen = _grid_or_none(settings.penalty)
        k, method = problem.n_outputs, settings.options.method
        if settings.options.loss != "square":
            P = 20 if pen is None else len(pen)
            return newton_memory(m, k, P, problem.n, n_val)
        if grid is not None:
            return incremental_memory(m, k, pen, len(grid), n_val)
        if method == "direct":
            return direct_memory(m, k, 20 if pen is None else len(pen), B.n_threads())
        if method != "cg":
            return gradient_memory(m, k, pen, n_val)
        max_iter = self.max_iter(settings)
        itemsize = B.compute_dtype(problem.X).itemsize if hasattr(problem.X, "dtype") else 8
        share = int(SOLVER_SHARE * (problem.budget - problem.held - aside))
        opts: KernelOptions = settings.options
        rank = opts.preconditioner_rank
        args = (m, k, pen, max_iter, n_val)
        if opts.factor_layout == "compact":  # float32 where the data's would be refused
            room = problem.budget - problem.held - aside - MIN_OPERATOR_BYTES
            _, slots, fsize = forced_compact(*args, room, itemsize)
            return cg_memory(*args, True, "compact", fsize, slots)
        if opts.factor_layout != "auto":  # asked for: the budget admits it or refuses the fit
            return cg_memory(*args, True, opts.factor_layout, itemsize, None, rank)
        first = compact_first_for(itemsize)
        room = self.solver_room(problem, m, aside, itemsize)
        layout, slots, fsize = cg_layout(*args, share, itemsize, first, rank, room)
        need = cg_memory(*args, True, layout, fsize, slots or None, rank)
        on_device = factor_on_device(problem.device, m)
        if layout == "eigh" and compact_in_reach(
            layout, m, k, pen, max_iter, n_val, share, on_device
        ):  # the compact factor where K_mm fails its Cholesky test, its basis beside it
            need = max(need, cg_memory(m, k, pen, max_iter, n_val, True, "compact", 8, None))
        return need

    @staticmethod
    def solver_room(problem: FitProblem, m: int, aside: int, itemsize: int) -> int:
        """The most CG's compact factor may take beyond ``memory.SOLVER_SHARE``, where no
        compact buffer fits the share (``krylov.cg_layout``'s ``room``): what the copies
        and vectors leave of the budget, less twice the operators' streamed blocks at full
        size (``operators.kernel.stream_bytes``: the training and validation operators
        share the rest by rows). The cache it takes from could hold little of K_nm there:
        a float32 buffer larger than the share is more than half of that rest, so the
        rest holds fewer than 8 m (m + 1) bytes, under 2 m / n of K_nm's n m float32
        entries and m / n of its float64 ones. ``itemsize``: the operators' entries."""
        d = int(problem.X.shape[1])
        sparse = not as_rows(problem.X).dense_blocks
        n_jobs = problem.workspace.n_jobs or B.n_threads()
        streams = 2 * stream_bytes(m, d, itemsize, n_jobs, problem.device.is_cuda, sparse)
        return max(0, problem.budget - problem.held - aside - max(streams, MIN_OPERATOR_BYTES))

    def path(
        self,
        op: KernelProducts,
        Ytr: np.ndarray,
        wt: np.ndarray | None,
        val: Validation | None,
        sel: CenterSelection,
        grid: np.ndarray | None,
        settings: FitSettings,
        n_tr: int,
        classifier: bool,
        memory_limit: int | None = None,
    ) -> Path:
        opts: KernelOptions = settings.options
        pen = settings.penalty
        factor = None
        if "gamma" in sel.info:  # SQUEAK's γ-regularized Nyström (SqueakCenters(regularized))
            if grid is not None:
                raise ValueError(
                    "SqueakCenters(regularized=True) fits the whole dictionary: n_centers "
                    "cannot be a path"
                )
            factor = regularized_factor(op.center_gram(), sel.weights, sel.info["gamma"])
        if opts.loss != "square":
            if grid is not None:
                raise ValueError(
                    f"loss={opts.loss!r}: n_centers as a path ('auto' or a sequence) is the "
                    "square loss's closed form; give one number of centers"
                )
            return self.newton(op, Ytr, wt, val, settings, opts.method, sel, factor)
        if grid is not None:
            return incremental_nystrom_path(op, Ytr, _grid_or_none(pen), grid, wt, val)
        if opts.method == "direct":
            cv = _smoother(settings, classifier)
            return nystrom_direct_path(
                op,
                Ytr,
                _grid_or_none(pen),
                wt,
                val,
                cv,
                factor,
                method=self.direct_spectrum,
                memory_limit=memory_limit,
            )
        return iterative_path(
            op,
            Ytr,
            None if isinstance(pen, str) else pen,  # None: the solver's "auto" grid
            self.iteration_options(settings, memory_limit),
            wt,
            val,
            IterativeSetup(factor=factor),
        )

    def refit_centers(self, problem: FitProblem, cand: CandidateFit) -> CenterSelection:
        """The centers of a refit on all the rows where the estimator has its default m:
        those the chosen point was fit with (a new draw made another model at a λ near the
        rounding level of K_mm's factor: yacht's default direct fit went from test RMSE 0.61
        on the training part to 5.1 refit), and, where they are drawn uniformly, the
        ``default_n_centers(n)`` - m more that all the rows call for, drawn uniformly from
        the rows not yet centers (a fit on all the rows has that m). Indices point into all
        the rows. A given m (or path of m) draws its centers again from all the rows
        (``refit``): keeping 2,300 centers drawn from cpusmall's 2,400 training rows, none
        from the validation part, tested at MSE 14.00 against 13.34 for a new draw."""
        sel, settings, rows = cand.centers, cand.settings, cand.row_indices
        assert sel is not None
        if sel.indices is None or rows is None:
            return sel
        taken = rows[sel.indices]
        strategy = settings.options.centers
        uniform = strategy is None or (isinstance(strategy, str) and strategy == "uniform")
        extra = default_n_centers(problem.n) - len(taken)
        if not uniform or extra <= 0:
            return replace(sel, indices=taken)
        free = np.setdiff1d(np.arange(problem.n), taken)
        new = settings.rng.choice(free, min(extra, len(free)), replace=False)
        every = np.concatenate([taken, new])
        return replace(sel, points=center_rows(problem.X, every), indices=every)

    def refit(self, problem: FitProblem, cand: CandidateFit) -> tuple[CandidateFit, np.ndarray]:
        """Fit again on all the rows at the chosen point of the path; with the default m,
        on the chosen point's centers and more (``refit_centers``).

        The (m, λ) path: batch Nyström at the chosen m and λ. Gradient descent and the
        ν-method keep the chosen penalty and iteration count (their regularization). CG
        reruns the same path (same penalties, hence the same Krylov construction) on all
        the data: to convergence when the chosen point had converged, else for the chosen
        number of iterations, and takes the chosen penalty's point.
        """
        path, settings = cand.path, cand.settings
        opts: KernelOptions = settings.options
        if opts.loss != "square":
            return self.newton_refit(problem, cand)
        best = path.best_params
        every = np.arange(problem.n)
        # the default m: the chosen point's centers, grown; a given m: drawn again
        sel = opts.centers if settings.size is not None else self.refit_centers(problem, cand)
        if "n_centers" in best:
            fixed = replace(
                settings,
                penalty=float(best["penalty"]),
                size=int(best["n_centers"]),
                options=replace(opts, method="direct"),
            )
            again = self.solve(problem, cand.kernel, every, None, fixed)
            return again, again.path.coef()
        if opts.method == "cg":
            p, t = path.best_index
            reached = int(np.isfinite(path.train_error[p]).sum())
            done = bool(path.info["converged"][p]) and t == reached - 1
            fixed = replace(
                settings,
                penalty=np.asarray(path.params["penalty"][:, 0]),
                n_iter=None if done else t + 1,
                options=replace(opts, centers=sel),
            )
            again = self.solve(problem, cand.kernel, every, None, fixed)
            last = int(np.isfinite(again.path.train_error[p]).sum()) - 1
            return again, again.path.coef((p, last if done else min(t, last)))
        carry = best.get("n_iter") if opts.method in ("gd", "nu") else None
        fixed = replace(
            settings,
            penalty=float(best.get("penalty", 0.0)),
            n_iter=carry,
            options=replace(opts, centers=sel),
        )
        again = self.solve(problem, cand.kernel, every, None, fixed)
        return again, again.path.coef()


class NYTROFamily(NystromFamily):
    """NYTRO: Nyström gradient descent (or the ν-method) regularized by early stopping."""

    screens_with_own_solver = True
    # its regularization is the iteration count (at most SCREEN_MAX_ITER in the screen), not
    # a λ whose best width falls with n: without the shift, cpusmall 1.049 -> 1.002 x the
    # oracle, kin8nm 1.032 -> 0.977, ijcnn1 +0.80 -> +0.06 points; protein 1.000 -> 1.028
    shifts_width = False

    _solvers = ("gd", "nu")

    def options(self, params: Mapping[str, Any]) -> KernelOptions:
        return KernelOptions(
            self.method(params),
            params.get("max_iter"),
            params["centers"],
            nu=params["nu"],
            step=params["step"],
            stopping=params["stopping"],
            stopping_threshold=params.get("stopping_threshold"),
            loss=check_loss(params, ("square",)),
        )

    def smoother_modes(self, settings: FitSettings, method: str) -> tuple[str, ...]:
        return ()

    def iteration_options(
        self, settings: FitSettings, memory_limit: int | None
    ) -> IterativeOptions:
        """NYTRO's ν, step and stopping rule (the plain window rule in a refit)."""
        opts: KernelOptions = settings.options
        nu = check_float(opts.nu, "nu", 0.0, np.inf, low_open=True)
        step = opts.step
        if isinstance(step, str):
            check_choice(step, "step", STEP_RULES)
        else:
            step = check_float(step, "step", 0.0, np.inf, low_open=True)
        stopping = check_choice(opts.stopping, "stopping", STOPPING_RULES)
        threshold = opts.stopping_threshold
        if threshold is not None:
            if stopping == "paper":  # a fraction of the previous RMSE
                threshold = check_float(threshold, "stopping_threshold", 0.0, 1.0, high_open=True)
            else:  # the fitted line's fall over the window, in RMSE units (any sign)
                threshold = check_float(threshold, "stopping_threshold", -np.inf, np.inf)
        return replace(
            super().iteration_options(settings, memory_limit),
            nu=nu,
            step=step,
            stopping=stopping if settings.n_iter is None else "window",
            stopping_threshold=threshold,
        )
