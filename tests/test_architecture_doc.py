"""docs/architecture.md draws the folders as they are: every product module is named on it, every
path it names exists, and its worked example of a rule is the repository's own text."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("cli", "compiler", "dsl", "plan", "runtime")
_QUOTED = re.compile(r"`([^`\s]+)`")
_SHOWN = re.compile(r"^<!-- (file|excerpt): ([\w./-]+) -->\n```\w*\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# The folders a path on the page may be relative to, as in `checks/__init__.py` or `templates/`.
_BASES = (ROOT, ROOT / "compiler", ROOT / "runtime")


def _named_paths(text: str) -> set[str]:
    """The quoted repository paths on the page: a `/` in them, a pattern (`PCnnn`) not."""
    found = set()
    for quoted in _QUOTED.findall(text):
        path = quoted.split(":")[0].rstrip(",.")
        if "/" in path and "nnn" not in path and not path.startswith(("pipec.", "http")):
            found.add(path)
    return found


def test_every_path_the_page_names_exists():
    missing = [p for p in sorted(_named_paths(DOC.read_text())) if not any((b / p).exists() for b in _BASES)]
    assert missing == []


def test_every_product_module_is_on_the_page():
    text = DOC.read_text()
    quoted = set(_QUOTED.findall(text))

    def named(path: Path) -> bool:
        relative = path.relative_to(ROOT)
        folders = {f"{'/'.join(relative.parts[:i])}/" for i in range(1, len(relative.parts))}
        return str(relative) in quoted or bool(folders & quoted) or path.name in quoted

    modules = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py")) if p.name != "__init__.py"]
    assert [str(p.relative_to(ROOT)) for p in modules if not named(p)] == []


def test_the_worked_rule_is_the_repository_s_own_text():
    shown = _SHOWN.findall(DOC.read_text())
    assert {kind for kind, _, _ in shown} == {"file", "excerpt"}
    for kind, path, block in shown:
        text = (ROOT / path).read_text()
        if kind == "file":
            assert block == text, f"the page's copy of {path} differs from it: paste the file again"
        else:
            lines = [line.strip() for line in text.splitlines()]
            wanted = [line.strip() for line in block.splitlines()]
            starts = [i for i in range(len(lines)) if lines[i:i + len(wanted)] == wanted]
            assert starts, f"the page's excerpt of {path} is not in it"
