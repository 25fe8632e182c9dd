"""The compiler stays near-linear on wide steps: for every shape of bench/check_speed.py and for
pipelines/rl_step.pipe, four times the nodes may cost at most GROWTH times the CPU seconds of
checking (`pipec --check`), and of planning and writing the plan (`pipec --emit plan`) (4.0 is
linear, 16 quadratic; 8 leaves room for a busy machine and for caches). A quadratic stage (a
`parallel` block's members compared pairwise, lanes' reachability kept per node over every
chain, a flat list of segments cut out of order, ancestor bitsets as wide as the distance to
a fan's root) fails it. Sizes stay small so CI time does too; `bench/check_speed.py` measures the
large ones."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import check_speed  # noqa: E402 - from bench/
from test_dag import SPAN, _items  # noqa: E402

from pipec.compiler import Settings, compile_file  # noqa: E402
from pipec.compiler.dag import add_lanes, build_dag  # noqa: E402
from pipec.compiler.model import GraphBody  # noqa: E402
from pipec.compiler.emit import plan_json_pieces  # noqa: E402

GROWTH = 8.0
SMALL = 1000


def _cpu_seconds(run, repeats: int = 2) -> float:
    """The least CPU time of a few runs: what the work costs, not what the machine's load adds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def _check(path: Path, defines=()) -> None:
    compile_file(path, _settings(defines), until="check")


def _emit(path: Path, defines=()) -> None:
    """`pipec --emit plan`'s work: the plan and its JSON."""
    for _ in plan_json_pieces(compile_file(path, _settings(defines)).plan):
        pass


def _settings(defines) -> Settings:
    settings = Settings()
    return dataclasses.replace(settings, compile=dataclasses.replace(settings.compile, defines=tuple(defines)))


@pytest.mark.parametrize("run", [_check, _emit], ids=["check", "emit"])
@pytest.mark.parametrize("shape", sorted(check_speed.SHAPES))
def test_four_times_the_nodes_cost_at_most_growth_times_the_time(tmp_path, shape, run):
    shutil.copy(check_speed.TINY, tmp_path)
    paths = []
    for nodes in (SMALL, 4 * SMALL):
        paths.append(tmp_path / f"{shape}{nodes}.pipe")
        paths[-1].write_text(check_speed.SHAPES[shape](nodes))
    compile_file(paths[0], Settings())  # compiles the kernels once
    small, large = (_cpu_seconds(lambda p=p: run(p)) for p in paths)
    assert large / small < GROWTH, f"{shape}: {small:.3f} s -> {large:.3f} s for 4x the nodes"


@pytest.mark.parametrize("run", [_check, _emit], ids=["check", "emit"])
def test_rl_step_with_four_times_the_updates_costs_at_most_growth_times_the_time(run):
    updates = [(("UPDATES", str(u)),) for u in (SMALL // 10, 4 * SMALL // 10)]  # 1,004 and 4,004 nodes
    _check(check_speed.RL_STEP, updates[0])  # compiles the kernels once
    small, large = (_cpu_seconds(lambda d=d: run(check_speed.RL_STEP, d)) for d in updates)
    assert large / small < GROWTH, f"rl_step: {small:.3f} s -> {large:.3f} s for 4x the updates"


def _slices_then_all(n: int) -> list:
    """n nodes each writing an element of `a` (unordered), n copying each to `b`, one reading all
    of `b`: the last keeps n predecessors, each with an ancestor of its own."""
    return ([([(0, i, i + 1, 2)], None) for i in range(n)] + [([(0, i, i + 1, 1), (1, i, i + 1, 2)], None)
                                                           for i in range(n)] + [([(1, 0, n, 1)], None)])


def test_the_dag_of_a_node_keeping_many_predecessors_grows_linearly():
    # a node reading every slice once compared its predecessors' wide ancestor sets per
    # predecessor, and found each kept one's hazard by searching its list: quadratic in the slices
    small, large = (_cpu_seconds(lambda n=n: build_dag(GraphBody("step", "step", SPAN, _items(_slices_then_all(n)))))
                    for n in (5000, 20000))
    assert large / small < GROWTH, f"{small:.3f} s -> {large:.3f} s for 4x the slices"


def _fork_joins(diamonds: int) -> list[tuple[int, int]]:
    """a -> b, a -> c, b -> d, c -> d, d the next diamond's a: two wide, as a learner's step."""
    edges = []
    for k in range(diamonds):
        a = 3 * k
        edges += [(a, a + 1), (a, a + 2), (a + 1, a + 3), (a + 2, a + 3)]
    return edges


def test_lanes_of_a_long_narrow_dag_grow_linearly():
    # each diamond's second branch once opened a chain of its own, and every later node kept
    # its latest ancestor in each of them: quadratic time and memory in the diamonds
    small, large = (_cpu_seconds(lambda d=d: add_lanes(3 * d + 1, _fork_joins(d), 2)) for d in (2000, 8000))
    assert large / small < GROWTH, f"{small:.3f} s -> {large:.3f} s for 4x the nodes"
