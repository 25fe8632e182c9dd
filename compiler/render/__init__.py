"""Renderers: pure functions from diagnostics to text for people, tools and CI systems."""

from .github import render_github
from .json import render_json
from .sarif import render_sarif
from .text import render_concise, render_text

RENDERERS = {
    "text": render_text,
    "concise": render_concise,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}

__all__ = ["RENDERERS"]
