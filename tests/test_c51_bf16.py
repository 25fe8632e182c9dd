"""pipelines/c51_step.pipe's bf16 mode (-D BF16=true, docs/c51.md): the plan's GEMMs of layers
2 and 3 multiply bf16 operands into bf16 activations or f32 logits and gradients; layer 1 and
every gradient written into `grad` stay f32; the f32 mode has no bf16 operand at all; the
runtime builds the bf16 plan (fake driver and cuBLASLt). tests/gpu/test_c51_step.py runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_cublaslt import FakeCublasLt
from fake_cuda import fake_driver

from pipec.compiler import Settings, compile_file
from pipec.compiler.config import CompileOptions
from pipec.compiler.model import CONTAINERS, GemmNode, LaunchNode, Mode
from pipec import load
from pipec.runtime import Backends

C51 = Path(__file__).resolve().parent.parent / "pipelines" / "c51_step.pipe"


def _compile(bf16: bool, *defines: tuple[str, str]):
    result = compile_file(C51, Settings(CompileOptions(defines=(("BF16", str(bf16).lower()), *defines))))
    assert result.diagnostics == [], [f"{d.code} {d.message}" for d in result.diagnostics]
    return result


def _nodes(result, kind):
    return [n for body in result.program.bodies() for n in body.walk() if isinstance(n, kind)]


def _types(node: GemmNode) -> tuple[str, str, str, str]:
    bias = node.bias or node.bias_grad
    return (node.a.buffer.dtype.name, node.b.buffer.dtype.name, node.c.buffer.dtype.name,
            bias.buffer.dtype.name if bias is not None else "-")


@pytest.mark.parametrize("defines", [(), (("HIDDEN", "4096"), ("UPDATES", "2"))], ids=["default", "4096x2"])
def test_bf16_plan_multiplies_bf16_operands_into_f32_logits_and_gradients(defines):
    gemms = _nodes(_compile(True, *defines), GemmNode)
    by_kind = {}
    for node in gemms:
        by_kind.setdefault(node.name.split("/")[-1].split("#")[0], set()).add(_types(node))
    assert by_kind == {
        "gemm:act_h1": {("f32", "f32", "f32", "f32")},          # layer 1: 4 inputs, f32
        "gemm:h1": {("f32", "f32", "f32", "f32")},
        "gemm:t1": {("f32", "f32", "f32", "f32")},
        "gemm:act_h2_bf16": {("bf16", "bf16", "bf16", "bf16")},  # layer 2: bf16 in, bf16 out
        "gemm:h2_bf16": {("bf16", "bf16", "bf16", "bf16")},
        "gemm:t2_bf16": {("bf16", "bf16", "bf16", "bf16")},
        "gemm:act_logits": {("bf16", "bf16", "f32", "f32")},     # layer 3: f32 logits, f32 bias
        "gemm:logits": {("bf16", "bf16", "f32", "f32")},
        "gemm:t_logits": {("bf16", "bf16", "f32", "f32")},
        "gemm:grad": {("bf16", "bf16", "f32", "f32"),            # dW3 + db3, dW2
                      ("bf16", "bf16", "f32", "-"), ("f32", "f32", "f32", "-")},  # dW1: f32
        "gemm:dh2": {("bf16", "bf16", "f32", "f32")},
        "gemm:dh1": {("bf16", "bf16", "f32", "f32")},
    }
    assert all(n.compute == "f32" for n in gemms if n.a.buffer.dtype.name == "bf16")


def _writes(node, buffer):
    return [(a.start, a.stop) for a in node.accesses if a.buffer.name == buffer and a.mode & Mode.WRITE]


def test_bf16_weights_are_written_by_every_adamw_and_at_init():
    """After every AdamW the bf16 copies are rewritten, by AdamW itself (c51_adamw_step_bf16),
    over the whole parameter vector, and every GEMM that reads them comes after the AdamW
    before it; the init makes them with the conversion graph `bf16_weights`."""
    result = _compile(True, ("UPDATES", "2"))
    nparams = result.program.consts["NPARAMS"]
    step = [n for n in result.program.step.walk() if not isinstance(n, CONTAINERS)]  # the leaves
    names = [n.name for n in step]
    adamw = [i for i, n in enumerate(step) if isinstance(n, LaunchNode) and n.kernel.name.endswith("adamw_step_bf16")]
    assert len(adamw) == 2 and not any(n.endswith("/adamw_step") or "bf16_weights/" in n for n in names)
    for i in adamw:
        assert _writes(step[i], "params_bf16") == [(0, nparams)]
        assert _writes(step[i], "target_bf16") == [(0, nparams)]
    writers = [i for i, n in enumerate(step) if _writes(n, "params_bf16") or _writes(n, "target_bf16")]
    assert writers == adamw
    readers = [i for i, n in enumerate(step) if isinstance(n, GemmNode)
               and {n.b.buffer.name} & {"params_bf16", "target_bf16"}]
    update_of = [sum(a < i for a in adamw) for i in readers]  # AdamWs before each reader
    assert update_of[0] == 0 and update_of[-1] == 1  # the act GEMM and update 1's read update 0's copies
    init = [n.name for n in result.program.init.walk() if isinstance(n, LaunchNode)]
    assert sum("bf16_weights/" in name for name in init) == 2


def test_f32_mode_runs_the_plain_adamw():
    step = [n for n in _compile(False).program.step.walk() if isinstance(n, LaunchNode)]
    assert sum(n.kernel.name == "adamw_step" for n in step) == 1
    assert not any(n.kernel.name.endswith("_bf16") for n in step)


def test_f32_mode_has_no_bf16_operand():
    result = _compile(False)
    assert {_types(n)[:3] for n in _nodes(result, GemmNode)} == {("f32", "f32", "f32")}
    assert not any("c51_to_bf16" in n.name for n in _nodes(result, LaunchNode))


def test_the_bf16_plan_builds_and_replays_as_it_runs_eagerly_on_the_fake_driver():
    driver = fake_driver(C51)
    small = {"ENVS": 8, "HIDDEN": 128, "CAPACITY": 1024, "BATCH": 16, "UPDATES": 2, "LEARNING_STARTS": 64,
             "BF16": "true"}
    with load(C51, backends=Backends(driver, FakeCublasLt(driver.cu)), defines=small) as pipeline:
        assert pipeline.buffer("params_bf16").spec.dtype == "bf16"
        assert pipeline.verify(1).ok
