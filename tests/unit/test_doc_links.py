"""The documentation holds together: every relative link in README.md, docs/ and
chart/README.md reaches a file that exists, and an anchor reaches a heading of that file, as
GitHub renders it. The README stays a landing page, and every topic has its page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", REPO / "chart" / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
TOPICS = [
    "architecture",
    "policy-reference",
    "deletion-cost",
    "gpu-labels",
    "placement",
    "karpenter",
    "security",
    "operations",
    "benchmarks",
    "local-control-plane",
    "tests",
    "install",
]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"^#{1,6} (.+)$", line)
        if not match:
            continue
        base = slug(match.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("schedpolicy or Karpenter's gate?", "schedpolicy-or-karpenters-gate"),
        ("Asking why: `explain` and `simulate`", "asking-why-explain-and-simulate"),
        ("In-cluster tests", "in-cluster-tests"),
        ("B7E: no eviction", "b7e-no-eviction"),
    ],
)
def test_anchors_are_made_as_github_makes_them(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[here](#top) [gone](#nowhere) [file](missing.md)\n")
    assert relative_links(page) == ["#top", "#nowhere", "missing.md"]
    assert [b.split(":")[0] for b in broken_links(page)] == ["#nowhere", "missing.md"]


def test_the_readme_is_a_landing_page_and_every_topic_has_its_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    missing = [t for t in TOPICS if not (REPO / "docs" / f"{t}.md").exists()]
    assert missing == []
    unlinked = [t for t in TOPICS if f"(docs/{t}.md)" not in readme]
    assert unlinked == [], "topics the README does not link to"
