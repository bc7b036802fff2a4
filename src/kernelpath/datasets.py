"""Data loaders and the synthetic problems of the papers.

Loaders return ``(X, y)`` as float64 NumPy arrays (X of a LIBSVM file as CSR):

- ``load_libsvm``: LIBSVM / svmlight text (plain, .gz or .bz2), as a CSR matrix (or dense);
- ``load_csv``: delimited text with or without a header, choosing the target column(s);
- ``load_arff``: ARFF files (SciPy's reader), numeric attributes;
- ``load_mat``: MATLAB v5 .mat files with named train/test arrays;
- ``load_shared``: the benchmark data sets of the project's shared data folder by name.

Synthetic: ``make_sin_regression`` is the foundation benchmark's problem
x ~ N(0, I_d), y = sin(<w, x>) + noise * eps with ||w|| = 1.
"""

from __future__ import annotations

import bz2
import gzip
import io
import os
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

import numpy as np

from ._backend import resolve_memory_budget
from ._validation import check_choice, check_float, check_int, make_rng

__all__ = [
    "load_libsvm",
    "load_csv",
    "load_arff",
    "load_mat",
    "load_shared",
    "shared_data_dir",
    "make_sin_regression",
    "SHARED_DATASETS",
]


def _open_text(path: str | os.PathLike[str]) -> io.TextIOBase:
    p = str(path)
    if p.endswith(".bz2"):
        return io.TextIOWrapper(bz2.open(p, "rb"))
    if p.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(p, "rb"))
    return open(p)  # noqa: SIM115


def load_libsvm(
    path: str | os.PathLike[str], n_features: int | None = None, dense: bool = False
) -> tuple[Any, np.ndarray]:
    """Read a LIBSVM / svmlight file (optionally .gz / .bz2): X as a CSR matrix (every
    estimator takes one), or dense.

    Parameters
    ----------
    path : path-like
    n_features : int or None
        Number of columns (default: the largest feature index seen).
    dense : bool, default=False
        Return X as a dense float64 array instead (refused when it would not fit the
        default memory budget).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n, d), float64 (ndarray with ``dense=True``)
    y : ndarray of shape (n,)

    Raises
    ------
    ValueError
        With ``dense=True``, the dense X would not fit the default memory budget (a feature
        index of 2·10⁹ in a two-line file asks for n × 2·10⁹ × 8 bytes): refused before it is
        allocated.
    """
    from sklearn.datasets import load_svmlight_file

    if not isinstance(dense, (bool, np.bool_)):
        raise TypeError(f"dense must be True or False, got {dense!r}")
    X, y = load_svmlight_file(str(path), n_features=n_features)
    y = np.asarray(y, dtype=np.float64)
    if not dense:
        return X.tocsr().astype(np.float64), y
    n, d = X.shape
    need, budget = n * d * 8, resolve_memory_budget(None)
    if need > budget:
        raise ValueError(
            f"path: {path} densified is {n} rows x {d} features ({need / 2**30:.3g} GiB: the "
            f"largest feature index sets d), more than the memory at hand "
            f"({budget / 2**30:.3g} GiB); read it sparse (dense=False): every estimator "
            "takes a CSR matrix"
        )
    return np.asarray(X.toarray(), dtype=np.float64), y


def load_csv(
    path: str | os.PathLike[str],
    target: int | Sequence[int] = -1,
    delimiter: str | None = ",",
    header: bool | None = None,
    skip_rows: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Read a delimited text file of numbers (optionally .gz / .bz2) into dense arrays.

    Parameters
    ----------
    path : path-like
        The file.
    target : int or sequence of int, default=-1
        The column(s) of y (negative: from the end).
    delimiter : str or None, default=","
        The separator (None: any whitespace).
    header : bool or None, default=None
        Whether the first line is a header; None detects one (a first line that does not
        parse as numbers).
    skip_rows : int, default=0
        Lines skipped before the header (e.g. a shape line).

    Returns
    -------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,) or (n, n_targets)
    """
    with _open_text(path) as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.strip()][skip_rows:]
    if not lines:
        raise ValueError(f"{path}: no data")

    def split(line: str) -> list[str]:
        return [
            t.strip().strip('"') for t in (line.split(delimiter) if delimiter else line.split())
        ]

    if header is None:
        try:
            [float(t) for t in split(lines[0])]
            header = False
        except ValueError:
            header = True
    rows = lines[1:] if header else lines
    data = np.array([[float(t) for t in split(ln)] for ln in rows], dtype=np.float64)
    cols = np.arange(data.shape[1])
    tcols = np.atleast_1d(cols[np.asarray(target)])
    xcols = np.setdiff1d(cols, tcols)
    y = data[:, tcols]
    return data[:, xcols], (y[:, 0] if y.shape[1] == 1 else y)


def load_arff(path: str | os.PathLike[str], target: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Read an ARFF file with numeric attributes.

    Parameters
    ----------
    path : path-like
        The file.
    target : int, default=-1
        The attribute index of y.

    Returns
    -------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
    """
    from scipy.io import arff

    data, _ = arff.loadarff(str(path))
    arr = np.column_stack([np.asarray(data[name], dtype=np.float64) for name in data.dtype.names])
    cols = np.arange(arr.shape[1])
    t = cols[target]
    return arr[:, cols != t], arr[:, t]


def load_mat(path: str | os.PathLike[str], *names: str) -> tuple[np.ndarray, ...]:
    """Read named arrays from a MATLAB v5 .mat file (float64; column vectors flattened).

    Parameters
    ----------
    path : path-like
        The file.
    *names : str
        The arrays to read, in the order returned.

    Returns
    -------
    tuple of ndarray
    """
    from scipy.io import loadmat

    d = loadmat(str(path))
    out = []
    for name in names:
        if name not in d:
            raise KeyError(
                f"{path} has no array {name!r}; it has {sorted(k for k in d if k[0] != '_')}"
            )
        a = np.asarray(d[name], dtype=np.float64)
        out.append(a.ravel() if a.ndim == 2 and a.shape[1] == 1 else a)
    return tuple(out)


def shared_data_dir() -> FsPath | None:
    """The shared data folder, or None when absent.

    ``$KERNELPATH_DATA``, else ``../shared/data`` from the working directory or from this
    source tree.

    Returns
    -------
    pathlib.Path or None
    """
    candidates = []
    env = os.environ.get("KERNELPATH_DATA")
    if env:
        candidates.append(FsPath(env))
    candidates.append(FsPath.cwd().parent / "shared" / "data")
    here = FsPath(__file__).resolve()
    for parent in here.parents[:5]:
        candidates.append(parent.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


#: name -> (loader, relative path(s), options): the data sets of the shared folder.
SHARED_DATASETS: dict[str, dict[str, Any]] = {
    "cpusmall": {"kind": "csv", "file": "cpusmall/cpu_small.csv", "skip_rows": 1, "header": False},
    "pumadyn32nh": {"kind": "arff", "file": "pumadyn32nh/puma32H.arff"},
    "ijcnn1": {"kind": "libsvm", "train": "ijcnn1/ijcnn1.trn.bz2", "test": "ijcnn1/ijcnn1.tst.bz2"},
    "adult": {"kind": "libsvm", "train": "adult/adult.trn.bz2", "test": "adult/adult.tst.bz2"},
    "breastcancer": {"kind": "mat", "file": "breastcancer/breastcancer_nytro.mat"},
    "protein": {"kind": "csv", "file": "uci/protein-structure.csv", "target": 0},
    "kin8nm": {"kind": "csv", "file": "uci/kin8nm.csv"},
    "power-plant": {"kind": "csv", "file": "uci/power-plant.csv"},
    "concrete": {"kind": "csv", "file": "uci/concrete.csv"},
    "abalone": {"kind": "libsvm", "file": "abalone/abalone.trn.bz2"},
    "usps": {"kind": "text", "train": "usps/zip.train.gz", "test": "usps/zip.test.gz"},
    "mnist": {"kind": "npz", "file": "mnist/mnist.npz"},
}


def load_shared(name: str, root: str | os.PathLike[str] | None = None) -> dict[str, np.ndarray]:
    """Load a shared benchmark data set by name.

    Parameters
    ----------
    name : str
        One of ``SHARED_DATASETS``.
    root : path-like or None, default=None
        The shared data folder (default: ``shared_data_dir()``).

    Returns
    -------
    dict
        ``X``, ``y`` (the whole set) or, where the set comes split, ``X_train``,
        ``y_train``, ``X_test``, ``y_test``.

    Raises
    ------
    FileNotFoundError
        When the shared data folder (or the file) is absent.
    """
    if name not in SHARED_DATASETS:
        raise ValueError(f"name must be one of {sorted(SHARED_DATASETS)}, got {name!r}")
    base = FsPath(root) if root is not None else shared_data_dir()
    if base is None or not base.is_dir():
        raise FileNotFoundError("the shared data folder is not available")
    spec = SHARED_DATASETS[name]
    kind = spec["kind"]
    if kind == "mat":
        Xtr, ytr, Xte, yte = load_mat(base / spec["file"], "Xtr", "Ytr", "Xte", "Yte")
        return {"X_train": Xtr, "y_train": ytr, "X_test": Xte, "y_test": yte}
    if kind == "npz":  # the official split; uint8 pixels as float64, labels as int64
        with np.load(base / spec["file"], allow_pickle=False) as z:
            out = {k: np.asarray(z[k]) for k in ("x_train", "y_train", "x_test", "y_test")}
        return {
            "X_train": out["x_train"].reshape(len(out["x_train"]), -1).astype(np.float64),
            "y_train": out["y_train"].astype(np.int64),
            "X_test": out["x_test"].reshape(len(out["x_test"]), -1).astype(np.float64),
            "y_test": out["y_test"].astype(np.int64),
        }
    if kind == "text":  # whitespace-separated numbers, the label in the first column
        tr = np.loadtxt(base / spec["train"], ndmin=2)
        te = np.loadtxt(base / spec["test"], ndmin=2)
        return {"X_train": tr[:, 1:], "y_train": tr[:, 0], "X_test": te[:, 1:], "y_test": te[:, 0]}
    if kind == "libsvm" and "train" in spec:
        Xtr, ytr = load_libsvm(base / spec["train"], dense=True)
        Xte, yte = load_libsvm(base / spec["test"], n_features=Xtr.shape[1], dense=True)
        d = max(Xtr.shape[1], Xte.shape[1])
        if Xtr.shape[1] < d:
            Xtr = np.hstack([Xtr, np.zeros((len(Xtr), d - Xtr.shape[1]))])
        return {"X_train": Xtr, "y_train": ytr, "X_test": Xte, "y_test": yte}
    path = base / spec["file"]
    if kind == "libsvm":
        X, y = load_libsvm(path, dense=True)
    elif kind == "arff":
        X, y = load_arff(path)
    else:
        X, y = load_csv(
            path,
            target=spec.get("target", -1),
            header=spec.get("header"),
            skip_rows=spec.get("skip_rows", 0),
        )
    return {"X": X, "y": y}


def make_sin_regression(
    n_samples: int,
    n_features: int = 20,
    noise: float = 0.1,
    random_state: Any = None,
    w: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw x ~ N(0, I_d), y = sin(<w, x>) + noise * eps, eps ~ N(0, 1), with ||w|| = 1.

    Parameters
    ----------
    n_samples : int
        Rows drawn.
    n_features : int, default=20
        Dimension d.
    noise : float, default=0.1
        Standard deviation of the noise (the test RMSE no model beats on average).
    random_state : int, Generator or None, default=None
        Seed of the draw.
    w : ndarray of shape (n_features,) or None, default=None
        The direction; None draws one (pass the returned one back to draw a test set).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    w : ndarray of shape (n_features,)
        The direction (pass it back to draw a test set of the same problem).
    """
    rng = np.random.default_rng(random_state)
    if w is None:
        w = rng.standard_normal(n_features)
        w /= np.linalg.norm(w)
    X = rng.standard_normal((n_samples, n_features))
    y = np.sin(X @ w) + noise * rng.standard_normal(n_samples)
    return X, y, w


# ------------------------------------------------------------------ arm dynamics
#: Inertial parameters of the simulated planar arm: masses (kg), lengths and centers of
#: mass (m), link inertias about their centers (kg m^2), gravity (m/s^2).
ARM = {"m1": 2.0, "m2": 1.2, "l1": 0.5, "lc1": 0.25, "lc2": 0.2, "I1": 0.05, "I2": 0.02, "g": 9.81}
#: Effects the rigid-body model misses: viscous and Coulomb friction, joint elasticity.
ARM_UNMODELED: dict[str, tuple[float, float]] = {
    "viscous": (0.3, 0.2),
    "coulomb": (0.3, 0.2),
    "stiffness": (0.5, 0.3),
    "rest": (-0.5, 2.0),
}
#: The two trajectories: circles of the end effector in two regions of the workspace.
ARM_TRAJECTORIES: dict[str, dict[str, Any]] = {
    "circle-a": {"center": (0.45, 0.15), "radius": 0.12, "period": 2.0},
    "circle-b": {"center": (0.25, -0.35), "radius": 0.10, "period": 1.6},
}


def arm_parameters() -> np.ndarray:
    """The base inertial parameters π of the simulated arm (5,): I1 + m1 lc1² + m2 l1²,
    I2 + m2 lc2², m2 l1 lc2, m1 lc1 + m2 l1, m2 lc2."""
    a = ARM
    return np.array(
        [
            a["I1"] + a["m1"] * a["lc1"] ** 2 + a["m2"] * a["l1"] ** 2,
            a["I2"] + a["m2"] * a["lc2"] ** 2,
            a["m2"] * a["l1"] * a["lc2"],
            a["m1"] * a["lc1"] + a["m2"] * a["l1"],
            a["m2"] * a["lc2"],
        ]
    )


def arm_regressor(X: np.ndarray) -> np.ndarray:
    """Φ(q, q̇, q̈) of the planar two-link arm in a vertical plane: τ = Φ π.

    Parameters
    ----------
    X : ndarray of shape (n, 6) or (6,)
        [q1, q2, q̇1, q̇2, q̈1, q̈2] (rad, rad/s, rad/s²).

    Returns
    -------
    ndarray of shape (n, 2, 5) (or (2, 5) for one sample)
    """
    X = np.asarray(X, dtype=np.float64)
    one = X.ndim == 1
    X2 = X[None] if one else X
    q1, q2, dq1, dq2, ddq1, ddq2 = X2.T
    g = ARM["g"]
    c2, s2 = np.cos(q2), np.sin(q2)
    c1, c12 = np.cos(q1), np.cos(q1 + q2)
    zero = np.zeros_like(q1)
    row1 = np.stack(
        [
            ddq1,
            ddq1 + ddq2,
            c2 * (2 * ddq1 + ddq2) - s2 * (2 * dq1 * dq2 + dq2**2),
            g * c1,
            g * c12,
        ],
        axis=1,
    )
    row2 = np.stack([zero, ddq1 + ddq2, c2 * ddq1 + s2 * dq1**2, zero, g * c12], axis=1)
    out = np.stack([row1, row2], axis=1)
    return out[0] if one else out


def _inverse_kinematics(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    l1, l2 = ARM["l1"], 0.45
    c2 = np.clip((x**2 + y**2 - l1**2 - l2**2) / (2 * l1 * l2), -1.0, 1.0)
    q2 = np.arccos(c2)  # elbow down
    q1 = np.arctan2(y, x) - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2))
    return q1, q2


def make_arm_dynamics(
    n_samples: int,
    trajectory: str = "circle-a",
    unmodeled: bool = True,
    noise: float = 0.05,
    random_state: Any = None,
    dt: float = 0.01,
) -> tuple[np.ndarray, np.ndarray, Any, np.ndarray]:
    """Inverse dynamics of a simulated planar two-link arm (thesis ch. 8's iCub arm, in small).

    The end effector traces a circle ("circle-a" or "circle-b": two regions of the
    workspace, like the thesis's XY and XZ circles) with a slowly varying speed; joint
    angles come from inverse kinematics, velocities and accelerations from the analytic
    derivatives of the path (central differences on a 10x finer grid). Torques follow the
    rigid-body model τ = Φ(q, q̇, q̈) π, plus, with ``unmodeled=True``, viscous and Coulomb
    friction and a joint elasticity the model misses, plus Gaussian sensor noise.

    Parameters
    ----------
    n_samples : int
    trajectory : {"circle-a", "circle-b"}
    unmodeled : bool, default=True
    noise : float, default=0.05
        Standard deviation of the torque noise (N m).
    random_state : int, Generator or None
        Phase of the circle, speed modulation and noise.
    dt : float, default=0.01
        Sampling period (s).

    Returns
    -------
    X : ndarray of shape (n_samples, 6)
        [q1, q2, q̇1, q̇2, q̈1, q̈2].
    tau : ndarray of shape (n_samples, 2)
        Joint torques.
    regressor : callable
        ``arm_regressor``: X -> Φ of shape (n, 2, 5).
    pi : ndarray of shape (5,)
        The true base parameters.
    """

    n = check_int(n_samples, "n_samples", 1)
    assert n is not None
    trajectory = check_choice(trajectory, "trajectory", tuple(ARM_TRAJECTORIES))
    noise = check_float(noise, "noise", 0.0, np.inf, high_open=True)
    dt = check_float(dt, "dt", 0.0, np.inf, low_open=True, high_open=True)
    rng = make_rng(random_state)
    spec = ARM_TRAJECTORIES[trajectory]
    phase0 = rng.uniform(0, 2 * np.pi)
    wobble = rng.uniform(0.1, 0.3)
    fine = 10
    h = dt / fine
    t = np.arange(n * fine + 4) * h - 2 * h
    omega = 2 * np.pi / spec["period"]
    phase = phase0 + omega * t + wobble * np.sin(0.5 * omega * t)
    cx, cy = spec["center"]
    x = cx + spec["radius"] * np.cos(phase)
    y = cy + spec["radius"] * np.sin(phase)
    q1, q2 = _inverse_kinematics(x, y)
    Q = np.column_stack([q1, q2])
    dQ = np.gradient(Q, h, axis=0)
    ddQ = np.gradient(dQ, h, axis=0)
    keep = slice(2, 2 + n * fine, fine)
    X = np.column_stack([Q[keep], dQ[keep], ddQ[keep]])
    pi = arm_parameters()
    tau = np.einsum("ntp,p->nt", arm_regressor(X), pi)
    if unmodeled:
        fv = np.array(ARM_UNMODELED["viscous"])
        fc = np.array(ARM_UNMODELED["coulomb"])
        k = np.array(ARM_UNMODELED["stiffness"])
        rest = np.array(ARM_UNMODELED["rest"])
        tau = tau + fv * X[:, 2:4] + fc * np.tanh(X[:, 2:4] / 0.05) + k * (X[:, :2] - rest)
    tau = tau + noise * rng.standard_normal(tau.shape)
    return X, tau, arm_regressor, pi
