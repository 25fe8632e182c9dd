"""The fuzzer's oracle (tests/test_fuzz.py, scripts/fuzz.py): what must hold of pipec's answer
to any input in any surroundings. Exit status 0, 1 or 2; no traceback (an exception propagates
to the caller, which counts it); a usage error alone on stderr with status 2; otherwise a JSON
report whose diagnostics have a known code, a message, a hint and a span inside their file,
the other formats agreeing with it, and no exit status 0 while an error of a selected rule
stands (a silent pass)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
from pathlib import Path

from fuzz_surroundings import Surroundings
from pipec.cli.arguments import define
from pipec.compiler import codes, compile_file, load_settings
from pipec.compiler.cli import main
from pipec.compiler.config import ConfigError, Settings, override
from pipec.compiler.render import RENDERERS
from pipec.dsl import SourceFile

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # FORCE_COLOR colours the usage errors too


def run_check(path: Path, fmt: str | None, around: Surroundings = Surroundings()) -> tuple[int, str, str]:
    """pipec's exit status, stdout and stderr on `path` in its surroundings (`fmt` None: the
    format that $PIPEC_OUTPUT_FORMAT names)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--check", *(["--format", fmt] if fmt else []), *around.argv(), str(path)]
    with around.environment(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse's own usage errors (a malformed -D)
            code = exit.code if isinstance(exit.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _span_problem(file: str, line: int, column: int, end_line: int, end_column: int) -> str | None:
    if file.startswith("<-D "):  # a -D value's own text, which no file holds
        return None if line == 1 <= column else f"span {file}:{line}:{column} outside the value"
    source = SourceFile.read(Path(file))
    if not 1 <= line <= source.line_count or not 1 <= column <= len(source.line_text(line)) + 1:
        return f"span {file}:{line}:{column} lies outside the file"
    if (end_line, end_column) < (line, column) or end_line > source.line_count:
        return f"span {file}:{line}:{column} ends before it starts or after the file"
    return None


def _settings(path: Path, around: Surroundings) -> Settings | None:
    """The settings the check ran with, every rule selected; None when its configuration or
    its command line is a usage error (which the check must answer with exit status 2)."""
    try:
        defines = tuple(define(text) for text in around.defines)
        return override(load_settings(path), defines=defines or None, select=("ALL",), ignore=())
    except (ConfigError, argparse.ArgumentTypeError):
        return None


def problems(path: Path, around: Surroundings = Surroundings()) -> tuple[int, list[str], list[str]]:
    """pipec's exit status on the file at `path` in its surroundings, the codes it reported,
    and what is wrong with its answer (nothing, normally). An exception inside pipec
    propagates: a traceback is the first thing looked for. The command line answers in JSON;
    the other formats render the same diagnostics."""
    found: list[str] = []
    code, out, err = run_check(path, "json", around)
    if code not in (0, 1, 2):
        found.append(f"exit status {code}")
    every_rule = _settings(path, around)
    errors = [line for line in _ANSI.sub("", err).splitlines() if line.startswith("pipec: error:")]
    if errors:  # a usage error: one line, status 2, nothing on stdout
        if code != 2 or len(err.strip().splitlines()) != 1 or out:
            found.append(f"a usage error not alone or not status 2 ({code}): {err[:300]!r}")
        return code, [], found
    if every_rule is None:
        return code, [], found + [f"a broken configuration or -D passed with status {code}"]
    try:
        diagnostics = json.loads(out)
    except ValueError:
        return code, [], found + [f"no JSON report: {out[:200]!r}"]
    if code == 2 and not diagnostics:
        found.append("exit status 2 with an empty report")
    for d in diagnostics:
        if d["code"] not in codes.BY_CODE or not d["message"] or not d["hint"]:
            found.append(f"diagnostic without a known code, a message or a hint: {d}")
        span = _span_problem(d["file"], d["line"], d["column"], d["end_line"], d["end_column"])
        if span:
            found.append(f"{d['code']}: {span}")
    with around.environment():
        again = compile_file(path, every_rule, until="check").diagnostics
    found += _silent_pass(path, code, again)
    reports = {name: render(again) for name, render in RENDERERS.items()}
    if len(json.loads(reports["sarif"])["runs"][0]["results"]) != len(again):
        found.append("the SARIF report disagrees with the JSON report")
    if again and not all(reports[name].strip() for name in reports):
        found.append("an empty report in some format")
    if "PIPEC_OUTPUT_FORMAT" in around.env:  # the format named there: the same status, or a usage error
        chosen = around.env["PIPEC_OUTPUT_FORMAT"]
        if run_check(path, None, around)[0] != (code if chosen in ("", *RENDERERS) else 2):
            found.append(f"PIPEC_OUTPUT_FORMAT={chosen!r} gave another exit status than {code}")
    return code, [d["code"] for d in diagnostics], found


def _silent_pass(path: Path, code: int, every_rule: list) -> list[str]:
    """Exit status 0 while an error of a selected rule stands: the configuration's selection,
    not a typo or an empty one, must be what hides the others."""
    settings = load_settings(path)
    selected = codes.select(list(settings.select)) - codes.select(list(settings.ignore))
    standing = sorted({d.code for d in every_rule if d.severity is codes.Severity.ERROR and d.code in selected})
    return [f"exit status 0 with errors {', '.join(standing)}"] if code == 0 and standing else []
