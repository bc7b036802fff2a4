"""Progress of long fits: solvers report, whoever listens shows it.

The solvers call ``report(stage, done, total, **info)`` at each iteration, epoch or pass
(``stage`` names the loop: ``"cg"``, ``"gd"``, ``"epochs"``, ...; ``info`` holds what is known,
e.g. the best validation error so far). Nothing is shown by default: a report costs one
context-variable lookup and a ``logging`` level check.

Listeners:

- the ``kernelpath`` logger, at DEBUG level (``logging.getLogger("kernelpath")``);
- an estimator's ``verbose`` (1: one line per stage and a summary; 2: one line per report),
  printed to stderr through ``verbose_reporter``;
- the command line's tqdm bar (``tqdm_reporter``).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "report",
    "note",
    "listening",
    "quiet",
    "verbose_reporter",
    "tqdm_reporter",
    "logger",
]

logger = logging.getLogger("kernelpath")

Reporter = Callable[[str, int, "int | None", dict[str, Any]], None]
_reporters: contextvars.ContextVar[tuple[Reporter, ...]] = contextvars.ContextVar(
    "kernelpath_reporters", default=()
)


def report(stage: str, done: int, total: int | None = None, **info: Any) -> None:
    """Tell the listeners that ``done`` of ``total`` steps of ``stage`` are finished."""
    reporters = _reporters.get()
    if reporters:
        for r in reporters:
            r(stage, done, total, info)
    if logger.isEnabledFor(logging.DEBUG):
        extra = "".join(f", {k}={_fmt(v)}" for k, v in info.items())
        logger.debug("%s %d/%s%s", stage, done, "?" if total is None else total, extra)


def note(text: str) -> None:
    """Tell the listeners one line of text (a cost estimate before a long step): a
    ``verbose`` fit prints it, the command line's bar writes it above itself, and the
    ``kernelpath`` logger has it at INFO level."""
    for r in _reporters.get():
        r(NOTE, 0, None, {"text": text})
    logger.info("%s", text)


#: The stage name of a ``note``.
NOTE = "note"


@contextlib.contextmanager
def listening(reporter: Reporter) -> Iterator[None]:
    """Send the reports made inside the block (in this thread or context) to ``reporter``."""
    token = _reporters.set((*_reporters.get(), reporter))
    try:
        yield
    finally:
        _reporters.reset(token)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No listener hears the reports made inside the block (the DEBUG log still does): the
    inner fits of a search that reports its own steps."""
    token = _reporters.set(())
    try:
        yield
    finally:
        _reporters.reset(token)


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@contextlib.contextmanager
def verbose_reporter(owner: str, level: int, stream: Any = None) -> Iterator[None]:
    """Lines on stderr for an estimator's ``verbose``: at level 1 the first and last report
    of each stage and about every tenth in between, at level 2 every report; the time
    since the start of the fit leads each line."""
    if level <= 0:
        yield
        return
    out = stream if stream is not None else sys.stderr
    t0 = time.perf_counter()
    last: dict[str, int] = {}
    held: list[str] = []  # the latest report not shown (shown when the stage ends)

    def line(text: str) -> None:
        print(f"[{owner} {time.perf_counter() - t0:7.1f} s] {text}", file=out, flush=True)

    def show(stage: str, done: int, total: int | None, info: dict[str, Any]) -> None:
        if stage == NOTE:
            line(info["text"])
            return
        extra = "".join(f", {k} {_fmt(v)}" for k, v in info.items())
        text = f"{stage} {done}{'' if total is None else f'/{total}'}{extra}"
        every = 1 if level >= 2 or not total else max(1, total // 10)
        first = stage not in last
        if held and not held[0].startswith(f"{stage} "):
            line(held.pop())  # the previous stage's last step
        if not (level >= 2 or first or done == total or done - last.get(stage, 0) >= every):
            held[:] = [text]
            return
        held.clear()
        last[stage] = done
        line(text)

    with listening(show):
        yield
    if held:
        line(held.pop())
    line("done")


@contextlib.contextmanager
def tqdm_reporter(what: str) -> Iterator[None]:
    """One tqdm bar per stage on stderr (the command line's ``--progress``)."""
    from tqdm import tqdm

    bars: dict[str, Any] = {}

    def show(stage: str, done: int, total: int | None, info: dict[str, Any]) -> None:
        if stage == NOTE:
            tqdm.write(info["text"], file=sys.stderr)
            return
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():  # a new stage: the previous ones are finished
                other.close()
            bar = bars[stage] = tqdm(
                total=total, desc=f"{what}: {stage}", unit="step", file=sys.stderr, leave=True
            )
        if total is not None and bar.total != total:
            bar.total = total
        bar.update(max(0, done - bar.n))
        if info:
            bar.set_postfix({k: _fmt(v) for k, v in info.items()}, refresh=False)

    try:
        with listening(show):
            yield
    finally:
        for bar in bars.values():
            bar.close()
