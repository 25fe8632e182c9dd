"""Device control flow on a real GPU: every construct taken and not taken, nesting, `while`
termination, `every N` and `repeat K` counted on the device, and eager against graph replay
through the branches, bit for bit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runtime"
N = 32


@pytest.fixture
def conditionals():
    import pipec

    with pipec.load(FIXTURES / "conditionals.pipe") as pipeline:
        yield pipeline


def _all(pipeline, name: str, value) -> bool:
    return bool((pipeline.read(name) == value).all())


def test_each_construct_taken(conditionals):
    p = conditionals
    p.step(1)
    assert _all(p, "a", 1.0)  # if: then
    assert _all(p, "b", 2.0)  # switch: case 2
    assert _all(p, "busy", 0) and _all(p, "d", 4.0)  # while ran once; the nested if ran
    assert _all(p, "x", 1.5)  # repeat 3 added 0.5 three times; every 2 not yet due
    assert _all(p, "c", 0.0)  # every 2: its copy has not run yet (buffers start at zeros)
    p.step(1)
    assert _all(p, "x", 1.5 + 1.0 + 1.5) and _all(p, "c", 1.0)  # every 2 ran on the second step


def test_each_construct_not_taken(conditionals):
    p = conditionals
    p.write("learn_on", np.array([0], np.int32))
    p.write("mode", np.array([7], np.uint8))  # no case 7: no body
    p.write("b", np.full(N, 7.0, np.float32))
    p.step(1)
    assert _all(p, "a", 2.0)  # if: else
    assert _all(p, "b", 7.0)  # switch ran no case
    assert _all(p, "d", 0.0)  # the nested if was not taken
    p.write("mode", np.array([0], np.uint8))
    p.step(1)
    assert _all(p, "b", 0.0)  # case 0


def test_while_terminates_and_nested_constructs_count_on_the_device():
    import pipec

    with pipec.load(FIXTURES / "device_loops.pipe") as p:
        p.step(2)
        assert _all(p, "left", 0)
        assert _all(p, "iterations", 10.0)  # 5 iterations per step
        assert _all(p, "repeats", 20.0)  # repeat 2 in each iteration
        assert _all(p, "periodic", 3.0)  # every 3 over 10 evaluations
        p.write("on", np.array([0], np.int32))
        p.step(1)
        assert _all(p, "iterations", 15.0) and _all(p, "periodic", 3.0)


def test_eager_matches_graph_through_branches(conditionals):
    report = conditionals.verify(5)
    assert report.ok, [m.describe() for m in report.mismatches]
    assert report.branches["step/if"] == {0: 5} and report.branches["step/every"] == {0: 2}
    conditionals.write("learn_on", np.array([0], np.int32))
    report = conditionals.verify(3)
    assert report.ok and report.branches["step/if"] == {1: 3}


def test_piperun_verify_reports_the_branches_taken():
    result = subprocess.run([sys.executable, "-m", "pipec.runtime.cli", str(FIXTURES / "device_loops.pipe"),
                             "--verify", "3"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "branches taken (eager) `step/while`: body 0 15x" in result.stdout


def test_steps_per_launch_runs_k_steps_per_graph_launch():
    import pipec

    with pipec.load(FIXTURES / "device_loops.pipe", steps_per_launch=3) as p:
        p.step(2)  # two launches, three steps each, five loop iterations per step
        assert _all(p, "iterations", 30.0) and _all(p, "repeats", 60.0) and _all(p, "periodic", 10.0)
        report = p.verify(2)
        assert report.ok, [m.describe() for m in report.mismatches]
        assert report.branches["launch/repeat"] == {0: 6} and report.branches["step/while"] == {0: 30}
    result = subprocess.run([sys.executable, "-m", "pipec.runtime.cli", str(FIXTURES / "conditionals.pipe"),
                             "--steps", "60", "--log-every", "20", "--steps-per-launch", "10"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ran 60 steps" in result.stdout
