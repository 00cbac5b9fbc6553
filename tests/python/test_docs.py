"""The README and the docs: every relative link resolves (file and heading), and the README stays a
front door (at most 250 lines, the two set-up commands in its first 15)."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """`text` without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set:
    found, seen = set(), {}
    for line in re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S).splitlines():
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(page: Path) -> list:
    bad = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):   # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target}: no heading #{anchor} in {file.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    assert broken_links(page) == []


def test_a_broken_link_is_found():
    # A TemporaryDirectory, not pytest's tmp_path, which hunt-leaks counts as a leak (test_report.py).
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "page.md"
        page.write_text("# Title\n[ok](#title) [gone](missing.md) [nowhere](#no-such) `[code](x.md)`\n")
        assert broken_links(page) == ["missing.md: no such file", "#no-such: no heading #no-such in page.md"]


def test_slugs_are_githubs():
    assert slug("compile()'s defaults against torch.compile's") == "compiles-defaults-against-torchcompiles"
    assert slug("One instruction model for 3.11, 3.12 and 3.13") == "one-instruction-model-for-311-312-and-313"


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    head = "\n".join(lines[:15])
    # The two commands: the demo's, and the one CI runs (.ci/run execs scripts/test.sh).
    assert "bash scripts/demo.sh" in head and "bash scripts/test.sh" in head
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
