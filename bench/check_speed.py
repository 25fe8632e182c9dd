"""How long `pipec --check` takes on a generated pipeline of N nodes, once the kernels are
cached (the figure CI cares about). Needs no GPU.

    python bench/check_speed.py [--nodes 5000] [--repeats 5]"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import TINY, median, table

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pipec-check-"))
    rows = []
    for n in args.nodes:
        path = folder / f"generated{n}.pipe"
        path.write_text(generated(n))
        command = [sys.executable, "-m", "pipec", "--check", str(path)]
        subprocess.run(command, check=True, capture_output=True)  # fills the kernel cache
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        rows.append([n, median(times), min(times)])
    print(table(["nodes", "pipec --check, median s", "min s"], rows))


if __name__ == "__main__":
    main()
