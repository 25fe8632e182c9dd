"""bench/check_speed.py's programs: within the parser's size limit and the node limit at the
documented node limit, clean, and of the node count the bench reports (the count asked for,
but for the documented exceptions), in every shape."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import check_speed  # noqa: E402 - from bench/

from pipec.compiler import Settings, compile_file  # noqa: E402
from pipec.compiler.resolve.size import MAX_NODES  # noqa: E402
from pipec.dsl.parser import MAX_PIPE_CHARS  # noqa: E402


def _nodes(body) -> int:
    return sum(1 for _ in body.walk())


@pytest.mark.parametrize("shape", sorted(check_speed.SHAPES))
def test_the_largest_program_fits_in_one_file_and_the_node_limit(shape):
    assert len(check_speed.SHAPES[shape](MAX_NODES)) < MAX_PIPE_CHARS
    assert MAX_NODES - check_speed.GRAPH_NODES <= check_speed.node_count(shape, MAX_NODES) <= MAX_NODES


@pytest.mark.parametrize("shape, nodes", [("random", 300), ("random", 700), ("chain", 300),
                                          ("fan", 300), ("graphs", 3000), ("parallel", 300),
                                          ("slices", 300)])
def test_a_generated_program_is_clean_and_has_the_nodes_asked_for(tmp_path, shape, nodes):
    shutil.copy(check_speed.TINY, tmp_path)
    path = tmp_path / "generated.pipe"
    path.write_text(check_speed.SHAPES[shape](nodes))
    result = compile_file(path, Settings(), until="check")
    assert result.diagnostics == []
    step = result.program.step
    # every child graph is a node of its own; slices write and copy as many, then read them
    expected = {"graphs": nodes // (check_speed.GRAPH_NODES + 1) * (check_speed.GRAPH_NODES + 1),
                "slices": nodes - 1}.get(shape, nodes)
    assert _nodes(step) == expected == check_speed.node_count(shape, nodes)
