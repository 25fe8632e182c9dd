"""What the flagships' GPU tests (tests/gpu/test_rl_step.py, test_c51_step.py) do to a
pipeline: run it twice and verify graph against eager, and train it while watching the mean
return. Shared so that both flagships are held to the same checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def two_runs_and_verify(pipe: Path, defines: dict, steps: int = 60) -> dict:
    """Two fresh runs of `steps` steps agree bit for bit on every buffer, and the second's
    next `steps` graph replays equal as many eager steps; returns the first run's buffers."""
    import pipec

    snapshots = []
    for _ in range(2):
        with pipec.load(pipe, defines=defines) as pipeline:
            pipeline.step(steps)
            snapshots.append(pipeline.snapshot())
            if len(snapshots) == 2:
                report = pipeline.verify(steps)
    first, second = snapshots
    for name in first:
        np.testing.assert_array_equal(first[name].view(np.uint8), second[name].view(np.uint8), err_msg=name)
    assert report.ok, [m.describe() for m in report.mismatches]
    return first


def mean_return_curve(pipe: Path, defines: dict, every: int = 500, steps: int = 10_000,
                      stop_at: float | None = None) -> list[float]:
    """The mean return of the last 100 episodes every `every` steps, up to `steps` steps (or
    until it reaches `stop_at`)."""
    import pipec

    curve: list[float] = []
    with pipec.load(pipe, defines=defines) as pipeline:
        for _ in range(steps // every):
            pipeline.step(every)
            pipeline.synchronize()
            curve.append(pipeline.readback()["mean_return_100"])
            if stop_at is not None and curve[-1] >= stop_at:
                break
    return curve
