"""pipelines/c51_step.pipe's gradient norm (docs/c51.md, "The gradient norm and AdamW"), in the
compiled plan: two c51_grad_sumsq passes cover `grad` once and write disjoint parts of
`gnorm_part`, which AdamW sums whole; the pass over the bulk (W2, b2, W3, b3) waits for no
GEMM of the dh1 -> dW1 chain, so it runs beside it, and only the pass over W1 and b1 follows
dW1. tests/gpu/test_c51_step.py checks the norm's value on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import Settings, compile_file
from pipec.compiler.config import CompileOptions
from pipec.compiler.dag import build_dag
from pipec.compiler.model import GemmNode, GraphNode, LaunchNode, Mode, PointerArg, ValueArg

C51 = Path(__file__).resolve().parent.parent / "pipelines" / "c51_step.pipe"


def _optimize(*defines: tuple[str, str]):
    result = compile_file(C51, Settings(CompileOptions(defines=defines)))
    assert result.diagnostics == [], [f"{d.code} {d.message}" for d in result.diagnostics]
    body = next(n.body for n in result.program.step.walk()
                if isinstance(n, GraphNode) and n.name.endswith("/optimize[0]"))
    return result.program.consts, body


def _ancestors(dag, node: int) -> set[int]:
    preds, seen, todo = dag.predecessors(), set(), [node]
    while todo:
        for p in preds[todo.pop()]:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def _range(node, buffer: str, mode: Mode) -> list[tuple[int, int]]:
    return [(a.start, a.stop) for a in node.accesses if a.buffer.name == buffer and a.mode & mode]


@pytest.mark.parametrize("defines", [(), (("HIDDEN", "4096"),), (("HIDDEN", "4096"), ("BF16", "true"))],
                         ids=["default", "4096", "4096-bf16"])
def test_the_bulk_norm_pass_runs_beside_the_dh1_dw1_chain(defines):
    consts, body = _optimize(*defines)
    items, dag = body.items, build_dag(body)
    off_w2, nparams, parts = consts["OFF_W2"], consts["NPARAMS"], consts["NORM_PARTS"]
    passes = [i for i, n in enumerate(items) if isinstance(n, LaunchNode) and n.kernel.name == "c51_grad_sumsq"]
    (adamw,) = [i for i, n in enumerate(items) if isinstance(n, LaunchNode) and "adamw_step" in n.kernel.name]
    bulk, last = sorted(passes, key=lambda i: -_range(items[i], "grad", Mode.READ)[0][0])
    assert _range(items[bulk], "grad", Mode.READ) == [(off_w2, nparams)]
    assert _range(items[last], "grad", Mode.READ) == [(0, off_w2)]
    written = sorted(_range(items[bulk], "gnorm_part", Mode.WRITE) + _range(items[last], "gnorm_part", Mode.WRITE))
    assert written[0][0] == 0 and written[0][1] == written[1][0] and written[1][1] == parts
    assert _range(items[adamw], "gnorm_part", Mode.READ) == [(0, parts)]
    nparts = [a.value for a in items[adamw].args if isinstance(a, ValueArg)][1]  # after P
    assert nparts == parts <= 1024

    # the GEMMs of the chain: dh1 (writes db1 into grad) and dW1 (writes grad[0 : 4 HIDDEN])
    chain = {i for i, n in enumerate(items) if isinstance(n, GemmNode)
             and any(stop <= off_w2 for _, stop in _range(n, "grad", Mode.WRITE))}
    assert len(chain) == 2
    writers_of_bulk = {i for i, n in enumerate(items) if isinstance(n, GemmNode)
                       and any(start >= off_w2 for start, _ in _range(n, "grad", Mode.WRITE))}
    assert len(writers_of_bulk) == 3
    assert writers_of_bulk <= _ancestors(dag, bulk) and not chain & _ancestors(dag, bulk)
    assert chain <= _ancestors(dag, last)
    assert {bulk, last} <= _ancestors(dag, adamw)
    gnorm = [a for a in items[bulk].args if isinstance(a, PointerArg) and a.buffer.name == "gnorm_part"]
    assert items[bulk].grid[0] == gnorm[0].stop - gnorm[0].start  # a partial per block
