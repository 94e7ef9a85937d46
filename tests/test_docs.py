"""The README and the documentation pages: the README stays short, and no relative link, snippet or nav entry
points at a file that does not exist (cheap checks; CI builds the site itself with ``mkdocs build --strict``)."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_LIMIT = 10_000

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SNIPPET = re.compile(r'^-{1,3}8<-{1,3}\s+"([^"]+)"', re.MULTILINE)


def _generated() -> set[str]:
    """The pages ``docs/gen_reference.py`` writes at build time (the ``.md`` paths it names), relative to docs/."""
    source = (DOCS / "gen_reference.py").read_text(encoding="utf-8")
    return set(re.findall(r'"(reference/[\w/-]+\.md)"', source))


def _exists(page: Path, target: str) -> bool:
    """Whether a link from ``page`` to ``target`` reaches a file, or a page generated under docs/ at build time."""
    resolved = (page.parent / target).resolve()
    if resolved.exists():
        return True
    try:
        inside = resolved.relative_to(DOCS.resolve()).as_posix()
    except ValueError:
        return False
    return inside in _generated() or inside.startswith("reference/api/")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def relative_links(text: str) -> list[str]:
    """The relative link targets of a markdown text (outside code), without their #anchors."""
    prose = _CODE.sub("", _FENCE.sub("", text))
    targets = []
    for target in _LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # a URL (https:, mailto:, file:) or an anchor on the same page
        targets.append(target.split("#", 1)[0])
    return targets


def test_readme_is_at_most_10000_characters():
    size = len((ROOT / "README.md").read_text(encoding="utf-8"))
    assert size <= README_LIMIT, f"README.md has {size} characters (at most {README_LIMIT}): move detail to docs/"


def test_the_readme_python_snippet_prints_what_its_comments_say(tmp_path):
    """The README's "Or from Python" block, run as written (a seeded mechanism): its output is its comment lines."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", readme[readme.index("Or from Python:"):], flags=re.S).group(1)
    printed = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert len(printed) == 2 and ran.stdout.splitlines() == printed


def test_readme_keeps_the_test_command():
    assert "python -m pytest" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(page: Path):
    missing = [target for target in relative_links(page.read_text(encoding="utf-8")) if not _exists(page, target)]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_included_snippets_exist(page: Path):
    missing = [path for path in _SNIPPET.findall(page.read_text(encoding="utf-8")) if not (ROOT / path).is_file()]
    assert not missing, f"{page.relative_to(ROOT)} includes missing files: {missing}"


def test_nav_pages_exist():
    nav = re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"),
                     re.MULTILINE)
    assert nav, "mkdocs.yml names no page"
    missing = [page for page in nav if not (DOCS / page).is_file()]
    assert not missing, f"mkdocs.yml's nav names missing pages: {missing}"


def test_the_link_finder_sees_links_and_skips_code():
    text = "[a](x.md) ![i](img/a.png) [b](https://e.org) [c](#top) `[d](no.md)`\n```\n[e](no2.md)\n```\n[f](y.md#s)"
    assert relative_links(text) == ["x.md", "img/a.png", "y.md"]


def test_the_annotated_example_config_loads():
    """docs/examples/audit.toml (shown on the Configs page, its comments read into the config reference) is a
    valid config of the current code: a renamed or removed key fails here."""
    from auditkit.config import from_dict

    from_dict(tomllib.loads((DOCS / "examples" / "audit.toml").read_text(encoding="utf-8")))
