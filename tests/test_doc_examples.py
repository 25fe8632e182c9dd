"""Every code example in the documentation is checked.

Fenced blocks in README.md, docs/*.md and the rule explanations must say what they hold:

- ```pipe: a complete `.pipe` program. It is checked as if it were a file in the block's folder
  (the folder of the document; tests/fixtures/rules/ for rule explanations, whose examples use
  the fixture kernels) and must report exactly the diagnostics its inline comments expect
  (`# error: [PC302]`, the fixture convention), so a block without one must be clean. A block
  whose first line names a repository file (`# pipelines/examples/tutorial.pipe: ...`) is checked
  in that file's folder and must be that file, word for word.
- ```python: Python; it must compile (the GPU test tier runs the python-api example).
- ```console, ```toml, ```cpp, ```text: shown, not run (shell sessions, configuration, CUDA
  declarations, syntax schematics and output).

docs/rules.md is generated from the explanations (tests/test_docs.py), so it is not read twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import compile_fixture, expected_diagnostics, explain

ROOT = Path(__file__).resolve().parent.parent
RULE_FIXTURES = ROOT / "tests" / "fixtures" / "rules"
EXPLANATIONS = ROOT / "compiler" / "explanations"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(EXPLANATIONS.glob("*.md"))]
DOCUMENTS = [d for d in DOCUMENTS if d.name != "rules.md"]
SHOWN_ONLY = {"console", "toml", "cpp", "text"}
_FENCE = re.compile(r"^(\s*)```(.*)$")
_NAMED_FILE = re.compile(r"^#\s*([\w./-]+\.pipe)\b")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int          # of the opening fence, 1-based
    language: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks(document: Path) -> list[Block]:
    found: list[Block] = []
    lines = document.read_text(encoding="utf-8").splitlines()
    open_at: int | None = None
    language = ""
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        fence = _FENCE.match(line)
        if fence and open_at is None:
            open_at, language, body = number, fence.group(2).strip(), []
        elif fence:
            found.append(Block(document, open_at, language, "\n".join(body) + "\n"))
            open_at = None
        elif open_at is not None:
            body.append(line)
    assert open_at is None, f"{document}:{open_at}: unclosed code fence"
    return found


ALL_BLOCKS = [b for d in DOCUMENTS for b in blocks(d)]
PIPE_BLOCKS = [b for b in ALL_BLOCKS if b.language == "pipe"]


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.id)
def test_every_block_says_what_it_holds(block):
    assert block.language in SHOWN_ONLY | {"pipe", "python"}, \
        f"{block.id}: label the fence (pipe, python, {', '.join(sorted(SHOWN_ONLY))})"


def _home(block: Block) -> tuple[Path, Path | None]:
    """The folder the block is checked in, and the repository file it claims to be."""
    named = _NAMED_FILE.match(block.text)
    if named and (ROOT / named.group(1)).is_file():
        path = ROOT / named.group(1)
        return path.parent, path
    if block.document.parent == EXPLANATIONS:
        return RULE_FIXTURES, None
    return block.document.parent, None


@pytest.mark.parametrize("block", PIPE_BLOCKS, ids=lambda b: b.id)
def test_pipe_example_checks_as_it_claims(block):
    folder, named = _home(block)
    if named is not None:
        assert block.text == named.read_text(encoding="utf-8"), \
            f"{block.id} shows {named.relative_to(ROOT)} but differs from it"
    # A hidden file in the block's own folder, so its relative imports resolve as the reader's would.
    path = folder / f".doc_example_{block.document.stem}_{block.line}.pipe"
    path.write_text(block.text, encoding="utf-8")
    try:
        actual, result = compile_fixture(path)
        expected = expected_diagnostics(path)
    finally:
        path.unlink()
    assert actual == expected, f"{block.id}: " + explain(actual, expected, result)


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language == "python"], ids=lambda b: b.id)
def test_python_example_compiles(block):
    compile(block.text, block.id, "exec")


def test_every_rule_explanation_shows_a_firing_and_a_clean_program():
    for explanation in sorted(EXPLANATIONS.glob("*.md")):
        programs = [b for b in blocks(explanation) if b.language == "pipe"]
        firing = [b for b in programs if _expects_something(b)]
        clean = [b for b in programs if not _expects_something(b)]
        assert firing and clean, f"{explanation.name}: needs a ```pipe example that fires and one that is clean"


def _expects_something(block: Block) -> bool:
    return bool(re.search(r"#\s*(?:error|warning):\s*\[", block.text))
