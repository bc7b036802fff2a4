"""What a solver family is asked by the search and the estimators: its options, its path,
the closed-form selection it offers, one candidate fit, the refit, and its model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import _backend as B
from .._validation import check_choice, check_float, check_int, check_penalty, make_rng
from ..inputs import as_rows, is_sparse, rows_in_memory
from ..kernels import Kernel
from ..operators.protocol import KernelProducts, Operator
from ..path import Path
from ..solvers._common import Validation
from ..solvers.losses import LOSSES
from ..workspace import Workspace
from .memory import MIN_OPERATOR_BYTES
from .problem import CandidateFit, FitProblem, FitSettings, SolveRequest

__all__ = [
    "Family",
    "FittedModel",
    "SCREEN_MIN_ROWS",
    "check_loss",
    "newton_intercept",
    "kernel_operators",
    "validation",
    "in_memory",
    "candidate_scores",
]

#: The fewest rows of a screening round (successive halving).
SCREEN_MIN_ROWS = 2000


@dataclass(frozen=True)
class FitCost:
    """A fit's estimated cost: seconds on the machine the constant was measured on, peak
    bytes, and the sizes of the dense factorizations behind them."""

    seconds: float
    bytes: int
    sizes: tuple[int, ...]
    #: Set where the cost is worth a warning: what to use instead.
    advice: str | None = None

    def describe(self) -> str:
        minutes = self.seconds / 60
        took = f"{self.seconds:.0f} s" if minutes < 2 else f"{minutes:.0f} min"
        sizes = " + ".join(f"{s:,}" for s in self.sizes)
        return (
            f"estimated cost: about {took} and {self.bytes / 1e9:.1f} GB at the peak "
            f"(dense factorizations of {sizes} rows, on a 2-core machine)"
        )


@dataclass(frozen=True)
class FittedModel:
    """What a prediction reads of a fitted model: its coefficients and intercept, its
    kernel, and its centers (a kernel expansion) or its feature map (a primal model, of
    ``n_features`` features)."""

    coef: Any
    intercept: Any
    kernel: Kernel
    centers: Any = None
    features: Any = None
    n_features: int | None = None

    @classmethod
    def of(cls, attrs: Mapping[str, Any]) -> FittedModel:
        """From fitted attributes: an estimator's, or ``Family.model``'s with ``coef_``,
        ``intercept_`` and ``kernel_``."""
        return cls(
            attrs["coef_"],
            attrs["intercept_"],
            attrs["kernel_"],
            attrs.get("centers_"),
            attrs.get("features_"),
            attrs.get("n_features_"),
        )


class Family:
    """A solver family (exact KRLS, Nyström, NYTRO, random features, SGM, EigenPro).

    Families hold no state: what a fit needs travels in ``FitProblem`` and
    ``FitSettings`` (whose ``options`` are the family's own checked parameters), and what
    it produces in ``CandidateFit``. Subclasses implement ``solve`` and ``model``; the
    rest has defaults that say "no".
    """

    #: The estimator parameter whose sequence or "auto" value makes a path over the size.
    size_param = "n_centers"
    #: Whether the family fits on dask arrays (its operator's products on the workers).
    takes_dask = False
    #: Whether its fits take scipy.sparse rows (the kernels' sparse block products).
    takes_sparse = True
    #: Why X must be in memory, or None when it is read in blocks.
    in_memory: str | None = None
    #: Whether a width search (``widths.choose_width``) scores widths with the family's
    #: own solver: NYTRO, SGM and EigenPro, whose iteration, step and epoch budget decides
    #: which widths they can fit (a wide kernel is ill-conditioned: at the width the closed
    #: form chose, NYTRO and SGM failed scikit-learn's training-score check), and random
    #: features, whose D decides it; else Nyström KRLS's closed form.
    screens_with_own_solver = False
    #: Whether the best width found on a subsample is shifted for the rows it left out
    #: (``widths.WIDTH_SHIFT``, measured for models whose size grows with n: Nyström's
    #: m ~ sqrt(n)); False for random features (a fixed D) and NYTRO (regularized by its
    #: iteration count), where the shift moved the width away from the best
    #: (benchmarks/results/defaults.json).
    shifts_width = True
    #: Whether the model is a kernel expansion over centers, f = K(., centers) coef (its
    #: gradients give ``sigma="agop"`` its metric, ``agop.model_gradient_outer``).
    expands_centers = False
    #: Whether a default fit may grow its number of centers (``fitting.growth``).
    grows_centers = False

    # ------------------------------------------------------------------ settings
    def settings(self, params: Mapping[str, Any]) -> FitSettings:
        """The estimator's parameters checked: the common ones and ``options``."""
        penalty = self.check_penalty(params)
        fraction = check_float(
            params["validation_fraction"], "validation_fraction", 0.0, 1.0, high_open=True
        )
        patience = check_int(params.get("n_iter_no_change"), "n_iter_no_change", 1, allow_none=True)
        tol = check_float(params.get("tol", 0.0), "tol", 0.0, np.inf, high_open=True)
        rng = make_rng(params["random_state"])
        refit = params["refit"]
        if isinstance(refit, str):
            if refit != "auto":
                raise ValueError(f"refit must be True, False or 'auto', got {refit!r}")
        elif not isinstance(refit, (bool, np.bool_)):
            raise TypeError(f"refit must be True, False or 'auto', got {refit!r}")
        return FitSettings(
            penalty=penalty,
            rng=rng,
            validation_fraction=fraction,
            n_iter_no_change=patience,
            tol=tol,
            refit=refit if isinstance(refit, str) else bool(refit),
            options=self.options(params),
            size=params.get(self.size_param),
        )

    def check_penalty(self, params: Mapping[str, Any]) -> Any:
        return check_penalty(params["penalty"])

    def options(self, params: Mapping[str, Any]) -> Any:
        """The family's own parameters, checked (a frozen dataclass)."""
        return None

    def fourier_features(self, params: Mapping[str, Any]) -> bool:
        """Whether the fit draws random Fourier maps (with ``scale`` on, relative to the
        training columns' means: ``FitProblem.center``)."""
        return False

    def method(self, params: Mapping[str, Any]) -> str:
        """The solver or filter the parameters name."""
        raise NotImplementedError

    # ------------------------------------------------------------------ what it offers
    def size_path(self, settings: FitSettings) -> bool:
        """Whether the size parameter asks for a path (a sequence or "auto")."""
        size = settings.size
        return isinstance(size, str) or (size is not None and np.ndim(size) == 1)

    def has_path(self, settings: FitSettings, method: str) -> bool:
        """Whether a fit makes a path to select on (else one model)."""
        return self.size_path(settings) or not isinstance(settings.penalty, float)

    def closed_form(self, method: str) -> bool:
        """Whether ``method``'s chosen point is a closed form at its λ (its refit is one
        more solve, stable in n); an iterate's regularization depends on n instead."""
        return False

    def unused_penalty(self, method: str) -> bool:
        """Whether ``method`` ignores ``penalty`` (its path is over iterations)."""
        return False

    def smoother_modes(self, settings: FitSettings, method: str) -> tuple[str, ...]:
        """The cv modes it offers in closed form ("loo", "gcv")."""
        return ()

    def native_probabilities(self, settings: FitSettings) -> bool:
        """Whether the model's scores are logits of its loss (the logistic loss): its
        probabilities need no calibration."""
        return getattr(settings.options, "loss", "square") == "logistic"

    def describe(self, settings: FitSettings, method: str) -> str:
        if self.size_path(settings):
            return f"a path over {self.size_param}"
        return f"solver/filter {method!r}"

    def draws_default_centers(self, settings: FitSettings) -> bool:
        """Whether the fit draws the default number of centers (``n_centers=None``)."""
        return False

    def drawn_centers(self, settings: FitSettings, n_rows: int) -> int | None:
        """The number of centers a fit on ``n_rows`` rows draws (None: the family draws
        none, or not a number fixed before the fit)."""
        return None

    def max_iter(self, settings: FitSettings) -> int | None:
        """The most iterations a fit runs (None: not an iterative path with a cap in its
        options)."""
        return None

    def screen(self, settings: FitSettings, fraction: float, n_rows: int) -> FitSettings:
        """A screening round's settings on ``fraction`` of the ``n_rows`` training rows."""
        return settings

    def screen_floor(self, settings: FitSettings, n_rows: int) -> int:
        """The fewest training rows a screening round fits on."""
        return SCREEN_MIN_ROWS

    # ------------------------------------------------------------------ fits
    def check_memory(self, problem: FitProblem, plan: Any, settings: FitSettings) -> None:
        """Refuse, before any work, a ``memory_budget`` that the plan's largest fits
        (``memory.main_fits``) cannot live in: the width screen and the search fit smaller
        problems first, so such a budget was refused only after them (EigenPro: 35 s into a
        200,000-point fit). Families whose fits size themselves to the budget check
        nothing here."""
        return None

    def cost(self, problem: FitProblem, plan: Any) -> FitCost | None:
        """The fit's time and peak memory, estimated from the plan (a ``SelectionPlan``)
        before its largest step; None where the family has no cost model."""
        return None

    def solve(self, request: SolveRequest) -> CandidateFit:
        """The path of ``request.kernel`` fit on its rows, scored on its validation rows
        (or in closed form, ``settings.cv_mode``)."""
        raise NotImplementedError

    def refit(self, problem: FitProblem, cand: CandidateFit) -> tuple[CandidateFit, np.ndarray]:
        """(the fit on all the rows at the chosen point of ``cand``, its coefficients).
        Default: the closed form at the chosen penalty."""
        best = cand.path.best_params
        fixed = replace(cand.settings, penalty=float(best.get("penalty", 0.0)))
        return self.refit_with(problem, cand, fixed)

    def refit_with(
        self,
        problem: FitProblem,
        cand: CandidateFit,
        settings: FitSettings,
        index: tuple[int, ...] | None = None,
    ) -> tuple[CandidateFit, np.ndarray]:
        """(``cand``'s kernel fit again on all the rows with ``settings``, the coefficients
        at ``index`` of that fit's path; None: its best point): what every refit ends in."""
        again = self.solve(SolveRequest.every_row(problem, cand.kernel, settings))
        return again, again.path.coef(index)

    def newton_refit(
        self, problem: FitProblem, cand: CandidateFit
    ) -> tuple[CandidateFit, np.ndarray]:
        """A Newton loss's refit on all the rows (``solvers.newton``): the path's penalties
        down to the chosen one, each solve warm-started from the last (cheaper and safer
        than Newton from zero at a small λ)."""
        path = cand.path
        (p,) = path.best_index
        fixed = replace(
            cand.settings, penalty=np.asarray(path.params["penalty"][: p + 1]), n_iter=None
        )
        return self.refit_with(problem, cand, fixed, (p,))

    def path_penalties(self, path: Path) -> np.ndarray:
        """The λ grid of a path (its own λ at the largest size for a path over sizes):
        what the other folds of a k-fold search reuse."""
        lam = np.asarray(path.params["penalty"], dtype=float)
        if lam.ndim == 1:
            return lam
        return lam[:, 0] if path.param_names[0] == "penalty" else lam[-1, :]

    # ------------------------------------------------------------------ the model
    def model(self, cand: CandidateFit, coef: np.ndarray) -> dict[str, Any]:
        """The fitted attributes (but ``coef_`` and ``intercept_``) of the model made of
        ``coef`` on ``cand``, and ``"coef"`` / ``"intercept"``: the model's own."""
        raise NotImplementedError

    def decision(self, model: FittedModel, X: Any, workspace: Workspace) -> Any:
        """f(X) of the fitted ``model``, X validated and on the prediction device (NumPy or
        a tensor there), within ``workspace``'s budget."""
        raise NotImplementedError


def newton_intercept(cand: CandidateFit, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(coefficients, intercept) of a point of ``cand``'s path: a Newton loss's path keeps
    its intercept as the coefficients' last row; the square loss's is ``cand.intercept``."""
    coef = np.asarray(coef)
    if getattr(cand.settings.options, "loss", "square") == "square":
        return coef, cand.intercept
    return coef[:-1], coef[-1].astype(np.float64)


def check_loss(params: Mapping[str, Any], allowed: tuple[str, ...] = LOSSES) -> str:
    """The ``loss`` of a classifier's parameters ("square" where there is none)."""
    loss = params.get("loss", "square")
    if isinstance(loss, str) and loss not in allowed and loss in LOSSES:
        raise ValueError(
            f"loss={loss!r} is not available here: this estimator fits the square loss only "
            "(NystromClassifier, KRLSClassifier and RandomFeaturesClassifier take "
            "'logistic' and 'squared_hinge')"
        )
    return check_choice(loss, "loss", allowed)


#: What fits data larger than memory (``in_memory``'s refusal).
LARGER_THAN_MEMORY = (
    "for data larger than memory use NystromRegressor / NystromClassifier, NYTRO, "
    "RandomFeatures or SGM"
)


def in_memory(X: Any, budget: int, who: str, why: str, instead: str = LARGER_THAN_MEMORY) -> Any:
    """X (a row source or a dask array) loaded into memory where a method needs it whole
    (``why``), if it fits ``budget``; else refused, naming what fits it ``instead``."""
    if not B.is_lazy(X):
        return X
    need = int(np.prod(X.shape)) * np.dtype(X.dtype).itemsize
    if need > budget:
        kind = "a dask array" if B.is_dask(X) else "rows read from disk"
        raise ValueError(
            f"{who} {why}: X ({kind}, {need / 1e9:.2f} GB) does not fit "
            f"memory_budget={budget / 1e9:.2f} GB; {instead}"
        )
    rows = as_rows(X).read(0, X.shape[0])  # CSR for a dask array of sparse chunks
    return rows if is_sparse(rows) else np.ascontiguousarray(rows)


def kernel_operators(
    kernel: Kernel, Xtr: Any, Xva: Any, centers: Any, workspace: Workspace
) -> tuple[KernelProducts, KernelProducts | None]:
    """The training and validation operators against ``centers``, sharing the budget of
    ``workspace`` (what ``memory.operator_budget`` left them) by rows."""
    n_tr = Xtr.shape[0]
    n_va = 0 if Xva is None else Xva.shape[0]
    share = n_tr / (n_tr + n_va)
    op = workspace.share(workspace.budget * share).operator(Xtr, centers, kernel)
    vop = None
    if Xva is not None:
        vop = workspace.share(workspace.budget * (1 - share)).operator(Xva, centers, kernel)
    return op, vop


def validation(
    problem: FitProblem, op: Operator | None, val_rows: np.ndarray | None, intercept: np.ndarray
) -> Validation | None:
    """The validation set of ``val_rows`` seen through ``op``, targets centered like the
    training targets."""
    if op is None or val_rows is None:
        return None
    # the hold-out is scored with the weights the fit is given (sample and class weights)
    w = problem.scoring_weights(val_rows)
    return Validation(op, problem.Y[val_rows] - intercept, problem.scoring, w)


def candidate_scores(
    family: Family, problem: FitProblem, cand: CandidateFit, coef: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """The scores f(X[rows]) of the model made of ``coef`` on ``cand``, (len(rows), k),
    computed within the rows' share of the budget (the share a fit's validation operator
    gets: the fit's other operators and copies may still be alive)."""
    attrs = family.model(cand, coef)
    share = max(MIN_OPERATOR_BYTES, problem.budget * len(rows) // max(problem.n, 1))
    model = FittedModel.of(
        {
            **attrs,
            "coef_": np.asarray(attrs["coef"]),
            "intercept_": np.asarray(attrs["intercept"]),
            "kernel_": cand.kernel,
        }
    )
    X = rows_in_memory(problem.X, rows)
    F = family.decision(model, X, problem.workspace.share(share))
    F = np.asarray(B.to_numpy(F), dtype=np.float64)
    return F.reshape(len(rows), -1)
