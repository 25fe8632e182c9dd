"""Grouped collectives without a GPU: `allreduce OP A, B, ...` and `broadcast A, B, ... from R`
as one node and one NCCL group (one kernel, one synchronisation of the ranks), their per-view
checks (PC601-PC604), their plan and hash, and the group recorded and issued over the fake
communicator (tests/fake_nccl.py). The same on two real GPUs: tests/gpu2/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fake_nccl import load_on_fake_ranks
from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.plan.schema import (
    CollectiveNodeSpec, CollectiveOperandSpec, collective_sequence, collective_sequence_hash, from_json, to_json,
)
from pipec.dsl import PipeSyntaxError, SourceFile, ast, parse
from pipec.runtime.collectives import CollectiveFailed
from pipec.runtime.distributed import first_difference

GROUPED = """
buffer grad: f32[8] = fill(1.5)
buffer steps: i32[2] = fill(3)
buffer params: f32[4] replicated = fill(2.0)
buffer flags: u8[4] replicated
init {
    broadcast params, flags from 0
}
step {
    allreduce sum grad, steps[0:1]
}
"""


def _compile(tmp_path: Path, text: str, **defines):
    path = tmp_path / "prog.pipe"
    path.write_text(text)
    settings = override(load_settings(path), defines=tuple((k, str(v)) for k, v in defines.items()) or None)
    return compile_file(path, settings)


def _errors(compilation) -> list:
    return [d for d in compilation.diagnostics if d.severity.value == "error"]


def test_allreduce_and_broadcast_take_several_views_the_others_one():
    text = "step {\n allreduce avg a, b[0:4], c\n broadcast a, b from 1\n allreduce max a\n}\n"
    stmts = parse(SourceFile(Path("t.pipe"), text)).decls[0].body.stmts
    assert [len(s.views) for s in stmts] == [3, 2, 1]
    assert isinstance(stmts[0].views[1], ast.Slice) and stmts[1].root.value == 1
    for text in ("step { allgather a, b -> c }", "step { reducescatter sum a, b -> c }", "step { allreduce sum }"):
        with pytest.raises(PipeSyntaxError):
            parse(SourceFile(Path("t.pipe"), text))


def test_a_group_is_one_node_with_one_operand_per_view_and_one_token_access(tmp_path):
    compilation = _compile(tmp_path, GROUPED, WORLD_SIZE=2)
    assert _errors(compilation) == []
    plan = compilation.plan
    [node] = [n for n in plan.graphs[plan.step].nodes if isinstance(n, CollectiveNodeSpec)]
    assert node.name == "step/allreduce:grad+steps" and node.op == "sum"
    assert node.operands == (CollectiveOperandSpec("f32", 8, "grad", 0, "grad", 0),
                             CollectiveOperandSpec("i32", 1, "steps", 0, "steps", 0))
    assert [(a.buffer, a.start, a.stop, a.mode) for a in node.accesses] == [
        ("grad", 0, 8, "rw"), ("steps", 0, 1, "rw"), ("pipec.nccl", 0, 1, "rw")]
    assert from_json(to_json(plan)) == plan
    assert [n.describe() for n in collective_sequence(plan)] == [
        "broadcast 4 x f32, 4 x u8 from 0 (init/broadcast:params+flags)",
        "allreduce sum 8 x f32, 1 x i32 (step/allreduce:grad+steps)"]


@pytest.mark.parametrize("text, code, message", [
    ("buffer a: f32[8]\nstep { allreduce sum a, a }", "PC604", "elements [0:8] of `a` twice"),
    ("buffer a: f32[8]\nstep { allreduce sum a[0:4], a[3:8] }", "PC604", "elements [3:4] of `a` twice"),
    ("buffer a: f32[8]\nbuffer b: f32[2]\nstep { broadcast b, a[2:4], a[0:6] from 0 }", "PC604",
     "elements [2:4] of `a` twice"),
    ("buffer a: f32[8]\nstep { allreduce sum a[0:4], a[4:8] }", None, ""),
    ("buffer a: f32[8]\nbuffer n: i32[1]\nstep { allreduce avg a, n }", "PC601", "`avg` of i32 `n` would truncate"),
    ("buffer a: f32[8]\nbuffer n: i32[1]\nstep { allreduce max a, n }", None, ""),
    ("buffer a: f32[8]\nbuffer b: f32[8]\nstep { allreduce sum a, b[0:8 - RANK] }", "PC603",
     "holds 8 on rank 0, 7 on rank 1"),
    ("buffer a: f32[8]\nbuffer b: f32[8]\nstep { allreduce sum a, b[RANK:RANK + 1] }", None, ""),
    ("buffer a: f32[8]\nbuffer b: f32[8]\nstep { broadcast a, b from 2 }", "PC602", "root rank 2 lies outside"),
    ("buffer a: f32[8]\nbuffer f: i32[1]\nstep { if f[0] { allreduce sum a, f } }", "PC603",
     "`f` decides on the device"),
])
def test_a_group_checks_every_view_as_a_single_collective_would(tmp_path, text, code, message):
    found = _errors(_compile(tmp_path, text, WORLD_SIZE=2))
    if code is None:
        assert found == []
    else:
        assert [d.code for d in found] == [code] and message in found[0].message, found


def test_grouping_changes_the_hash_and_the_refusal_names_the_group(tmp_path):
    grouped = _compile(tmp_path, "buffer a: f32[8]\nbuffer b: f32[2]\nstep { allreduce sum a, b }").plan
    apart = _compile(tmp_path, "buffer a: f32[8]\nbuffer b: f32[2]\nstep { allreduce sum a\n allreduce sum b }").plan
    assert collective_sequence_hash(grouped) != collective_sequence_hash(apart)
    ours, theirs = ([n.describe() for n in collective_sequence(p)] for p in (apart, grouped))
    assert first_difference(theirs, ours, 1, 1) == (
        "rank 1's plan differs from rank 0's at collective 1: rank 0 issues `allreduce sum 8 x f32, 2 x f32 "
        "(step/allreduce:a+b)`, rank 1 `allreduce sum 8 x f32 (step/allreduce:a)`; every rank must issue the "
        "same collectives in the same order")


def test_a_group_is_recorded_and_issued_eagerly_as_one_nccl_kernel(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, GROUPED)
    with pipeline:
        # init's broadcast ran eagerly as a group; the step's allreduce was recorded as one
        assert [(c[0], c[4], c[5]) for c in comm.calls] == [("broadcast", False, True)] * 2 + [
            ("allreduce", True, True)] * 2
        assert comm.groups == [["broadcast", "broadcast"], ["allreduce", "allreduce"]]
        [child] = [n.child for n in fake.executables[pipeline.graph.exec].nodes]
        assert [(n.kind, n.work.function) for n in child.nodes] == [("kernel", "ncclDevKernel_group")]
        pipeline.step()
        state = pipeline.snapshot()
        assert state["grad"].tolist() == [3.0] * 8 and state["steps"].tolist() == [6, 3]  # sums over two ranks
        pipeline.restore({"grad": np.full(8, 1.5, np.float32), "steps": np.full(2, 3, np.int32)})
        pipeline.run_eager()
        assert pipeline.snapshot()["steps"].tolist() == [6, 3]
        assert comm.groups[2:] == [["allreduce", "allreduce"]]


class _RefusingSecond:
    """Wraps the fake communicator: its second allreduce is refused, as NCCL refuses a call."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, 0

    def allreduce(self, *args) -> None:
        self.seen += 1
        if self.seen == 2:
            raise RuntimeError("ncclInvalidArgument")
        self.inner.allreduce(*args)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_refused_call_inside_a_group_still_ends_the_group(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, GROUPED)
    with pipeline:
        pipeline.collectives.communicator = _RefusingSecond(comm)
        with pytest.raises(CollectiveFailed, match=r"`step/allreduce:grad\+steps` \(.*\): NCCL refused the call: "
                                                   "ncclInvalidArgument"):
            pipeline.run_eager()
        assert comm.groups[-1] == ["allreduce"]  # group_end came, around the one accepted call
