"""The documentation pages made from ``benchmarks/results/`` at build time: each benchmark's
own ``table`` command, run in a subprocess, writes ``docs/_generated/<name>.md``, which the
benchmark pages include. The command-line reference is generated here too, from the
parser's own help (``kernelpath.cli``), so it cannot drift from the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "_generated"

#: page name -> the benchmark command that prints its tables from the results
TABLES: dict[str, list[str]] = {
    "run": ["benchmarks/run.py", "--table"],
    "ard": ["benchmarks/ard.py", "table"],
    "defaults": ["benchmarks/defaults.py", "table"],
    "threads": ["benchmarks/threads.py", "table"],
    "classification": ["benchmarks/classification.py", "table"],
    "selection": ["benchmarks/selection.py", "table"],
    "out_of_core": ["benchmarks/out_of_core.py", "--table"],
    "cli_cost": ["benchmarks/cli.py", "--table"],
    "krls_cost": ["benchmarks/krls_cost.py", "table"],
    "threads_load": ["benchmarks/threads.py", "load-table"],
    "threads_stream": ["benchmarks/threads.py", "stream-table"],
    "threads_public": ["benchmarks/threads.py", "public-table"],
    "float32": ["benchmarks/float32.py", "table"],
    "startup": ["benchmarks/startup.py", "table"],
    "accuracy": ["benchmarks/accuracy.py", "table"],
    "max_iter_memory": ["benchmarks/max_iter_memory.py", "table"],
    "gpu": ["benchmarks/gpu.py", "table"],
    "dask_kills": ["benchmarks/dask_kills.py", "table"],
    "sparse": ["benchmarks/sparse.py", "table"],
    "direct_small_penalty": ["benchmarks/direct_small_penalty.py", "table"],
    "rpcholesky": ["benchmarks/rpcholesky.py", "table"],
    "compact_float32": ["benchmarks/compact_float32.py", "table"],
    "float32_products": ["benchmarks/float32_products.py", "table"],
    "mnist_centers": ["benchmarks/mnist_centers.py", "table"],
    "default_centers": ["benchmarks/default_centers.py", "table"],
    "lowrank_preconditioner": ["benchmarks/lowrank_preconditioner.py", "table"],
    "million_p": ["benchmarks/million_p.py", "table"],
    "eigh_layout": ["benchmarks/eigh_layout.py", "table"],
    "block_rows": ["benchmarks/block_rows.py", "table"],
    "compact_algebra": ["benchmarks/compact_algebra.py", "table"],
    "compact_algebra_anchors": ["benchmarks/compact_algebra.py", "table", "--anchors", "3"],
    "width_rows": ["benchmarks/width_rows.py", "table"],
    "mnist_before": ["benchmarks/mnist_centers.py", "before-table"],
    "product_pieces": ["benchmarks/product_pieces.py", "table"],
    "disk_factor": ["benchmarks/disk_factor.py", "table"],
}


def _write(name: str, text: str) -> None:
    path = OUT / f"{name}.md"
    if not path.exists() or path.read_text() != text:  # unchanged pages keep their mtime
        path.write_text(text)


def tables() -> None:
    for name, cmd in TABLES.items():
        res = subprocess.run(
            [sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True, check=True
        )
        _write(name, res.stdout.strip() + "\n")


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
