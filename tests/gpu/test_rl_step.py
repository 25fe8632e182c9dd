"""The flagship pipeline end to end through pipec's own runtime: deterministic, graph replay
equal to eager execution bit for bit, and it learns CartPole under the default seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flagship_runs import mean_return_curve, two_runs_and_verify

pytestmark = pytest.mark.gpu

PIPE = Path(__file__).resolve().parents[2] / "pipelines" / "rl_step.pipe"
# A small configuration that reaches the learner within a few dozen steps.
SMALL = {
    "ENVS": 64, "HIDDEN": 32, "CAPACITY": 4096, "BATCH": 64, "UPDATES": 2, "LEARNING_STARTS": 200,
    "EPS_DECAY_STEPS": 50, "PER_BETA_STEPS": 100, "LR_CHECK_EVERY": 10, "LR_PATIENCE": 2,
    "MAX_EPISODE_STEPS": 40,
}


def test_two_runs_agree_and_graph_matches_eager():
    first = two_runs_and_verify(PIPE, SMALL)
    assert first["step_ctr"][0] == 60 and first["learn_on"][0] == 1 and first["adam_t"][0] > 50
    assert np.isfinite(first["params"]).all() and np.isfinite(first["target"]).all()
    size = first["replay_size"][0]
    leaves = first["tree"][SMALL["CAPACITY"]:]
    assert SMALL["LEARNING_STARTS"] <= size <= SMALL["CAPACITY"]
    assert (leaves[:size] > 0).all() and (leaves[size:] == 0).all()
    assert first["ep_count"][0] > 0 and first["diag"][0] == 60


def test_the_default_pipeline_learns_cartpole():
    curve = mean_return_curve(PIPE, {})
    assert max(curve) >= 195, f"mean return of the last 100 episodes, every 500 steps: {curve}"
