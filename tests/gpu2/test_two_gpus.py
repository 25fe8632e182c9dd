"""Two ranks on two GPUs, started by torchrun from inside the test (so plain `pytest -m gpu2`
runs them): every collective's values in the graph and eagerly (allreduce and broadcast also
grouped, one NCCL group over views of several element types), `--verify` with the replicated
buffers compared across ranks, rl_step data-parallel (its collectives grouped), and a failed or
stalled rank stopping the other within seconds, piperun between its log points too. Each test's
ranks run on a port of their own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu2

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
COLLECTIVES = ROOT / "tests" / "fixtures" / "runtime" / "collectives.pipe"
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Two ranks under torchrun. Past `timeout` the whole process group is killed, ranks
    included (killing torchrun alone leaves them holding the output pipes, and the test would
    wait for them), and the test fails with what they printed."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(_port()), *map(str, args)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            pytest.fail(f"the ranks did not finish within {timeout} s:\n{out[-3000:]}\n{err[-6000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _reports(folder: Path) -> list[dict]:
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_every_collective_gives_the_same_values_in_the_graph_and_eagerly(tmp_path):
    run = torchrun(WORKER, "values", COLLECTIVES, tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    for report in _reports(tmp_path):
        rank = report["rank"]
        expected = {"x": 3.0, "mean": 1.5, "top": 2.0, "half": 3.0, "from_one": 2.0,
                    "piece": 2.0 * (rank + 1), "gathered": [1.0, 2.0],
                    "group_sum": 3.0, "group_count": 3.0, "group_from": 2.0, "group_flag": 2.0}
        assert report["graph"] == expected and report["eager"] == expected, report
        assert report["verify_ok"] and report["replicated_differences"] == []


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Open MPI) on the PATH")
def test_mpirun_ranks_meet_through_mpi(tmp_path):
    command = ["mpirun", "-n", "2", "--allow-run-as-root", "--oversubscribe", sys.executable, str(WORKER),
               "values", str(COLLECTIVES), str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-4000:]
    assert [r["graph"]["x"] for r in _reports(tmp_path)] == [3.0, 3.0]


def test_rl_step_verifies_on_two_ranks_with_its_parameters_identical():
    run = torchrun("-m", "pipec.runtime.cli", RL_STEP, "--verify", "20", "-D", "LEARNING_STARTS=512",
                   "--no-progress", timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    for rank in (0, 1):
        assert f"piperun[rank {rank}]: verify: the 15 replicated buffers hold the same bits on all 2 ranks " \
            "after 20 steps" in run.stdout, run.stdout[-4000:]


def test_rl_step_runs_with_one_json_stream_per_rank():
    run = torchrun("-m", "pipec.runtime.cli", RL_STEP, "--steps", "1000", "--log-every", "500", "--json",
                   timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    summaries = [json.loads(line) for line in run.stdout.splitlines() if '"summary"' in line]
    assert sorted((s["rank"], s["world_size"], s["steps"]) for s in summaries) == [(0, 2, 1000), (1, 2, 1000)]


@pytest.mark.parametrize("mode, message", [
    ("fail", "another rank failed (rank 1: a planted failure)"),
    ("stall", "did not finish within 15 s"),
])
def test_a_failed_or_stalled_rank_stops_the_other_within_seconds(tmp_path, mode, message):
    started = time.monotonic()
    run = torchrun(WORKER, mode, COLLECTIVES, tmp_path, env={"PIPEC_NCCL_TIMEOUT": "15"}, timeout=240)
    elapsed = time.monotonic() - started
    assert run.returncode != 0 and elapsed < 120, (elapsed, run.stderr[-4000:])
    assert (tmp_path / "rank0.json").exists(), run.stderr[-6000:]
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    assert message in rank0.get("error", ""), rank0
    # from before loading (compiling, creating the communicator) to the error
    assert rank0["seconds"] < (60 if mode == "fail" else 90), rank0


def test_piperun_with_a_stalled_rank_stops_between_its_log_points(tmp_path):
    # one log point in ten million steps: only the bounded launches' waits (each for the chunk
    # before the last one enqueued) poll
    run = torchrun(WORKER, "replay", COLLECTIVES, tmp_path, env={"PIPEC_NCCL_TIMEOUT": "15"}, timeout=240)
    assert (tmp_path / "rank0.json").exists(), run.stderr[-6000:]  # else its stacks are in stderr
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    assert rank0["status"] == 1 and rank0["seconds"] < 90, (rank0, run.stderr[-4000:])
    assert "did not finish within 15 s" in run.stderr, run.stderr[-4000:]
