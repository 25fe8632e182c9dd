"""Every code example in the documentation is checked.

Fenced blocks in README.md, docs/*.md and the rule explanations must say what they hold:

- ```pipe: a complete `.pipe` program. It is checked as if it were a file in the document's
  folder and must report exactly the diagnostics its inline comments expect (`# error: [PC302]`,
  the rule fixtures' convention), so a block without one must be clean. A block whose first line
  names a repository file (`# pipelines/examples/tutorial.pipe: ...`) is checked in that file's
  folder and must be that file, word for word.
- ```python: Python; it must compile (the GPU test tier runs the python-api example).
- ```console, ```toml, ```cpp, ```text: shown, not run (shell sessions, configuration, CUDA
  declarations, syntax schematics and output).
- ```c, ```c++, ```rust: checked by tests/test_native_docs.py (C and C++ compiled against
  native/include/pipec.h, Rust excerpts found in the file their first line names).

Rule explanations show their examples through `<!-- example: FILE -->`: the programs in
compiler/explanations/examples/, which tests/test_rules.py checks; each explanation must show one
that fires and its clean twin. docs/rules.md is generated from the explanations
(tests/test_docs.py), so it is not read twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import compile_fixture, expected_diagnostics, explain

ROOT = Path(__file__).resolve().parent.parent
EXPLANATIONS = ROOT / "compiler" / "explanations"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(EXPLANATIONS.glob("*.md"))]
DOCUMENTS = [d for d in DOCUMENTS if d.name != "rules.md"]
SHOWN_ONLY = {"console", "toml", "cpp", "text"}
NATIVE = {"c", "c++", "rust"}  # tests/test_native_docs.py
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
    assert block.language in SHOWN_ONLY | NATIVE | {"pipe", "python"}, \
        f"{block.id}: label the fence (pipe, python, {', '.join(sorted(SHOWN_ONLY | NATIVE))})"


def _home(block: Block) -> tuple[Path, Path | None]:
    """The folder the block is checked in, and the repository file it claims to be."""
    named = _NAMED_FILE.match(block.text)
    if named and (ROOT / named.group(1)).is_file():
        path = ROOT / named.group(1)
        return path.parent, path
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


_DIRECTIVE = re.compile(r"^<!-- example: ([\w.-]+) -->$", re.MULTILINE)


@pytest.mark.parametrize("explanation", sorted(EXPLANATIONS.glob("*.md")), ids=lambda p: p.stem)
def test_explanation_shows_a_firing_and_a_clean_program(explanation):
    shown = _DIRECTIVE.findall(explanation.read_text(encoding="utf-8"))
    missing = [name for name in shown if not (EXPLANATIONS / "examples" / name).is_file()]
    assert not missing, f"{explanation.name} shows examples that do not exist: {missing}"
    firing = [n for n in shown if n.startswith(explanation.stem) and not n.endswith("_ok.pipe")]
    clean = [n for n in shown if n.startswith(explanation.stem) and n.endswith("_ok.pipe")]
    assert firing and clean, f"{explanation.name}: show a program that fires and its clean twin"
