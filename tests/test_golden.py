"""Golden plans: `pipec --emit plan` and `--emit dot` for every pipeline in pipelines/ match the
files in tests/golden/, so a change to parsing, resolution, the DAG or lowering that alters what
the runtime would build shows up as a diff in review. After an intended change, regenerate them
with `PIPEC_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py` and read the diff."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
# the files pipelines share (pipelines/common/) have no step of their own: their declarations
# are pinned through the plans of the pipelines that import them
PIPELINES = sorted(p for p in (ROOT / "pipelines").rglob("*.pipe") if p.parent.name != "common")
UPDATE = os.environ.get("PIPEC_UPDATE_GOLDEN") == "1"


def _golden_name(pipeline: Path, kind: str) -> Path:
    relative = pipeline.relative_to(ROOT / "pipelines").with_suffix("")
    return GOLDEN / f"{'.'.join(relative.parts)}.{kind}"


@pytest.mark.parametrize("kind", ["plan.json", "dot"])
@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: p.stem)
def test_emitted_plan_matches_golden(pipeline, kind):
    emit = "plan" if kind == "plan.json" else "dot"
    run = subprocess.run(
        [sys.executable, "-m", "pipec", str(pipeline.relative_to(ROOT)), "--emit", emit],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    # The plan names kernel sources by absolute path (the runtime compiles them); the checkout's
    # own location is not part of what is compared.
    emitted = run.stdout.replace(str(ROOT), "<repository>")
    golden = _golden_name(pipeline, kind)
    if UPDATE:
        golden.write_text(emitted, encoding="utf-8")
    assert golden.is_file(), f"no golden file {golden.relative_to(ROOT)}: run with PIPEC_UPDATE_GOLDEN=1"
    assert emitted == golden.read_text(encoding="utf-8"), \
        f"{pipeline.relative_to(ROOT)}: --emit {emit} differs from {golden.relative_to(ROOT)}; " \
        "if the change is intended, regenerate with PIPEC_UPDATE_GOLDEN=1 and review the diff"


def test_every_golden_file_has_its_pipeline():
    expected = {_golden_name(p, k) for p in PIPELINES for k in ("plan.json", "dot")}
    stale = sorted(p.name for p in GOLDEN.iterdir() if p not in expected)
    assert not stale, f"golden files without a pipeline: {stale}"
