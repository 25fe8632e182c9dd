"""Every pipeline shipped in pipelines/ checks clean and plans; the files they share (in a
`common` folder: declarations and graphs, no step) check clean on their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import compile_file, load_settings

ALL = sorted((Path(__file__).parent.parent / "pipelines").rglob("*.pipe"))
SHARED = [p for p in ALL if p.parent.name == "common"]
PIPELINES = [p for p in ALL if p not in SHARED]


def _ident(path: Path) -> str:
    return str(path.relative_to(path.parents[1]))


def _clean(path: Path):
    result = compile_file(path, load_settings(path))
    assert result.diagnostics == [], "\n".join(f"{d.span.location()} {d.code} {d.message}" for d in result.diagnostics)
    assert result.plan is not None
    return result.plan


@pytest.mark.parametrize("path", PIPELINES, ids=_ident)
def test_pipeline_checks_clean(path):
    assert _clean(path).step is not None


@pytest.mark.parametrize("path", SHARED, ids=_ident)
def test_shared_file_checks_clean_with_its_defaults_and_has_no_step(path):
    assert _clean(path).step is None
