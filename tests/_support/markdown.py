"""Reading the tables of the docs' markdown pages (the name and parameter lists the tests check)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path


def section(path: Path, heading: str) -> str:
    """The text under the level-2 ``## heading`` of a markdown file, up to the next one."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", path.read_text(), re.S | re.M)
    assert m, f"{path.name} has no '## {heading}' section"
    return m[1]


def rows(text: str, header: str) -> Iterator[tuple[str | None, str, list[str]]]:
    """(the ``###`` heading above it or None, the line, its cells) for every body row of the
    tables in text: separator rows and header rows (first cell ``header``) left out."""
    heading = None
    for line in text.splitlines():
        h = re.match(r"^### (.+?)\s*$", line)
        if h:
            heading = h[1].strip("` ")
            continue
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] == header:
            continue
        yield heading, line, cells
