"""Every code block of the README and the documentation runs.

The ```python blocks of a page run in order in one namespace, and its ```bash blocks line by
line in a shell, all in one temporary directory: a page may build on its earlier blocks and
makes its own data and files. A block whose first line is ``# requires: cuda`` (a GPU),
``# requires: torch`` (PyTorch installed) or ``# requires: cluster`` (a real cluster) is
skipped where that is missing, with the reason; bash blocks that install (the set-up
commands: ``pip install``) are not rerun. A block that fails fails its page's test."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIP_DIRS = {"_build", "_generated", "generated", "auto_examples"}
PAGES = [ROOT / "README.md"] + sorted(
    p for p in DOCS.rglob("*.md") if not SKIP_DIRS & set(p.relative_to(DOCS).parts)
)
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```", re.S | re.M)
REQUIRES = re.compile(r"^# requires: (\w+)")


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def _missing(code: str) -> str | None:
    """Why a block cannot run here, or None."""
    m = REQUIRES.match(code)
    if m is None:
        return None
    need = m.group(1)
    if need == "cuda" and not _cuda():
        return "needs CUDA"
    if need == "torch" and importlib.util.find_spec("torch") is None:
        return "needs PyTorch"
    if need == "cluster":
        return "needs a cluster"
    return None


def _run_bash(code: str, cwd: Path) -> None:
    kernelpath = shutil.which("kernelpath")
    for line in code.splitlines():
        line = line.split("  #")[0].strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        if words[0] == "kernelpath" and kernelpath is None:  # not on PATH: the module
            words = [sys.executable, "-m", "kernelpath", *words[1:]]
        res = subprocess.run(words, cwd=cwd, capture_output=True, text=True, env=dict(os.environ))
        assert res.returncode == 0, f"{line!r} failed:\n{res.stderr[-2000:]}"


def test_the_docs_have_pages():
    names = {p.name for p in PAGES}
    assert {"README.md", "usage.md", "classification.md", "cli.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_code_blocks_run(page, tmp_path, monkeypatch):
    blocks = BLOCK.findall(page.read_text())
    if page.parent.name == "guide" and page.name != "index.md":
        assert blocks, f"{page.name} has no runnable example"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    skipped = []
    for i, (lang, code) in enumerate(blocks):
        why = _missing(code)
        if why is not None:
            skipped.append(f"block {i}: {why}")
            continue
        if lang == "bash":
            if "pip install" in code:
                continue  # the set-up commands are run by CI itself, not rerun here
            _run_bash(code, tmp_path)
        else:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
    if skipped and len(skipped) == len(blocks):
        pytest.skip("; ".join(skipped))


def test_ci_runs_the_readme_test_command_verbatim():
    commands = [
        line
        for lang, code in BLOCK.findall((ROOT / "README.md").read_text())
        if lang == "bash"
        for line in code.splitlines()
        if "python -m pytest" in line
    ]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert commands[0] == ci  # the README's test command; the other runs the oldest versions
    assert [c for c in commands[1:] if "-c constraints/oldest.txt" not in c] == []


def test_oldest_constraints_pin_every_dependency_at_its_minimum():
    """constraints/oldest.txt holds each runtime dependency at the lower bound that
    pyproject.toml states: the versions the oldest-versions run tests are the ones allowed."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (ROOT / "constraints" / "oldest.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    for dep in deps:
        name, _, low = dep.partition(">=")
        assert pins.get(name) is not None, f"{name} is not pinned"
        assert pins[name] == low or pins[name].startswith(low + "."), (name, low, pins[name])


@pytest.mark.parametrize(
    ("script", "block", "call"),
    [
        ("nytro_table2", "nytro_table2", "table"),
        ("thesis_ch4", "thesis_ch4", "table"),
        ("thesis_ch4", "thesis_ch4_selected", "selected_table"),
        ("thesis_table62", "thesis_table62", "table"),
        ("reproduce", "eigenpro_rules", "eigenpro_table"),
    ],
)
def test_report_tables_are_the_results(script, block, call, monkeypatch):
    """The reproduction report's generated tables are what the scripts make from
    ``benchmarks/paper/results`` (rerun ``... table --write`` after a new run)."""
    paper = ROOT / "benchmarks" / "paper"
    monkeypatch.syspath_prepend(str(paper))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"_report_{script}", paper / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = (paper / "REPORT.md").read_text()
    start, end = f"<!-- {block}: start -->", f"<!-- {block}: end -->"
    inside = report[report.index(start) + len(start) : report.index(end)]
    assert inside.strip() == getattr(module, call)().strip()
