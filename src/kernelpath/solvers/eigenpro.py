"""EigenPro: stochastic gradient descent preconditioned by the top eigensystem of the kernel
(Ma & Belkin 2017, "Diving into the shallows", Table 2; EigenPro 2, Ma & Belkin 2019, §4).

Kernel EigenPro (in the RKHS). The model is f = sum_i α_i k(x_i, ·) over the n training
points and the loss (1/2n) sum_i (f(x_i) - y_i)^2. A minibatch B of size m takes the step

    α_B <- α_B - (η/m) g,      g = f(X_B) - y_B,

and EigenPro adds, on a fixed subsample S of s points,

    α_S <- α_S + (η/m) E diag(d) E^T K(X_S, X_B) g,   d_i = (1 - τ λ_{q+1} / λ_i) / (s λ_i),

where (λ_i, e_i), i <= q + 1, are the top eigenpairs of K_S / s (e_i unit eigenvectors of
K_S); λ_{q+1} is floored at λ_1 / s (see ``_flatten_level``). It is the step
f <- f - η P ∇ with P = I - sum_i (1 - τ λ_{q+1}/λ_i) ψ_i ⊗ ψ_i and
ψ_i = K(·, X_S) e_i / sqrt(s λ_i) the Nyström extensions of the covariance operator's
eigenfunctions: the top q directions are flattened to τ λ_{q+1}, so a step size about
λ_1 / λ_{q+1} times larger is stable. τ <= 1 is the damping. q = 0 is plain kernel SGD.

Step and batch sizes (EigenPro 2): β = max_x of the preconditioned k(x, x) (on the
subsample), batch size m = min(β / λ_{q+1} + 1, what the memory budget allows, n) and
η = m / (β + (m - 1) λ_{q+1}) (≈ m / β below the critical batch size β / λ_{q+1}).

EigenPro on random features (primal): f = φ(x)^T w, the step w <- w - (η/m) P Φ_B^T g with
P = I - V_q diag(1 - τ λ_{q+1}/λ_i) V_q^T from the top eigenpairs of Φ_S^T Φ_S / s.

The eigensystem comes from a dense ``scipy.linalg.eigh`` restricted to the top q + 1 pairs:
seconds for s of a few thousand on two cores (the reference code's default iterative
eigensolver does not finish in minutes here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from .._backend import FACTOR_DTYPE
from .._threads import dense_threads
from ..inputs import take_rows
from ..kernels import Kernel
from ..linalg import EIGH_FLOPS
from ..operators.features import BLOCK_BYTES
from ..path import Path
from ..progress import report
from ..selection import EarlyStopping
from ..workspace import Workspace
from ._common import Validation, as_2d

__all__ = [
    "EigenSystem",
    "kernel_eigensystem",
    "feature_eigensystem",
    "step_rule",
    "weighted_step",
    "paper_step_rule",
    "reference_step_rule",
    "PAPER_SUBSAMPLE_SIZE",
    "default_damping",
    "STEP_RULES",
    "PAPER_BATCH_SIZE",
    "sgd_path",
    "kernel_sgd_steps",
    "feature_sgd_steps",
]


@dataclass
class EigenSystem:
    """Top eigenpairs of the subsample operator and the preconditioner built from them.

    Attributes
    ----------
    values : ndarray of shape (q,)
        λ_1 >= ... >= λ_q (of K_S / s, or Φ_S^T Φ_S / s).
    vectors : ndarray of shape (s, q) or (D, q)
        Unit eigenvectors.
    tail : float
        λ_{q+1}, the top eigenvalue after preconditioning.
    damping : float
        τ.
    beta : float
        Largest preconditioned k(x, x) on the subsample.
    """

    values: np.ndarray
    vectors: np.ndarray
    tail: float
    damping: float
    beta: float

    @property
    def q(self) -> int:
        return len(self.values)

    def scales(self) -> np.ndarray:
        """1 - τ λ_{q+1} / λ_i: how much of each top direction the preconditioner removes."""
        return 1.0 - self.damping * self.tail / self.values


def _top_pairs(M: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    size = len(M)
    count = min(count, size)
    with dense_threads(EIGH_FLOPS * size**3):
        try:
            vals, vecs = scipy.linalg.eigh(
                M, subset_by_index=[size - count, size - 1], driver="evr", check_finite=False
            )
        except np.linalg.LinAlgError:  # MRRR fails on some near-low-rank matrices (wide kernels)
            vals, vecs = np.empty(0), np.empty((size, 0))
        if len(vals) < count:
            vals, vecs = scipy.linalg.eigh(M, driver="evd", check_finite=False)
            vals, vecs = vals[size - count :], vecs[:, size - count :]
    return np.maximum(vals[::-1], 0.0), vecs[:, ::-1]


def _flatten_level(vals: np.ndarray, q: int, s: int) -> tuple[int, float]:
    """(q_eff, λ~): the level the top directions are flattened to is λ_{q+1}, but not below
    λ_1 / s: a subsample of s points estimates the eigenvalues only to about λ_1 / sqrt(s)
    and its eigenfunctions represent the whole data's operator even less well below that,
    and flattening to a numerically zero λ_{q+1} (a rank-deficient K_S) gives an unbounded
    step. Only the directions above the level are flattened (measured: 2-D blobs with
    s = 240, q = 160 diverged with λ_{q+1} = 0; digits keep a 1100x flatter spectrum)."""
    if len(vals) == 0 or vals[0] <= 0:
        return 0, 0.0
    level = max(float(vals[q]) if len(vals) > q else 0.0, float(vals[0]) / s)
    q_eff = int(np.count_nonzero(vals[:q] > level))
    return q_eff, level


def kernel_eigensystem(K_s: np.ndarray, q: int, damping: float) -> EigenSystem:
    """Top-q eigensystem of K_S / s for kernel EigenPro (q = 0: no preconditioning).

    Parameters
    ----------
    K_s : ndarray of shape (s, s)
        Kernel matrix of the subsample.
    q : int
        Number of directions to flatten (q < s).
    damping : float in (0, 1]
    """
    s = len(K_s)
    vals, vecs = _top_pairs(np.asarray(K_s, dtype=FACTOR_DTYPE) / s, q + 1)
    q_eff, tail = _flatten_level(vals, q, s) if q else (0, float(vals[0]))
    es = EigenSystem(vals[:q_eff], vecs[:, :q_eff], tail, damping, 0.0)
    # preconditioned k(x_j, x_j) on the subsample: K_jj - sum_i c_i s λ_i e_i[j]^2
    corr = (es.vectors**2) @ (es.scales() * s * es.values) if es.q else 0.0
    es.beta = float(np.max(np.diag(K_s) - corr))
    return es


def feature_eigensystem(Phi_s: np.ndarray, q: int, damping: float) -> EigenSystem:
    """Top-q eigensystem of Φ_S^T Φ_S / s for EigenPro on features."""
    s = len(Phi_s)
    P = np.asarray(Phi_s, dtype=FACTOR_DTYPE)
    vals, vecs = _top_pairs(P.T @ P / s, q + 1)
    q_eff, tail = _flatten_level(vals, q, s) if q else (0, float(vals[0]))
    es = EigenSystem(vals[:q_eff], vecs[:, :q_eff], tail, damping, 0.0)
    norms = np.einsum("ij,ij->i", P, P)
    if es.q:
        proj = P @ es.vectors
        norms = norms - (proj**2) @ es.scales()
    es.beta = float(np.max(norms))
    return es


#: ``rule`` of the EigenPro estimators: EigenPro 2's step and batch size, the seed paper's as
#: printed, or as its released code sets them.
STEP_RULES = ("eigenpro2", "paper", "reference")
#: The minibatch of the seed paper's experiments (Sec. 6, "Hyperparameters": m = 256).
PAPER_BATCH_SIZE = 256
#: The seed paper's subsample for the eigensystem (Sec. 6 and Appendix A: M = 4800).
PAPER_SUBSAMPLE_SIZE = 4800


def _tail(es: EigenSystem) -> float:
    return max(es.tail, 1e-12 * max(es.beta, 1e-300))


def _paper_batch(n: int, batch_size: int | None) -> int:
    """The seed paper's minibatch 256 (or ``batch_size``), at most n and at least 1."""
    return max(int(min(PAPER_BATCH_SIZE if batch_size is None else batch_size, n)), 1)


def paper_step_rule(es: EigenSystem, n: int, batch_size: int | None = None) -> tuple[int, float]:
    """The seed paper's batch size and step as printed (Ma & Belkin 2017, Sec. 4, the text
    after eq. 22): the minibatch m = 256 (or ``batch_size``) and η ~ √(m / λ_{k+1}(𝒦)), taken
    with the constant 1, the only one the text gives. 𝒦 = (2/n) Σ k(x_i, .) ⊗ k(x_i, .) is the
    paper's covariance operator (Sec. 3.2), so λ_{k+1}(𝒦) = 2 λ_{q+1} with λ the eigenvalues of
    K / n used here; and the paper's iteration f <- f - η P(𝒦 f - b) takes the gradient of
    (1/n) sum (f(x_i) - y_i)^2, twice the gradient of this solver's loss (1/2n) sum (...)^2.
    In this solver's scaling the step is therefore 2 √(m / (2 λ_{q+1})) = √(2 m / λ_{q+1}).
    It shrinks with the batch as eq. 21-22's dominant term √(2 λ_{k+1} κ / m) says it should,
    but, unlike EigenPro 2's rule, nothing keeps it below 2 / ||P K_m|| for a given batch."""
    m = _paper_batch(n, batch_size)
    return m, float(np.sqrt(2.0 * m / _tail(es)))


def reference_step_rule(
    es: EigenSystem, n: int, batch_size: int | None = None
) -> tuple[int, float]:
    """The seed paper's batch size and step as its released MATLAB and Keras code sets them:
    plain SGD takes η_SGD = 1.5 / λ_1 for the loss (1/2n) sum (f(x_i) - y_i)^2 (the released
    code's 1.5 / (2 λ_1) for the loss without the 1/2), and EigenPro multiplies it by the
    acceleration λ_1 / λ_{q+1}: η = 1.5 / λ_{q+1}, below the full-gradient bound 2 / λ_{q+1} of
    the preconditioned operator, with the minibatch of 256 (or ``batch_size``; the step does
    not depend on it). No batch-size correction: a small batch with a large β / λ_{q+1} can
    diverge, which is what EigenPro 2's rule fixes (and why it is the default)."""
    return _paper_batch(n, batch_size), 1.5 / _tail(es)


def default_damping(rule: str, features: bool) -> float:
    """τ when ``damping="auto"``: EigenPro 2's 0.95, or the seed paper's 1 for kernels and
    1/4 for random features (Sec. 6 prints them; its released code uses the same)."""
    if rule in ("paper", "reference"):
        return 0.25 if features else 1.0
    return 0.95


def step_rule(
    es: EigenSystem, n: int, max_batch: int, batch_size: int | None = None
) -> tuple[int, float]:
    """EigenPro 2's batch size min(β/λ_{q+1} + 1, max_batch, n) (or ``batch_size``, at most
    n) and its step m / (β + (m-1) λ_{q+1}) for that batch size m."""
    lam = max(es.tail, 1e-12 * es.beta)
    if batch_size is None:
        m = max(int(min(es.beta / lam + 1, max_batch, n)), 1)
    else:
        m = int(min(batch_size, n))
    return m, m / (es.beta + (m - 1) * lam)


def weighted_step(es: EigenSystem, m: int, eta: float, w_max: float) -> float:
    """The step ``eta`` of a rule for unit weights, for weights (mean 1) up to ``w_max``: a
    sample's gradient is multiplied by its weight, so the one-sample term β of EigenPro 2's
    bound m / (β + (m-1) λ_{q+1}) becomes w_max β; the step shrinks by that bound's ratio
    (unchanged for w_max <= 1). Without it, one row holding all the weight (w = n)
    diverged."""
    if not w_max > 1.0:
        return eta
    lam = max(es.tail, 1e-12 * es.beta)
    return eta * (es.beta + (m - 1) * lam) / (w_max * es.beta + (m - 1) * lam)


def sgd_path(
    n: int,
    Y: np.ndarray,
    predict_batch: Callable[[np.ndarray, np.ndarray], np.ndarray],
    apply_step: Callable[[np.ndarray, np.ndarray, np.ndarray, float], None],
    coef: np.ndarray,
    n_epochs: int,
    batch_size: int,
    step: float,
    rng: np.random.Generator,
    validation: Validation | None,
    n_iter_no_change: int | None,
    tol: float,
    info: dict[str, Any],
    weights: np.ndarray | None = None,
) -> Path:
    """The epoch loop shared by kernel and feature EigenPro: a path over epochs.

    ``predict_batch(idx, coef)`` gives f(X_idx); ``apply_step(idx, g, coef, eta)`` updates
    ``coef`` in place for the residuals g on the batch. The training error of an epoch is
    the mean squared residual of its batches, each measured before its own step. With
    ``weights`` (summing to n) each residual is weighted in the step.
    """
    Y2 = as_2d(Y)
    k = Y2.shape[1]
    train = np.full(n_epochs, np.nan)
    val_err = None if validation is None else np.full(n_epochs, np.nan)
    val_loss = None if validation is None else np.full(n_epochs, np.nan)
    stopper = EarlyStopping(1, n_iter_no_change, tol) if validation is not None else None
    stored: dict[tuple[int, ...], np.ndarray] = {}
    best = (np.inf, np.inf)
    for epoch in range(n_epochs):
        order = rng.permutation(n)
        sq = 0.0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            g = predict_batch(idx, coef) - Y2[idx]
            sq += float((g * g).sum())
            apply_step(idx, g if weights is None else weights[idx, None] * g, coef, step)
        if not np.all(np.isfinite(coef)):
            raise FloatingPointError(
                "EigenPro diverged (non-finite coefficients): give a smaller step_size"
            )
        train[epoch] = sq / (n * k)
        if validation is not None and val_err is not None and val_loss is not None:
            F = np.asarray(validation.op.matvec(coef), dtype=FACTOR_DTYPE).reshape(-1, k)
            e, loss = validation.errors(F, k)
            val_err[epoch], val_loss[epoch] = float(e[0]), float(loss[0])
            # keep the coefficients of the point Path will choose (error, then loss)
            if (val_err[epoch], val_loss[epoch]) < best:
                best = (float(val_err[epoch]), float(val_loss[epoch]))
                stored = {(epoch,): coef.copy()}
            assert stopper is not None
            stopper.update(epoch, np.array([val_loss[epoch]]))
            if not stopper.active[0]:
                break
        else:
            stored = {(epoch,): coef.copy()}
        best_val = {} if val_err is None else {"best_val": float(np.nanmin(val_err[: epoch + 1]))}
        report("epochs", epoch + 1, n_epochs, **best_val)
    last = int(np.flatnonzero(np.isfinite(train))[-1])
    if (last,) not in stored:
        stored[(last,)] = coef.copy()
    return Path(
        {"n_epochs": np.arange(1, n_epochs + 1)},
        train,
        val_err,
        coef_fn=None,
        scoring=validation.scoring if validation is not None else "mse",
        best_index=None,
        stored=stored,
        val_loss=val_loss,
        info=dict(info, batch_size=batch_size, step_size=step, epochs_run=last + 1),
    )


def eigenpro_memory(
    n: int, s: int, q: int, k: int, n_val: int, n_features: int | None = None
) -> int:
    """Bytes EigenPro holds beside the data and its batches' kernel blocks: the subsample's
    kernel matrix and its top eigenpairs (three s x s: K_S, its scaled copy and the
    eigensolver's), the coefficients (n x k, and the best ones), the validation
    predictions; with ``n_features`` D the subsample's features (s x D), Φ_S^T Φ_S and its
    eigensolver's (three D x D) and three blocks of validation features in flight."""
    preds = 2 * n_val * k
    if n_features is None:
        return 8 * (3 * s * s + 2 * s * (q + 1) + 2 * n * k + preds)
    D = n_features
    return 8 * (s * D + 3 * D * D + 2 * D * (q + 1) + 2 * D * k + preds) + 3 * BLOCK_BYTES


def kernel_sgd_steps(
    X: np.ndarray, kernel: Kernel, subsample: np.ndarray, es: EigenSystem, workspace: Workspace
) -> tuple[
    Callable[[np.ndarray, np.ndarray], np.ndarray],
    Callable[[np.ndarray, np.ndarray, np.ndarray, float], None],
]:
    """(predict_batch, apply_step) of kernel EigenPro on the training points X, their
    kernel blocks within ``workspace``'s budget."""
    Xs = take_rows(X, subsample)
    d_scale = es.scales() / (len(subsample) * es.values) if es.q else np.zeros(0)
    E = es.vectors

    def predict_batch(idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        op = workspace.operator(take_rows(X, idx), X, kernel, cache=False)
        return np.asarray(op.matvec(coef), dtype=FACTOR_DTYPE)

    def apply_step(idx: np.ndarray, g: np.ndarray, coef: np.ndarray, eta: float) -> None:
        m = len(idx)
        coef[idx] -= (eta / m) * g  # idx has no repeats (a slice of a permutation)
        if es.q:
            K_bs = workspace.operator(take_rows(X, idx), Xs, kernel, cache=False).dense()
            h = np.asarray(K_bs, dtype=FACTOR_DTYPE).T @ g  # K(X_S, X_B) g, (s, k)
            coef[subsample] += (eta / m) * (E @ (d_scale[:, None] * (E.T @ h)))

    return predict_batch, apply_step


def feature_sgd_steps(
    features: Callable[[np.ndarray], np.ndarray], es: EigenSystem
) -> tuple[
    Callable[[np.ndarray, np.ndarray], np.ndarray],
    Callable[[np.ndarray, np.ndarray, np.ndarray, float], None],
]:
    """(predict_batch, apply_step) of EigenPro on an explicit feature map;
    ``features(idx)`` returns Φ(X_idx)."""
    V = es.vectors
    c = es.scales() if es.q else np.zeros(0)

    def predict_batch(idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        return np.asarray(features(idx) @ coef, dtype=FACTOR_DTYPE)

    def apply_step(idx: np.ndarray, g: np.ndarray, coef: np.ndarray, eta: float) -> None:
        grad = np.asarray(features(idx), dtype=FACTOR_DTYPE).T @ g / len(idx)
        if es.q:
            grad -= V @ (c[:, None] * (V.T @ grad))
        coef -= eta * grad

    return predict_batch, apply_step
