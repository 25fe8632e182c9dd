"""GEMM nodes on CPU: the statement's syntax, its resolution into a GemmNode (views, transposes,
scales, epilogues, the rules PC501-PC508), hazards, lowering to GemmNodeSpec, the plan's JSON
and the grouping of gemm nodes by the library kernel they reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipec.compiler import Settings
from pipec.compiler.config import CompileOptions
from pipec.compiler.emit import plan_dot, plan_json
from pipec.compiler.model import GemmNode, Mode
from pipec.plan.schema import GemmNodeSpec, MatrixSpec, from_json, to_json
from pipec.compiler.resolve.gemm import WORKSPACE_PREFIX
from pipec.dsl import SourceFile, ast, parse
from stage_helpers import check_text

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "pipelines" / "examples" / "gemm_mlp.pipe"


def _statement(text: str):
    (step,) = parse(SourceFile(Path("t.pipe"), f"step {{ {text} }}")).decls
    (stmt,) = step.body.stmts
    return stmt


def _compile(body: str, **options):
    settings = Settings(CompileOptions(**options)) if options else None
    return check_text(body, header="", settings=settings)


def _codes(result) -> list[str]:
    """The diagnostics but PC402: the snippets share declarations some leave unused."""
    return [d.code for d in result.diagnostics if d.code != "PC402"]


def _gemms(result) -> list[GemmNode]:
    return [n for body in result.program.bodies() for n in body.walk() if isinstance(n, GemmNode)]


# --- syntax -----------------------------------------------------------------------------------


def test_the_statement_keeps_target_expression_and_options():
    stmt = _statement("gemm c[1] = 2.0 * a.T @ b + bias + 0.5 * c[1] with activation = relu, aux = m")
    assert isinstance(stmt, ast.Gemm)
    assert stmt.target.span.text == "c[1]"
    assert stmt.value.span.text == "2.0 * a.T @ b + bias + 0.5 * c[1]"
    assert [(o.name.text, o.value.span.text) for o in stmt.options] == [("activation", "relu"), ("aux", "m")]
    assert stmt.span.text.startswith("gemm") and stmt.span.text.endswith("aux = m")


def test_at_binds_like_star_left_to_right_and_above_plus():
    value = _statement("gemm c = s * a @ b + d").value
    assert value.op == "+" and value.right.span.text == "d"
    product = value.left
    assert product.op == "@" and product.right.span.text == "b"
    assert product.left.op == "*" and product.left.span.text == "s * a"


def test_a_statement_without_options_and_a_multi_index():
    stmt = _statement("gemm view(h, 4, 8) = x[0, 1] @ w")
    assert stmt.options == ()
    index = stmt.value.left
    assert isinstance(index, ast.Index) and isinstance(index.index, ast.TupleLit)
    assert [i.value for i in index.index.items] == [0, 1]


# --- resolution -------------------------------------------------------------------------------


SHAPES = """
buffer a: f32[2, 8, 16] = uniform(-1.0, 1.0, seed=1)
buffer b: f32[32, 16] = uniform(-1.0, 1.0, seed=2)
buffer c: f32[2, 8, 32]
"""


def test_a_transposed_batched_node():
    result = _compile(SHAPES + "step { gemm c = 0.5 * a @ b.T + 2 * c }")
    assert _codes(result) == []
    (node,) = _gemms(result)
    assert (node.m, node.n, node.k, node.batch) == (8, 32, 16, 2)
    assert (node.trans_a, node.trans_b, node.alpha, node.beta) == (False, True, 0.5, 2.0)
    assert node.epilogue == "none" and node.compute == "f32"
    assert node.name == "step/gemm:c"
    modes = {a.buffer.name: (a.start, a.stop, a.mode) for a in node.accesses}
    assert modes["a"] == (0, 256, Mode.READ) and modes["b"] == (0, 512, Mode.READ)
    assert modes["c"] == (0, 512, Mode.READ_WRITE)
    assert modes[node.workspace.name] == (0, 4 << 20, Mode.WRITE)


def test_indexing_leading_dimensions_and_views_pick_elements():
    result = _compile(SHAPES + """
        buffer flat: f32[1024] = uniform(-1.0, 1.0, seed=3)
        step { gemm c[1] = view(flat[512:640], 8, 16) @ view(b, 16, 32) }""")
    assert _codes(result) == []
    (node,) = _gemms(result)
    assert (node.a.buffer.name, node.a.start, node.a.rows, node.a.cols) == ("flat", 512, 8, 16)
    assert (node.c.start, node.c.stop, node.batch) == (256, 512, 1)
    assert {a.buffer.name: a.mode for a in node.accesses}["c"] == Mode.WRITE  # beta 0 reads nothing


def test_a_target_spelled_as_a_view_of_itself_accumulates():
    result = _compile(SHAPES + "step { gemm c[0] = a[0] @ b.T + view(c[0], 8, 32) }")
    assert _codes(result) == []
    assert _gemms(result)[0].beta == 1.0


def test_a_shared_operand_serves_every_matrix_of_a_batch():
    result = _compile(SHAPES + "buffer w: f32[16, 32] = uniform(-1.0, 1.0, seed=4)\nstep { gemm c = a @ w }")
    assert _codes(result) == []
    (node,) = _gemms(result)
    assert (node.b.batch, node.b.batched, node.batch) == (1, False, 2)


@pytest.mark.parametrize("options, epilogue", [
    ("", "bias"),
    ("with activation = relu", "relu_bias"),
    ("with activation = gelu, aux = g", "gelu_bias"),
])
def test_forward_epilogues(options, epilogue):
    result = _compile(f"""
        buffer x: f32[64, 32] = uniform(-1.0, 1.0, seed=1)
        buffer w: f32[128, 32] = uniform(-1.0, 1.0, seed=2)
        buffer bias: f32[128]
        buffer h: f32[64, 128]
        buffer g: f32[8192]
        step {{ gemm h = x @ w.T + bias {options} }}""")
    assert _codes(result) == []
    assert _gemms(result)[0].epilogue == epilogue


def test_the_mlp_example_is_clean_in_both_types_with_each_rule_satisfied():
    for dtype in ("f32", "bf16"):
        from pipec.compiler import compile_file

        result = compile_file(MLP, Settings(CompileOptions(defines=(("DT", f'"{dtype}"'),))))
        assert _codes(result) == [], dtype
        assert {n.c.buffer.dtype.name for n in _gemms(result)} == {dtype}
        epilogues = [n.epilogue for n in _gemms(result)]
        assert epilogues == ["relu_bias", "bias", "bgrad_a", "drelu", "none"]


@pytest.mark.parametrize("statement, code", [
    ("gemm c = a[0] @ b", "PC502"),                                      # k: 16 against 32
    ("gemm c[0] = a[0] @ b.T + c[1]", "PC501"),                          # accumulates another matrix
    ("gemm c[0] = a[0] @ b.T @ b", "PC501"),                             # two products
    ("gemm c[0] = a[5] @ b.T", "PC502"),                                 # index past the batch
    ("gemm c[0] = view(a, 8, 32) @ b", "PC502"),                         # 256 elements as 8 x 32
    ("gemm c[0] = a[0, 1] @ b.T", "PC502"),                              # a vector, no matrix
    ("gemm c[0] = a[0] @ b.T with compute = tf16", "PC508"),
    ("gemm c[0] = a[0] @ b.T with bias = b", "PC508"),
    ("gemm c[0] = a[0] @ b.T with gradient = gelu", "PC505"),
    ("gemm c[0] = a[0] @ b.T + 0 * c[0] with gradient = relu, aux = c", "PC506"),  # f32 mask
    ("gemm c[0] = a[0] @ b.T with compute = tf32", None),
    ("gemm c[0] = c[1, 0, 0] * a[0] @ b.T", "PC507"),
    ("gemm c[0] = a[0] @ b.T + step * c[0]", "PC507"),
    ("gemm view(c, 16, 32) = view(a, 16, 16) @ b.T", None),
    ("gemm c[0] = view(a[2:130], 8, 16) @ b.T", "PC503"),
    ("gemm c[0] = view(a[8:136], 8, 16) @ b.T", None),
    ("gemm c[0] = a[0] @ b.T * 2", "PC501"),                              # alpha after the product
    ("gemm c[0] = a[0] @ b.T + c[0] + 0.5 * c[0]", "PC501"),             # accumulates twice
    ("gemm c[0] = a[0] @ b.T + b[0] + b[1]", "PC501"),                   # two biases
    ("gemm c[0] = a[0] @ b.T - c[0]", "PC501"),                          # subtraction
    ("gemm c[0] = a[0] @ b.T + -1.0 * c[0]", None),                      # a negative beta instead
    ("gemm c[0] = a[0] @ bb.T", "PC103"),
    ("gemm c[0] = a[0] @ b.T with activation = relu, aux = c", "PC506"),  # an f32 mask
])
def test_rules_fire_or_stay_silent(statement, code):
    result = _compile(SHAPES + f"step {{ {statement} }}")
    assert _codes(result) == ([code] if code else [])


def test_a_bias_gradient_of_a_batch_and_a_batch_into_one_matrix_are_refused():
    result = _compile(SHAPES + """
        buffer db: f32[8]
        buffer one: f32[8, 32]
        step {
            gemm c = a @ b.T with bias_grad = db
            gemm one = a @ b.T
        }""")
    assert _codes(result) == ["PC505", "PC502"]


def test_the_gelu_aux_needs_rows_rounded_to_eight_elements_per_matrix():
    body = SHAPES.replace("[32, 16]", "[20, 16]").replace("[2, 8, 32]", "[2, 8, 20]")
    body += "buffer g: f32[{}]\nstep {{ gemm c = a @ b.T with activation = gelu, aux = g }}"
    assert _codes(_compile(body.format(2 * 8 * 24 - 1))) == ["PC506"]
    result = _compile(body.format(2 * 8 * 24))
    assert _codes(result) == []
    (node,) = _gemms(result)
    assert (node.aux_ld, node.aux.stop) == (24, 2 * 8 * 24)


def test_the_workspace_option_sizes_every_node_workspace_and_is_checked():
    result = _compile(SHAPES + "option gemm_workspace = 1 << 20\nstep { gemm c[0] = a[0] @ b.T }")
    (node,) = _gemms(result)
    assert node.workspace.name == WORKSPACE_PREFIX + "step/gemm:c"
    assert node.workspace.nbytes == 1 << 20 and node.workspace.dtype.name == "u8"
    assert result.program.buffers[node.workspace.name] is node.workspace
    assert _codes(_compile(SHAPES + "option gemm_workspace = 100\nstep { gemm c[0] = a[0] @ b.T }")) == ["PC108"]


def test_an_aux_output_may_have_any_shape_and_a_constant_choose_a_word():
    result = _compile(SHAPES + 'const ACT = "gelu"\nbuffer g: f32[2, 2, 2, 32]\n'
                      "step { gemm c[0] = a[0] @ b.T with activation = ACT, aux = g }")
    assert _codes(result) == []
    assert _gemms(result)[0].epilogue == "gelu"


def test_at_between_numbers_is_a_constant_error():
    result = _compile("const A = 2 @ 3\nbuffer x: f32[4]\nstep { fill x = A }")
    assert [(d.code, d.message) for d in result.diagnostics] == [("PC105", "`@` multiplies matrices, not numbers")]


def test_a_constant_names_a_buffer_type():
    result = _compile('const DT = "bf16"\nbuffer x: DT[16, 16]\nstep { gemm x = x @ x + x }')
    assert result.program.buffers["x"].dtype.name == "bf16"
    wrong = _compile('const DT = "f99"\nbuffer x: DT[16]\nstep { fill x = 0 }')
    assert [d.message for d in wrong.diagnostics] == ["unknown element type `DT` (`f99`)"]


# --- hazards ----------------------------------------------------------------------------------


def test_gemms_sharing_a_buffer_are_ordered_and_independent_ones_are_not():
    result = _compile("""
        buffer x: f32[16, 16] = uniform(-1.0, 1.0, seed=1)
        buffer h: f32[16, 16]
        buffer y: f32[16, 16]
        buffer z: f32[16, 16]
        step {
            gemm h = x @ x
            gemm y = h @ x
            gemm z = x @ x.T
            gemm h = z @ y
        }""")
    dag = next(d for d in result.checked.dags if d.body.name == "step")
    kinds = {(a, b): (h.kind, h.buffer) for (a, b), h in dag.hazards.items()}
    # 0 -> 1 RAW h; 1 -> 3 RAW y (and WAR h, one hazard per pair), 2 -> 3 RAW z; 0 -> 3 implied
    assert kinds == {(0, 1): ("RAW", "h"), (1, 3): ("RAW", "y"), (2, 3): ("RAW", "z")}
    assert not any(2 in pair and 0 in pair for pair in kinds)  # 2 shares only x, which nothing writes


def test_gemms_in_a_parallel_block_writing_one_target_conflict():
    result = _compile(SHAPES + "step { parallel { gemm c[0] = a[0] @ b.T\n gemm c[0] = a[1] @ b.T } }")
    assert _codes(result) == ["PC314"]
    result = _compile(SHAPES + "step { parallel { gemm c[0] = a[0] @ b.T\n gemm c[1] = a[1] @ b.T } }")
    assert _codes(result) == []  # their workspaces are their own


# --- lowering, the plan and its JSON ----------------------------------------------------------


def _spec(result, name: str) -> GemmNodeSpec:
    return next(n for g in result.plan.graphs for n in g.nodes if n.name == name)


def test_lowering_a_transposed_batched_node_field_by_field():
    result = _compile(SHAPES + "buffer w: f32[2, 16, 32] = uniform(-1.0, 1.0, seed=5)\n"
                      "step { gemm c = 0.5 * a @ w + c\ngemm c[1] = a[1] @ b.T }")
    spec = _spec(result, "step/gemm:c")
    assert (spec.m, spec.n, spec.k, spec.batch) == (8, 32, 16, 2)
    assert spec.a == MatrixSpec("a", 0, "f32", 8, 16, 16, 128)
    assert spec.b == MatrixSpec("w", 0, "f32", 16, 32, 32, 512)
    assert spec.c == MatrixSpec("c", 0, "f32", 8, 32, 32, 256)
    assert (spec.trans_a, spec.trans_b, spec.alpha, spec.beta) == (False, False, 0.5, 1.0)
    assert (spec.epilogue, spec.bias, spec.aux, spec.bias_grad) == ("none", None, None, None)
    assert (spec.workspace, spec.workspace_bytes) == (WORKSPACE_PREFIX + "step/gemm:c", 4 << 20)
    single = _spec(result, "step/gemm:c#2")
    assert single.b == MatrixSpec("b", 0, "f32", 32, 16, 16, 0) and single.trans_b
    assert single.c == MatrixSpec("c", 1024, "f32", 8, 32, 32, 0)
    assert ("c", 256, 512, "w") in [(a.buffer, a.start, a.stop, a.mode) for a in single.accesses]


def test_lowering_bias_gradients_and_the_relu_mask():
    result = _compile("""
        buffer x: bf16[64, 32] = uniform(-1.0, 1.0, seed=1)
        buffer dy: bf16[64, 96] = uniform(-1.0, 1.0, seed=2)
        buffer w: bf16[96, 32] = uniform(-1.0, 1.0, seed=3)
        buffer dw: bf16[104, 32]
        buffer db: bf16[128]
        buffer dx: f32[64, 32]
        buffer mask: u8[2048]
        buffer dbx: f32[32]
        step {
            gemm view(dw[0:3072], 96, 32) = dy.T @ x with bias_grad = db[8:120]
            gemm dx = dy @ w with gradient = relu, aux = mask[1024:2048], bias_grad = dbx
        }""")
    assert _codes(result) == []
    weight = _spec(result, "step/gemm:dw")
    assert weight.epilogue == "bgrad_a" and weight.trans_a and not weight.trans_b
    assert (weight.m, weight.n, weight.k) == (96, 32, 64)
    assert weight.bias_grad == MatrixSpec("db", 16, "bf16", 1, 96, 96, 0)
    data = _spec(result, "step/gemm:dx")
    assert data.epilogue == "drelu"
    assert data.aux == MatrixSpec("mask", 1024, "u8", 64, 32, 128, 0)
    assert data.bias_grad == MatrixSpec("dbx", 0, "f32", 1, 32, 32, 0)
    modes = {a.buffer: (a.start, a.stop, a.mode) for a in data.accesses}
    assert modes["mask"] == (1024, 1024 + 64 * 128 // 8, "r") and modes["dbx"] == (0, 32, "w")


def test_the_plan_json_reads_back_equal_and_groups_gemms_by_descriptor():
    result = _compile("""
        buffer x: f32[16, 16] = uniform(-1.0, 1.0, seed=1)
        buffer y: f32[16, 16]
        buffer z: f32[16, 16]
        graph layer(I) { gemm y = x @ x }
        step {
            layer(0)
            layer(1)
            gemm z = x @ x
            gemm z = x @ x.T
        }
        init { gemm z = x @ x }""")
    plan = result.plan
    assert from_json(json.loads(plan_json(plan))) == plan
    assert from_json(to_json(plan)) == plan
    first, second = plan.gemm_groups
    assert first.key == "16x16x16 f32/f32/f32 NN none f32 align 256"
    assert [(u.node, u.scope) for u in first.nodes] == [
        ("init/gemm:z", "eager"), ("step/layer[0]/gemm:y", "step/layer[0]"),
        ("step/layer[1]/gemm:y", "step/layer[1]"), ("step/gemm:z", "step")]
    assert first.scopes == ("eager", "step/layer[0]", "step/layer[1]", "step")
    workspaces = [b.name for b in plan.buffers if b.name.startswith(WORKSPACE_PREFIX)]
    assert workspaces == [WORKSPACE_PREFIX + u.node for u in first.nodes + second.nodes if "layer" in u.node] + [
        WORKSPACE_PREFIX + n for n in ("step/gemm:z", "step/gemm:z#2", "init/gemm:z")]
    assert (second.trans_b, [u.node for u in second.nodes], second.scopes) == (
        True, ["step/gemm:z#2"], ("step", "eager"))


def test_the_alignment_of_a_group_is_the_least_operand_alignment():
    result = _compile(SHAPES + "buffer flat: f32[1024] = uniform(-1.0, 1.0, seed=3)\n"
                      "step { gemm c[1] = view(flat[4:132], 8, 16) @ b.T }")
    (group,) = result.plan.gemm_groups
    assert group.alignment == 16  # flat starts 16 bytes in; c[1] 1024


def test_the_alignment_of_a_group_counts_the_aux_and_bias_gradient_offsets():
    result = _compile("""
        buffer x: f32[64, 32] = uniform(-1.0, 1.0, seed=1)
        buffer w: f32[128, 32] = uniform(-1.0, 1.0, seed=2)
        buffer h: f32[64, 128]
        buffer g: f32[8192 + 4]
        buffer db: f32[128 + 8]
        step {
            gemm h = x @ w.T with activation = gelu, aux = g[4:8196]
            gemm w = h.T @ x with bias_grad = db[8:136]
        }""")
    assert [group.alignment for group in result.plan.gemm_groups] == [16, 32]


def test_a_batch_with_a_shared_operand_is_a_group_of_its_own():
    result = _compile(SHAPES + "buffer w: f32[16, 32] = uniform(-1.0, 1.0, seed=4)\n"
                      "buffer w2: f32[2, 16, 32] = uniform(-1.0, 1.0, seed=5)\n"
                      "step {\n gemm c = a @ w\n gemm c = a @ w2\n}")
    shared, batched = result.plan.gemm_groups
    assert shared.key == "8x32x16 batch 2 f32/f32/f32 NN none f32 align 256 shared b"
    assert batched.key == "8x32x16 batch 2 f32/f32/f32 NN none f32 align 256"


def test_dot_draws_gemm_nodes_as_boxes_of_their_own():
    result = _compile(SHAPES + "step { gemm c = a @ b.T }")
    assert '[shape=box3d, label="gemm c = a @ b.T\\n8x32x16 x 2 f32, none"]' in plan_dot(result.plan)


@pytest.mark.parametrize("statement", [
    "gemm sq = sq @ w",                                                   # the target is an operand
    "gemm view(x[0:64], 8, 8) = view(x[32:96], 8, 8) @ w",               # overlapping views
    "gemm h = sq @ w with activation = gelu, aux = h",                   # aux written into the target
    "gemm h = sq @ w + wide[0] with activation = gelu, aux = wide",      # aux written over the bias
    "gemm sq = h @ w with gradient = gelu, aux = sq",                    # the target over the read aux
    "gemm h = sq.T @ w with bias_grad = sq[0]",                          # bias gradient over a
    "gemm sq = w @ w with bias_grad = sq[0]",                            # bias gradient in the target
])
def test_a_written_range_shared_with_another_operand_is_refused(statement):
    shapes = """
        buffer sq: f32[8, 8]
        buffer w: f32[8, 8]
        buffer h: f32[8, 8]
        buffer wide: f32[8, 8]
        buffer x: f32[256]
        step {{ {} }}"""
    result = _compile(shapes.format(statement))
    assert _codes(result) == ["PC502"], result.diagnostics
    assert "only the accumulated target" in result.diagnostics[0].hint


def test_a_one_row_target_added_to_itself_accumulates():
    result = _compile("""
        buffer a: f32[1, 16]
        buffer b: f32[16, 16]
        buffer c: f32[1, 16]
        step {
            gemm c = a @ b + view(c, 1, 16)
            gemm c = a @ b + c[0]
        }""")
    assert _codes(result) == []
    assert [(n.beta, n.bias) for n in _gemms(result)] == [(1.0, None), (1.0, None)]


def test_the_matrices_of_a_batch_start_sixteen_bytes_apart():
    body = """
        buffer x: f32[4, {0}]
        buffer b: f32[{0}, 4]
        buffer y: f32[16]
        step {{ gemm view(y, 4, 1, 4) = view(x, 4, 1, {0}) @ b }}"""
    result = _compile(body.format(3))
    assert _codes(result) == ["PC503"] and "matrices of `view(x, 4, 1, 3)` are 12 bytes" in \
        result.diagnostics[0].message
    assert _codes(_compile(body.format(4))) == []


@pytest.mark.parametrize("scales", ["1e308 * 1e308 * a @ b", "1e308 * 1e308 * 0.0 * a @ b",
                                    "a @ b + 1e308 * 10.0 * sq", "(1 << 250) * (1 << 250) * (1 << 250) * (1 << 250) * (1 << 250) * a @ b"])
def test_alpha_and_beta_are_finite(scales):
    result = _compile(f"""
        buffer a: f32[8, 8]
        buffer b: f32[8, 8]
        buffer sq: f32[8, 8]
        step {{ gemm sq = {scales} }}""")
    assert _codes(result) == ["PC105"] and "must be a finite number" in result.diagnostics[0].message
