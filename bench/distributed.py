"""rl_step on one GPU and data-parallel on two, as ENVS per rank grows: environment steps per
second (all ranks together) and learner updates per second, and the cost of the all-reduce
node inside the replay.

    python bench/distributed.py [--envs 128,512,2048,8192,32768] [--steps 3000] [--out DIR]

The default sweep goes up to 32768 environments per rank, meant to reach a size where one
GPU's step is no longer launch-bound (`pipec --check -D ENVS=32768 -D WORLD_SIZE=2` accepts
it); the table gives the speed-up of two GPUs over one at every size. Each point runs
`piperun --json` once on GPU 0 without a launcher and once under `torchrun --nproc-per-node 2`
(NCCL_NVLS_ENABLE=0, which pipec sets anyway). A rank's steps/s is its own summary's; the
two-GPU figure is the slower rank's. Environment steps/s are steps/s x ENVS x ranks; learner
updates/s are steps/s x UPDATES (each update averages the ranks' gradients, so two GPUs make
the same number of updates from twice the data). With two ranks rl_step holds three
collective nodes a step (two of them grouped allreduces). The all-reduce's cost: a step
holding only an all-reduce of the gradient (NPARAMS f32; rl_step's optimize groups it with
the gradient-norm parts), replayed on two GPUs, against a step holding one memset of the same
buffer: the difference per replay is what the node adds to a step."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from common import environment, save_json, table

ROOT = Path(__file__).resolve().parent.parent
PIPE = ROOT / "pipelines" / "rl_step.pipe"
NPARAMS = 4610  # rl_step's parameter count at HIDDEN = 64 (8 H + H^2 + 2)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def piperun(pipe: Path, ranks: int, steps: int, defines: dict) -> list[dict]:
    """Every rank's JSON summary of one run."""
    args = [str(pipe), "--steps", str(steps), "--log-every", str(steps), "--json", "--no-progress"]
    args += [a for k, v in defines.items() for a in ("-D", f"{k}={v}")]
    if ranks == 1:
        command = [sys.executable, "-m", "pipec.runtime.cli", *args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
                   "--master-addr", "127.0.0.1", "--master-port", str(_port()), "-m", "pipec.runtime.cli", *args]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "NCCL_NVLS_ENABLE": "0"}, timeout=1800)
    if run.returncode != 0:
        raise SystemExit(f"bench/distributed.py: {' '.join(command)} failed:\n{run.stderr[-3000:]}")
    summaries = [json.loads(line) for line in run.stdout.splitlines() if '"event": "summary"' in line]
    assert len(summaries) == ranks, run.stdout[-2000:]
    return summaries


def scaling(envs: list[int], steps: int) -> list[dict]:
    points = []
    for e in envs:
        point = {"envs_per_rank": e}
        for ranks in (1, 2):
            summaries = piperun(PIPE, ranks, steps, {"ENVS": e})
            steps_per_s = min(s["steps_per_s"] for s in summaries)
            point[f"{ranks}gpu"] = {"steps_per_s": steps_per_s, "env_steps_per_s": steps_per_s * e * ranks,
                                    "updates_per_s": steps_per_s, "gpu_us_per_step":
                                    max(s["gpu_us_per_step"] for s in summaries)}
        point["env_speedup"] = point["2gpu"]["env_steps_per_s"] / point["1gpu"]["env_steps_per_s"]
        points.append(point)
        print(f"ENVS={e}: {point}", flush=True)
    return points


def allreduce_cost(folder: Path, steps: int) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    costs = {}
    for name, body in (("allreduce", "allreduce avg grad"), ("memset", "fill grad = 0.0")):
        pipe = folder / f"{name}.pipe"
        pipe.write_text(f"buffer grad: f32[{NPARAMS}]\nstep {{\n    {body}\n}}\n")
        summaries = piperun(pipe, 2, steps, {})
        costs[name] = {"steps_per_s": min(s["steps_per_s"] for s in summaries),
                       "gpu_us_per_step": max(s["gpu_us_per_step"] for s in summaries)}
    costs["allreduce_us_per_step"] = costs["allreduce"]["gpu_us_per_step"] - costs["memset"]["gpu_us_per_step"]
    return costs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", default="128,512,2048,8192,32768")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args()
    envs = [int(e) for e in args.envs.split(",")]
    points = scaling(envs, args.steps)
    cost = allreduce_cost(args.out / "distributed_pipes", 20 * args.steps)
    rows = [[pt["envs_per_rank"], f"{pt['1gpu']['env_steps_per_s']:,.0f}", f"{pt['2gpu']['env_steps_per_s']:,.0f}",
             f"{pt['env_speedup']:.2f}x", f"{pt['1gpu']['updates_per_s']:,.0f}", f"{pt['2gpu']['updates_per_s']:,.0f}",
             f"{pt['1gpu']['gpu_us_per_step']:.1f}", f"{pt['2gpu']['gpu_us_per_step']:.1f}"] for pt in points]
    print(table(["ENVS per rank", "env steps/s 1 GPU", "env steps/s 2 GPUs", "speed-up 2 GPUs / 1", "updates/s 1 GPU",
                 "updates/s 2 GPUs", "us/step 1 GPU", "us/step 2 GPUs"], rows))
    print(f"\nall-reduce of {NPARAMS} f32 in a replay on 2 GPUs: {cost['allreduce_us_per_step']:.1f} us per step "
          f"({cost['allreduce']['gpu_us_per_step']:.1f} us for the all-reduce step, "
          f"{cost['memset']['gpu_us_per_step']:.1f} us for a memset step)")
    save_json(args.out / "distributed.json", {"environment": environment(), "scaling": points,
                                             "allreduce": cost})
    return 0


if __name__ == "__main__":
    sys.exit(main())
