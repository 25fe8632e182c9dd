"""How long `pipec --check` takes, and how much memory, on a generated pipeline of N nodes, once
the kernels are cached (the figure CI cares about). Needs no GPU.

    python bench/check_speed.py [--nodes 5000 100000] [--shape random|chain|fan] [--repeats 5]
    python bench/check_speed.py --stages --nodes 100000   # seconds per compiler stage, in process

`--stages` runs every stage up to the plan once in this process and prints where the time
goes: resolve, the hazard DAG (check), and the plan with its lanes."""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import TINY, chain_pipe, fan_pipe, median, table

BUFFERS = 64


def generated(nodes: int, seed: int = 0) -> str:
    """Random reads and writes over a few dozen buffers: a DAG with real hazards everywhere."""
    rng = random.Random(seed)
    lines = [f'from "{TINY}" import tiny, leaf']
    lines += [f"buffer b{i}: u32[64]" for i in range(BUFFERS)]
    lines.append("step {")
    for _ in range(nodes):
        src, dst = rng.sample(range(BUFFERS), 2)
        lo = rng.randrange(0, 63)
        lines.append(f"    launch leaf<<<1, 32>>>(in b{src}, out b{dst}[{lo}:{lo + 1}])")
    lines.append("}")
    return "\n".join(lines) + "\n"


SHAPES = {"random": generated, "chain": chain_pipe, "fan": fan_pipe}


def timed_check(command: list[str]) -> tuple[float, float]:
    """Seconds and peak resident MiB of one `pipec --check` run."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def stage_seconds(path: Path) -> list[list]:
    """Each stage of one in-process compile, with the DAG's share of check and plan."""
    import cProfile
    import pstats

    from pipec.compiler import Settings, compile_file

    profile = cProfile.Profile()
    profile.runcall(compile_file, path, Settings())
    stats = pstats.Stats(profile).stats
    wanted = ["resolve_program", "check_program", "build_dag", "transitive_reduction",
              "plan_program", "add_lanes"]
    rows = []
    for name in wanted:
        # cumulative time of the outermost call: the largest of the entries with that name
        seconds = max((v[3] for (_, _, fn), v in stats.items() if fn == name), default=0.0)
        rows.append([name, seconds])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="random")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stages", action="store_true", help="seconds per stage, in process")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pipec-check-"))
    rows = []
    for n in args.nodes:
        path = folder / f"{args.shape}{n}.pipe"
        path.write_text(SHAPES[args.shape](n))
        command = [sys.executable, "-m", "pipec", "--check", str(path)]
        timed_check(command)  # fills the kernel cache
        if args.stages:
            print(f"{args.shape}, {n} nodes")
            print(table(["stage", "seconds (cumulative, profiled)"], stage_seconds(path)))
            continue
        runs = [timed_check(command) for _ in range(args.repeats)]
        times = [seconds for seconds, _ in runs]
        rows.append([n, median(times), min(times), max(mib for _, mib in runs)])
    if rows:
        print(table(["nodes", "pipec --check, median s", "min s", "peak MiB"], rows))


if __name__ == "__main__":
    main()
