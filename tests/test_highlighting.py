"""The docs' ```pipe blocks highlighted: the Pygments lexer (dsl/pygments_lexer.py, registered
as the `pygments.lexers` entry point `pipe`) reads every block of docs/ and README.md without an
error token, and gives every character of the shipped pipelines the class the TextMate grammar
of editors/vscode gives it, as VS Code computes it (keyword, name, number, string, comment)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

pytest.importorskip("pygments", reason="the test extra brings Pygments: pip install -e '.[test]'")
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, String  # noqa: E402

from pipec.dsl.pygments_lexer import PipeLexer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
PIPELINES = sorted((ROOT / "pipelines").rglob("*.pipe")) + sorted((ROOT / "compiler" / "explanations"
                                                                  / "examples").glob("*.pipe"))
_BLOCK = re.compile(r"^```pipe\n(.*?)^```", re.S | re.M)


def _blocks():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in _BLOCK.finditer(path.read_text()):
            yield f"{path.relative_to(ROOT)}:{path.read_text()[:match.start()].count(chr(10)) + 1}", match.group(1)


BLOCKS = list(_blocks())


def test_the_entry_point_names_the_lexer():
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pygments.lexers"]
    module, _, name = entry["pipe"].partition(":")
    assert getattr(import_module(module), name) is PipeLexer
    assert {"pipe"} <= set(PipeLexer.aliases) and "*.pipe" in PipeLexer.filenames


def test_there_are_blocks_to_highlight():
    assert len(BLOCKS) > 50


@pytest.mark.parametrize("where, block", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_every_pipe_block_of_the_docs_lexes_without_an_error(where, block):
    errors = [(value, index) for index, token, value in PipeLexer().get_tokens_unprocessed(block)
              if token in Error]
    assert errors == [], f"{where}: no rule for {errors}"


def _pygments_classes(text: str) -> list[str]:
    classes = ["other"] * len(text)
    for index, token, value in PipeLexer().get_tokens_unprocessed(text):
        if token in Comment:
            kind = "comment"
        elif token in String:
            kind = "string"
        elif token in Number:
            kind = "number"
        elif token in Keyword or token in Operator.Word:
            kind = "keyword"
        elif token in Name:
            kind = "name"
        else:
            kind = "other"
        classes[index:index + len(value)] = [kind] * len(value)
    return classes


_SCOPE_CLASSES = [  # first match wins: a directive inside a comment is comment
    ("comment.", "comment"), ("string.", "string"), ("constant.character.escape", "string"),
    ("constant.numeric.", "number"), ("keyword.operator.logical", "keyword"),
    ("keyword.operator", "other"), ("punctuation.", "other"), ("keyword.", "keyword"), ("storage.", "keyword"),
    ("constant.language", "keyword"), ("support.type", "keyword"), ("entity.name.", "name"),
    ("variable.", "name"), ("constant.other", "name"),
]


def _textmate_class(scopes: list[str]) -> str | None:
    """The class of a token's scopes; None for text the grammar leaves unscoped."""
    for prefix, kind in _SCOPE_CLASSES:
        if any(scope.startswith(prefix) for scope in scopes[1:]):
            return kind
    return None


def _textmate_classes(text: str, tokens: list) -> list[str]:
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    classes = ["other"] * len(text)
    for line, start, end, scopes in tokens:
        at = starts[line]
        kind = _textmate_class(scopes)
        if kind is not None:
            classes[at + start:at + end] = [kind] * (end - start)
            continue
        for word in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", text[at + start:at + end]):  # unscoped: names
            classes[at + start + word.start():at + start + word.end()] = ["name"] * len(word.group())
    return classes


@pytest.fixture(scope="module")
def textmate_tokens() -> dict:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the TextMate side needs it (apt-get install -y npm)")
    if not (VSCODE / "node_modules" / "vscode-textmate").is_dir():
        pytest.skip("editors/vscode has no node_modules: run `npm ci` there (.ci/run does, before pytest)")
    done = subprocess.run(["node", str(VSCODE / "tests" / "scopes.js"), *map(str, PIPELINES)],
                          capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout)


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_lexer_classes_each_character_as_the_textmate_grammar_does(path, textmate_tokens):
    text = path.read_text()
    assert text.isascii(), "columns are compared as UTF-16 units and code points alike"
    ours, theirs = _pygments_classes(text), _textmate_classes(text, textmate_tokens[str(path)])
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b and not text[i].isspace()]
    if differing:
        i = differing[0]
        line = text.count("\n", 0, i) + 1
        start = text.rfind("\n", 0, i) + 1
        pytest.fail(f"{path.name}:{line}:{i - start + 1}: Pygments says {ours[i]}, TextMate {theirs[i]} in "
                    f"{text[start:text.find(chr(10), i)]!r} ({len(differing)} characters differ)")
