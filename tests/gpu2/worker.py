"""One rank of tests/gpu2/test_two_gpus.py, started by torchrun: `worker.py MODE PIPE OUT_DIR`.

MODE `values`: one graph replay and one eager step of PIPE, their results and `verify`'s;
`fail`: rank 1 reports a failure and then hangs, as a wedged process would, while rank 0 keeps
stepping; `stall`: rank 1 stops issuing collectives without a word; `replay`: rank 1 stalls as
in `stall` while rank 0 runs piperun with one log point, far away. Each rank writes what it saw
to OUT_DIR/rank<R>.json."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import pipec
from pipec.runtime.distributed import nccl_environment, stop_other_ranks
from pipec.runtime.process_launchers import launch_from_environment

mode, pipe, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
launch = launch_from_environment()
nccl_environment()
report: dict = {"rank": launch.rank, "world_size": launch.world_size}
if mode != "values" and launch.rank == 0:
    # a rank 0 that hangs prints every thread's stack and exits, so the test shows where
    faulthandler.dump_traceback_later(float(os.environ.get("PIPEC_TEST_DUMP_S", "110")), exit=True)


def summary(pipeline) -> dict:
    def first(name):  # bf16 reads back as ml_dtypes' bfloat16, which float64 holds exactly
        return float(np.asarray(pipeline.read(name), dtype=np.float64).reshape(-1)[0])
    gathered = pipeline.read("gathered").reshape(launch.world_size, -1)[:, 0].tolist()
    names = ("x", "mean", "top", "half", "from_one", "piece", "group_sum", "group_count", "group_from", "group_flag")
    return {name: first(name) for name in names} | {"gathered": gathered}


started = time.monotonic()
if mode == "replay" and launch.rank == 0:
    # only piperun's bounded launches (at most IN_FLIGHT nodes unfinished, each chunk's wait polling)
    # can notice the stalled rank: without them the launches fill CUDA's queue and the next one
    # blocks inside the driver
    from pipec.runtime.cli import main
    report["status"] = main([str(pipe), "--steps", "10000000", "--log-every", "10000000", "--no-progress"])
    report["seconds"] = round(time.monotonic() - started, 2)
    (out / "rank0.json").write_text(json.dumps(report))
    sys.exit(report["status"])
try:
    with pipec.load(pipe, device=launch.local_rank, launch=launch) as pipeline:
        report["backend"] = pipeline.distributed.communicator.backend
        if mode == "values":
            pipeline.step()
            report["graph"] = summary(pipeline)
            pipeline.run_eager()
            report["eager"] = summary(pipeline)
            report["verify_ok"] = pipeline.verify(3).ok
            from pipec.runtime.distributed import replicated_differences
            report["replicated_differences"] = replicated_differences(pipeline, 3)
        elif launch.rank == 1:
            pipeline.step(5)
            pipeline.synchronize()
            if mode == "fail":
                stop_other_ranks(pipeline, "a planted failure")
            (out / "rank1.json").write_text(json.dumps(report))
            time.sleep(600)  # wedged: only the launcher ends it
        else:
            while time.monotonic() - started < 300:
                pipeline.step(5)
                pipeline.synchronize()
except pipec.Error as error:
    report["error"] = f"{type(error).__name__}: {error}"
report["seconds"] = round(time.monotonic() - started, 2)
(out / f"rank{launch.rank}.json").write_text(json.dumps(report))
sys.exit(1 if "error" in report else 0)
