"""Every pipeline shipped in pipelines/ checks clean and plans; the files they share (in a
`common` folder: declarations and graphs, no step) check clean on their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override

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


FLAGSHIPS = [p for p in PIPELINES if p.stem in ("rl_step", "c51_step")]


@pytest.mark.parametrize("defines", [(), (("ENVS", "512"),)], ids=["default", "512 envs"])
@pytest.mark.parametrize("path", FLAGSHIPS, ids=_ident)
def test_state_a_step_writes_in_part_is_not_poisoned_by_verify(path, defines):
    """`piperun --verify` poisons the buffers a step writes before it reads them. The replay's
    ring and sum tree keep their old slots (a push writes a few of them), so every kernel that
    writes them binds them `inout`: poisoned, they fed the learner garbage transitions. (At 512
    envs c51_step pushes in two nodes, a scan and a write.)"""
    result = compile_file(path, override(load_settings(path), defines=defines or None))
    assert result.diagnostics == []
    first = {b.name: b.step_first_access for b in result.plan.buffers}
    for name in ("rb_obs", "rb_act", "rb_ret", "rb_next", "rb_disc", "tree", "win_obs", "replay_head"):
        assert first[name] == "read", name
    assert first["b_idx"] == "write"  # the learner's batch is written whole: poisoned
