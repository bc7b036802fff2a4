"""Newton's method for the smooth convex classification losses (``solvers.losses``) on a
kernel model, along a decreasing λ path with warm starts.

The model is f(x) = phi(x)^T beta + b with phi(x) = R^T k_m(x) the Nyström features (R the
factor of K_mm^+, ``linalg.nystrom_factor``: ||f||_H^2 = ||beta||^2, alpha = R beta), or
random features (R = I). For each λ of the path it minimizes

    J(beta, b) = sum_i w_i l(y_i, f(x_i)) / sum_i w_i + λ ||beta||^2,

the intercept b unpenalized (as scikit-learn's ``LogisticRegression``: C = 1 / (2 n λ) with
sum_i w_i = n). Newton step: H d = -g with

    g = Phi^T (w l'(F)) / sum w + 2 λ [beta; 0],
    H = Phi^T diag(w l''(F)) Phi / sum w + 2 λ diag(1, ..., 1, 0)     (Phi with a ones column)

(the multinomial loss: the rows' k x k Hessians diag(p) - p p^T in place of l''), a
backtracking line search on J (Armijo), and a stop when half the squared Newton decrement
g^T H^-1 g, which bounds the gap to the minimum near it, is at most tol^2 J.

``method="direct"``: H is formed (one weighted Gram matrix Phi^T D Phi, a pass of O(n m^2),
per output and Newton step) and factored; the multinomial loss, whose outputs are
coupled, runs conjugate gradient preconditioned by those per-class blocks (block Jacobi).
``method="cg"``: conjugate gradient on H v products (one fused pass of O(n m) per output for
a separable loss, two for the multinomial), solved to a relative residual that shrinks with
the gradient (inexact Newton). Its preconditioner: at first, as FALKON's, the Hessian of the
centers' own rows scaled to all rows, Phi_c^T diag(w l''(F_c)) Phi_c / sum_c w_c + 2 λ;
then, once CG's products since the last exact Hessian have cost as much as forming one
(a ski-rental rule, ``GRAM_RATIO``), the exact Hessian of the current iterate, formed and
kept: later steps and penalties reuse it with their own λ (CG on a lagged exact Hessian
takes a few products). Measured on ijcnn1 (m = 1000, 20 penalties): 868 CG products and
69 s with the centers' Hessian alone; 84 products, 2 exact Hessians and 13 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from .._backend import FACTOR_DTYPE
from ..linalg import NystromFactor, cholesky_in_place
from ..path import Path, lex_argmin
from ..selection import error_rate
from ._common import Validation, as_2d, weights_or_ones
from .losses import Loss, log_loss, make_loss

__all__ = ["Design", "newton_path", "newton_memory", "PATH_PATIENCE"]

#: Newton steps per λ at most.
MAX_NEWTON_STEPS = 50
#: The path stops after this many penalties in a row whose validation score did not improve
#: (with ``n_iter_no_change`` set; the points not reached are NaN).
PATH_PATIENCE = 3
#: The "auto" grid: 20 penalties geometric from the top eigenvalue of Phi^T W Phi / n down
#: over 9 decades (the square loss's grid, ``selection.penalty_grid``).
AUTO_SPAN = 1e-9
#: Newton steps per penalty along the path (the chosen point is solved to the tolerance).
PATH_STEPS = 1
#: Armijo's sufficient decrease.
ARMIJO = 1e-4
#: (r + 2 r^2 / n) / GRAM_RATIO Hessian products cost about one exact Hessian of r features
#: (measured at r = 1000: 13 products on ijcnn1's 40,000 rows, 61 on USPS's 5,800).
GRAM_RATIO = 40


def newton_memory(r: int, k: int, n_penalties: int, n_rows: int, n_val: int) -> int:
    """Bytes the Newton path holds beside its operators: the (r + 1) x (r + 1) Hessian
    blocks and their factors per output (direct: this step's; CG: the last exact ones kept
    as its preconditioner), five more r x r matrices while an exact Hessian is made (the
    factor R, the centers' design rows, the operator's Gram sum and its projections R^T G
    and R^T G R; measured: a 200,000-row fit at m = 1,000 held 7 of them at its peak, 113 MB
    traced at memory_budget=100MB when 4 were counted), the path's coefficients, and its
    n x k vectors (scores, derivatives, the step's scores, the CG directions' scores)."""
    mats = (5 + 2 * k) * (r + 1) ** 2
    coefs = 3 * (r + 1) * k * max(n_penalties, 20)
    vectors = 8 * n_rows * k + 3 * n_val * k
    return 8 * (mats + coefs + vectors)


class ExplicitFeatures:
    """The products of a feature matrix Phi (n x r) held in memory (exact KRLS's A R)."""

    def __init__(self, Phi: np.ndarray) -> None:
        self.Phi = Phi
        self.shape = Phi.shape

    def matvec(self, M: np.ndarray) -> np.ndarray:
        return self.Phi @ M

    def rmatvec(self, U: np.ndarray) -> np.ndarray:
        return self.Phi.T @ U

    def gram(self, weights: np.ndarray) -> np.ndarray:
        S = self.Phi * np.sqrt(np.maximum(weights, 0.0))[:, None]
        return S.T @ S

    def fused(self, B_: np.ndarray, weights: np.ndarray, return_matvec: bool = True) -> Any:
        U = self.Phi @ B_
        return self.Phi.T @ (weights * U), U


class Design:
    """Phi = [A R, 1]: the operator A (kernel n x m, or features n x D) seen through the
    factor R (None: the identity), with a ones column for the intercept. Coefficients
    T of shape (r + 1, k): beta = T[:-1], b = T[-1]. ``explicit``: Phi = A R itself, held
    in memory (the training products skip A and R; the coefficients and other operators'
    rows still go through R)."""

    def __init__(
        self,
        op: Any,
        factor: NystromFactor | None,
        center_rows: np.ndarray | None = None,
        explicit: bool = False,
    ) -> None:
        self.factor, self.center_rows = factor, center_rows
        self.r = factor.rank if factor is not None else int(op.shape[1])
        self.n = int(op.shape[0])
        self.kernel_op = op
        self.op: Any = op
        self.train_factor = factor
        if explicit:
            Phi = np.asarray(op.dense(), dtype=FACTOR_DTYPE)
            if factor is not None:
                Phi = Phi @ np.asarray(factor.R)
            self.op, self.train_factor = ExplicitFeatures(Phi), None

    def coef(self, T: np.ndarray) -> np.ndarray:
        """(alpha; b) of shape (p + 1, k): the coefficients of A's columns and b."""
        B = T[:-1]
        alpha = B if self.factor is None else self.factor.apply(B)
        return np.vstack([alpha, T[-1:]])

    def forward(self, T: np.ndarray, op: Any = None) -> np.ndarray:
        """Phi T, (n, k) (another operator's rows with ``op``: the validation set)."""
        if op is None and self.train_factor is None:
            C = T
        else:
            C = self.coef(T)
        A = self.op if op is None else op
        F = np.asarray(A.matvec(C[:-1]), dtype=FACTOR_DTYPE).reshape(-1, C.shape[1])
        return F + C[-1]

    def backward(self, U: np.ndarray) -> np.ndarray:
        """Phi^T U, (r + 1, k)."""
        V = np.asarray(self.op.rmatvec(U), dtype=FACTOR_DTYPE).reshape(-1, U.shape[1])
        if self.train_factor is not None:
            V = self.train_factor.apply_t(V)
        return np.vstack([V, U.sum(axis=0, keepdims=True)])

    def weighted_product(
        self, v: np.ndarray, d: np.ndarray, top: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(Phi^T diag(d) Phi v, Phi v) for one column v (r + 1,) in one pass over the
        rows (``fused``); ``top`` = R^T A^T d."""
        beta, b = v[:-1], float(v[-1])
        fac = self.train_factor
        alpha = beta if fac is None else fac.apply(beta[:, None])[:, 0]
        AtDA, Aa = self.op.fused(alpha, d, return_matvec=True)
        u = np.asarray(Aa, dtype=FACTOR_DTYPE).reshape(-1) + b
        AtDA = np.asarray(AtDA, dtype=FACTOR_DTYPE).reshape(-1, 1)
        out = np.empty(self.r + 1)
        out[:-1] = (AtDA if fac is None else fac.apply_t(AtDA))[:, 0] + b * top
        out[-1] = d @ u
        return out, u

    def gram(self, d: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
        """Phi^T diag(d) Phi, (r + 1, r + 1); ``top``: A^T d if at hand."""
        G = np.asarray(self.op.gram(d), dtype=FACTOR_DTYPE)
        if self.train_factor is not None:
            G = self.train_factor.project(G)
        if top is None:
            top = self.backward(d[:, None])[:-1, 0]
        H = np.empty((self.r + 1, self.r + 1))
        H[:-1, :-1] = G
        H[:-1, -1] = H[-1, :-1] = top
        H[-1, -1] = d.sum()
        return H

    def center_design(self) -> np.ndarray:
        """[K_mm R, 1]: the rows of Phi at the centers, (m, r + 1)."""
        Kc = np.asarray(self.kernel_op.center_gram(), dtype=FACTOR_DTYPE)
        Phi = Kc if self.factor is None else Kc @ np.asarray(self.factor.R)
        return np.hstack([Phi, np.ones((len(Phi), 1))])

    def curvature_scale(self) -> np.ndarray | None:
        """mu with Phi^T Phi / n ~ diag(mu) (FALKON's approximation through the centers:
        M / m with M = R^T K_mm^2 R diagonal), or None where there is none."""
        fac = self.factor
        if fac is None or fac.M is None or np.ndim(fac.M) != 1:
            return None
        return np.asarray(fac.M, dtype=FACTOR_DTYPE) / int(self.kernel_op.shape[1])

    def top(self, w: np.ndarray) -> float:
        """The top eigenvalue of Phi^T W Phi / sum w (without the ones column)."""
        mu = self.curvature_scale()
        if mu is not None:
            return float(mu.max())
        G = self.gram(w / w.sum())[:-1, :-1]
        return float(scipy.linalg.eigvalsh(G, subset_by_index=[len(G) - 1, len(G) - 1])[0])


@dataclass
class _State:
    """The iterate: coefficients T, training scores F, and the work done."""

    T: np.ndarray
    F: np.ndarray
    steps: int = 0
    inner: int = 0


def _objective(loss: Loss, wn: np.ndarray, F: np.ndarray, T: np.ndarray, lam: float) -> float:
    return float(wn @ loss.values(F)) + lam * float((T[:-1] ** 2).sum())


def _spd_solver(H: np.ndarray) -> Any:
    """v -> H^-1 v for a symmetric positive semi-definite H, factored once (a
    least-squares solution where H is singular: no curvature along a direction with no
    gradient)."""
    try:
        cf = (cholesky_in_place(np.array(H, order="F")), True)  # (lower triangle: read)
        if np.all(np.isfinite(cf[0])):
            return lambda v: scipy.linalg.cho_solve(cf, v, check_finite=False)
    except np.linalg.LinAlgError:
        pass
    pinv = scipy.linalg.pinvh(H)
    return lambda v: pinv @ v


class _Newton:
    """Newton's method on J at one λ after another, the iterate carried over."""

    def __init__(
        self,
        design: Design,
        loss: Loss,
        wn: np.ndarray,
        method: str,
        max_inner: int,
        tol: float,
    ) -> None:
        self.design, self.loss, self.wn = design, loss, wn
        self.method, self.max_inner, self.tol = method, max_inner, tol
        self._tol2 = min(tol, 1e150) ** 2  # tol^2, finite (a tol of 1e300 stops at once)
        self._fused: tuple[np.ndarray, np.ndarray] | None = None
        self._g0: float | None = None  # the gradient's norm at the first step of a λ
        self.fuses = loss.separable and hasattr(design.op, "fused")
        rows = design.center_rows
        if method == "cg" and rows is None:
            self.method = "direct"  # no centers among the rows: no preconditioner
        self._grams: list[np.ndarray] | None = None  # the last exact Hessian (cg)
        self._refresh, self._spent = False, 0
        # an exact Hessian (a pass of O(n r^2) and R's O(r^3), blocked) in Hessian
        # products (a pass of O(n r) each, memory-bound), per output
        r, n = design.r, max(design.n, 1)
        self.gram_cost = max(1, round((r + 2 * r * r / n) / GRAM_RATIO))
        self._factored: tuple[float, list[Any]] | None = None  # (λ, the lagged factors)
        if self.method == "cg":
            assert rows is not None
            self.center_rows = rows
            self.center_design = design.center_design()
            w = wn[rows]
            # the centers' rows stand for all: (1/n) sum_i ~ (1/m) sum_c, weights kept
            self.center_weights = w / w.sum() if w.sum() > 0 else np.full(len(rows), 1 / len(rows))

    def hess(self, F: np.ndarray, V: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """(H V, Phi V): for a separable loss one fused pass per output, else two passes."""
        if self._fused is not None:
            D, tops = self._fused
            HV, U = np.empty_like(V), np.empty((self.design.n, V.shape[1]))
            for j in range(V.shape[1]):
                HV[:, j], U[:, j] = self.design.weighted_product(V[:, j], D[:, j], tops[:, j])
            HV[:-1] += 2 * lam * V[:-1]
            return HV, U
        U = self.design.forward(V)
        HV = self.design.backward(self.wn[:, None] * self.loss.hessian_product(F, U))
        HV[:-1] += 2 * lam * V[:-1]
        return HV, U

    def step(self, s: _State, lam: float) -> tuple[np.ndarray, np.ndarray | None, float]:
        """The Newton direction (r + 1, k), its scores Phi d where they came for free, and
        the squared decrement g^T H^-1 g."""
        loss, wn, design = self.loss, self.wn, self.design
        Gn = wn[:, None] * loss.gradient(s.F)
        k = Gn.shape[1]
        ridge = np.full(design.r + 1, 2 * lam)
        ridge[-1] = 0.0  # the intercept is not penalized
        if self.method == "direct":
            D = wn[:, None] * loss.curvature(s.F)
            g = design.backward(np.hstack([Gn, D]))
            tops, g = g[:-1, k:], g[:, :k]
            solvers = [
                _spd_solver(design.gram(D[:, j], tops[:, j]) + np.diag(ridge)) for j in range(k)
            ]
        else:
            D = wn[:, None] * loss.curvature(s.F)
            if self.fuses or self._refresh:  # A^T D beside the gradient
                g = design.backward(np.hstack([Gn, D]))
                tops, g = g[:-1, k:], g[:, :k]
                if self.fuses:  # for the fused products
                    self._fused = (D, tops)
            else:
                g = design.backward(Gn)
            if self._refresh:  # the exact Hessian (without λ) at this iterate, kept
                self._grams = [design.gram(D[:, j], tops[:, j]) for j in range(k)]
                self._refresh, self._spent, self._factored = False, 0, None
            if self._grams is not None:  # the last exact Hessian, with this λ
                if self._factored is None or self._factored[0] != lam:
                    ridged = [G + np.diag(ridge) for G in self._grams]
                    self._factored = (lam, [_spd_solver(H) for H in ridged])
                solvers = self._factored[1]
            else:  # FALKON's: the Hessian of the centers' rows, scaled to all rows
                rows = self.center_rows
                Dc = self.center_weights[:, None] * loss.curvature(s.F[rows], rows)
                Ac = self.center_design
                blocks = (Ac.T @ (Dc[:, j : j + 1] * Ac) + np.diag(ridge) for j in range(k))
                solvers = [_spd_solver(H) for H in blocks]
        g[:-1] += 2 * lam * s.T[:-1]
        if self.method == "direct" and loss.separable:  # H itself: no iteration
            d = -np.column_stack([solvers[j](g[:, j]) for j in range(k)])
            s.inner += k
            return d, None, float(-(g * d).sum())

        def precond(V: np.ndarray) -> np.ndarray:
            Z = np.column_stack([solvers[j](V[:, j]) for j in range(k)])
            if not loss.separable:
                # the softmax's steps keep sum_j T[:, j] = 0 (H maps that subspace to
                # itself, and g lies in it): so must the preconditioned residual
                Z -= Z.mean(axis=1, keepdims=True)
            return Z

        gnorm = float(np.linalg.norm(g))
        if self._g0 is None:  # the first step of this λ: the gradient to shrink from
            self._g0 = gnorm
        rel = min(0.1, np.sqrt(gnorm / max(self._g0, 1e-300)))
        d, U, its = self._cg(s.F, g, lam, precond, rel)
        s.inner += its
        # ski rental: once the products since the last exact Hessian cost as much as
        # forming one, the next step forms it (and CG on a lagged Hessian takes few steps)
        self._spent += its if self.fuses else 2 * its  # the softmax's: two passes
        if self._spent >= self.gram_cost:
            self._refresh = True
        return d, U, float(-(g * d).sum())

    def _cg(
        self, F: np.ndarray, g: np.ndarray, lam: float, precond: Any, rel: float
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Preconditioned CG on H d = -g to ||residual|| <= rel ||g||, with Phi d
        accumulated from the products."""
        x = np.zeros_like(g)
        U = np.zeros((self.design.n, g.shape[1]))
        res = -g
        z = precond(res)
        p = z.copy()
        rz = float((res * z).sum())
        target = rel * float(np.linalg.norm(g))
        its = 0
        if not rz > 0:  # the preconditioned gradient vanished: d = 0
            return x, U, its
        for its in range(1, self.max_inner + 1):  # noqa: B007
            Hp, Up = self.hess(F, p, lam)
            pHp = float((p * Hp).sum())
            if not pHp > 0:
                break
            a = rz / pHp
            x += a * p
            U += a * Up
            res -= a * Hp
            if float(np.linalg.norm(res)) <= target:
                break
            z = precond(res)
            rz_new = float((res * z).sum())
            if not rz_new > 0:  # the preconditioned residual vanished (underflow): done
                break
            p = z + (rz_new / rz) * p
            rz = rz_new
        return x, U, its

    def solve(self, s: _State, lam: float, max_steps: int = MAX_NEWTON_STEPS) -> bool:
        """Newton at ``lam`` from ``s`` (updated in place), at most ``max_steps`` steps;
        whether it converged."""
        loss, wn = self.loss, self.wn
        J = _objective(loss, wn, s.F, s.T, lam)
        self._g0 = None
        steps = 0
        converged = False
        for _ in range(max_steps):
            d, U, dec = self.step(s, lam)
            if not np.isfinite(dec) or dec / 2 <= self._tol2 * max(J, 1e-300):
                converged = bool(np.isfinite(dec))
                break
            if U is None:
                U = self.design.forward(d)
            t = 1.0
            while True:  # backtracking to Armijo's decrease (d is a descent direction)
                J_new = _objective(loss, wn, s.F + t * U, s.T + t * d, lam)
                if J_new <= J - ARMIJO * t * dec or t < 1e-10:
                    break
                t /= 2
            if not J_new < J:
                converged = True  # no decrease left at the floating-point level
                break
            s.T += t * d
            s.F += t * U
            if not loss.separable:  # softmax ignores a shift of every intercept
                s.T[-1] -= s.T[-1].mean()
            J = J_new
            steps += 1
        s.steps = steps
        return converged


@dataclass(frozen=True)
class NewtonOptions:
    """How the Newton path runs.

    Attributes
    ----------
    method : {"direct", "cg"}
        How the Newton systems are solved (module docstring).
    max_inner : int
        CG iterations per Newton step at most.
    tol : float
        Newton stops when half the squared decrement is at most tol^2 times J.
    patience : int or None
        Stop the path after this many penalties without a better validation loss (the
        log-loss, or the squared hinge loss).
    dtype
        The stored coefficients' dtype.
    explicit : bool
        Form Phi = A R in memory once (exact KRLS: its n x n products are cheaper than
        passes through A and R).
    """

    method: str = "direct"
    max_inner: int = 100
    tol: float = 1e-4
    patience: int | None = PATH_PATIENCE
    dtype: Any = np.float64
    explicit: bool = False


class _Points:
    """The path's points as they are reached: training loss, coefficients, the iterate
    itself (to solve the chosen point again) and the validation scores."""

    def __init__(
        self, P: int, design: Design, loss: Any, loss_name: str, wn: np.ndarray, dtype: Any,
        validation: Validation | None,
    ) -> None:  # fmt: skip
        self.design, self.loss, self.loss_name, self.wn = design, loss, loss_name, wn
        self.dtype, self.validation = dtype, validation
        self.train = np.full(P, np.nan)
        self.val_err = np.full(P, np.nan) if validation is not None else None
        self.val_rate = np.full(P, np.nan)
        self.val_sec = np.full(P, np.nan)
        self.stored: dict[tuple[int, ...], np.ndarray] = {}
        self.iterates: dict[int, np.ndarray] = {}

    def record(self, p: int, state: _State) -> float:
        """Keep point p of the path (the state's) and score it on the validation set; the
        score the path's patience reads (NaN without a validation set)."""
        self.train[p] = float(self.wn @ self.loss.values(state.F))
        self.stored[(p,)] = self.design.coef(state.T).astype(self.dtype)
        self.iterates[p] = state.T.copy()
        validation = self.validation
        if validation is None or self.val_err is None:
            return np.nan
        Fv = self.design.forward(state.T, validation.op)[:, None, :]
        vw = validation.weights
        rate = float(_error_rate(validation.Y, Fv, vw))
        if self.loss_name == "logistic":
            score, second = float(log_loss(validation.Y, Fv, vw)[0]), rate
        else:
            score, second = rate, float(_hinge(validation.Y, Fv[:, 0], vw))
        self.val_err[p], self.val_rate[p], self.val_sec[p] = score, rate, second
        # the path's patience reads a smooth score: the error rate stays flat while λ is
        # too large for any row to change side (adult: the first 4 penalties)
        return score if self.loss_name == "logistic" else second

    def chosen(self) -> int:
        """The best validated point (ties: the error rate, or the squared hinge loss), or
        the last one reached."""
        if self.val_err is not None and np.isfinite(self.val_err).any():
            ties = self.val_rate if self.loss_name == "logistic" else self.val_sec
            return lex_argmin(self.val_err, ties)
        return int(np.flatnonzero(np.isfinite(self.train))[-1])


def newton_path(
    op: Any,
    y: np.ndarray,
    loss_name: str,
    penalties: np.ndarray | None,
    weights: np.ndarray | None = None,
    validation: Validation | None = None,
    factor: NystromFactor | None = None,
    options: NewtonOptions | None = None,
    center_rows: np.ndarray | None = None,
) -> Path:
    """The λ path of a smooth convex loss by Newton's method, λ decreasing, each solve
    started from the previous one's solution.

    Parameters
    ----------
    op : operator of shape (n, p)
        The training rows against the centers (``KernelProducts``) or their random
        features (``FeatureOperator``): ``matvec``, ``rmatvec`` and ``gram``.
    y : ndarray of shape (n,) or (n, k)
        ±1 one-vs-all codes.
    loss_name : {"logistic", "squared_hinge"}
    penalties : ndarray of shape (P,) or None
        λ values (sorted decreasing); None: 20 from the top eigenvalue of
        Phi^T W Phi / n over 9 decades.
    weights : ndarray of shape (n,) or None
    validation : Validation or None
        Scores every λ: the logistic loss by log-loss (its ``val_error``; the error rate
        in ``info["val_error_rate"]`` breaks ties), the squared hinge by error rate (ties:
        its log-loss is not defined, so the squared hinge loss).
    factor : NystromFactor or None
        R of the Nyström features (None: the operator's columns are the features).
    options : NewtonOptions or None
        The method of the Newton systems, its caps and tolerance, the path's patience.
    center_rows : ndarray of int or None
        The training rows that are the centers (CG's preconditioner is the Hessian of
        these rows; None: ``method="cg"`` falls back to "direct").

    Returns
    -------
    Path over "penalty"; the coefficients of a point have shape (p + 1, k): the columns'
    coefficients (alpha = R beta) and, last, the intercept.
    """
    opts = options or NewtonOptions()
    Y = as_2d(y).astype(FACTOR_DTYPE)
    n, k = Y.shape
    w = weights_or_ones(weights, n)
    wn = w / w.sum()
    loss = make_loss(loss_name, Y)
    design = Design(op, factor, center_rows, opts.explicit)
    if getattr(op, "expected_passes", 0) is None:
        op.expected_passes = 8  # several passes a Newton step: keep K_nm if it fits
    lam = np.sort(np.asarray(penalties, dtype=float))[::-1] if penalties is not None else None
    if lam is None:
        top = design.top(w)
        lam = np.geomspace(top, top * AUTO_SPAN, 20)
    P = len(lam)
    newton = _Newton(design, loss, wn, opts.method, opts.max_inner, opts.tol)
    state = _State(np.zeros((design.r + 1, k)), np.zeros((n, k)))
    points = _Points(P, design, loss, loss_name, wn, opts.dtype, validation)
    converged = np.zeros(P, dtype=bool)
    n_steps = np.zeros(P, dtype=int)
    best, since = np.inf, 0
    # along the path: PATH_STEPS Newton steps per penalty from the previous solution (the
    # path-following of self-concordant losses: a modest decrease of λ keeps the previous
    # solution where Newton converges fast); the chosen point is then solved to ``tol``
    last = P - 1 if P == 1 else -1
    for p, lp in enumerate(lam):
        steps = MAX_NEWTON_STEPS if p == last else PATH_STEPS
        converged[p] = newton.solve(state, float(lp), steps)
        n_steps[p] = state.steps
        score = points.record(p, state)
        if validation is None:
            continue
        if not np.isfinite(best) or score < best - opts.tol * abs(best):
            best, since = score, 0
        else:
            since += 1
            if opts.patience is not None and since >= opts.patience:
                break
    chosen = points.chosen()
    if not converged[chosen]:
        state.T = points.iterates[chosen].copy()
        state.F = design.forward(state.T)
        converged[chosen] = newton.solve(state, float(lam[chosen]))
        n_steps[chosen] += state.steps
        points.record(chosen, state)
    if validation is not None:
        validation.op.release()
    info = {
        "method": f"newton-{newton.method}",
        "loss": loss_name,
        "newton_steps": n_steps,
        "inner_solves": state.inner,
        "converged": converged,
        "rank": design.r,
    }
    if validation is not None:
        info["val_error_rate"] = points.val_rate
    return Path(
        {"penalty": lam},
        points.train,
        points.val_err,
        coef_fn=None,
        scoring="log_loss" if loss_name == "logistic" else "error_rate",
        stored=points.stored,
        info=info,
        val_loss=points.val_rate if loss_name == "logistic" else points.val_sec,
    )


def _error_rate(Y: np.ndarray, F: np.ndarray, w: np.ndarray | None) -> float:
    return float(error_rate(Y, F, w)[0])


def _hinge(Y: np.ndarray, F: np.ndarray, w: np.ndarray | None) -> float:
    per = (np.maximum(0.0, 1.0 - Y * F) ** 2).sum(axis=1)
    return float(per.mean() if w is None else (w @ per) / w.sum())
