"""bench/trainer_step.py's generated pipeline: clean, of the trainers' shape (200 and more
nodes, GEMM nodes with bias, activation and gradient epilogues, child graphs, clipping, AdamW
over every parameter buffer, mapped diagnostics), and with programmatic edges between its
kernels and none with `option pdl = "off"`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import trainer_step  # noqa: E402 - from bench/

import pipec  # noqa: E402
from pipec.plan.schema import ChildGraphNodeSpec, GemmNodeSpec, KernelNodeSpec  # noqa: E402


def _plan(tmp_path: Path, pdl: str):
    compilation = pipec.check(trainer_step.write(tmp_path, f"trainer_{pdl}", trainer_step.trainer_pipe(14, 64, 128, pdl)))
    assert not compilation.diagnostics, [d.message for d in compilation.diagnostics]
    return compilation.plan


def test_the_generated_step_has_the_trainers_shape(tmp_path):
    plan = _plan(tmp_path, "auto")
    leaves = plan.leaves(plan.step)
    gemms = [n for n in leaves if isinstance(n, GemmNodeSpec)]
    kernels = {n.function for n in leaves if isinstance(n, KernelNodeSpec)}
    assert len(leaves) >= 200 and len(gemms) == 14 * 6
    assert {g.epilogue for g in gemms} >= {"relu_bias", "drelu", "none"} and any(g.bias_grad for g in gemms)
    assert kernels >= {"tr_residual", "tr_center_rows", "tr_clip_scale", "tr_adamw", "tr_schedule", "tr_diagnostics"}
    assert sum(isinstance(n, ChildGraphNodeSpec) for n in plan.graphs[plan.step].nodes) == 3 * 14
    assert plan.buffer("diag").memory == "mapped"


def test_its_kernels_get_programmatic_edges_unless_the_option_says_off(tmp_path):
    def programmatic(plan) -> int:
        return sum(k.programmatic for g in plan.graph_tree(plan.step) for k in g.edge_kinds)

    assert programmatic(_plan(tmp_path, "auto")) > 14 and programmatic(_plan(tmp_path, "off")) == 0
