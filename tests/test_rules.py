"""Every rule has a fixture where it fires and one where it stays silent.

compiler/explanations/examples/<CODE>_<name>.pipe (shown by `pipec --explain`) must produce exactly the diagnostics its inline
comments expect; <CODE>_<name>_ok.pipe must produce none at all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import LOAD_TIME_RULES, compile_fixture, expected_diagnostics, explain, load_fixture
from pipec.compiler.codes import EXAMPLES, RULES

FIXTURES = EXAMPLES
FIRING = sorted(p for p in FIXTURES.glob("PC*.pipe") if not p.stem.endswith("_ok"))
SILENT = sorted(FIXTURES.glob("PC*_ok.pipe"))


def _code(path: Path) -> str:
    return path.name.split("_", 1)[0]


def _diagnose(path: Path):
    return load_fixture(path) if _code(path) in LOAD_TIME_RULES else compile_fixture(path)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_every_rule_has_both_fixtures(rule):
    firing = [p for p in FIRING if _code(p) == rule.code]
    assert firing, f"no fixture where {rule.code} fires"
    assert any(p for p in SILENT if _code(p) == rule.code), f"no fixture where {rule.code} stays silent"
    assert any(code == rule.code for p in firing for *_, code in expected_diagnostics(p)), \
        f"{firing[0].name} expects no {rule.code}"


@pytest.mark.parametrize("path", FIRING, ids=lambda p: p.stem)
def test_rule_fires(path):
    actual, result = _diagnose(path)
    expected = expected_diagnostics(path)
    assert actual == expected, explain(actual, expected, result)


@pytest.mark.parametrize("path", SILENT, ids=lambda p: p.stem)
def test_rule_stays_silent(path):
    actual, result = _diagnose(path)
    assert actual == set(), explain(actual, set(), result)


def test_every_rule_is_bound_to_its_code_in_code_order():
    """Call sites write `sink.add(PC205, ...)`: each rule is codes.py's name equal to its code,
    and RULES (so `--explain ALL` and docs/rules.md) lists them in code order."""
    from pipec.compiler import codes

    assert all(getattr(codes, rule.code) is rule for rule in RULES)
    assert [rule.code for rule in RULES] == sorted(rule.code for rule in RULES)


def test_no_rule_code_is_spelled_as_a_string_at_a_call_site():
    """A mistyped constant is an import error; a mistyped string would be a silent miss."""
    root = Path(__file__).resolve().parents[1]
    literal = re.compile(r"""\.add\(\s*["']PC\d{3}""")
    offenders = [str(path.relative_to(root)) for folder in ("compiler", "runtime", "plan")
                 for path in (root / folder).rglob("*.py") if literal.search(path.read_text())]
    assert offenders == []
