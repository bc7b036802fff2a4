"""Per-feature kernel widths learned from the data (automatic relevance determination).

A radial kernel with one width per feature, ``r^2 = sum_l (x_l - z_l)^2 / sigma_l^2``, is
fitted by minimizing the validation error of a Nyström model on a subsample of the data over
the log widths and the log penalty:

    alpha(theta) = (K_nm^T W K_nm + λ n K_mm + δ n I)^-1 K_nm^T W Y      (training part)
    L(theta)     = sum_i w_i ||K_vm(theta) alpha(theta) - y_i||^2 / (sum_i w_i k)  (validation part)

with δ = ``JITTER`` a constant (K_mm may be singular when the widths are large). The gradient
is exact (one adjoint solve): with R = K_vm alpha - Y, G = dL/d(pred) = 2 W R / (sum w k),
U = A^-1 K_vm^T G,

    dL = <G alpha^T, dK_vm> + <W (Y - K_nm alpha) U^T - W K_nm U alpha^T, dK_nm>
         - λ n <U alpha^T, dK_mm> - λ n <U, K_mm alpha> d log λ,

and every <M, dK> along log sigma_l is one pass of ``operators.gradients.width_gradient``. The
minimizer is L-BFGS-B (SciPy), started from the best point of the ``sigma="auto"`` widths
(one width for all features) and a few penalties on the same subsample.

The objective was chosen by measurement (``benchmarks/ard.py``, ``docs/design.md``): the
hold-out error of one 80/20 split of the subsample, or on small data (``KFOLD_BELOW`` rows)
the mean over 5 folds (``cv="auto"``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse

from . import _backend as B
from ._threads import dense_threads, fit_threaded
from ._validation import check_int, check_rows, check_weights
from .inputs import rows_in_memory
from .kernels import AUTO_WIDTH_FACTORS, Kernel, make_kernel, median_distance
from .operators import KernelOperator
from .operators.gradients import width_gradient
from .selection import holdout_split
from .workspace import Workspace

__all__ = ["learn_widths", "ARD_KERNELS", "width_objective"]

#: Rows the widths are learned on by default (a random subsample of larger data).
N_SUBSAMPLE = 10_000
#: The kernels with widths: Gaussian, Laplacian, Cauchy, Matern (their class names).
ARD_KERNELS = ("Gaussian", "Laplacian", "Cauchy", "Matern")
#: δ of the objective's system, relative to n (K_mm is singular for large widths).
JITTER = 1e-10
#: Bounds of the log penalty and of the widths relative to the median distance.
PENALTY_BOUNDS = (1e-9, 10.0)
WIDTH_BOUNDS = (1e-3, 1e4)
#: ``cv="auto"``: k-fold below this many subsample rows, the hold-out above. Measured
#: (``benchmarks/ard.py``): 5 folds against the hold-out gave test RMSE 4.94 against 5.83 on
#: concrete (824 training rows) and 0.32 against 1.02 on yacht (246), the same on power-plant
#: (7,654: 3.96 both) at 4x the time; on the synthetic data of ``tests/test_ard.py`` (2,400
#: rows, 3 of 8 features relevant) the hold-out left two irrelevant widths at 1x-3x the start
#: and 5 folds widened all five by > 100x (test RMSE 0.036 against 0.10). 3 folds against 5
#: on the small sets: concrete +20% / -13% against "auto", energy -75% / -40%: the spread of
#: one split, not a trend; 5 folds kept.
KFOLD_BELOW = 5000
AUTO_FOLDS = 5
#: Penalties tried with each "auto" width to start the descent (one block per width).
START_PENALTIES = tuple(10.0**-k for k in range(9, 0, -1))
#: The descent stops when the objective fell by less than STOP_TOL (relative) over the last
#: STOP_WINDOW iterations. Measured on wine (5 folds): 0.6096 after 20 iterations, 0.6095
#: after 30, 0.6077 after 76; the last 0.3% of the objective cost two thirds of the time.
STOP_WINDOW = 10
STOP_TOL = 1e-3


def _check_kernel(kernel: Any) -> Kernel:
    k = make_kernel(kernel)
    if type(k).__name__ not in ARD_KERNELS or not hasattr(k, "width_factor"):
        raise ValueError(
            f"kernel: per-feature widths ('ard') need a radial kernel (Gaussian, Laplacian, "
            f"Cauchy or Matern), got {k!r}"
        )
    return k


class _Objective:
    """The validation error of a Nyström fit as a function of theta = (log sigma, log λ),
    with its gradient; the folds and the centers are fixed."""

    def __init__(
        self,
        kernel: Kernel,
        X: np.ndarray,
        Y: np.ndarray,
        w: np.ndarray,
        folds: list[tuple[np.ndarray, np.ndarray]],
        centers: np.ndarray,
        workspace: Workspace,
    ) -> None:
        self.kernel, self.X, self.Y, self.w = kernel, X, Y, w
        self.folds, self.C, self.workspace = folds, centers, workspace
        self.d = X.shape[1]
        self.n_evaluations = 0

    def kernel_at(self, log_sigma: np.ndarray) -> Kernel:
        params = self.kernel.get_params()
        params["sigma"] = np.exp(log_sigma)
        return type(self.kernel)(**params)

    def _blocks(self, k: Kernel) -> tuple[KernelOperator, np.ndarray, list[tuple[Any, ...]]]:
        """The center operator, K_mm and per fold (train operator, K_nm, validation
        operator, K_vm) at the kernel ``k``."""
        ws = self.workspace
        op_c = ws.in_process(self.C, self.C, k)
        blocks = []
        for tr, va in self.folds:
            op_t = ws.in_process(self.X[tr], self.C, k)
            op_v = ws.in_process(self.X[va], self.C, k)
            blocks.append((op_t, op_t.dense(), op_v, op_v.dense()))
        return op_c, op_c.center_gram(), blocks

    def _solve(self, K: np.ndarray, Kmm: np.ndarray, wt: np.ndarray, Yt: np.ndarray, lam: float):
        """The training part: (Cholesky factor of A, alpha, W K_nm), or None when A is not
        positive definite."""
        WK = K * wt[:, None]
        return self._solve_normal(K.T @ WK, WK.T @ Yt, Kmm, len(K), lam) + (WK,)

    @staticmethod
    def _solve_normal(KWK: np.ndarray, KWY: np.ndarray, Kmm: np.ndarray, n: int, lam: float):
        A = KWK + (lam * n) * Kmm
        A[np.diag_indices_from(A)] += JITTER * n
        try:
            with dense_threads(len(A) ** 3 / 3):
                cf = scipy.linalg.cho_factor(A, lower=True)
        except np.linalg.LinAlgError:
            return (None, None)
        return cf, scipy.linalg.cho_solve(cf, KWY)

    def values(self, log_sigma: np.ndarray, penalties: Any) -> list[float]:
        """The objective at one set of widths and several penalties (the blocks and
        K_nm^T W K_nm once)."""
        _, Kmm, blocks = self._blocks(self.kernel_at(log_sigma))
        self.n_evaluations += len(penalties)
        loss = np.zeros(len(penalties))
        for (tr, va), (_, K, _, Kv) in zip(self.folds, blocks, strict=True):
            WK = K * self.w[tr][:, None]
            KWK, KWY = K.T @ WK, WK.T @ self.Y[tr]
            wv = self.w[va]
            for j, lam in enumerate(penalties):
                alpha = self._solve_normal(KWK, KWY, Kmm, len(tr), float(lam))[1]
                if alpha is None:
                    loss[j] = np.inf
                    continue
                R = Kv @ alpha - self.Y[va]
                loss[j] += float(np.sum(wv[:, None] * R * R)) / (wv.sum() * R.shape[1])
        loss /= len(self.folds)
        return [float(v) if np.isfinite(v) else np.inf for v in loss]

    def __call__(self, theta: np.ndarray, grad: bool = True) -> Any:
        theta = np.asarray(theta, dtype=np.float64)
        if not grad:
            return self.values(theta[:-1], [np.exp(theta[-1])])[0]
        self.n_evaluations += 1
        lam = float(np.exp(theta[-1]))
        op_c, Kmm, blocks = self._blocks(self.kernel_at(theta[:-1]))
        loss, g = 0.0, np.zeros(self.d + 1)
        for (tr, va), (op_t, K, op_v, Kv) in zip(self.folds, blocks, strict=True):
            Yt, wt, Yv, wv = self.Y[tr], self.w[tr], self.Y[va], self.w[va]
            n = len(tr)
            cf, alpha, WK = self._solve(K, Kmm, wt, Yt, lam)
            if cf is None:
                return np.inf, np.zeros_like(theta)
            R = Kv @ alpha - Yv
            scale = 1.0 / (wv.sum() * Yv.shape[1])
            loss += scale * float(np.sum(wv[:, None] * R * R))
            Gv = (2.0 * scale) * (wv[:, None] * R)  # dL / d(validation predictions)
            U = scipy.linalg.cho_solve(cf, Kv.T @ Gv)
            res = Yt - K @ alpha
            left = np.hstack([wt[:, None] * res, -(WK @ U)])
            right = np.hstack([U, alpha])
            gw = width_gradient(op_v, Gv, alpha)
            gw += width_gradient(op_t, left, right)
            gw += width_gradient(op_c, (-lam * n) * U, alpha)
            g[:-1] += gw
            g[-1] += -lam * n * float(np.sum(U * (Kmm @ alpha)))
        loss /= len(self.folds)
        g /= len(self.folds)
        if not np.isfinite(loss):
            return np.inf, np.zeros_like(theta)
        return loss, g


def _folds(n: int, cv: Any, validation_fraction: float, rng: np.random.Generator) -> list:
    if cv == "holdout":
        return [holdout_split(n, validation_fraction, rng)]
    perm = rng.permutation(n)
    parts = np.array_split(perm, cv)
    return [
        (np.sort(np.concatenate([p for j, p in enumerate(parts) if j != i])), np.sort(parts[i]))
        for i in range(cv)
    ]


def width_objective(
    kernel: Any,
    X: Any,
    y: Any,
    centers: Any,
    *,
    sample_weight: Any = None,
    validation_fraction: float = 0.2,
    cv: Any = "holdout",
    random_state: Any = None,
    memory_budget: Any = None,
) -> Any:
    """The objective ``learn_widths`` minimizes, as a function ``f(theta, grad=True)`` of
    ``theta = (log sigma_1, ..., log sigma_d, log λ)`` returning ``(value, gradient)`` (or the
    value with ``grad=False``), on all of ``X`` (no subsample) with the given centers.

    For checking the gradient and for plots of the objective; ``kernel`` gives the family
    (and Matern's ``nu``), its widths are those of theta.
    """
    k = _check_kernel(kernel)
    Xa = np.ascontiguousarray(B.to_numpy(X), dtype=np.float64)
    B.check_real(y, "y")
    Y = np.asarray(y, dtype=np.float64)
    Y = Y.reshape(len(Y), -1)
    w = np.ones(len(Xa)) if sample_weight is None else check_weights(sample_weight, len(Xa))
    rng = np.random.default_rng(random_state)
    folds = _folds(len(Xa), cv, validation_fraction, rng)
    C = np.ascontiguousarray(B.to_numpy(centers), dtype=np.float64)
    return _Objective(k, Xa, Y, w, folds, C, Workspace.of(memory_budget))


def _subsample(
    X: Any, y: Any, sample_weight: Any, n_subsample: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(the subsample's indices, its rows as float64, every row's targets (n, k) and
    weights): X and y checked, naming them; only the subsample's rows are read."""
    if scipy.sparse.issparse(X):
        raise TypeError("X must be a dense array, got a sparse matrix: pass X.toarray()")
    if not hasattr(X, "shape"):  # a list of rows
        X = check_rows(X, "X")
    if getattr(X, "ndim", 2) != 2 or len(getattr(X, "shape", ())) != 2:
        raise ValueError(f"X must be 2-D, got shape {getattr(X, 'shape', None)}")
    n = int(X.shape[0])
    B.check_real(y, "y")
    Y = np.asarray(B.to_numpy(y), dtype=np.float64)
    if len(Y) != n:
        raise ValueError(f"y has {len(Y)} rows but X has {n}")
    Y = Y.reshape(n, -1)
    if not np.isfinite(Y).all():
        raise ValueError("y contains NaN or infinity")
    w = np.ones(n) if sample_weight is None else check_weights(sample_weight, n)
    idx = np.arange(n) if n <= n_subsample else np.sort(rng.choice(n, n_subsample, False))
    rows = B.to_numpy(rows_in_memory(X, idx))
    if np.asarray(rows).dtype.kind not in "biuf":
        raise TypeError(f"X must contain real numbers, got dtype {np.asarray(rows).dtype}")
    Xs = np.ascontiguousarray(rows, dtype=np.float64)
    if not np.isfinite(Xs).all():
        raise ValueError("X contains NaN or infinity")
    return idx, Xs, Y, w


def _start(objective: _Objective, med: float, d: int) -> tuple[float, float, float]:
    """(objective, log width, log penalty) of the best of the "auto" widths (one for all
    features) and a few penalties: where the optimization starts."""
    best = (np.inf, np.log(med), np.log(START_PENALTIES[0]))
    for f in AUTO_WIDTH_FACTORS:
        vals = objective.values(np.full(d, np.log(med * f)), START_PENALTIES)
        j = int(np.argmin(vals))
        if vals[j] < best[0]:
            best = (float(vals[j]), float(np.log(med * f)), float(np.log(START_PENALTIES[j])))
    if not np.isfinite(best[0]):
        raise ValueError("the widths' objective could not be computed at any starting width")
    return best


def _minimize(
    objective: _Objective, theta0: np.ndarray, med: float, max_iter: int
) -> scipy.optimize.OptimizeResult:
    """L-BFGS-B from ``theta0`` within the widths' and the penalty's bounds, stopped where
    the objective stops falling (``STOP_WINDOW`` iterations within ``STOP_TOL``)."""
    d = len(theta0) - 1
    lo, hi = np.log(med * WIDTH_BOUNDS[0]), np.log(med * WIDTH_BOUNDS[1])
    bounds = [(lo, hi)] * d + [tuple(np.log(PENALTY_BOUNDS))]
    history: list[float] = []

    def stop_on_plateau(intermediate_result: scipy.optimize.OptimizeResult) -> None:
        history.append(float(intermediate_result.fun))
        if len(history) > STOP_WINDOW:
            before = history[-1 - STOP_WINDOW]
            if before - history[-1] <= STOP_TOL * abs(before):
                raise StopIteration

    return scipy.optimize.minimize(
        objective,
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        callback=stop_on_plateau,
        options={"maxiter": max_iter, "ftol": 1e-10, "gtol": 1e-8},
    )


@fit_threaded
def learn_widths(
    kernel: Any,
    X: Any,
    y: Any,
    *,
    sample_weight: Any = None,
    cv: Any = "auto",
    validation_fraction: float = 0.2,
    n_subsample: int = N_SUBSAMPLE,
    n_centers: int = 500,
    max_iter: int = 100,
    random_state: Any = None,
    memory_budget: Any = None,
    return_info: bool = False,
) -> Any:
    """Learn one width per feature (and a penalty) by minimizing a Nyström model's validation
    error by gradient (ARD).

    Parameters
    ----------
    kernel : Gaussian, Laplacian, Cauchy or Matern (an instance or a name)
        The family; its ``sigma`` is replaced (``"ard"`` or anything else).
    X : array-like of shape (n_samples, n_features)
        Any input an estimator takes (arrays, tensors, row sources, dask arrays): only the
        subsample's rows are read.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Real targets (classifiers pass their ±1 / one-hot codes).
    sample_weight : array-like of shape (n_samples,), default=None
    cv : "auto", "holdout" or int, default="auto"
        The objective: the error on one split of the subsample, or the mean over k folds;
        "auto" is 5 folds when the subsample has fewer than 5,000 rows (where one split's
        validation part is small enough to overfit), else the hold-out.
    validation_fraction : float, default=0.2
        The held-out share of the subsample (``cv="holdout"``).
    n_subsample : int, default=10000
        Rows the widths are learned on (drawn at random; all when fewer).
    n_centers : int, default=500
        Nyström centers of the objective's model (uniform over the subsample).
    max_iter : int, default=100
        L-BFGS-B iterations.
    random_state : int, Generator or None
    memory_budget : int, str or None
        For the kernel blocks (see ``KernelOperator``).
    return_info : bool, default=False
        Also return a dict: ``penalty`` (the learned λ of the subsample model), ``start``
        (the starting width and λ), ``objective_start`` / ``objective_end``,
        ``n_evaluations``, ``n_iter``, ``time``, ``message``.

    Returns
    -------
    kernel : Kernel
        The family with ``sigma`` an array of shape (n_features,) (``kernel.sigma``: a small
        width is a relevant feature).
    info : dict (with ``return_info=True``)
    """
    t0 = time.perf_counter()
    k = _check_kernel(kernel)
    if isinstance(cv, bool) or not (cv in ("auto", "holdout") or isinstance(cv, (int, np.integer))):
        raise ValueError(f"cv must be 'auto', 'holdout' or an integer >= 2, got {cv!r}")
    if cv not in ("auto", "holdout") and cv < 2:
        raise ValueError(f"cv must be 'auto', 'holdout' or an integer >= 2, got {cv!r}")
    if not (isinstance(validation_fraction, (float, int)) and 0 < validation_fraction < 1):
        raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction!r}")
    n_subsample = int(check_int(n_subsample, "n_subsample", 10))
    n_centers = int(check_int(n_centers, "n_centers", 1))
    max_iter = int(check_int(max_iter, "max_iter", 1))
    rng = np.random.default_rng(random_state)
    idx, Xs, Y, w = _subsample(X, y, sample_weight, n_subsample, rng)
    d = Xs.shape[1]
    # the objective in units of the targets' variance: L-BFGS-B's tolerances are absolute
    # and relative to values of order 1 (pumadyn32nh's MSE is 7e-4 in its own units)
    Ys, ws = Y[idx], w[idx]
    dev = Ys - np.average(Ys, axis=0, weights=ws)
    spread = float(np.sqrt(np.average((dev * dev).mean(axis=1), weights=ws)))
    Ys = Ys / (spread if spread > 0 else 1.0)
    if cv == "auto":
        cv = AUTO_FOLDS if len(idx) < KFOLD_BELOW else "holdout"
    if cv != "holdout" and cv > len(idx):
        raise ValueError(f"cv={cv} folds need at least {cv} samples, got {len(idx)}")
    folds = _folds(len(idx), cv, validation_fraction, rng)
    if min(min(len(tr), len(va)) for tr, va in folds) < 1:
        raise ValueError(f"too few samples ({len(idx)}) to hold out a validation set")
    m = min(n_centers, min(len(tr) for tr, _ in folds))
    C = Xs[np.sort(rng.choice(len(Xs), m, replace=False))]
    objective = _Objective(k, Xs, Ys, ws, folds, C, Workspace.of(memory_budget))

    med = median_distance(Xs, rng)
    best = _start(objective, med, d)
    theta0 = np.r_[np.full(d, best[1]), best[2]]
    res = _minimize(objective, theta0, med, max_iter)
    theta = res.x if np.isfinite(res.fun) and res.fun <= best[0] else theta0
    learned = objective.kernel_at(theta[:-1])
    if not return_info:
        return learned
    info = {
        "penalty": float(np.exp(theta[-1])),
        "start": {"sigma": float(np.exp(best[1])), "penalty": float(np.exp(best[2]))},
        "objective_start": best[0],  # validation MSE / variance of y
        "objective_end": float(min(res.fun, best[0])),
        "n_evaluations": objective.n_evaluations,
        "n_iter": int(res.nit),
        "n_subsample": len(idx),
        "n_centers": m,
        "cv": cv,
        "time": time.perf_counter() - t0,
        "message": str(res.message),
    }
    return learned, info
