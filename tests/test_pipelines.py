"""Every pipeline shipped in pipelines/ checks clean and plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import compile_file, load_settings

PIPELINES = sorted((Path(__file__).parent.parent / "pipelines").rglob("*.pipe"))


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_pipeline_checks_clean(path):
    result = compile_file(path, load_settings(path))
    assert result.diagnostics == [], "\n".join(f"{d.span.location()} {d.code} {d.message}" for d in result.diagnostics)
    assert result.plan is not None and result.plan.step is not None
