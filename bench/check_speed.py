"""How long `pipec --check` and `pipec --emit plan` take, and how much memory, on a generated
pipeline of N nodes, once the kernels are cached (the figure CI cares about). Needs no GPU.

    python bench/check_speed.py [--nodes 5000 100000] [--shape random chain ...] [--repeats 5]   # every shape by default
    python bench/check_speed.py --stages --nodes 100000   # seconds per compiler stage, in process
    python bench/check_speed.py --rl-step 10000            # also pipelines/rl_step.pipe, -D UPDATES=10000
    python bench/check_speed.py --mode emit --nodes 100000 # `--emit plan` only (both by default)

Each shape makes N nodes, step and init together (but `graphs`: a multiple of GRAPH_NODES + 1,
the nodes of a child graph and its node, at most N from N = GRAPH_NODES + 1 on; `slices`: one
short for an even N), so the documented limit of 1,000,000 nodes is reachable with --nodes
1000000; the table gives each program's count. rl_step with UPDATES=U has 10 U + 4 nodes.

The parser reads at most 262,144 characters a file (PC112), so the programs are written the way
a large pipeline is: a few statements repeated by compile-time `for` loops and child-graph
uses, not one line per node. `--stages` runs every stage up to the plan once in this process
and prints where the time goes: parse, resolve, the hazard DAG (check), and the plan with its
lanes."""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import TINY, median, table

ROOT = Path(__file__).resolve().parent.parent
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"
BUFFERS = 64
PATTERN = 256  # distinct random statements, repeated by a loop
GRAPH_NODES = 1000  # nodes of one child graph in the `graphs` shape


def _repeated(nodes: int, statements: list[str]) -> list[str]:
    """`statements`, which read `k`, repeated by a loop over `k` until `nodes` statements: the
    last pass, with only the statements still missing, is a loop of its own."""
    loops, rest = divmod(nodes, len(statements))
    lines = []
    for first, stop, count in ((0, loops, len(statements)), (loops, loops + 1, rest)):
        if stop > first and count:
            lines += [f"    for k in {first} .. {stop} {{"] + ["        " + s for s in statements[:count]] + ["    }"]
    return lines


def random_pipe(nodes: int, seed: int = 0) -> str:
    """Random reads and writes over a few dozen buffers: a DAG with real hazards everywhere.
    Each repetition of the pattern moves every written slot by the loop variable `k`."""
    rng = random.Random(seed)
    statements = []
    for _ in range(min(nodes, PATTERN)):
        src, dst = rng.sample(range(BUFFERS), 2)
        lo = rng.randrange(0, 63)
        statements.append(f"launch leaf<<<1, 32>>>(in b{src}, out b{dst}[({lo} + k) % 63:({lo} + k) % 63 + 1])")
    lines = ['from "tiny.cu" import tiny, leaf']
    lines += [f"buffer b{i}: u32[64]" for i in range(BUFFERS)]
    return "\n".join(lines + ["step {"] + _repeated(nodes, statements) + ["}"]) + "\n"


def chain_pipe(nodes: int) -> str:
    """n dependent tiny kernels: every node updates one slot."""
    return (f'from "tiny.cu" import tiny\nbuffer counter: u32[1]\n'
            f"step {{\n    for i in 0 .. {nodes} {{\n        launch tiny<<<1, 32>>>(counter)\n    }}\n}}\n")


def fan_pipe(nodes: int) -> str:
    """One root node, then n - 1 independent nodes that each read the root and write their own slot."""
    leaves = max(1, nodes - 1)
    return (f'from "tiny.cu" import tiny, leaf\nbuffer root: u32[1]\nbuffer slots: u32[{leaves}]\n'
            f"step {{\n    launch tiny<<<1, 32>>>(root)\n    for i in 0 .. {leaves} {{\n"
            f"        launch leaf<<<1, 32>>>(in root, out slots[i:i + 1])\n    }}\n}}\n")


def graphs_pipe(nodes: int) -> str:
    """Child graphs of GRAPH_NODES nodes each, used once per part of a sliced buffer: the shape
    of a pipeline that repeats a learner `UPDATES` times. Each use is GRAPH_NODES + 1 nodes
    (the child graph node and its nodes)."""
    parts = max(1, nodes // (GRAPH_NODES + 1))
    return (f'from "tiny.cu" import tiny, leaf\nbuffer root: u32[{parts}]\n'
            f"buffer slots: u32[{parts}, {GRAPH_NODES}]\n"
            f"graph part(p) {{\n    launch tiny<<<1, 32>>>(root[p:p + 1])\n"
            f"    for i in 0 .. {GRAPH_NODES - 1} {{\n"
            f"        launch leaf<<<1, 32>>>(in root[p:p + 1], out slots[p * {GRAPH_NODES} + i:p * {GRAPH_NODES} + i + 1])\n"
            f"    }}\n}}\nstep {{\n    for p in 0 .. {parts} {{\n        part(p)\n    }}\n}}\n")


def parallel_pipe(nodes: int) -> str:
    """One root node, a `parallel for` of n - 2 members that each read the root and write their
    own slot (PC314 proves them disjoint), then one node reading every slot."""
    members = max(1, nodes - 2)
    return (f'from "tiny.cu" import tiny, leaf\nbuffer root: u32[1]\nbuffer slots: u32[{members}]\n'
            f"step {{\n    launch tiny<<<1, 32>>>(root)\n    parallel for i in 0 .. {members} {{\n"
            f"        launch leaf<<<1, 32>>>(in root, out slots[i:i + 1])\n    }}\n"
            f"    launch tiny<<<1, 32>>>(slots)\n}}\n")


def slices_pipe(nodes: int) -> str:
    """Many slices of one buffer: (n - 1) / 2 nodes write one element each of `a`, in a strided
    order (each cut lands inside the list of segments, not at its end), as many copy each into
    `b`, and one node reads all of `b` and writes the root the writers read."""
    half = max(1, (nodes - 1) // 2)
    stride = next(s for s in range(7919, 2 * half + 7919) if math.gcd(s, half) == 1)
    at = f"(s * {stride}) % {half}"
    return (f'from "tiny.cu" import tiny, leaf\nbuffer root: u32[1]\nbuffer a: u32[{half}]\n'
            f"buffer b: u32[{half}]\nstep {{\n    for s in 0 .. {half} {{\n"
            f"        launch leaf<<<1, 32>>>(in root, out a[{at}:{at} + 1])\n    }}\n"
            f"    for s in 0 .. {half} {{\n        launch leaf<<<1, 32>>>(in a[{at}:{at} + 1], out b[{at}:{at} + 1])\n"
            f"    }}\n    launch leaf<<<1, 32>>>(in b, out root)\n}}\n")


def node_count(shape: str, nodes: int) -> int:
    """How many nodes SHAPES[shape](nodes) makes."""
    if shape == "graphs":
        return max(1, nodes // (GRAPH_NODES + 1)) * (GRAPH_NODES + 1)
    if shape == "slices":
        return 2 * max(1, (nodes - 1) // 2) + 1
    return max(nodes, {"fan": 2, "parallel": 3}.get(shape, 1))


SHAPES = {"random": random_pipe, "chain": chain_pipe, "fan": fan_pipe, "graphs": graphs_pipe,
          "parallel": parallel_pipe, "slices": slices_pipe}


def timed(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak resident MiB of one pipec run. The CPU time is the
    fairer figure on a machine shared with other work."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


STAGES = ["parse_source", "resolve_program", "check_program", "build_dag", "run_checks",
          "plan_program", "add_lanes"]


def stage_seconds(path: Path, defines: list[str]) -> list[list]:
    """Each stage of one in-process compile (profiled, so slower than a plain run), with the
    DAG's share of check and the lanes' share of plan."""
    import cProfile
    import dataclasses
    import pstats

    from pipec.compiler import Settings, compile_file

    settings = Settings()
    settings = dataclasses.replace(settings, compile=dataclasses.replace(
        settings.compile, defines=tuple(tuple(d.split("=", 1)) for d in defines)))
    profile = cProfile.Profile()
    profile.runcall(compile_file, path, settings)
    stats = pstats.Stats(profile).stats
    # cumulative time of the outermost call: the largest of the entries with that name
    return [[name, max((v[3] for (_, _, fn), v in stats.items() if fn == name), default=0.0)]
            for name in STAGES]


MODES = {"check": ["--check"], "emit": ["--emit", "plan", "-o", os.devnull]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[100, 1000, 5000])
    parser.add_argument("--shape", choices=sorted(SHAPES), nargs="*", default=sorted(SHAPES),
                        help="the generated programs to time (default: every shape)")
    parser.add_argument("--rl-step", type=int, metavar="UPDATES", nargs="*", default=[],
                        help="also pipelines/rl_step.pipe with -D UPDATES=...")
    parser.add_argument("--mode", choices=sorted(MODES), nargs="*", default=sorted(MODES),
                        help="`pipec --check`, `pipec --emit plan` (written to /dev/null), or both (the default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stages", action="store_true", help="seconds per stage, in process")
    parser.add_argument("--cold", action="store_true",
                        help="skip the run that fills the kernel cache (when it is filled already)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pipec-check-"))
    shutil.copy(TINY, folder)  # imports stay inside the program's folder
    cases: list[tuple[str, int, Path, list[str]]] = []
    for shape in args.shape:
        for n in args.nodes:
            path = folder / f"{shape}{n}.pipe"
            path.write_text(SHAPES[shape](n))
            cases.append((shape, node_count(shape, n), path, []))
    cases += [(f"rl_step UPDATES={u}", 10 * u + 4, RL_STEP, [f"UPDATES={u}"]) for u in args.rl_step]
    rows = []
    for label, nodes, path, defines in cases:
        commands = {mode: [sys.executable, "-m", "pipec", *MODES[mode], str(path), *(f"-D{d}" for d in defines)]
                    for mode in args.mode}
        if not args.cold:
            timed(next(iter(commands.values())))  # fills the kernel cache
        if args.stages:
            print(label)
            print(table(["stage", "seconds (cumulative, profiled)"], stage_seconds(path, defines)))
            continue
        row: list = [label, f"{nodes:,}"]
        for mode in args.mode:
            runs = [timed(commands[mode]) for _ in range(args.repeats)]
            row += [median([r[0] for r in runs]), median([r[1] for r in runs]), round(max(r[2] for r in runs))]
        rows.append(row)
    if rows:
        print(table(["program", "nodes"] + [f"{mode}: {what}" for mode in args.mode
                                            for what in ("median s", "median CPU s", "peak MiB")], rows))


if __name__ == "__main__":
    main()
