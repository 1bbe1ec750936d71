"""The README is a front door (issue 44): short, and every page of docs/ is reachable from its map;
every relative link of the README, PROTOCOL.md and docs/ leads to a file that exists and, with
an anchor, to a heading of that file (GitHub's anchor rule)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "PROTOCOL.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of ``path``: lower case, punctuation dropped, spaces -> '-'."""
    text = FENCE.sub("", path.read_text())
    out = set()
    for title in re.findall(r"^#+ +(.*?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower().replace("`", "")).replace(" ", "-")
        out.add(slug)
    return out


def test_the_readme_is_short_and_maps_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    linked = {m for m in LINK.findall(readme)}
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in linked, f"docs/{page.name} is not in the README's map"


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"^[a-z]+:", target):          # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []
