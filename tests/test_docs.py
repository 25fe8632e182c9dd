"""docs/rules.md is generated from compiler/explanations/ and must be kept in step with it; every
rule's explanation starts with its heading and has the same four sections."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipec.compiler.codes import EXPLANATIONS, RULES

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("**What it catches.**", "**Why it matters.**", "**Example.**", "**Instead.**")


def test_rules_md_is_generated():
    generated = subprocess.run(
        [sys.executable, "-m", "pipec", "--explain", "ALL"], capture_output=True, text=True, check=True,
        cwd=ROOT,
    ).stdout
    committed = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == generated, \
        "docs/rules.md is stale: run `pipec --explain ALL > docs/rules.md`"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_explanation_starts_with_heading(rule):
    text = rule.explanation()
    heading = f"## {rule.code} {rule.name}"
    assert text.splitlines()[0] == heading, f"{rule.code}.md must begin with `{heading}`"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_explanation_has_its_sections(rule):
    text = rule.explanation()
    positions = [text.find(section) for section in SECTIONS]
    missing = [s for s, p in zip(SECTIONS, positions) if p < 0]
    assert not missing, f"{rule.code}.md lacks {', '.join(missing)}"
    assert positions == sorted(positions), f"{rule.code}.md: sections out of order"


def test_no_explanation_without_a_rule():
    codes = {rule.code for rule in RULES}
    extra = sorted(p.stem for p in EXPLANATIONS.glob("*.md") if p.stem not in codes)
    assert not extra, f"explanations for codes the rule table lacks: {', '.join(extra)}"
