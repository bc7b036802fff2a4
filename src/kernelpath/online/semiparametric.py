"""The semiparametric learner (a physical model plus a random-feature correction, both
online; thesis §8.3) and the chapter-8 test-then-update protocol."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .. import _backend as B
from .._threads import one_blas_thread
from .._validation import check_int, keep_params
from ..features import RandomFourierFeatures
from ..inputs import dense_block
from ..kernels import Gaussian
from .common import _host, _rows, check_n_features
from .rls import RecursiveRLS

__all__ = ["SemiparametricRegressor", "semiparametric_protocol"]


class SemiparametricRegressor(BaseEstimator):
    """A parametric model plus a random-feature correction, both learned online (thesis
    §8.3, Fig. 8.2).

    The parametric part is a recursive RLS on user regressors: for a sample x with T outputs,
    ``regressor(x)`` returns Φ(x) of shape (T, p) and the model is ŷ = Φ(x) π̂; each sample
    adds its T rows to the RLS of π̂ (``parameters_``). The nonparametric part is a
    ``RecursiveRLS`` on random Fourier features of (x, ŷ), normalized, learning the residual
    y - ŷ. A sample updates the parametric part first, then the correction on the residual of
    the updated parametric prediction. The prediction is ŷ + Δŷ.

    Parameters
    ----------
    regressor : callable
        (n, d) -> (n, T, p): the regressor matrices Φ(x) (``make_arm_dynamics`` returns one).
    features : transformer or None, default=None
        Feature map of the normalized (x, ŷ); None: ``RandomFourierFeatures`` with a Gaussian
        kernel of width sqrt(d + T) and ``n_features`` features.
    n_features : int, default=300
    penalty : float, default=1e-3
        λ of the correction's RLS.
    parametric_penalty : float, default=1e-6
        λ of the parametric RLS: how strongly π̂ is held at ``initial_parameters``.
    initial_parameters : array-like of shape (p,) or None, default=None
        Prior π_0 (e.g. from CAD); the parametric RLS learns π̂ - π_0 on the residual
        y - Φ π_0, i.e. minimizes ||Φ π - y||^2 + λ_p ||π - π_0||^2. None: zeros.
    forgetting : float in (0, 1], default=1.0
        Forgetting factor of the correction.
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    parameters_ : ndarray of shape (p,)
        π̂.
    parametric_ : RecursiveRLS
    correction_ : RecursiveRLS
    single_output_ : bool
        Whether the first batch's y was 1-D (one output per sample): ``predict`` then
        returns shape (n_samples,).
    input_mean_, input_scale_ : ndarray of shape (d + T,)
        Normalization of (x, ŷ), from the first batch given to ``fit`` / ``partial_fit``.
    """

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified batch by batch for the physical model
        return tags

    def __init__(
        self,
        regressor: Any,
        *,
        features: Any = None,
        n_features: int = 300,
        penalty: float = 1e-3,
        parametric_penalty: float = 1e-6,
        initial_parameters: Any = None,
        forgetting: float = 1.0,
        random_state: Any = None,
    ) -> None:
        keep_params(self, locals())

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "parametric_")

    def _phi(self, X: np.ndarray) -> np.ndarray:
        if not callable(self.regressor):
            raise TypeError(f"regressor must be callable, got {type(self.regressor).__name__}")
        try:
            P = np.asarray(self.regressor(X), dtype=np.float64)
        except (ValueError, TypeError, IndexError) as exc:
            raise ValueError(
                f"regressor failed on X of shape {X.shape} (does X have the features it "
                f"expects?): {type(exc).__name__}: {exc}"
            ) from exc
        if P.ndim != 3 or len(P) != len(X):
            raise ValueError(
                f"regressor must return an array of shape (n, T, p), got {P.shape} for "
                f"{len(X)} samples"
            )
        return P

    @one_blas_thread
    def fit(self, X: Any, y: Any) -> SemiparametricRegressor:
        """Forget everything and learn from (X, y) sample by sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs, learned in order.
        y : array-like of shape (n_samples,) or (n_samples, T)
            Targets.

        Returns
        -------
        self
        """
        for name in ("parametric_", "correction_"):
            if hasattr(self, name):
                delattr(self, name)
        return self.partial_fit(X, y)

    @one_blas_thread
    def partial_fit(self, X: Any, y: Any) -> SemiparametricRegressor:
        """Update with one sample or a batch, parametric part first.

        Parameters
        ----------
        X : array-like of shape (d,) or (n_samples, d)
        y : array-like of shape (T,) or (n_samples, T), or (n_samples,) for a batch
            (one output per sample: T = 1, and ``predict`` returns shape (n_samples,))

        Returns
        -------
        self
        """

        X2 = dense_block(_rows(X))  # the physical model sees dense rows
        Yh = _host(y)
        B.check_real(Yh, "y")
        # a batch's 1-D y is one output per sample; one sample's 1-D y is its T outputs
        one_d = np.ndim(X) == 2 and np.ndim(Yh) == 1
        Y = _rows(np.reshape(np.asarray(Yh), (-1, 1)) if one_d else Yh, "y")
        if len(Y) != X2.shape[0]:
            raise ValueError(
                f"X and y have different numbers of samples: {X2.shape[0]} and {len(Y)}"
            )
        if hasattr(self, "parametric_"):
            check_n_features(self, X2)
        P = self._phi(X2)
        if P.shape[1] != Y.shape[1]:
            raise ValueError(f"regressor gives {P.shape[1]} outputs, y has {Y.shape[1]}")
        if not hasattr(self, "parametric_"):
            p = P.shape[2]
            prior = (
                np.zeros(p)
                if self.initial_parameters is None
                else np.asarray(self.initial_parameters, dtype=np.float64)
            )
            if prior.shape != (p,) or not np.all(np.isfinite(prior)):
                raise ValueError(
                    f"initial_parameters must be {p} finite numbers, "
                    f"got {self.initial_parameters!r}"
                )
            self._prior = prior
            self.n_features_in_ = X2.shape[1]
            self.single_output_ = one_d
            self.parametric_ = RecursiveRLS(penalty=self.parametric_penalty)
            self.parametric_.partial_fit(P[0], Y[0] - P[0] @ prior)
            y_hat0 = np.einsum("ntp,p->nt", P, self.parameters_)
            inp = np.hstack([X2, y_hat0])
            self.input_mean_ = inp.mean(axis=0)
            scale = inp.std(axis=0)
            self.input_scale_ = np.where(scale > 0, scale, 1.0)
            fmap = self.features
            if fmap is None:
                width = float(np.sqrt(inp.shape[1]))
                fmap = RandomFourierFeatures(
                    Gaussian(width), n_features=self.n_features, random_state=self.random_state
                )
            self.correction_ = RecursiveRLS(self.penalty, features=fmap, forgetting=self.forgetting)
            start = 1
            self._correct(X2[:1], Y[:1], P[:1])
        else:
            start = 0
        for i in range(start, X2.shape[0]):
            self.parametric_.partial_fit(P[i], Y[i] - P[i] @ self._prior)
            self._correct(X2[i : i + 1], Y[i : i + 1], P[i : i + 1])
        return self

    def _normalized(self, X: np.ndarray, y_hat: np.ndarray) -> np.ndarray:
        return (np.hstack([X, y_hat]) - self.input_mean_) / self.input_scale_

    def _correct(self, X: np.ndarray, Y: np.ndarray, P: np.ndarray) -> None:
        y_hat = np.einsum("ntp,p->nt", P, self.parameters_)
        self.correction_.partial_fit(self._normalized(X, y_hat), Y - y_hat)

    @property
    @one_blas_thread
    def parameters_(self) -> np.ndarray:
        check_is_fitted(self)
        return self._prior + self.parametric_.coef_

    @one_blas_thread
    def predict_parametric(self, X: Any) -> np.ndarray:
        """The parametric part alone, ŷ = Φ(x) π̂.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples, T)
        """
        check_is_fitted(self)
        X2 = check_n_features(self, dense_block(_rows(X)))
        return B.like_input(np.einsum("ntp,p->nt", self._phi(X2), self.parameters_), X)

    @one_blas_thread
    def predict(self, X: Any) -> np.ndarray:
        """ŷ + Δŷ, shape (n_samples, T), or (n_samples,) after a fit on a 1-D y.

        Parameters
        ----------
        X : array-like of shape (d,) or (n_samples, d)
        """
        check_is_fitted(self)
        X2 = check_n_features(self, dense_block(_rows(X)))
        y_hat = self.predict_parametric(X2)
        delta = self.correction_.predict(self._normalized(X2, y_hat))
        out = y_hat + delta.reshape(y_hat.shape)
        if getattr(self, "single_output_", False):
            out = out[:, 0]
        return B.like_input(out, X)


def semiparametric_protocol(
    regressor: Any,
    X_train: Any,
    y_train: Any,
    X_stream: Any,
    y_stream: Any,
    *,
    n_parts: int = 10,
    part_size: int = 1000,
    window: int = 100,
    n_features: int = 300,
    penalty: float = 1e-3,
    random_state: Any = None,
) -> dict[str, Any]:
    """The thesis's ch. 8 comparison of a parametric (P), a nonparametric (NP) and a
    semiparametric (SP) model of inverse dynamics, learned online (§8.4, Fig. 8.4).

    All three learn (X_train, y_train) (one trajectory), then the stream's first
    ``n_parts`` parts of ``part_size`` samples arrive in order and every sample is predicted
    by each model as it stands, then learned (test-then-update, one sample at a time). P is
    the recursive RLS of the parameters π̂ on ``regressor`` (SP's parametric part: it learns
    the same with or without the correction); NP a ``RecursiveRLS`` on ``n_features``
    random Fourier features of the standardized inputs (Gaussian width sqrt(d), the
    standardization from X_train); SP ``SemiparametricRegressor(regressor, n_features=,
    penalty=)``.

    Parameters
    ----------
    regressor : callable (n, d) -> (n, T, p)
        Φ(x), as for ``SemiparametricRegressor``.
    X_train, y_train : array-like of shape (n_train, d) and (n_train, T)
    X_stream, y_stream : array-like of shape (n_stream, d) and (n_stream, T)
        At least ``n_parts * part_size`` samples.
    n_parts, part_size : int, default=10, 1000
    window : int, default=100
        Samples of the moving window of the windowed RMSE.
    n_features, penalty : the random features and λ of NP and of SP's correction.
    random_state : int, Generator or None

    Returns
    -------
    dict with, for each of "P", "NP", "SP": ``squared_errors[name]`` of shape (N,) (mean over
    the T outputs of each sample, N = n_parts * part_size), ``part_rmse[name]`` of shape
    (n_parts,), ``windowed_rmse[name]`` of shape (N - window + 1,) (the RMSE of samples
    i .. i + window - 1); and ``parameters`` (π̂ at the end).
    """

    n_parts = int(check_int(n_parts, "n_parts", 1))
    part_size = int(check_int(part_size, "part_size", 1))
    window = int(check_int(window, "window", 1))
    Xa, Xs = dense_block(_rows(X_train, "X_train")), dense_block(_rows(X_stream, "X_stream"))
    Ya = np.asarray(_host(y_train, "y_train"), dtype=np.float64).reshape(len(Xa), -1)
    Ys = np.asarray(_host(y_stream, "y_stream"), dtype=np.float64)
    Ys = Ys.reshape(len(Ys), -1)
    N = n_parts * part_size
    if len(Xs) < N or len(Ys) != len(Xs):
        raise ValueError(
            f"X_stream / y_stream: {n_parts} parts of {part_size} samples need {N} samples "
            f"of X_stream and y_stream, got {len(Xs)} and {len(Ys)}"
        )
    if Xs.shape[1] != Xa.shape[1] or Ys.shape[1] != Ya.shape[1]:
        raise ValueError(
            f"X_stream / y_stream have {Xs.shape[1]} features and {Ys.shape[1]} outputs, "
            f"X_train / y_train {Xa.shape[1]} and {Ya.shape[1]}"
        )
    if window > N:
        raise ValueError(f"window={window} is longer than the stream's {N} samples")
    rng = np.random.default_rng(random_state)
    seeds = rng.integers(2**63, size=2)
    sp = SemiparametricRegressor(
        regressor, n_features=n_features, penalty=penalty, random_state=int(seeds[0])
    ).fit(Xa, Ya)
    mu, sd = Xa.mean(axis=0), Xa.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    rff = RandomFourierFeatures(
        Gaussian(np.sqrt(Xa.shape[1])), n_features=n_features, random_state=int(seeds[1])
    )
    nonpar = RecursiveRLS(penalty, features=rff).fit((Xa - mu) / sd, Ya)
    err = {name: np.empty(N) for name in ("P", "NP", "SP")}
    for i in range(N):
        x, y = Xs[i : i + 1], Ys[i : i + 1]
        err["P"][i] = np.mean((sp.predict_parametric(x) - y) ** 2)
        err["SP"][i] = np.mean((sp.predict(x) - y) ** 2)
        err["NP"][i] = np.mean((nonpar.predict((x - mu) / sd).reshape(y.shape) - y) ** 2)
        sp.partial_fit(x, y)
        nonpar.partial_fit((x - mu) / sd, y)
    kernel = np.ones(window) / window
    return {
        "squared_errors": err,
        "part_rmse": {
            k: np.sqrt(v.reshape(n_parts, part_size).mean(axis=1)) for k, v in err.items()
        },
        "windowed_rmse": {k: np.sqrt(np.convolve(v, kernel, mode="valid")) for k, v in err.items()},
        "parameters": sp.parameters_.copy(),
    }
