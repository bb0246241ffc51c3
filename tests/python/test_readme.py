"""Runs every Python block of the README's "From Python" section from the source root
and checks each `print(...)  # output` comment against what the line printed."""

import contextlib
import io
import os
import re

import matplotlib.figure
import pytest

from conftest import ROOT


def _blocks():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## From Python"):]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


BLOCKS = _blocks()


def test_the_section_opens_with_a_notebook_example():
    assert len(BLOCKS) >= 2
    assert "fused_matmuls" in BLOCKS[0] and "plot_access_trace" in BLOCKS[0]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block(index, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, path, **kw: saved.append(path))
    monkeypatch.chdir(ROOT)
    scope = {}
    lines = BLOCKS[index].splitlines()
    # Run line by line groups: each print with an expected-output comment is checked.
    chunk = []
    for line in lines:
        m = re.match(r"^(print\(.*\))\s+#\s(.*)$", line)
        if not m:
            chunk.append(line)
            continue
        exec("\n".join(chunk), scope)
        chunk = []
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(m.group(1), scope)
        assert out.getvalue().rstrip("\n") == m.group(2), line
    exec("\n".join(chunk), scope)
    if "savefig" in BLOCKS[index]:
        assert saved, "the block draws a figure"
