"""The benchmarks' entry point: runs any benchmark script by name, and writes the documents'
tables from ``benchmarks/results/``.

    python benchmarks/run.py list                       # every script and what it measures
    python benchmarks/run.py NAME COMMAND [OPTIONS]     # e.g. peers run --sizes 200k,1M
    python benchmarks/run.py NAME --help                # a script's commands and options
    python benchmarks/run.py tables [--check] [--only a,b] [--generated DIR]

NAME is a script of ``benchmarks/`` or of ``benchmarks/paper/`` (the papers' reproductions),
without ``.py``. Every script measures through ``benchmarks/fresh.py`` (fresh processes,
alternating rounds, medians, results with the machine's description) and has a ``table``
command that reads only its results.

``tables`` rewrites every generated table of ``README.md`` and ``docs/benchmarks.md``, the
text between ``<!-- NAME: start -->`` and ``<!-- NAME: end -->``, from the results (a table
that cannot be made is left as it is and named; the exit status is then 1). ``--check``
changes nothing and fails where a table differs from its results. ``--generated DIR``
writes each table as ``DIR/NAME.md`` instead, for the pages that include them (the
documentation build), and leaves the documents as they are.
"""

from __future__ import annotations

import ast
import importlib
import runpy
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import fresh as h

PAPER = h.HERE / "paper"
DOCUMENTS = (h.ROOT / "README.md", h.ROOT / "docs" / "benchmarks.md")
#: block name -> (script, function) that makes it from the results
TABLES: dict[str, tuple[str, str]] = {
    "headline": ("peers", "headline"),
    "peers": ("peers", "table"),
    "large_m": ("large_m", "table"),
    "mnist_centers": ("large_m", "mnist_table"),
    "gpu": ("gpu", "table"),
    "ard": ("ard", "table"),
    "selection": ("selection", "table"),
    "real": ("selection", "real_table"),
    "classification": ("classification", "table"),
    "centers": ("centers", "table"),
    "center_strategies": ("centers", "strategies_table"),
    "stochastic": ("stochastic", "table"),
    "sgm": ("stochastic", "sgm_table"),
    "online": ("online", "table"),
    "out_of_core": ("out_of_core", "table"),
    "dask_kills": ("out_of_core", "kills_table"),
    "sparse": ("out_of_core", "sparse_table"),
    "startup": ("cli", "startup_table"),
    "cli_cost": ("cli", "table"),
    "krls_cost": ("krls_cost", "table"),
    "float32": ("float32", "table"),
    "float32_precision": ("float32", "precision_table"),
    "float32_pass": ("float32", "products_table"),
    "accuracy": ("accuracy", "table"),
    "default_search": ("accuracy", "defaults"),
    "defaults": ("defaults", "table"),
    "defaults_oracle": ("run", "defaults_oracle"),
}
#: scripts whose ``table`` command runs in its own process (their own command lines)
OWN_PROCESS = {"accuracy", "defaults"}


def defaults_oracle() -> str:
    """The two tables of ``defaults.py table`` that compare each family's default with its
    oracle (the third, of the ways to a width, is on the defaults guide's page)."""
    import defaults

    res = defaults._results()
    return "\n\n".join(
        [
            "**`NystromRegressor()` / `NystromClassifier()` against the oracle**",
            defaults.table(res),
            "**The other families' defaults against their oracles**",
            defaults.family_table(res),
        ]
    )


def scripts() -> dict[str, Path]:
    """Every benchmark script by name (``benchmarks/`` first, then ``benchmarks/paper/``)."""
    found = {p.stem: p for p in sorted(PAPER.glob("*.py")) if not p.stem.startswith("_")}
    found.update({p.stem: p for p in sorted(h.HERE.glob("*.py")) if p.stem != "run"})
    return found


def listing() -> str:
    """Every script with the first line of its docstring."""
    lines = []
    for name, path in scripts().items():
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        first = " ".join(doc.split("\n\n")[0].split())
        where = "paper/" if path.parent == PAPER else ""
        lines.append(f"{where + name:22s} {textwrap.shorten(first, 96, placeholder=' ...')}")
    return "\n".join(lines)


def make(name: str) -> str:
    """Block ``name``'s text, from the results alone."""
    script, function = TABLES[name]
    if script in OWN_PROCESS:
        cmd = [sys.executable, str(h.HERE / f"{script}.py"), function]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=h.ROOT)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "?")
        return proc.stdout.strip()
    fn: Callable[[], str] = getattr(importlib.import_module(script), function)
    return fn().strip()


def tables(check: bool = False, only: str = "", generated: str = "") -> str:
    """Write the generated tables of the documents (``--check``: only compare;
    ``--generated DIR``: write them as DIR/NAME.md instead)."""
    wanted = h.names(only) or list(TABLES)
    texts, failed = {}, []
    for name in wanted:
        try:
            texts[name] = make(name)
        except Exception as exc:  # noqa: BLE001 - named below, the block left as it is
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    differ, written = [], []
    for doc in () if generated else DOCUMENTS:
        for name, text in texts.items():
            now = read_block(doc, name)
            if now is not None and now != f"\n\n{text}\n\n":
                differ.append(f"{doc.relative_to(h.ROOT)}: {name}")
                if not check:
                    h.write_block(doc, name, text)
                    written.append(f"{doc.relative_to(h.ROOT)}: {name}")
    if generated:
        folder = Path(generated)
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            path = folder / f"{name}.md"
            if not path.is_file() or path.read_text() != text + "\n":
                path.write_text(text + "\n")
    for line in failed:
        print(f"not made: {line}", file=sys.stderr)
    if check and differ:
        print("differ from the results:\n  " + "\n  ".join(differ), file=sys.stderr)
    if failed or (check and differ):
        raise SystemExit(1)
    if generated:
        return f"wrote {len(texts)} tables to {generated}"
    return "\n".join(["written:", *written]) if written else "every table is up to date"


def read_block(path: Path, name: str) -> str | None:
    """The text between ``path``'s markers of ``name``, or None where it has none."""
    page = path.read_text()
    start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
    if start not in page or end not in page:
        return None
    return page[page.index(start) + len(start) : page.index(end)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("list", "tables"):
        return h.cli(__doc__, {"list": listing, "tables": tables}, argv)
    known = scripts()
    if not argv or argv[0] not in known:
        print((__doc__ or "") + "\n" + listing())
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    path = known[argv[0]]
    sys.path[:0] = [str(path.parent), str(h.HERE)]
    sys.argv = [str(path), *argv[1:]]
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
