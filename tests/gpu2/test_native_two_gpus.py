"""The C runtime with a communicator the host created, on two GPUs (issue 26): two processes of
native/examples/data_parallel.c, each creating its NCCL communicator (the unique id through a
file) and replaying its rank's bundle of pipelines/rl_step.pipe, end bit-identical to piperun's
two ranks under torchrun on the same bundles; and a rank that dies without a word makes the
other stop with its one-line error within the timeout, not hang. Run with
`python -m pytest -m gpu2 tests/gpu2/test_native_two_gpus.py`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from native_harness import build_native, native_tools_missing
from pipec.runtime.state import _read

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
from test_native_collectives import build_bundle, same_state  # noqa: E402

pytestmark = [pytest.mark.gpu2,
              pytest.mark.skipif(native_tools_missing() is not None, reason=native_tools_missing() or "")]

ROOT = Path(__file__).resolve().parents[2]
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"
STEPS = 2000  # past LEARNING_STARTS: the gradients' allreduce runs


def ranks(commands: list[list[str]], timeout: float, env: dict | None = None) -> list[subprocess.CompletedProcess]:
    """One process per rank (RANK, WORLD_SIZE, LOCAL_RANK set as torchrun sets them); past
    `timeout` all are killed and the test fails with what they printed."""
    started = []
    for rank, command in enumerate(commands):
        variables = {**os.environ, **(env or {}), "RANK": str(rank), "WORLD_SIZE": str(len(commands)),
                     "LOCAL_RANK": str(rank)}
        started.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                        env=variables, start_new_session=True))
    done = []
    deadline = time.monotonic() + timeout
    for process in started:
        try:
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in started:
                os.killpg(p.pid, signal.SIGKILL)
            pytest.fail(f"the ranks did not finish within {timeout} s")
        done.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return done


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("native-two-gpus")
    for rank in (0, 1):
        build_bundle(RL_STEP, folder / f"rl_step.rank{rank}.bundle", rank, 2)
    return build_native(folder / "build"), folder


def test_the_c_runtime_replays_the_data_parallel_plan_as_piperun_does(setup):
    native, folder = setup
    c = ranks([[str(native / "data_parallel"), str(folder / f"rl_step.rank{r}.bundle"), "--steps", str(STEPS),
                "--id-file", str(folder / "id"), "--save-state", str(folder / f"c{r}")] for r in (0, 1)], timeout=600)
    assert all(r.returncode == 0 for r in c), [r.stderr[-3000:] for r in c]
    # piperun's ranks under torchrun, each on its own bundle (torchrun --no-python runs the shell)
    script = (f"exec {sys.executable} -m pipec.runtime.cli {folder}/rl_step.rank$RANK.bundle --steps {STEPS} "
              f"--no-progress --save-state {folder}/python$RANK")
    python = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--no-python",
                             "sh", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert python.returncode == 0, python.stderr[-4000:]
    for rank in (0, 1):
        assert same_state(folder / f"c{rank}", folder / f"python{rank}") == [], rank
    (_, zero), (_, one) = (_read(folder / f"c{r}" / "state.safetensors") for r in (0, 1))
    assert zero["params"].tobytes() == one["params"].tobytes()  # replicated across the ranks


def test_a_rank_that_dies_stops_the_other_with_its_one_line_error(setup):
    native, folder = setup
    started = time.monotonic()
    # one replay a wait: a full launch queue would block inside cuGraphLaunch, out of any timeout's reach
    base = [str(native / "data_parallel"), "--steps", "10000000", "--sync-every", "1", "--id-file", str(folder / "id-dies")]
    done = ranks([[*base, str(folder / "rl_step.rank0.bundle")],
                  [*base, str(folder / "rl_step.rank1.bundle"), "--exit-after", "100"]],
                 timeout=240, env={"PIPEC_NCCL_TIMEOUT": "15"})
    elapsed = time.monotonic() - started
    assert done[1].returncode == 3 and done[0].returncode == 1, [r.stderr[-2000:] for r in done]
    (line,) = done[0].stderr.splitlines()
    assert line.startswith("data_parallel[rank 0]: error: rank 0: ") and \
        line.endswith("; the NCCL communicator is aborted"), line
    assert elapsed < 120, elapsed
