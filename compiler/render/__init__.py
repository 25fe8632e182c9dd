"""Renderers: pure functions from diagnostics to text for people, tools and CI systems.

Each takes `color` and `checked` (how many files were checked, for the closing summary line);
the machine formats (json, sarif, github) ignore both, so their output stays parseable."""

from .github import render_github
from .json import render_json
from .sarif import render_sarif
from .statistics import statistics_json, statistics_text
from .text import render_concise, render_text

RENDERERS = {
    "text": render_text,
    "concise": render_concise,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}

__all__ = ["RENDERERS", "statistics_json", "statistics_text"]
