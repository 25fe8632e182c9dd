"""Programmatic edges on the device (docs/plan.md, "Programmatic edges"): built, replayed and
verified bit for bit against eager launches, and equal bit for bit to the same pipelines with
`option pdl = "off"` (every edge ordinary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "tests" / "fixtures" / "runtime" / "pdl_chain.pipe"
ON, OFF = {"PDL": '"auto"'}, {"PDL": '"off"'}  # c51_step.pipe's default is off, rl_step's auto
# the flagship tests' small configurations (the learner runs within the 60 steps), HIDDEN theirs
SMALL = {
    "ENVS": 64, "CAPACITY": 4096, "BATCH": 64, "UPDATES": 2, "LEARNING_STARTS": 200,
    "EPS_DECAY_STEPS": 50, "PER_BETA_STEPS": 100, "LR_CHECK_EVERY": 10, "LR_PATIENCE": 2,
    "MAX_EPISODE_STEPS": 40,
}


def _run(pipe: Path, defines: dict, steps: int) -> tuple[dict, int]:
    """Every buffer after `steps` replays, the programmatic edges of the graph, and a verified
    further `steps` replays against as many eager steps."""
    import pipec

    with pipec.load(pipe, defines=defines) as pipeline:
        pipeline.step(steps)
        snapshot = pipeline.snapshot()
        report = pipeline.verify(steps)
        assert report.ok, [m.describe() for m in report.mismatches]
        return snapshot, pipeline.graph.programmatic_edges


def _same_bits(first: dict, second: dict) -> None:
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name].view(np.uint8), second[name].view(np.uint8), err_msg=name)


def test_a_chain_of_programmatic_edges_replays_as_ordinary_edges_do():
    with_edges, count = _run(CHAIN, ON, 20)
    without, none = _run(CHAIN, OFF, 20)
    assert (count, none) == (64, 0)
    _same_bits(with_edges, without)


@pytest.mark.parametrize("pipe, defines", [
    ("rl_step.pipe", {**SMALL, "HIDDEN": 32}),
    ("c51_step.pipe", {**SMALL, "HIDDEN": 256}),
    ("c51_step.pipe", {**SMALL, "HIDDEN": 256, "BF16": "true"}),
], ids=["rl_step", "c51_step", "c51_step_bf16"])
def test_flagships_are_bit_exact_with_and_without_programmatic_edges(pipe, defines):
    with_edges, count = _run(ROOT / "pipelines" / pipe, {**defines, **ON}, 60)
    without, none = _run(ROOT / "pipelines" / pipe, {**defines, **OFF}, 60)
    assert count > 0 and none == 0
    _same_bits(with_edges, without)
