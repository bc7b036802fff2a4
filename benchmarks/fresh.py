"""The benchmark harness: how every benchmark script measures, records and tabulates.

A measurement runs in a fresh process, as a user's fit does (``call``: a function of a
benchmark module; ``fit``, ``pass``, ``mnist``: one library's fit of problem P or MNIST,
also in FALKON's own virtual environment). The compared configurations alternate round
after round, so that a drift of the machine falls on all of them, and the median of the
rounds is kept (``rounds``, ``summary``). Results go to ``benchmarks/results/NAME.json``
with the machine's description (``machine``, ``record``), and the documents' tables are
made from those files alone (``markdown``, ``write_block``; ``python benchmarks/run.py
tables`` writes them). A script's command line is built from its functions (``cli``).

    python benchmarks/fresh.py call MODULE FUNCTION '{"name": 1}'   # one call, a JSON line
    python benchmarks/fresh.py data --n 200000 --out DIR            # problem P as .npy files
    python benchmarks/fresh.py fit --lib kernelpath|falkon|sklearn --data DIR [options]
    python benchmarks/fresh.py pass --data DIR [options]            # one streamed pass
    python benchmarks/fresh.py mnist --root ROOT [options]          # MNIST's official split

A timed worker loads its data, waits for the memory to settle, times the library's ``fit``
alone (synchronized with the GPU at both ends on CUDA, after a small warm-up fit there)
and prints one JSON line: seconds, the test metric, the peak resident memory above the
loaded data (sampled every 5 ms) and, on CUDA, the peak device memory.

Only NumPy is imported at module level: the workers also run in FALKON's virtual
environment (``../shared/tools/build_falkon_cpu.sh``), where kernelpath is not installed.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: the results folder (``KERNELPATH_BENCH_RESULTS`` moves it, e.g. for a trial run)
RESULTS = Path(os.environ.get("KERNELPATH_BENCH_RESULTS", HERE / "results"))
SHARED = ROOT.parent / "shared"
#: where the generated problems are written once (``problem``)
DATA_ROOT = Path(os.environ.get("KERNELPATH_BENCH_DATA", "/tmp/kernelpath-bench"))


# ------------------------------------------------------------------ measuring in a worker
def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """Peak resident memory above the baseline at entry, sampled every 5 ms."""

    def __enter__(self) -> PeakMemory:
        self.base = _rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.005)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())

    @property
    def mb(self) -> float:
        return (self.peak - self.base) / 1e6


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``'s result, its seconds and its peak resident memory (MB above the start)."""
    with PeakMemory() as mem:
        t = time.perf_counter()
        out = fn()
        sec = time.perf_counter() - t
    return out, sec, mem.mb


def rmse(a: Any, b: Any) -> float:
    return float(np.sqrt(np.mean((np.asarray(a, float) - np.asarray(b, float)) ** 2)))


# ------------------------------------------------------------------ fresh processes
def run_fresh(
    args: list[str],
    *,
    python: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    tolerate: bool = False,
) -> Any:
    """``fresh.py ARGS`` in a fresh process (``python``: another interpreter, e.g. FALKON's
    venv); its last JSON line. With ``tolerate``, a failure or a timeout is returned as
    ``{"failed": ...}`` or ``{"timed_out": seconds}`` instead of raised."""
    cmd = [python or sys.executable, str(HERE / "fresh.py"), *args]
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout)
    except subprocess.TimeoutExpired:
        if tolerate:
            return {"timed_out": timeout}
        raise
    if proc.returncode != 0:
        if tolerate:
            return {"failed": proc.stderr[-3000:]}
        raise RuntimeError(f"{' '.join(args[:3])} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def call(module: str, function: str, *, fresh: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """``module.function(**kwargs)`` (a module of ``benchmarks/`` or ``benchmarks/paper/``)
    in a fresh process; ``fresh``: ``run_fresh``'s options."""
    args = ["call", module, function, json.dumps(kwargs, default=jsonable)]
    return run_fresh(args, **(fresh or {}))


def jsonable(value: Any) -> Any:
    """JSON for NumPy's scalars and arrays."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def rounds(
    jobs: dict[str, Callable[[int], dict[str, Any]]], runs: int, pause: float = 0.0
) -> dict[str, list[dict[str, Any]]]:
    """Each job once per round, in order, for ``runs`` rounds (a job is given the round's
    number, 0, 1, ...: its seed where the rounds draw anew); every result printed as it
    comes. ``pause``: seconds between two jobs (the memory a process freed settles)."""
    got: dict[str, list[dict[str, Any]]] = {label: [] for label in jobs}
    for r in range(runs):
        for label, job in jobs.items():
            got[label].append(job(r))
            brief = {k: v for k, v in got[label][-1].items() if isinstance(v, (int, float, str))}
            print(
                f"round {r + 1}, {label}: {json.dumps(brief, default=jsonable)[:300]}", flush=True
            )
            time.sleep(pause)
    return got


def summary(
    results: list[dict[str, Any]],
    key: str = "fit_s",
    median: tuple[str, ...] = (),
    mean: tuple[str, ...] = (),
    first: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The rounds of one configuration: the median of ``key`` and of ``median``'s keys, the
    mean of ``mean``'s, the largest ``peak_mb``, the first round's ``first`` keys, and every
    round's ``key`` (``{key}_runs``); rounds that failed or timed out are counted."""
    done = [r for r in results if key in r]
    out: dict[str, Any] = {"runs": len(done), f"{key}_runs": [r[key] for r in done]}
    if len(done) < len(results):
        out["not_measured"] = len(results) - len(done)
    if not done:
        return out
    out[key] = float(np.median(out[f"{key}_runs"]))
    for k in median:
        out[k] = float(np.median([r[k] for r in done]))
    for k in mean:
        out[k] = float(np.mean([r[k] for r in done]))
    if any("peak_mb" in r for r in done):
        out["peak_mb"] = float(max(r.get("peak_mb", 0.0) for r in done))
    for k in first:
        out[k] = done[0].get(k)
    return out


def median_round(results: list[dict[str, Any]], key: str = "time") -> dict[str, Any]:
    """The round whose ``key`` is the median (the upper one of an even count), with every
    round's ``key`` as ``times``."""
    times = [r[key] for r in results]
    return {**results[int(np.argsort(times)[len(times) // 2])], "times": times}


# ------------------------------------------------------------------ results
@functools.lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """This machine: cores, platform, versions, the BLAS libraries and the kernels OpenBLAS
    picked, and its ceilings measured now (``../shared/tools/machine_limits.py``, where it
    is): matrix-multiply rates, exponentials per second, read bandwidth."""
    import importlib.util
    import platform

    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    import kernelpath

    info: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "kernelpath": kernelpath.__version__,
        "blas": [
            {k: d.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for d in threadpool_info()
            if d.get("user_api") == "blas"
        ],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    tool = SHARED / "tools" / "machine_limits.py"
    if tool.is_file():
        spec = importlib.util.spec_from_file_location("machine_limits", tool)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        one, every = mod.exp_rates(np.float64, 2**24, 3, info["cores"])
        info["limits"] = {
            "gemm_gflops_float64": round(mod.gemm_rate(np.float64, 2048, 3), 1),
            "gemm_gflops_float32": round(mod.gemm_rate(np.float32, 2048, 3), 1),
            "exp_gelem_allcores_float64": round(every, 2),
            "exp_gelem_1thread_float64": round(one, 2),
            "read_gb_s": round(mod.read_bandwidth(2**27, 3), 1),
        }
    return info


#: The hosts the results ran on, by the BLAS kernels OpenBLAS picked there.
HOSTS = {"SkylakeX": "Intel (SkylakeX)", "Haswell": "AMD EPYC (Haswell)"}


def host(info: dict[str, Any] | None) -> str:
    """The host of a result's machine; results recorded without one ran on the Intel host."""
    blas = (info or {}).get("blas") or [{}]
    arch = blas[0].get("architecture") or "SkylakeX"
    return HOSTS.get(arch, arch)


def load(name: str, default: Any = None) -> Any:
    """``results/NAME.json``, or ``default`` where it does not exist."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else default


def save(name: str, doc: Any) -> Path:
    """Write ``results/NAME.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1, default=jsonable) + "\n")
    print(f"wrote {path}", flush=True)
    return path


def record(name: str, key: str, entry: dict[str, Any], within: str | None = None) -> None:
    """Set ``entry``, with this machine's description, as ``key`` of ``results/NAME.json``
    (of its ``within`` part), beside the entries other runs recorded."""
    doc = load(name, {})
    part = doc.setdefault(within, {}) if within else doc
    part[key] = {**entry, "machine": machine()}
    save(name, doc)


def suite(module: str, name: str, quick: bool, function: str = "suite") -> str:
    """``module.function(quick=quick)`` in a fresh process, its result saved with this
    machine as ``results/NAME.json`` (``NAME-quick.json`` for a quick run); the name."""
    name += "-quick" if quick else ""
    save(name, {"machine": machine(), "result": call(module, function, quick=quick)})
    return name


def problem(n: int, n_test: int = 50_000, d: int = 20) -> str:
    """The folder of problem P with ``n`` training rows (written once by ``fresh.py data``)."""
    out = DATA_ROOT / (f"P{n}" if (n_test, d) == (50_000, 20) else f"P{n}-{n_test}-{d}")
    if not (out / "yt.npy").is_file():
        args = ["data", "--n", str(n), "--n-test", str(n_test), "--d", str(d), "--out", str(out)]
        subprocess.run([sys.executable, str(HERE / "fresh.py"), *args], check=True)
    return str(out)


def falkon_python() -> str | None:
    """The python of FALKON's venv: $KERNELPATH_FALKON_PYTHON, else the build script's
    default places (../../falkon-venv beside the checkout, $TMPDIR or /tmp)."""
    candidates = [
        os.environ.get("KERNELPATH_FALKON_PYTHON"),
        str(ROOT.parent / "falkon-venv" / "bin" / "python"),
        str(Path(os.environ.get("TMPDIR", "/tmp")) / "falkon-venv" / "bin" / "python"),
    ]
    for c in candidates:
        if c and Path(c).is_file():
            if subprocess.run([c, "-c", "import falkon"], capture_output=True).returncode == 0:
                return c
    return None


def shared_split(name: str, rows: int | None = None) -> tuple[np.ndarray, ...]:
    """A shared set as the suites split it: the official split where there is one, else
    80/20 at random (seed 0); inputs standardized on the training part but adult's 0/1
    indicators; ``rows``: only the first rows of each part."""
    from sklearn.preprocessing import StandardScaler

    from kernelpath.datasets import load_shared

    d = load_shared(name)
    if "X" in d:
        perm = np.random.default_rng(0).permutation(len(d["X"]))
        cut = int(0.8 * len(perm))
        Xtr, ytr = d["X"][perm[:cut]], d["y"][perm[:cut]]
        Xte, yte = d["X"][perm[cut:]], d["y"][perm[cut:]]
    else:
        Xtr, ytr, Xte, yte = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    if rows is not None:
        Xtr, ytr, Xte, yte = Xtr[:rows], ytr[:rows], Xte[:rows], yte[:rows]
    if name != "adult":
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    return Xtr, ytr, Xte, yte


# ------------------------------------------------------------------ tables and command lines
def markdown(header: list[str], rows: list[list[Any]], align: str = "") -> str:
    """A Markdown table; ``align``: one letter a column, "l" or "r" (default: the first
    column left, the others right)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_block(path: Path, name: str, text: str) -> bool:
    """Put ``text`` between ``<!-- name: start -->`` and ``<!-- name: end -->`` in
    ``path``; whether the file changed (False where it has no such markers)."""
    page = path.read_text()
    start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
    if start not in page or end not in page:
        return False
    i, j = page.index(start) + len(start), page.index(end)
    new = page[:i] + "\n\n" + text.strip() + "\n\n" + page[j:]  # blank lines: Markdown blocks
    if new != page:
        path.write_text(new)
    return new != page


def names(text: str) -> list[str]:
    """A comma-separated option as a list."""
    return [s for s in text.split(",") if s]


def cli(doc: str | None, commands: dict[str, Callable[..., Any]], argv: Any = None) -> int:
    """A script's command line from its functions: ``SCRIPT COMMAND [--option VALUE]``,
    one option a keyword of the command's function (its default gives the type; a bool
    default makes a flag), the function's docstring its help. What the command returns is
    printed: a string as it is, anything else as JSON."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for name, fn in commands.items():
        text = inspect.getdoc(fn) or ""
        raw = argparse.RawDescriptionHelpFormatter
        first = text.split("\n\n")[0].replace("%", "%%")
        p = sub.add_parser(name, help=first, description=text, formatter_class=raw)
        for param in inspect.signature(fn).parameters.values():
            flag, default = "--" + param.name.replace("_", "-"), param.default
            if isinstance(default, bool):
                p.add_argument(flag, dest=param.name, action="store_true")
            else:
                kind = str if default is None else type(default)
                p.add_argument(flag, dest=param.name, default=default, type=kind)
    given = vars(ap.parse_args(argv))
    out = commands[given.pop("command")](**given)
    if isinstance(out, str):
        print(out)
    elif out is not None:
        print(json.dumps(out, indent=1, default=jsonable))
    return 0


# ------------------------------------------------------------------ the timed workers
def make_data(n: int, n_test: int, d: int, seed: int, out: str) -> None:
    """Problem P: x ~ N(0, I_d), y = sin<w, x> + 0.1 eps with ||w|| = 1, the test points
    from the same w (``kernelpath.datasets.make_sin_regression``'s generator calls)."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    y = np.sin(X @ w) + 0.1 * rng.standard_normal(n)
    rt = np.random.default_rng(seed + 1)
    Xt = rt.standard_normal((n_test, d))
    yt = np.sin(Xt @ w) + 0.1 * rt.standard_normal(n_test)
    for name, a in (("X", X), ("y", y), ("Xt", Xt), ("yt", yt)):
        np.save(os.path.join(out, f"{name}.npy"), a)


def load_problem(data: str, dtype: str = "float64") -> tuple[np.ndarray, ...]:
    """(X, y, X_test, y_test) of a folder ``make_data`` wrote, in ``dtype``."""
    arrays = [np.load(os.path.join(data, f"{k}.npy")) for k in ("X", "y", "Xt", "yt")]
    return tuple(np.ascontiguousarray(a, dtype=dtype) for a in arrays)


def _cuda(device: str | None) -> bool:
    return device is not None and device.startswith("cuda")


def _sync(device: str | None) -> None:
    """Wait for the GPU's queued work (a fit's time must include it)."""
    if _cuda(device):
        import torch

        torch.cuda.synchronize()


def _device_peak(device: str | None) -> dict[str, Any]:
    if not _cuda(device):
        return {}
    import torch

    return {
        "peak_device_mb": torch.cuda.max_memory_allocated() / 1e6,
        "gpu": torch.cuda.get_device_name(),
    }


def _fresh_device(device: str | None) -> None:
    """Forget the warm-up's memory before the timed fit."""
    if _cuda(device):
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def factor_info(est: Any) -> dict[str, Any]:
    """The form of a fit's factor of the centers' system (the chosen path's info)."""
    info = getattr(getattr(est, "path_", None), "info", {}) or {}
    keys = ("factor", "factor_dtype", "preconditioners", "jitter", "precondition_shift")
    return {k: info.get(k) for k in (*keys, "factor_on_device") if k in info}


def _fused_state() -> dict[str, Any]:
    """Whether kernelpath's fused Triton kernel was on, and the dtypes it fell back for."""
    try:
        from kernelpath import _fused
    except ImportError:
        return {}
    return {"fused_kernel": _fused.enabled(), "fused_failed": sorted(map(str, _fused._failed))}


def fit_kernelpath(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    from kernelpath import Gaussian, NystromRegressor

    est = NystromRegressor(
        Gaussian(a.sigma),
        penalty=a.penalty if a.path is None else np.geomspace(1e-3, 1e-9, a.path),
        n_centers=a.m,
        solver="cg",
        max_iter=a.iters,
        tol=0.0,
        validation_fraction=0.0 if a.path is None else 0.2,
        memory_budget=a.budget,
        random_state=0,
        factor_layout=a.factor_layout,
        **({} if a.device is None else {"device": a.device}),
    )
    _sync(a.device)
    t = time.perf_counter()
    est.fit(X, y)
    _sync(a.device)
    sec = time.perf_counter() - t
    extra = {"n_iter": est.n_iter_, "best_params": est.best_params_, "factor": factor_info(est)}
    return sec, est.predict(Xt), {**extra, **_fused_state()}


def fit_falkon(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    """FALKON 0.9: ``Falkon`` for host data (on the CPU, or streamed to the GPU with
    ``--device cuda``), ``InCoreFalkon`` for data already on the GPU (``--tensors --device
    cuda``); KeOps off, its other options at their defaults."""
    import falkon
    import torch

    cuda = _cuda(a.device)
    opts = falkon.FalkonOptions(
        use_cpu=not cuda,
        keops_active="no",
        **({} if cuda else {"max_cpu_mem": float(a.falkon_mem)}),
        debug=False,
    )
    kernel = falkon.kernels.GaussianKernel(sigma=a.sigma, opt=opts)
    cls = falkon.InCoreFalkon if cuda and torch.is_tensor(X) and X.is_cuda else falkon.Falkon
    model = cls(kernel=kernel, penalty=a.penalty, M=a.m, maxiter=a.iters, seed=0, options=opts)
    X_, Xt_ = (v if torch.is_tensor(v) else torch.from_numpy(v) for v in (X, Xt))
    y_ = (y if torch.is_tensor(y) else torch.from_numpy(y)).reshape(-1, 1)
    _sync(a.device)
    t = time.perf_counter()
    model.fit(X_, y_)
    _sync(a.device)
    sec = time.perf_counter() - t
    pred = model.predict(Xt_).cpu().numpy().ravel()
    return sec, pred, {"threads": torch.get_num_threads(), "falkon_class": cls.__name__}


def fit_sklearn(a: argparse.Namespace, X: Any, y: Any, Xt: Any) -> tuple[float, Any, dict]:
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    est = make_pipeline(
        Nystroem(kernel="rbf", gamma=1 / (2 * a.sigma**2), n_components=a.m, random_state=0),
        Ridge(alpha=a.penalty * len(X)),
    )
    t = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t, est.predict(Xt), {}


FITS = {"kernelpath": fit_kernelpath, "falkon": fit_falkon, "sklearn": fit_sklearn}


def _on(device: str | None, *arrays: Any) -> list[Any]:
    """The arrays as torch tensors on ``device`` (the CPU where None)."""
    import torch

    return [torch.from_numpy(np.asarray(v)).to(device or "cpu") for v in arrays]


def warm_up(a: argparse.Namespace, d: int) -> None:
    """One small fit of the same library on the same device before the timed one: CUDA's
    context, the cuBLAS / cuSOLVER handles and any compilation stay out of the timing. Its
    m reaches the size from which the m x m algebra runs on the device, so the device
    factor's libraries are loaded too."""
    rng = np.random.default_rng(123)
    m = min(a.m, 10_000)
    Xw = rng.standard_normal((2 * m, d)).astype(a.dtype)
    yw = np.sin(Xw[:, 0]).astype(a.dtype)
    small = argparse.Namespace(**{**vars(a), "m": m, "iters": 3, "path": None, "budget": None})
    if a.tensors:
        Xw, yw = _on(a.device, Xw, yw)
    FITS[a.lib](small, Xw, yw, Xw[:100])


def run_fit(a: argparse.Namespace) -> dict[str, Any]:
    X, y, Xt, yt = load_problem(a.data, a.dtype)
    if a.tensors:  # the data as torch tensors (on a.device, or the CPU)
        X, y, Xt = _on(a.device, X, y, Xt)
    if _cuda(a.device):
        warm_up(a, int(X.shape[1]))
        _fresh_device(a.device)
    time.sleep(0.5)  # let the memory of the load settle before the baseline
    with PeakMemory() as mem:
        sec, pred, extra = FITS[a.lib](a, X, y, Xt)
    pred = np.asarray(pred.cpu() if hasattr(pred, "cpu") else pred, dtype=np.float64)
    return {
        "lib": a.lib,
        "fit_s": sec,
        "test_rmse": rmse(pred, yt),
        "peak_mb": mem.mb,
        "n": int(len(X)),
        "dtype": a.dtype,
        **extra,
        **_device_peak(a.device),
    }


def run_pass(a: argparse.Namespace) -> dict[str, Any]:
    """Seconds of one streamed fused pass K_nm^T (K_nm v) (the median of ``a.repeats``, after
    one to warm up): the operator's kernel work against the machine's limit. On a GPU the X
    tensor lives there and ``--profile`` adds the pass's ten costliest CUDA kernels."""
    from kernelpath import Gaussian, KernelOperator

    X = load_problem(a.data, a.dtype)[0]
    if a.tensors or _cuda(a.device):
        (X,) = _on(a.device, X)
    op = KernelOperator(X, X[: a.m], Gaussian(a.sigma), memory_budget=a.budget, cache=False)
    v = np.random.default_rng(0).standard_normal(a.m)
    op.fused(v)
    times = []
    for _ in range(a.repeats):
        _sync(a.device)
        t = time.perf_counter()
        op.fused(v)
        _sync(a.device)
        times.append(time.perf_counter() - t)
    out: dict[str, Any] = {
        "pass_s": float(np.median(times)),
        "passes_s": times,
        "n": len(X),
        "m": a.m,
        "dtype": a.dtype,
        "block_rows": op.block_rows,
        **_fused_state(),
    }
    if _cuda(a.device) and a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            op.fused(v)
            _sync(a.device)
        events = sorted(prof.key_averages(), key=lambda e: -getattr(e, "device_time_total", 0))
        out["profile"] = [
            {"name": e.key[:90], "calls": e.count, "device_ms": e.device_time_total / 1e3}
            for e in events[:10]
        ]
    return out


def run_mnist(a: argparse.Namespace) -> dict[str, Any]:
    """MNIST's official split with ``NystromClassifier(scale=False, n_centers=m)`` and its
    other defaults (width screen, λ path on a 20% hold-out, refit), inputs in ``a.dtype``,
    on ``a.device``: the fit alone timed (after a small warm-up fit on a GPU)."""
    from kernelpath import NystromClassifier
    from kernelpath.datasets import load_shared

    d = load_shared("mnist", root=a.root)
    X, y = d["X_train"].astype(a.dtype), d["y_train"]
    Xt, yt = d["X_test"].astype(a.dtype), d["y_test"]

    def make(m: int | None, verbose: int = 0) -> Any:
        return NystromClassifier(
            scale=False,
            n_centers=m,
            random_state=0,
            device=a.device,
            verbose=verbose,
            factor_layout=a.factor_layout,
        )

    if _cuda(a.device):
        make(min(a.m or 10_000, 10_000)).fit(X[:20_000], y[:20_000])
        _fresh_device(a.device)
    est = make(a.m, a.verbose)
    with PeakMemory() as mem:
        _sync(a.device)
        t = time.perf_counter()
        est.fit(X, y)
        _sync(a.device)
        sec = time.perf_counter() - t
    return {
        "lib": "kernelpath",
        "fit_s": sec,
        "test_error_pct": float(100 * np.mean(est.predict(Xt) != yt)),
        "m": a.m,
        "centers": int(est.centers_.shape[0]),
        "dtype": a.dtype,
        "best_params": est.best_params_,
        "kernel": repr(est.kernel_),
        "peak_mb": mem.mb,
        "factor": factor_info(est),
        **_device_peak(a.device),
    }


def run_call(a: argparse.Namespace) -> Any:
    """``a.module.a.function(**a.kwargs)`` (modules of ``benchmarks/`` and its ``paper/``)."""
    for folder in (HERE / "paper", HERE):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    module = importlib.import_module(a.module)
    return getattr(module, a.function)(**json.loads(a.kwargs))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("call", help="a benchmark module's function, its result as JSON")
    for name in ("module", "function", "kwargs"):
        c.add_argument(name)
    d = sub.add_parser("data", help="problem P as .npy files")
    d.add_argument("--n", type=int, required=True)
    d.add_argument("--n-test", type=int, default=50_000)
    d.add_argument("--d", type=int, default=20)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", required=True)
    f = sub.add_parser("fit", help="one library's fit of problem P")
    f.add_argument("--lib", choices=sorted(FITS), required=True)
    f.add_argument("--path", type=int, default=None, help="kernelpath: a λ path of this size")
    f.add_argument("--falkon-mem", default="1e9", help="FALKON max_cpu_mem (bytes)")
    q = sub.add_parser("pass", help="one streamed pass K_nm^T (K_nm v)")
    q.add_argument("--repeats", type=int, default=3)
    q.add_argument("--profile", action="store_true", help="CUDA: the top kernels of a pass")
    for p, budget in ((f, None), (q, "2GB")):
        p.add_argument("--data", required=True)
        p.add_argument("--m", type=int, default=2000)
        p.add_argument("--sigma", type=float, default=5.0)
        p.add_argument("--dtype", default="float64")
        p.add_argument("--budget", default=budget, help="kernelpath's memory_budget")
        p.add_argument("--device", default=None, help="kernelpath device / torch device")
        p.add_argument("--tensors", action="store_true", help="pass torch tensors")
    f.add_argument("--penalty", type=float, default=1e-6)
    f.add_argument("--iters", type=int, default=20)
    t = sub.add_parser("mnist", help="MNIST's official split, NystromClassifier")
    t.add_argument("--root", required=True, help="the folder holding mnist/mnist.npz")
    t.add_argument("--m", type=int, default=None, help="n_centers (default: the estimator's)")
    t.add_argument("--dtype", default="float32")
    t.add_argument("--device", default=None)
    t.add_argument("--verbose", type=int, default=0, help="the estimator's progress (stderr)")
    for p in (f, t):
        p.add_argument("--factor-layout", default="auto", help="kernelpath's factor_layout")
    return ap


def main() -> int:
    a = _parser().parse_args()
    if a.cmd == "data":
        make_data(a.n, a.n_test, a.d, a.seed, a.out)
        return 0
    work = {"call": run_call, "fit": run_fit, "pass": run_pass, "mnist": run_mnist}[a.cmd]
    print(json.dumps(work(a), default=jsonable), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
