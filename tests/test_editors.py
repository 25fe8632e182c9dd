"""The editor files agree with the language and with docs/editors.md: every keyword of
dsl/grammar.lark is highlighted, the VS Code extension starts the server the docs name, and
the docs' configuration examples say the same."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from test_doc_examples import blocks

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((VSCODE / "syntaxes" / "pipe.tmLanguage.json").read_text())
PACKAGE = json.loads((VSCODE / "package.json").read_text())


def _patterns(rule) -> list[str]:
    found = [rule["match"]] if "match" in rule else []
    for child in rule.get("patterns", []):
        found += _patterns(child)
    return found


def test_every_keyword_of_the_grammar_is_highlighted():
    words = set(re.findall(r'"([a-z_]+)"', (ROOT / "dsl" / "grammar.lark").read_text()))
    highlighted = " ".join(p for rule in GRAMMAR["repository"].values() for p in _patterns(rule))
    missing = sorted(w for w in words if not re.search(rf"\b{w}\b", highlighted))
    assert not missing, f"keywords of dsl/grammar.lark without a scope in the TextMate grammar: {missing}"


def test_the_extension_names_the_grammar_the_language_and_the_server():
    contributes = PACKAGE["contributes"]
    assert contributes["languages"][0]["extensions"] == [".pipe"]
    assert contributes["grammars"][0]["scopeName"] == GRAMMAR["scopeName"] == "source.pipe"
    assert contributes["configuration"]["properties"]["pipec.server.command"]["default"] == ["pipec", "lsp"]
    assert (VSCODE / contributes["grammars"][0]["path"]).is_file()
    assert (VSCODE / PACKAGE["main"]).is_file()


def test_the_docs_examples_configure_what_the_server_is():
    document = blocks(ROOT / "docs" / "editors.md")
    helix = tomllib.loads(next(b.text for b in document if b.language == "toml"))
    assert helix["language-server"]["pipec"] == {"command": "pipec", "args": ["lsp"]}
    assert helix["language"][0]["scope"] == GRAMMAR["scopeName"]
    setting = next(b.text for b in document if b.language == "text" and "pipec.server.command" in b.text)
    assert json.loads("{" + setting + "}")["pipec.server.command"][1] == "lsp"
    tests = next(b.text for b in document if b.language == "console" and "npm test" in b.text)
    assert "npm ci" in tests and "tests/*.pipe-test" in PACKAGE["scripts"]["test"]
    assert "npm ci --no-audit --no-fund --loglevel=error && npm test" in (ROOT / ".ci" / "run").read_text()
