"""Every Python example of the user guide (``docs/guide/*.md``) runs: the ```python blocks of a
page are executed in order in one namespace, in a temporary directory, so a page may build on
its earlier blocks. A block that fails fails its page's test."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide"
PAGES = sorted(GUIDE.glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_guide_has_pages():
    assert len(PAGES) >= 2


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_guide_examples_run(page, tmp_path, monkeypatch):
    blocks = BLOCK.findall(page.read_text())
    assert blocks, f"{page.name} has no runnable example"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"guide_{page.stem}"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
