"""rl_step's device branches change which nodes launch, not what they compute: the learner under
`if learn_on[0]` and the plateau controller under `every LR_CHECK_EVERY` leave every buffer
bit-identical to the plain step (-D DEVICE_BRANCHES=0), one step per launch or several."""

from __future__ import annotations

import numpy as np
import pytest
from test_rl_step import PIPE, SMALL

pytestmark = pytest.mark.gpu

STEPS = 60  # past LEARNING_STARTS (about step 8 with SMALL) and several LR_CHECK_EVERY = 10


def _state(branches: int, steps_per_launch: int = 1) -> dict:
    import pipec

    with pipec.load(PIPE, defines={**SMALL, "DEVICE_BRANCHES": branches},
                    steps_per_launch=steps_per_launch) as pipeline:
        pipeline.step(STEPS // steps_per_launch)
        if branches and steps_per_launch == 1:
            report = pipeline.verify(20)
            assert report.ok, [m.describe() for m in report.mismatches]
            assert report.branches, "verify saw no device branch"
        return {k: v for k, v in pipeline.snapshot().items() if not k.startswith("pipec.control.")}


@pytest.mark.parametrize("steps_per_launch", [1, 4])
def test_device_branches_compute_the_same_bits(steps_per_launch):
    plain, branched = _state(0), _state(1, steps_per_launch)
    assert plain.keys() == branched.keys()
    for name in plain:
        np.testing.assert_array_equal(plain[name].view(np.uint8), branched[name].view(np.uint8), err_msg=name)
    assert plain["step_ctr"][0] == STEPS and plain["adam_t"][0] > 0
    assert np.isfinite(plain["lr_best"]).all(), "the plateau controller never ran a check"
