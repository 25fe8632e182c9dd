"""bench/control_flow.py without a GPU: its generated pipelines check clean, its measurements run
end to end against the fake driver (recorded calls, fixed event times), and its report formats
what they return. The figures themselves come from the GPU run (scripts/gpu-check.sh bench)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fake_cuda import fake_driver
from pipec.compiler import Settings, compile_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import control_flow  # noqa: E402 - from bench/
from common import chain_pipe, fan_pipe, write_pipe  # noqa: E402 - from bench/


def test_generated_pipelines_check_clean(tmp_path):
    pipes = control_flow.generated_pipes()
    assert set(pipes) == {"if_none", "if_taken", "if_not_taken"} | {f"repeat_{k}" for k in control_flow.LOOP_COUNTS}
    pipes.update(chain=chain_pipe(10), fan=fan_pipe(10))  # bench/launch_overhead.py's
    for name, text in pipes.items():
        path = write_pipe(tmp_path, name, text)
        compilation = compile_file(path, Settings(), until="check")
        assert compilation.program is not None and compilation.diagnostics == [], name
    assert pipes["if_taken"].count("if flag[0] {") == control_flow.CHAIN
    assert "fill(0)" in pipes["if_not_taken"] and "if " not in pipes["if_none"]


def test_slope_is_the_least_squares_fit():
    assert control_flow.slope([(1, 3.0), (10, 21.0), (100, 201.0)]) == pytest.approx(2.0)
    assert control_flow.slope([(1, 1.0), (2, 3.0), (3, 2.0)]) == pytest.approx(0.5)


def test_measurements_run_on_the_fake_driver_and_report(tmp_path, monkeypatch):
    monkeypatch.setattr(control_flow, "REPLAYS", 3)
    monkeypatch.setattr(control_flow, "LOOP_COUNTS", (1, 10))
    monkeypatch.setattr(control_flow, "WARMUP_STEPS", 4)
    drivers = []

    def driver_for(path: Path):
        drivers.append((path.name, fake_driver(path)))
        return drivers[-1][1]

    results = control_flow.measure(tmp_path, repeats=2, steps=6, driver_for=driver_for, launch_counts=(1, 4))
    assert [name for name, _ in drivers] == ["if_none.pipe", "if_taken.pipe", "if_not_taken.pipe",
                                             "repeat_1.pipe", "repeat_10.pipe"] + ["rl_step.pipe"] * 4
    # the fake's events all last 1 us: every replay costs 1 us / REPLAYS, nothing is added
    nodes = results["nodes"]
    assert nodes["replay_us"]["if_taken"] == pytest.approx(1 / 3)
    assert nodes["if_taken_us"] == nodes["if_not_taken_us"] == nodes["while_iteration_us"] == 0
    # (c) whole launches of K steps, about `steps` a run; (d) both forms of rl_step
    assert [(r["steps_per_launch"], r["steps"]) for r in results["steps_per_launch"]] == [(1, 6), (4, 8)]
    assert [r["defines"] for r in results["branches"]] == [{"DEVICE_BRANCHES": 1}, {"DEVICE_BRANCHES": 0}]
    # a launch of K = 4 steps is one cuGraphLaunch: warm-up 1 + host 2 + wall 2 + events 2 runs of 2
    k4 = drivers[6][1].cu
    assert len(k4.named("cuGraphLaunch")) == 1 + 3 * 2 * 2
    text = control_flow.report(results)
    assert "(c) rl_step, K steps per launch" in text and "slope: 0.000 us per iteration" in text
    assert text.count("\n|") >= 3 + 2 + 2 + 2 and "DEVICE_BRANCHES=1 runs at" in text
