"""The repository's own rules: sizes of the code and documents, and no project-history words.

A maintainer reads the code and the documents as they are; the sizes keep each module, class and
function readable in one sitting, and the history words (numbered stops, issues and audit items,
device sessions) mean nothing to a reader. The history lives in ``CHANGELOG.md`` by date.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kernelpath"

MAX_MODULE_LINES = 750
MAX_CLASS_LINES = 600
MAX_FUNCTION_LINES = 120
MAX_README_LINES = 120
MAX_DOC_PAGE_LINES = 800

# Words that name the project's history instead of the code: a numbered stop, issue or audit item,
# an audit by its ordinal, a device session, a host named by a stop.
HISTORY = re.compile(
    r"\bstops?\s+#?\d+"
    r"|\bissues?\s+#?\d+"
    r"|\bitems?\s+\d+\s+of\s+the\s+audit"
    r"|\b(?:first|second|third|fourth|earlier|last)\s+audit\b"
    r"|\baudit\s*#?\d+"
    r"|\btest_audit"
    r"|\bdevice\s+sessions?\b"
    r"|\bhost\s+of\s+stop",
    re.IGNORECASE,
)

# Files whose subject is the rule itself.
HISTORY_EXEMPT = {"tests/test_repository.py"}


def _tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [line for line in out.splitlines() if line]


def _text_files() -> list[Path]:
    suffixes = {".py", ".md", ".rst", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".sh", ".ini"}
    files = []
    for name in _tracked():
        path = ROOT / name
        if name in HISTORY_EXEMPT or not path.is_file():
            continue
        if path.suffix in suffixes or name in {".ci/run"}:
            files.append(path)
    return files


def test_no_history_words_in_tracked_files() -> None:
    found = []
    for path in _text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = HISTORY.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert not found, "history words (say the reason instead):\n" + "\n".join(found[:50])


def test_the_history_pattern_catches_what_it_should() -> None:
    for text in (
        "measured at stop 68",
        "see issue 47",
        "Issue #12",
        "the second audit",
        "item 3 of the audit",
        "a device session",
        "the host of stop 70",
    ):
        assert HISTORY.search(text), text
    for text in (
        "stops at the first doubling",
        "the issue tracker",
        "a stop criterion",
        "github.com/x/y/issues/34",
        "the session's budget",
    ):
        assert not HISTORY.search(text), text


def _sizes(path: Path) -> list[str]:
    text = path.read_text()
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    out = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        out.append(f"{name}: module of {lines} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            limit, kind = MAX_CLASS_LINES, "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            limit, kind = MAX_FUNCTION_LINES, "function"
        else:
            continue
        size = (node.end_lineno or node.lineno) - node.lineno + 1
        if size > limit:
            out.append(f"{name}:{node.lineno}: {kind} {node.name} of {size}")
    return out


def test_modules_classes_and_functions_stay_readable() -> None:
    over = [entry for path in sorted(SRC.rglob("*.py")) for entry in _sizes(path)]
    assert not over, "\n".join(over)


def test_the_size_check_sees_an_oversized_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    path = tmp_path / "probe.py"
    path.write_text(f"def long():\n{body}\n")
    assert any("function long" in entry for entry in _sizes(path))


def test_readme_and_documentation_pages_stay_short() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= MAX_README_LINES, f"README.md has {len(readme)} lines"
    long_pages = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        lines = len(page.read_text().splitlines())
        if lines > MAX_DOC_PAGE_LINES:
            long_pages.append(f"{page.relative_to(ROOT)}: {lines} lines")
    assert not long_pages, "\n".join(long_pages)


def test_the_design_page_names_only_modules_that_exist() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    missing = []
    for name in sorted(set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", design))):
        candidates = [SRC / name, ROOT / name, ROOT / "benchmarks" / name, ROOT / "tests" / name]
        if not any(path.exists() for path in candidates) and not list(SRC.rglob(name)):
            missing.append(name)
    assert not missing, f"docs/design.md names modules that do not exist: {missing}"
