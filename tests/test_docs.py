"""The docs stay readable and linked: every page under 400 lines, and every link
between them (`[text](page.md#anchor)`) names a page and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]*?\.md|)(#[^)\s]+)?\)")
MAX_LINES = 400


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return "#" + text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {
        _anchor(line.lstrip("#"))
        for line in page.read_text().splitlines()
        if line.startswith("#") and not line.startswith("#!")
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_reads_in_minutes(page: Path) -> None:
    lines = page.read_text().count("\n")
    assert lines < MAX_LINES, f"{page.name} has {lines} lines: split it by topic"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_to_a_page_finds_it(page: Path) -> None:
    broken = []
    for target, anchor in LINK.findall(page.read_text()):
        if "://" in target or not (target or anchor):
            continue
        linked = (page.parent / target).resolve() if target else page
        if not linked.exists():
            broken.append(target)
        elif anchor and anchor not in _anchors(linked):
            broken.append(target + anchor)
    assert not broken, f"{page.name} links to what does not exist: {broken}"
