"""Message grammar: a count agrees with its noun ("1 element", "2 elements") and an article with
the word after it ("an `int`", "a `float`", "an `f32`"). wording.py words them; this scans what
every rule's firing example reports (messages, hints, labels, notes, fix titles), and the source
for the idioms the helpers replace (`{'s' * (n != 1)}`, "node(s)")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import LOAD_TIME_RULES, compile_fixture, load_fixture
from pipec.compiler.codes import EXAMPLES
from pipec.wording import article, counted, plural, verb

ROOT = Path(__file__).resolve().parent.parent
FIRING = sorted(p for p in EXAMPLES.glob("PC*.pipe") if not p.stem.endswith("_ok"))

# "1 elements": a count of one before the plural of a noun that messages count
_NOUNS = ("element", "node", "byte", "thread", "block", "argument", "rank", "file", "step", "kernel", "buffer",
          "parameter", "dimension", "value", "operand", "instance", "matrice", "row", "column", "launch",
          "processe", "finding", "error", "warning", "label", "device", "record", "difference", "collective",
          "module", "pair", "replay", "place", "bit", "iteration", "character", "entrie", "item", "call", "use")
_ONE_PLURAL = re.compile(rf"(?<![\w.,:\[-])1 ((?:more )?(?:{'|'.join(_NOUNS)})e?s)\b")
# "a `int`", "an float": an article before a word, against the article the word takes
_ARTICLE = re.compile(r"(?<![\w`'-])(a|an) (`?[A-Za-z0-9_][\w.]*)")
_HEDGED = re.compile(r"\w\((s|es)\)")  # "node(s)": the count is known, so say it


def grammar_problems(text: str) -> list[str]:
    problems = [f"`1 {m.group(1)}`" for m in _ONE_PLURAL.finditer(text)]
    problems += [f"`{m.group()}` (say `{article(m.group(2))} {m.group(2)}`)" for m in _ARTICLE.finditer(text)
                 if article(m.group(2)) != m.group(1)]
    problems += [f"`{m.group()}`" for m in _HEDGED.finditer(text)]
    return problems


def test_the_scan_finds_what_it_is_for():
    assert grammar_problems("copy of 1 elements into a `int` buffer, 2 node(s)") == [
        "`1 elements`", "`a `int` (say `an `int`)", "`e(s)`"]
    assert grammar_problems("copy of 1 element into an `int` buffer, an f32, a u8, a uniform, 1 process, "
                            "rank 1 is, [0:1] items, an 8 x 8 view, a 16 x 8 view") == []


@pytest.mark.parametrize("noun, one, two", [("element", "1 element", "2 elements"),
                                            ("process", "1 process", "2 processes"),
                                            ("matrix", "1 matrix", "2 matrices")])
def test_counts(noun, one, two):
    assert (counted(1, noun), counted(2, noun), counted(0, noun)) == (one, two, two.replace("2", "0"))
    assert plural(noun, 1) == noun


@pytest.mark.parametrize("word, expected", [
    ("int", "an"), ("float", "a"), ("`int`", "an"), ("`float`", "a"), ("f32", "an"), ("i32", "an"),
    ("u8", "a"), ("bf16", "a"), ("uniform", "a"), ("unsigned char", "an"), ("uint32_t", "a"), ("x", "an"),
    ("y", "a"), ("8 x 8", "an"), ("16 x 8", "a"), ("11 x 2", "an"), ("18000", "an"), ("1100", "a"),
    ("`if`", "an"), ("`every`", "an"), ("`init`", "an"), ("`launch`", "a"), ("buffer", "a"),
])
def test_articles(word, expected):
    assert article(word) == expected


@pytest.mark.parametrize("singular, count, expected", [
    ("differs", 1, "differs"), ("differs", 2, "differ"), ("matches", 3, "match"), ("is", 2, "are"),
    ("holds", 0, "hold"), ("compiles", 2, "compile")])
def test_verbs(singular, count, expected):
    assert verb(singular, count) == expected


def _texts(diagnostic) -> list[str]:
    return [diagnostic.message, diagnostic.hint, diagnostic.label, *(label.message for label in diagnostic.labels),
            *diagnostic.notes, *(fix.title for fix in diagnostic.fixes)]


@pytest.mark.parametrize("path", FIRING, ids=lambda p: p.stem)
def test_what_each_rule_reports_is_grammatical(path):
    code = path.name.split("_", 1)[0]
    _, result = load_fixture(path) if code in LOAD_TIME_RULES else compile_fixture(path)
    problems = [f"{d.span.location()} {d.code}: {problem} in {text!r}"
                for d in result.diagnostics for text in _texts(d) for problem in grammar_problems(text)]
    assert not problems, "\n".join(problems)


def _code_files():
    for folder in ("cli", "compiler", "dsl", "plan", "runtime"):
        yield from (ROOT / folder).rglob("*.py")
    yield from ROOT.glob("*.py")


def test_no_message_hedges_a_count_or_pluralises_by_hand():
    """`{'s' * (n != 1)}` and "node(s)": counted(), plural() and verb() say it right."""
    found = []
    for path in _code_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            by_hand = (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
                       and any(isinstance(side, ast.Constant) and side.value in ("s", "es")
                               for side in (node.left, node.right)))
            hedged = isinstance(node, ast.Constant) and isinstance(node.value, str) and _HEDGED.search(node.value)
            if by_hand or hedged:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "word the count with pipec.wording: " + ", ".join(found)
