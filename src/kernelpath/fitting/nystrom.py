"""The Nyström families: Nyström KRLS (its closed-form λ path, preconditioned CG, the
(m, λ) path and the Newton path of the other losses) and NYTRO (gradient descent and the
ν-method, regularized by their iterations)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .. import _backend as B
from .._validation import check_choice, check_float, check_int
from ..centers import CenterSelection, chooses_size, select_centers, without_repeats
from ..inputs import as_rows, center_rows
from ..kernels import Kernel
from ..linalg import factor_on_device, regularized_factor
from ..operators.blocks import stream_bytes
from ..path import Path
from ..selection import STOPPING_RULES
from ..solvers import incremental_nystrom_path, iterative_path, nystrom_direct_path
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
from ..solvers.newton import newton_memory
from ..solvers.nystrom import direct_memory
from .family import (
    check_loss,
)
from .kernel_models import (
    AUTO_GRID_SIZE,
    SCREEN_CENTER_RATIO,
    FitShape,
    KernelOptions,
    PathRequest,
    _grid_or_none,
    _KernelModel,
    _smoother,
    check_n_centers,
    default_n_centers,
)
from .memory import (
    MIN_OPERATOR_BYTES,
    SOLVER_SHARE,
)
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest

__all__ = ["NystromFamily", "NYTROFamily"]


class NystromFamily(_KernelModel):
    """Nyström KRLS: the direct λ path, CG with the FALKON preconditioner, or the
    incremental (m, λ) path."""

    #: How the direct path computes its spectrum (``solvers.nystrom.DIRECT_METHODS``).
    direct_spectrum = "auto"

    takes_dask = True
    grows_centers = True
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
        if nc is not None:
            return int(nc)
        return min(n_rows, int(round(default_n_centers(n_rows) * settings.center_growth)))

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
        size = settings.size
        if size is None and settings.center_growth != 1.0:  # the default m, grown
            size = self.drawn_centers(settings, Xtr.shape[0])
        m, grid = check_n_centers(size, Xtr.shape[0], strategy)
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

    def solver_memory(self, problem: FitProblem, settings: FitSettings, shape: FitShape) -> int:
        """The solver's own memory: the (m, λ) path's, the direct path's, gradient
        descent's, or CG's, with one Cholesky factor per anchor when that takes at most
        ``memory.SOLVER_SHARE`` of what the copies and n-sized vectors leave of the budget
        (else one eigendecomposition for all of them, else the compact factor in the
        data's precision, else in float32 under float64 data, else one float32 compact
        buffer beyond the share where the budget holds it beside the operators' streamed
        blocks (``solver_room``), else the low-rank preconditioner: ``krylov.cg_layout``)."""
        m, _, n_val, grid, aside = shape
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
        size (``operators.blocks.stream_bytes``: the training and validation operators
        share the rest by rows). The cache it takes from could hold little of K_nm there:
        a float32 buffer larger than the share is more than half of that rest, so the
        rest holds fewer than 8 m (m + 1) bytes, under 2 m / n of K_nm's n m float32
        entries and m / n of its float64 ones. ``itemsize``: the operators' entries."""
        d = int(problem.X.shape[1])
        sparse = not as_rows(problem.X).dense_blocks
        n_jobs = problem.workspace.n_jobs or B.n_threads()
        streams = 2 * stream_bytes(m, d, itemsize, n_jobs, problem.device.is_cuda, sparse)
        return max(0, problem.budget - problem.held - aside - max(streams, MIN_OPERATOR_BYTES))

    def path(self, req: PathRequest, settings: FitSettings) -> Path:
        opts: KernelOptions = settings.options
        op, Ytr, wt, val, sel, grid = (
            req.op,
            req.Y,
            req.weights,
            req.validation,
            req.centers,
            req.grid,
        )
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
            return self.newton(req, settings, opts.method, factor)
        if grid is not None:
            return incremental_nystrom_path(op, Ytr, _grid_or_none(pen), grid, wt, val)
        if opts.method == "direct":
            cv = _smoother(settings, req.classifier)
            return nystrom_direct_path(
                op,
                Ytr,
                _grid_or_none(pen),
                wt,
                val,
                cv,
                factor,
                method=self.direct_spectrum,
                memory_limit=req.memory_limit,
            )
        return iterative_path(
            op,
            Ytr,
            None if isinstance(pen, str) else pen,  # None: the solver's "auto" grid
            self.iteration_options(settings, req.memory_limit),
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
        extra = (self.drawn_centers(settings, problem.n) or 0) - len(taken)
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
        # the default m: the chosen point's centers, grown; a given m: drawn again
        sel = opts.centers if settings.size is not None else self.refit_centers(problem, cand)
        if "n_centers" in best:
            fixed = replace(
                settings,
                penalty=float(best["penalty"]),
                size=int(best["n_centers"]),
                options=replace(opts, method="direct"),
            )
            return self.refit_with(problem, cand, fixed)
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
            again = self.solve(SolveRequest.every_row(problem, cand.kernel, fixed))
            last = int(np.isfinite(again.path.train_error[p]).sum()) - 1
            return again, again.path.coef((p, last if done else min(t, last)))
        carry = best.get("n_iter") if opts.method in ("gd", "nu") else None
        fixed = replace(
            settings,
            penalty=float(best.get("penalty", 0.0)),
            n_iter=carry,
            options=replace(opts, centers=sel),
        )
        return self.refit_with(problem, cand, fixed)


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
