"""Renderers on hostile input: terminal escape sequences and bidi overrides ("Trojan Source")
in a `.pipe` line (in a string literal, in a comment, bare) and in a file name are shown
escaped, never written raw; a 100,000-character line is clipped around its span with the caret
still under the right character. JSON and SARIF keep the exact text (the json module escapes it).

A buffer or other name cannot hold these characters (the grammar's NAME is ASCII), so a bare
one is a syntax error, which is a diagnostic like any other."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipec.compiler.cli import main
from pipec.compiler.diagnostics import Diagnostic, Label
from pipec.compiler.render import RENDERERS
from pipec.compiler.render.safe import ELLIPSIS, LINE_WIDTH, excerpt, visible
from pipec.cli.terminal import say
from pipec.dsl.source import SourceFile, Span

ESCAPE = "\x1b[2J\x1b]0;pwned\x07"  # clear the screen, retitle the terminal
BIDI = "\u202e\u2066"  # right-to-left override, left-to-right isolate
HOSTILE = ESCAPE + BIDI + "\x7f\x85\r"
# What must never reach the output raw: C0 but tab and newline, DEL, C1, bidi controls.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

PROGRAMS = {
    "string literal": f'import "lib{ESCAPE}{BIDI}.pipe"\n',
    "comment": f"const X = Y  # {ESCAPE} {BIDI}\n",
    "bare": f"const X{ESCAPE} = 1\n",
    "bidi in code": f"const X = 1 {BIDI}+ 2\n",
}


def check(capsys, path: Path, fmt: str) -> tuple[int, str]:
    code = main(["--check", "--format", fmt, str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out


def write(tmp_path: Path, text: str, name: str = "t.pipe") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def test_visible_escapes_controls_and_bidi_and_keeps_tabs_and_text():
    assert visible("a\tb\x1b[1mé\u202e\x9b\x7f") == "a\tb\\x1b[1mé\\u202e\\x9b\\x7f"
    assert visible("line\nbreak\r") == "line\\x0abreak\\x0d"


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
@pytest.mark.parametrize("where", sorted(PROGRAMS))
def test_no_format_writes_a_raw_control_character(capsys, tmp_path, monkeypatch, fmt, where):
    monkeypatch.chdir(tmp_path)
    code, out = check(capsys, write(tmp_path, PROGRAMS[where]), fmt)
    assert code in (1, 2) and out.strip()  # 2: a syntax error
    assert not RAW_CONTROL.findall(out)


@pytest.mark.parametrize("where", ["string literal", "comment"])
def test_text_shows_the_line_escaped(capsys, tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    _, out = check(capsys, write(tmp_path, PROGRAMS[where]), "text")
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in out and "\\u202e\\u2066" in out


def test_the_string_literal_is_escaped_in_the_message_and_under_the_caret(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, out = check(capsys, write(tmp_path, PROGRAMS["string literal"]), "text")
    head, _, source, carets = out.splitlines()[:4]
    assert "cannot find `lib\\x1b[2J" in head
    # The caret runs under the whole literal as shown, escapes included.
    quoted = source[source.index('"'): source.rindex('"') + 1]
    assert carets.index("^") == source.index('"') and carets.count("^") == len(quoted)


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_a_file_name_with_controls_is_shown_escaped(capsys, tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    name = f"a{ESCAPE}{BIDI}.pipe"
    code, out = check(capsys, write(tmp_path, "const X = Y\n", name), fmt)
    assert code == 1 and not RAW_CONTROL.findall(out)
    if fmt in ("text", "concise", "github"):
        assert "a\\x1b[2J\\x1b]0" in out
    if fmt == "json":
        assert json.loads(out)[0]["file"] == name


def test_json_and_sarif_keep_the_exact_text(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, PROGRAMS["string literal"])
    _, out = check(capsys, path, "json")
    assert f"lib{ESCAPE}{BIDI}.pipe" in json.loads(out)[0]["message"]
    _, out = check(capsys, path, "sarif")
    (result,) = json.loads(out)["runs"][0]["results"]
    assert f"lib{ESCAPE}{BIDI}.pipe" in result["message"]["text"]


def test_github_escapes_percent_line_breaks_and_property_separators(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, out = check(capsys, write(tmp_path, 'import "50%,a:b.pipe"\n', "x,y:z%.pipe"), "github")
    props, _, body = out.partition("::")[2].partition("::")
    assert "file=x%2Cy%3Az%25.pipe," in props
    assert "50%25,a:b.pipe" in body and "%0Ahelp: " in body and body.count("\n") == 1


def test_say_escapes_the_message(capsys):
    say("pipec", "error", f"cannot read {ESCAPE}.pipe", color=False)
    assert capsys.readouterr().err == "pipec: error: cannot read \\x1b[2J\\x1b]0;pwned\\x07.pipe\n"


@pytest.mark.parametrize("fmt", ["text", "concise"])
def test_a_100000_character_line_is_clipped_around_the_error(capsys, tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    half = " + ".join(["1"] * 12_500)  # 49,999 characters
    line = f"const X = {half} + Y + {half}"
    assert len(line) > 100_000
    code, out = check(capsys, write(tmp_path, line + "\n"), fmt)
    assert code == 1 and "undefined name `Y`" in out
    assert max(len(row) for row in out.splitlines()) <= 200
    if fmt == "text":
        source, carets = [row for row in out.splitlines() if row.startswith(("1 |", "  |"))][1:3]
        assert source.startswith("1 | " + ELLIPSIS) and source.endswith(ELLIPSIS)
        assert source[carets.index("^")] == "Y" and carets.count("^") == 1


def _diagnostic(source: SourceFile, start: int, end: int, **extra) -> Diagnostic:
    return Diagnostic("PC103", "undefined name", Span(source, start, end), "a hint", **extra)


def test_a_multi_line_span_shows_its_first_line_to_its_end():
    source = SourceFile(Path("m.pipe"), "const X = (1 +\n    2)\n")
    out = RENDERERS["text"]([_diagnostic(source, 10, 21)])
    rows = out.splitlines()
    assert rows[2] == "1 | const X = (1 +" and rows[3] == "  |           ^^^^"


def test_labels_are_escaped_and_clipped_too():
    text = "x" * 500 + f"{ESCAPE}Z" + "\n"
    source = SourceFile(Path("l.pipe"), text)
    at = text.index("Z")
    label = Label(Span(source, at, at + 1), f"label {BIDI}")
    out = RENDERERS["text"]([_diagnostic(source, 0, 1, label=f"here {ESCAPE}", labels=(label,))])
    assert not RAW_CONTROL.findall(out)
    rows = out.splitlines()
    assert rows[2].startswith("1 | xxx") and rows[2].endswith(ELLIPSIS) and rows[3].startswith("  | ^ here \\x1b")
    source_row, caret_row = rows[6], rows[7]
    assert source_row.startswith("1 | " + ELLIPSIS) and source_row[caret_row.index("-")] == "Z"
    assert caret_row.endswith("- label \\u202e\\u2066")


@pytest.mark.parametrize("line", [
    "a\tb\t\tc" + "\x1b" * 3 + "\td",
    "\t" * 300 + "Z" + "\t" * 300,
    "\u202e" * 400 + "Z" + "x" * 10,
    "y" * 1000 + "Z",
])
def test_the_caret_sits_under_the_marked_character(line):
    at = line.index("Z") if "Z" in line else line.index("c")
    shown = excerpt(line, at, at + 1)
    assert len(shown.text) <= LINE_WIDTH and not RAW_CONTROL.findall(shown.text) and "\t" not in shown.text
    assert shown.text[shown.start] == line[at] and shown.width == 1


def test_tabs_expand_to_the_same_stops_as_before():
    shown = excerpt("a\tbc\td", 5, 6)
    assert shown.text == "a   bc  d" and shown.start == 8


def test_a_span_at_the_end_of_a_long_line_points_past_its_last_character():
    line = "q" * 1000
    shown = excerpt(line, 1000, 1000)
    assert shown.text.startswith(ELLIPSIS) and shown.start == len(shown.text) and shown.width == 1
