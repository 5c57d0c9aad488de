"""The README and the docs link to what exists: every relative link in README.md and
docs/*.md names a file of the checkout, and every ``#anchor`` a heading of that file (as
GitHub spells a heading's anchor). Details moved from the README into docs/ (issue 56) must
keep every link that points at them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from realtools import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _text(path: Path) -> str:
    """A page without its code blocks (a ``#`` there is no heading, a ``](`` no link)."""
    return re.sub(r"```.*?```", "", path.read_text(), flags=re.S)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but ``-`` and
    ``_`` dropped, spaces as ``-``, a repeated heading numbered."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", _text(path), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def test_anchors_follow_github() -> None:
    assert "archguard-which-the-command-for-this-machine" in anchors(REPO / "docs" / "users.md")
    assert "toolarchguard" in anchors(REPO / "docs" / "configuration.md")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _text(page)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no such heading in {file.name}")
    assert not broken, broken


def test_the_readme_stays_short() -> None:
    """Issue 56: the README holds what archguard is, the quickstart, the one line a package
    adds, the farm in brief and one line per command, in 250 lines or fewer; the details are
    in docs/."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 250
