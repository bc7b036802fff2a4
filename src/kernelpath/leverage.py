"""Ridge leverage scores and effective dimensions: exact, fast approximate, SQUEAK.

For a kernel matrix K (n x n) and a penalty λ, the λ-ridge leverage scores are

    τ_i(λ) = (K (K + λ n I)^-1)_ii,      d_eff(λ) = sum_i τ_i(λ),      d_max(λ) = n max_i τ_i(λ)

(El Alaoui & Mahoney 2015, "Fast randomized kernel methods with statistical guarantees").
Sampling Nyström centers with probabilities proportional to τ needs about d_eff(λ) centers
where uniform sampling needs about d_max(λ).

Three estimators:

- ``exact``: one Cholesky factorization K + λnI = L L^T; τ_i = 1 - λn ||L^-1 e_i||^2.
  O(n^3) time and an n x n matrix: n up to ~20,000.
- ``approximate``: the two-pass method of El Alaoui & Mahoney (§3.5). Pass 1 draws p columns
  i.i.d. with probabilities K_ii / tr(K) (squared-length sampling in feature space); the
  Nyström approximation L = C W^+ C^T = B B^T (B = C R, R R^T = W^+) gives the scores
  τ~_i = (L (L + λnI)^-1)_ii = b_i^T (B^T B + λnI)^-1 b_i, computed in pass 2 in O(n p^2)
  without forming K. Since 0 ⪯ L ⪯ K and A -> A (A + λnI)^-1 is operator monotone,
  τ~_i <= τ_i always; if moreover K - L ⪯ ε λn I (enough columns, their Theorem),
  τ~_i >= (1 + ε) τ_i - ε: the band is tight where τ_i is large.
- ``squeak``: SQUEAK (Calandriello, Lazaric & Valko 2017, Algorithm 1), one sequential pass
  keeping a dictionary of (index, probability p~, multiplicity q). Each new point enters with
  p~ = 1 and q = q̄ copies (EXPAND); the scores of every dictionary point are re-estimated by
  their Eq. 5,

      τ~_i = (1 - ε)/γ (k_ii - k_i^T S (S^T K S + (1 + ε) γ I)^-1 S^T k_i),

  where S selects the dictionary points with weights sqrt(q_i / (q̄ p~_i)) (each copy weighs
  (q̄ p~_i)^(-1/2)); then p~_i <- min(τ~_i, p~_i) and each copy survives with probability
  p~_new / p~_old, i.e. q_i ~ Binomial(q_i, p~_new / p~_old) (SHRINK); points with q = 0
  leave. γ = λn. The dictionary after t points approximates K_t (any-time). The scores of
  all n points are Eq. 5 with the final dictionary (one more pass, O(n |D|^2)).

  Two variants (``variant=``). ``"auto"`` (the default, above) shifts by (1 + ε)γ, which
  keeps the estimates below the scores when the dictionary is only ε-accurate, and reads the
  data in blocks. ``"paper"`` is Algorithm 1 as printed: Eq. 5 with the shift γ, and line 4's
  floor p~_i <- max{min{τ~_i, p~_i}, p~_i / 2}, so that a probability at most halves per
  step; one point per step unless ``batch_size`` says otherwise. SQUEAK's own estimator, the
  γ-regularized Nyström of its Eq. 3, is ``regularized_factor`` (used by
  ``SqueakCenters(regularized=True)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from . import _backend as B
from ._backend import FACTOR_DTYPE
from ._threads import dense_threads, fit_threaded
from ._validation import check_choice, check_dask_rows, check_float, check_int, check_rows, make_rng
from .data.sources import as_source, is_lazy_array
from .inputs import as_rows, rows_in_memory, take_rows
from .kernels import Kernel, make_kernel
from .linalg import cholesky_in_place, eigh_in_place, nystrom_factor, zero_strict_upper
from .workspace import Workspace

__all__ = [
    "leverage_scores",
    "effective_dimension",
    "squeak",
    "SqueakDictionary",
    "METHODS",
    "SQUEAK_VARIANTS",
    "default_n_samples",
    "samples_within",
    "approximate_memory",
]

METHODS = ("exact", "approximate", "squeak")
SQUEAK_VARIANTS = ("auto", "paper")


def default_n_samples(n: int) -> int:
    """Columns p of the approximate method by default: 2 sqrt(n) log(n), at least 200,
    at most 4000 and n. (The theorem asks for p ~ tr(K) / (λ n ε) log(n), far more than
    needed in practice; measured on cpusmall, see docs/design.md.)"""
    p = int(2 * np.sqrt(n) * np.log(max(n, 2)))
    return int(min(n, max(200, min(p, 4000))))


#: p x p float64 matrices the approximate method holds at its peak beside its operator (the
#: factor R, the Gram matrix and its projection, the eigenvectors over it and dsyevd's
#: workspace of two, ``linalg.eigh_in_place``).
APPROXIMATE_MATRICES = 5


def approximate_memory(p: int) -> int:
    """Bytes the approximate method's p x p algebra holds (``APPROXIMATE_MATRICES``, or R and
    the Gram matrix's per-worker sums when there are more workers)."""
    return 8 * max(APPROXIMATE_MATRICES, 2 + B.n_threads()) * p * p


def samples_within(budget: int, n: int) -> int:
    """The default number of columns, ``default_n_samples(n)``, lowered so that the p x p
    algebra takes at most half of ``budget`` (the operator streams in the rest)."""
    p = default_n_samples(n)
    while p > 50 and approximate_memory(p) > budget // 2:
        p = int(p * 0.9)
    return min(p, n)


def _check_lambda(penalty: Any) -> float:
    return check_float(penalty, "penalty", 0.0, np.inf, low_open=True, high_open=True)


# --------------------------------------------------------------------------- exact
def _exact_scores(X: np.ndarray, kernel: Kernel, lam: float, workspace: Workspace) -> np.ndarray:
    n, budget = X.shape[0], workspace.budget
    need = n * n * np.dtype(FACTOR_DTYPE).itemsize
    if need > budget:
        raise ValueError(
            f"exact leverage scores of {n} points need the {n} x {n} kernel matrix "
            f"({need / 1e9:.2f} GB), more than memory_budget={budget / 1e9:.2f} GB: "
            "use method='approximate' or 'squeak'"
        )
    X = rows_in_memory(X, np.arange(n)) if B.is_lazy(X) else X  # n^2 fits: so does X
    op = workspace.share(budget).operator(X, X, kernel, cache=False)
    K = np.asarray(op.center_gram(), dtype=FACTOR_DTYPE)
    shift = lam * n
    K[np.diag_indices_from(K)] += shift
    try:  # (by blocks from 4,096 rows on: ``linalg.cholesky_in_place``)
        L = zero_strict_upper(cholesky_in_place(K))
    except np.linalg.LinAlgError:
        raise ValueError(
            f"K + penalty * n * I is not numerically positive definite (penalty={lam:g})"
        ) from None
    with dense_threads(n**3 / 3):  # a triangle's inverse: n^3 / 3 flops
        Linv, info = scipy.linalg.lapack.dtrtri(L, lower=1, overwrite_c=1)
    del L, K
    # (K + λnI)^-1 = L^-T L^-1: its diagonal holds the squared column norms of L^-1
    inv_diag = np.einsum("ij,ij->j", Linv, Linv)
    return np.clip(1.0 - shift * inv_diag, 0.0, 1.0)


# --------------------------------------------------------------------- approximate
def _approximate_scores(
    X: np.ndarray,
    kernel: Kernel,
    lam: float,
    n_samples: int,
    rng: np.random.Generator,
    workspace: Workspace,
) -> np.ndarray:
    n, budget = X.shape[0], workspace.budget
    need = approximate_memory(min(n_samples, n))
    if need > budget // 2:
        raise ValueError(
            f"approximate leverage scores with n_samples={n_samples} columns need "
            f"{need / 1e6:.0f} MB for their {n_samples} x {n_samples} algebra, more than half "
            f"of memory_budget={budget / 1e6:.0f} MB: give fewer n_samples or a larger budget"
        )
    first = rows_in_memory(X, np.arange(1))
    diag = B.to_numpy(workspace.operator(X, first, kernel).diag(), FACTOR_DTYPE)
    total = float(diag.sum())
    if not total > 0:
        raise ValueError("the kernel's diagonal is zero on X: leverage scores are undefined")
    cols = rng.choice(n, size=n_samples, replace=True, p=diag / total)
    # repeated columns add nothing to L = C W^+ C^T (nor does the rescaling of the columns)
    cols = np.unique(cols)
    op = workspace.share(budget - need).operator(X, rows_in_memory(X, cols), kernel)
    eps = float(np.finfo(op.dtype).eps)
    fac = nystrom_factor(op.center_gram(), dtype_eps=eps, preconditioned=False)
    R = fac.R
    G = np.asarray(op.gram(), dtype=FACTOR_DTYPE)
    H = fac.project(G)
    del G
    s, V = eigh_in_place(H)
    del H
    s = np.maximum(s, 0.0)  # B^T B is PSD; rounding can leave tiny negative eigenvalues
    # τ~_i = ||(B^T B + λnI)^-1/2 b_i||^2 with b_i = R^T k_i (k_i: row i of C)
    T = (R @ V) / np.sqrt(s + lam * n)
    tau = np.asarray(op.row_sq_norms(T), dtype=FACTOR_DTYPE)
    op.release()
    return np.clip(tau, 0.0, 1.0)


# -------------------------------------------------------------------------- SQUEAK
@dataclass
class SqueakDictionary:
    """The dictionary SQUEAK keeps.

    Attributes
    ----------
    indices : ndarray of int, shape (|D|,)
        Rows of X in the dictionary, in the order they entered.
    probabilities : ndarray of shape (|D|,)
        Their probabilities p~_i (non-increasing over the pass).
    multiplicities : ndarray of int, shape (|D|,)
        Surviving copies q_i (1 <= q_i <= q̄).
    q_bar, gamma, eps :
        The parameters of the pass (γ = λ n).
    variant : str
        "auto" or "paper" (``squeak``).
    """

    indices: np.ndarray
    probabilities: np.ndarray
    multiplicities: np.ndarray
    q_bar: int
    gamma: float
    eps: float
    variant: str = "auto"

    @property
    def shift(self) -> float:
        """The shift of Eq. 5: γ ("paper") or (1 + ε) γ ("auto")."""
        return self.gamma if self.variant == "paper" else (1 + self.eps) * self.gamma

    @property
    def weights(self) -> np.ndarray:
        """Column weights of S: sqrt(q_i / (q̄ p~_i)) (q_i copies of weight (q̄ p~_i)^-1/2)."""
        return np.sqrt(self.multiplicities / (self.q_bar * self.probabilities))

    def __len__(self) -> int:
        return len(self.indices)


def _eq5_factor(K_dd: np.ndarray, w: np.ndarray, shift: float) -> np.ndarray:
    """T = W L^-T with W K W + shift I = L L^T, so that
    k_i^T S (S^T K S + shift I)^-1 S^T k_i = ||T^T k_Di||^2 (k_Di: kernel values between
    point i and the dictionary)."""
    M = w[:, None] * K_dd * w[None, :]
    M[np.diag_indices_from(M)] += shift
    L = cholesky_in_place(M)  # (its lower triangle: what the solve reads)
    Linv_t = scipy.linalg.solve_triangular(L, np.eye(len(w)), lower=True, check_finite=False).T
    return w[:, None] * Linv_t


def _eq5_in_dictionary(K_c: np.ndarray, w: np.ndarray, shift: float) -> np.ndarray:
    """k_i^T S (S^T K S + shift I)^-1 S^T k_i for the dictionary points themselves: with
    W K W + shift I = L L^T and V = L^-1 W K, it is ||V e_i||^2."""
    WK = w[:, None] * K_c
    M = WK * w[None, :]
    M[np.diag_indices_from(M)] += shift
    L = cholesky_in_place(M)  # (its lower triangle: what the solve reads)
    V = scipy.linalg.solve_triangular(L, WK, lower=True, check_finite=False)
    return np.einsum("ij,ij->j", V, V)


def squeak(
    X: Any,
    kernel: Any,
    penalty: float,
    q_bar: int | None = None,
    eps: float = 0.5,
    delta: float | None = None,
    batch_size: int | None = None,
    random_state: Any = None,
    memory_budget: Any = None,
    variant: str = "auto",
) -> SqueakDictionary:
    """SQUEAK (Calandriello, Lazaric & Valko 2017, Algorithm 1): one pass over X.

    Parameters
    ----------
    X : array-like of shape (n, d)
    kernel : Kernel or str
    penalty : float
        λ > 0; SQUEAK's γ is λ n.
    q_bar : int or None
        Copies of each new point. None: from ``delta`` with the paper's
        q̄ = 39 α log(2n/δ) / ε², α = (1 + ε)/(1 - ε), when ``delta`` is given, else 16.
        The theoretical value keeps about the whole data set; measured on 2000 points of
        cpusmall (σ = 3, λ = 1e-4), q̄ = 8 breaks the bound K - K~ ⪯ γ/(1-ε) I by up to 25%,
        q̄ = 16 holds it with the top eigenvalue at 0.71-0.85 of the bound, dictionary
        ~880 points for d_eff = 198 (docs/design.md).
    eps : float in (0, 1), default=0.5
        Accuracy ε of the dictionary: 0 ⪯ K - K~ ⪯ γ/(1 - ε) I.
    delta : float in (0, 1) or None
        Failure probability, used only to set q̄.
    batch_size : int or None, default=None
        Points read per step (one point per step is Algorithm 1's loop); b > 1 merges the dictionary
        with b fresh points at once (the merge of the distributed version, DISQUEAK: every
        point still enters with q̄ copies and is only shrunk by its estimated score). None:
        as many points as the dictionary holds (at least 64), so a step costs O(|D|^3) for
        |D| new points: O(|D|^2) per point, the cost of Algorithm 1, with few NumPy calls
        (n = 2000: 0.5 s against 24 s one point at a time, same dictionary quality). With
        ``variant="paper"``, None means 1.
    random_state, memory_budget :
        Seed of the binomial draws; bytes for the kernel blocks.
    variant : {"auto", "paper"}, default="auto"
        "paper": Algorithm 1 as printed (Eq. 5 shifted by γ, line 4's floor p~/2, one point
        per step); "auto": the shift (1 + ε)γ and no floor (module docstring).

    Returns
    -------
    SqueakDictionary
    """
    args = (q_bar, eps, delta, batch_size, random_state)
    return squeak_dictionary(X, kernel, penalty, *args, Workspace.of(memory_budget), variant)


def squeak_dictionary(
    X: Any,
    kernel: Any,
    penalty: float,
    q_bar: int | None,
    eps: float,
    delta: float | None,
    batch_size: int | None,
    random_state: Any,
    workspace: Workspace,
    variant: str,
) -> SqueakDictionary:
    """``squeak`` with the kernel blocks in ``workspace`` (its budget resolved already)."""
    X = check_rows(X)
    n = X.shape[0]
    lam = _check_lambda(penalty)
    eps = check_float(eps, "eps", 0.0, 1.0, low_open=True, high_open=True)
    if q_bar is None:
        if delta is not None:
            delta = check_float(delta, "delta", 0.0, 1.0, low_open=True, high_open=True)
            alpha = (1 + eps) / (1 - eps)
            q_bar = int(np.ceil(39 * alpha * np.log(2 * n / delta) / eps**2))
        else:
            q_bar = 16
    q_bar_checked = check_int(q_bar, "q_bar", 1)
    assert q_bar_checked is not None
    b_fixed = check_int(batch_size, "batch_size", 1, allow_none=True)
    variant = check_choice(variant, "variant", SQUEAK_VARIANTS)
    if variant == "paper" and b_fixed is None:
        b_fixed = 1
    rng = make_rng(random_state)
    kern = make_kernel(kernel).resolve(X, rng)
    gamma = lam * n
    shift = gamma if variant == "paper" else (1 + eps) * gamma
    idx = np.empty(0, dtype=np.int64)
    prob = np.empty(0)
    mult = np.empty(0, dtype=np.int64)
    K_dd = np.empty((0, 0))
    diag_all = B.to_numpy(kern.diag(X), FACTOR_DTYPE)
    start = 0
    while start < n:
        b = b_fixed if b_fixed is not None else max(64, len(idx))
        new = np.arange(start, min(n, start + b))
        start += len(new)
        cand = np.concatenate([idx, new])
        # EXPAND: kernel values of the new points against the candidate dictionary
        op = workspace.operator(take_rows(X, new), take_rows(X, cand), kern, cache=False)
        K_new = np.asarray(op.dense(), dtype=FACTOR_DTYPE)
        d = len(idx)
        K_c = np.empty((len(cand), len(cand)))
        K_c[:d, :d] = K_dd
        K_c[d:, :] = K_new
        K_c[:d, d:] = K_new[:, :d].T
        K_c = (K_c + K_c.T) / 2
        p_old = np.concatenate([prob, np.ones(len(new))])
        q_old = np.concatenate([mult, np.full(len(new), q_bar_checked)])
        w = np.sqrt(q_old / (q_bar_checked * p_old))
        tau = (1 - eps) / gamma * (diag_all[cand] - _eq5_in_dictionary(K_c, w, shift))
        p_new = np.minimum(np.clip(tau, np.finfo(float).tiny, 1.0), p_old)
        if variant == "paper":  # line 4: a probability at most halves per step
            p_new = np.maximum(p_new, p_old / 2)
        # SHRINK: each copy survives with probability p_new / p_old
        q_new = rng.binomial(q_old, np.minimum(p_new / p_old, 1.0))
        keep = q_new > 0
        idx, prob, mult = cand[keep], p_new[keep], q_new[keep]
        K_dd = K_c[np.ix_(keep, keep)]
    return SqueakDictionary(idx, prob, mult, q_bar_checked, gamma, eps, variant)


def _squeak_scores(
    X: np.ndarray, kernel: Kernel, dictionary: SqueakDictionary, workspace: Workspace
) -> np.ndarray:
    """Eq. 5 with the final dictionary for every point of X."""
    op = workspace.operator(X, take_rows(X, dictionary.indices), kernel)
    K_dd = np.asarray(op.center_gram(), dtype=FACTOR_DTYPE)
    T = _eq5_factor(K_dd, dictionary.weights, dictionary.shift)
    quad = np.asarray(op.row_sq_norms(T), dtype=FACTOR_DTYPE)
    op.release()
    diag = B.to_numpy(kernel.diag(X), FACTOR_DTYPE)
    tau = (1 - dictionary.eps) / dictionary.gamma * (diag - quad)
    return np.clip(tau, 0.0, 1.0)


# -------------------------------------------------------------------------- public
@fit_threaded
def leverage_scores(
    X: Any,
    kernel: Any,
    penalty: float,
    method: str = "exact",
    random_state: Any = None,
    *,
    n_samples: int | None = None,
    q_bar: int | None = None,
    eps: float = 0.5,
    delta: float | None = None,
    batch_size: int | None = None,
    variant: str = "auto",
    memory_budget: Any = None,
    device: Any = None,
) -> Any:
    """λ-ridge leverage scores τ_i(λ) = (K (K + λ n I)^-1)_ii of every point.

    Parameters
    ----------
    X : array-like or tensor of shape (n, d)
    kernel : Kernel or str
        ``sigma="median"`` is resolved on X.
    penalty : float
        λ > 0 (the same λ as the estimators' ``penalty``).
    method : {"exact", "approximate", "squeak"}, default="exact"
        See the module docstring. "exact" needs the n x n kernel matrix (n up to ~20,000).
    random_state : int, Generator or None
        Seeds the column sampling ("approximate") or the binomial draws ("squeak").
    n_samples : int or None
        Columns p of "approximate" (default ``default_n_samples(n)``, fewer where their
        p x p algebra would take more than half the budget: ``samples_within``).
    q_bar, eps, delta, batch_size, variant :
        Parameters of "squeak" (see ``squeak``).
    memory_budget : int, str or None
        Bytes the kernel blocks may take (None: half of the available memory; device memory
        on CUDA). The exact method's n x n matrix is factored on the host.
    device : None, "auto", "cpu", "cuda", "cuda:N" or torch.device, default=None
        Where the kernel blocks are computed (None: where X lives; see the estimators).

    Returns
    -------
    ndarray or tensor of shape (n,)
        Scores in [0, 1], like X (a float64 tensor on X's device for a tensor). The
        estimates of "approximate" never exceed the exact scores; those of "squeak" estimate
        τ_i within the factor α = (1 + ε)/(1 - ε) from below when the dictionary is accurate.
    """
    dev = B.resolve_device(device, {"X": X})
    if is_lazy_array(X) or B.is_dask(X):  # read in blocks (or on a dask cluster)
        Xc = as_source(X) if is_lazy_array(X) else check_dask_rows(X)
    else:
        Xc = check_rows(X)
    Xc = as_rows(Xc).to(dev, B.dtype_of(Xc))
    lam = _check_lambda(penalty)
    method = check_choice(method, "method", METHODS)
    rng = make_rng(random_state)
    kern = make_kernel(kernel).resolve(Xc, rng)
    n = Xc.shape[0]
    if method == "exact":  # the n x n matrix is a host array
        tau = _exact_scores(Xc, kern, lam, Workspace.of(memory_budget))
        return B.like_input(tau, X)
    ws = Workspace.of(memory_budget, dev)
    if method == "approximate":
        p = (
            samples_within(ws.budget, n)
            if n_samples is None
            else check_int(n_samples, "n_samples", 1)
        )
        assert p is not None
        return B.like_input(_approximate_scores(Xc, kern, lam, int(p), rng, ws), X)
    if B.is_lazy(Xc):
        raise ValueError(
            "method='squeak' builds its dictionary from X in memory; for data read from disk "
            "or a dask array use method='approximate'"
        )
    args = (q_bar, eps, delta, batch_size, rng)
    dictionary = squeak_dictionary(Xc, kern, lam, *args, ws, variant)
    return B.like_input(_squeak_scores(Xc, kern, dictionary, ws), X)


@fit_threaded
def effective_dimension(
    X: Any,
    kernel: Any,
    penalty: float,
    method: str = "exact",
    random_state: Any = None,
    **options: Any,
) -> tuple[float, float]:
    """(d_eff(λ), d_max(λ)) = (sum_i τ_i, n max_i τ_i), from ``leverage_scores``.

    Parameters
    ----------
    X : array-like of shape (n, n_features)
        The points.
    kernel : Kernel or str
        The kernel.
    penalty : float
        λ.
    method : {"exact", "approximate", "squeak"}, default="exact"
        How the scores are computed (``leverage_scores``).
    random_state : int, Generator or None, default=None
        Seed of the approximate methods.
    **options
        ``leverage_scores``'s other keyword options.

    Returns
    -------
    (float, float)
        The effective dimension and the maximal degrees of freedom.
    """
    tau = B.to_numpy(leverage_scores(X, kernel, penalty, method, random_state, **options))
    return float(tau.sum()), float(len(tau) * tau.max())
