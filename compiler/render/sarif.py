"""SARIF 2.1.0, with the fields GitHub code scanning requires (rules with descriptions and
help, results with locations and a stable fingerprint)."""

from __future__ import annotations

import hashlib
import json

from ..._version import __version__
from ..codes import RULES
from ..diagnostics import Diagnostic


def _fingerprint(d: Diagnostic) -> str:
    line_text = d.span.source.line_text(d.span.line).strip()
    return hashlib.sha256(f"{d.code}:{line_text}".encode()).hexdigest()[:16] + ":1"


def render_sarif(diagnostics: list[Diagnostic], *, color: bool = False, checked: int | None = None) -> str:
    index = {rule.code: i for i, rule in enumerate(RULES)}
    rules = [
        {
            "id": rule.code, "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.summary},
            "help": {"text": f"Run `pipec --explain {rule.code}`.", "markdown": rule.explanation()},
            "defaultConfiguration": {"level": rule.severity.value},
        }
        for rule in RULES
    ]
    results = []
    for d in diagnostics:
        end_line, end_column = d.span.end_line_col()
        results.append({
            "ruleId": d.code, "ruleIndex": index[d.code], "level": d.severity.value,
            "message": {"text": f"{d.message}\nhelp: {d.hint}"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": d.span.source.display_path()},
                "region": {"startLine": d.span.line, "startColumn": d.span.column,
                           "endLine": end_line, "endColumn": max(end_column, d.span.column + 1)
                           if end_line == d.span.line else end_column},
            }}],
            "partialFingerprints": {"primaryLocationLineHash": _fingerprint(d)},
        })
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "pipec", "semanticVersion": __version__,
                                "informationUri": "https://github.com/pipec/pipec", "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(document, indent=2) + "\n"
