"""The documentation pages made from ``benchmarks/results/`` at build time: each benchmark's
table, made by the benchmark harness (``benchmarks/run.py tables``), is written to
``docs/_generated/<name>.md``, which the pages include. The command-line reference is
generated here too, from the parser's own help (``kernelpath.cli``), so it cannot drift
from the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "_generated"


def _write(name: str, text: str) -> None:
    path = OUT / f"{name}.md"
    if not path.exists() or path.read_text() != text:  # unchanged pages keep their mtime
        path.write_text(text)


def tables() -> None:
    """Every benchmark table, from the results alone (``benchmarks/run.py tables``)."""
    cmd = [sys.executable, "benchmarks/run.py", "tables", "--generated", str(OUT)]
    subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)


def cli_reference() -> None:
    """Every subcommand's ``--help``, as the parser prints it."""
    from kernelpath.cli.main import build_parser

    parser = build_parser()
    parts = ["```text", parser.format_help().rstrip(), "```"]
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():  # type: ignore[attr-defined]
        parts += ["", f"**`kernelpath {name}`**", "", "```text", p.format_help().rstrip(), "```"]
    _write("cli", "\n".join(parts) + "\n")


def write_all() -> None:
    OUT.mkdir(exist_ok=True)
    tables()
    cli_reference()


if __name__ == "__main__":
    write_all()
