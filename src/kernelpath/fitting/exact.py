"""Exact KRLS and the spectral filters as a fit family: every training point a center, the
λ path (or the filters' iterations) from one eigendecomposition of K (thesis ch. 3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .._validation import check_choice, check_float, check_int
from ..centers import CenterSelection
from ..kernels import Kernel
from ..linalg import FILTERS
from ..path import Path
from ..solvers import exact_path
from ..solvers.newton import newton_memory
from ..solvers.spectral import ITERATION_FILTERS
from .family import FitCost, check_loss
from .kernel_models import (
    FitShape,
    KernelOptions,
    PathRequest,
    _grid_or_none,
    _KernelModel,
    _smoother,
)
from .problem import CandidateFit, FitProblem, FitSettings

__all__ = ["ExactFamily"]

#: n x n matrices exact KRLS holds beside K at its peak (dsyevd's vectors and workspace,
#: kept over dsyevr, one n x n less, for its speed: n = 4000, 6.3 s against 7.2 s; the
#: leave-one-out adds the squared vectors), measured with tracemalloc (2.6 n^2 with K, 4.0
#: with the leave-one-out; tests/test_memory.py).
EXACT_MATRICES = 2
#: Seconds per n^3 of one exact KRLS eigendecomposition of n rows, with what surrounds it
#: (K, the path, the validation predictions), on this project's 2-core machine at its
#: default threads: the median of ``python benchmarks/krls_cost.py run`` (default fits of
#: 2,000-8,000 rows, fresh processes, results/krls_cost.json: 6.0e-11 to 1.1e-10 per run).
#: At 16,000 rows it gives 9.6 min (an eigendecomposition of 12,800 rows and the refit's of
#: 16,000), where a user measured 10-11 min.
EXACT_SECONDS_PER_N3 = 9.3e-11
#: A default exact fit estimated to take longer than this warns, naming Nyström.
EXACT_WARN_SECONDS = 60.0


class ExactFamily(_KernelModel):
    """Exact KRLS with a spectral-filter path: every training point is a center."""

    in_memory = "keeps every training point as a center"
    explicit = True

    def closed_form(self, method: str) -> bool:
        return method in ("tikhonov", "kols", "tsvd")

    def method(self, params: Mapping[str, Any]) -> str:
        return check_choice(params["filter"], "filter", FILTERS)

    def options(self, params: Mapping[str, Any]) -> KernelOptions:
        method, loss = self.method(params), check_loss(params)
        if loss != "square" and method != "tikhonov":
            raise ValueError(
                f"loss={loss!r} is fit by Newton's method with the Tikhonov penalty: give "
                f"filter='tikhonov', got filter={method!r}"
            )
        # every parameter checked, whether the filter uses it or not (scikit-learn's rule:
        # a bad value is refused at fit, not when another filter first reads it)
        check_int(params.get("max_iter"), "max_iter", 1, allow_none=True)
        check_float(params["nu"], "nu", 0.0, np.inf, low_open=True)
        if isinstance(params["step"], str):
            check_choice(params["step"], "step", ("auto", "thesis"))
        else:
            check_float(params["step"], "step", 0.0, np.inf, low_open=True)
        return KernelOptions(
            method, params.get("max_iter"), nu=params["nu"], step=params["step"], loss=loss
        )

    def size_path(self, settings: FitSettings) -> bool:
        return False

    def unused_penalty(self, method: str) -> bool:
        return method in ("kols", *ITERATION_FILTERS)

    def smoother_modes(self, settings: FitSettings, method: str) -> tuple[str, ...]:
        if settings.options.loss != "square":
            return ()  # no closed-form leave-one-out for the Newton losses
        if method == "tikhonov":
            return ("loo", "gcv")
        return ("gcv",) if method in ("tsvd", "landweber", "nu") else ()

    def centers(
        self, Xtr: Any, kernel: Kernel, settings: FitSettings, budget: int
    ) -> tuple[CenterSelection, np.ndarray | None]:
        return CenterSelection(Xtr, np.arange(Xtr.shape[0]), "all"), None

    def planned_centers(self, settings: FitSettings, n_rows: int) -> int | None:
        return n_rows

    def cost(self, problem: FitProblem, plan: Any) -> FitCost:
        """One eigendecomposition of K per training set the search fits (the hold-out's
        training part, each fold's, all rows for leave-one-out and GCV; per kernel where
        the widths are not screened on a subsample) and one of all rows for the refit, each
        ``EXACT_SECONDS_PER_N3`` n^3 seconds; the peak holds K, ``EXACT_MATRICES`` more
        n x n matrices and, for leave-one-out, the squared vectors."""
        if plan.folds is not None:
            sizes = [len(rows) for rows, _ in plan.folds] * len(plan.kernels)
        elif plan.cv == "holdout":
            sizes = [len(plan.train)]
        else:
            sizes = [problem.n] * len(plan.kernels)
        if plan.refit:
            sizes.append(problem.n)
        big = max(sizes)
        matrices = 1 + EXACT_MATRICES + (plan.cv == "loo")
        seconds = EXACT_SECONDS_PER_N3 * float(sum(float(s) ** 3 for s in sizes))
        advice = None
        if seconds > EXACT_WARN_SECONDS:
            advice = (
                f"exact KRLS on {problem.n:,} rows costs n^3 time and n^2 memory; "
                "NystromRegressor / NystromClassifier fit this size in seconds (their centers "
                "grow as sqrt(n) log n)"
            )
        return FitCost(seconds, 8 * matrices * big * big, tuple(sizes), advice)

    def solver_memory(self, problem: FitProblem, settings: FitSettings, shape: FitShape) -> int:
        """The eigendecomposition of K (n x n: its vectors and workspace,
        ``EXACT_MATRICES``; K itself is held in the operator's share, ``operator_floor``)
        and the coefficients and validation predictions of the path."""
        m, n_val = shape.m, shape.n_val
        P = 20 if isinstance(settings.penalty, str) else int(np.size(settings.penalty))
        k = problem.n_outputs
        if settings.options.loss != "square":  # K's factor, Phi = K R, Newton's matrices
            return 8 * (EXACT_MATRICES + 1) * m * m + newton_memory(m, k, P, m, n_val)
        matrices = EXACT_MATRICES + (settings.cv_mode == "loo")
        return 8 * (matrices * m * m + 3 * (m + n_val) * max(P, 20) * k)

    def operator_floor(self, shape: FitShape) -> int:
        """The training operator makes K whole (n x n) in its share of the budget."""
        m = shape.m
        return int(np.ceil(8 * m * m * (shape.n + shape.n_val) / shape.n))

    def path(self, req: PathRequest, settings: FitSettings) -> Path:
        opts: KernelOptions = settings.options
        if opts.loss != "square":
            return self.newton(req, settings, "direct")
        op, Ytr, wt, val, n_tr = req.op, req.Y, req.weights, req.validation, req.n_rows
        cv = _smoother(settings, req.classifier)
        if opts.method in ITERATION_FILTERS:
            max_iter = self.max_iter(settings)
            nu = check_float(opts.nu, "nu", 0.0, np.inf, low_open=True)
            if isinstance(opts.step, str):
                check_choice(opts.step, "step", ("auto", "thesis"))
                step = None if opts.step == "auto" else 2.0  # η = 2 / n: η n = 2
            else:
                step = check_float(opts.step, "step", 0.0, np.inf, low_open=True) * n_tr
            # the path keeps every iterate's coefficients and filter factors: P x n x (3k + 2)
            per_iter = 8 * n_tr * (3 * Ytr.shape[1] + 2)
            budget = int(getattr(op, "budget", 0) or 0)
            if budget and max_iter * per_iter > budget:
                raise ValueError(
                    f"max_iter={max_iter}: the exact path keeps every iterate of {n_tr} rows "
                    f"({max_iter * per_iter / 2**20:.0f} MiB), beyond memory_budget "
                    f"({budget / 2**20:.0f} MiB); give max_iter <= {budget // per_iter} or a "
                    "larger memory_budget"
                )
            return exact_path(
                op, Ytr, opts.method, np.arange(1, max_iter + 1), wt, val, cv=cv, nu=nu, step=step
            )
        return exact_path(op, Ytr, opts.method, _grid_or_none(settings.penalty), wt, val, cv=cv)

    def refit(self, problem: FitProblem, cand: CandidateFit) -> tuple[CandidateFit, np.ndarray]:
        best = cand.path.best_params
        opts: KernelOptions = cand.settings.options
        if opts.loss != "square":
            return self.newton_refit(problem, cand)
        carry = best.get("n_iter") if opts.method in ("nu", "landweber") else None
        fixed = replace(cand.settings, penalty=float(best.get("penalty", 0.0)), n_iter=carry)
        return self.refit_with(problem, cand, fixed)
