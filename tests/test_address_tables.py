"""Tables of addresses (`buffer t: ptr[N] = addresses(a, b[0:64])`): their declaration, the
accesses a launch binding one makes to the buffers it names (compiler/indirect.py), the plan,
and the runtime that fills them (the C runtime's side is tests/test_native_runtime.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fake_cuda import fake_driver
from stage_helpers import check_text
from pipec import load
from pipec.compiler import compile_file, load_settings
from pipec.compiler.bundle import write_bundle
from pipec.runtime.bundle import load_bundle
from pipec.compiler.codes import EXAMPLES
from pipec.compiler.lsp.index import _buffer_hover
from pipec.compiler.model import LaunchNode, Mode
from pipec.plan import schema
from pipec.runtime import Backends
from pipec.runtime.memory import BindError
from pipec.runtime.update import _buffer

KERNELS = EXAMPLES / "table_kernels.cu"
HEADER = f'from "{KERNELS}" import sum_squares, sum_squares_raw, scale_all, accumulate\n'
TABLES = Path(__file__).parent / "fixtures" / "runtime" / "tables.pipe"


def _codes(result) -> list[str]:
    return sorted(d.code for d in result.diagnostics)


def _check(body: str):
    return check_text(body, header=HEADER)


@pytest.mark.parametrize("declaration, code", [
    ("buffer t: ptr[2] = zeros", "PC107"),                           # a ptr buffer holds addresses only
    ("buffer t: ptr[2]", "PC107"),
    ("buffer t: f32[2] = addresses(w1, w2)", "PC107"),               # and only it holds them
    ("buffer t: ptr[2] = addresses(w1)", "PC107"),                   # one entry per element
    ("buffer t: ptr[1] = addresses(w1, w2)", "PC107"),
    ("buffer t: ptr[1] = addresses(w1, seed=1)", "PC107"),
    ("buffer t: ptr[1] = addresses(w1 + 1)", "PC107"),               # no buffer or slice
    ("buffer t: ptr[1] = addresses(later)", "PC103"),                # declared before the table
    ("buffer t: ptr[1] = addresses(N)", "PC103"),                    # a constant
    ("buffer t: ptr[1] = addresses(w1[0:500])", "PC206"),
    ("buffer t: ptr[1] = addresses(inner)", "PC107"),                # no table of tables
    ("buffer t: ptr[2] replicated = addresses(w1, w2)", "PC107"),    # addresses differ between ranks
    ("buffer t: pointer[2] = addresses(w1, w2)", "PC107"),
])
def test_a_table_names_one_buffer_or_slice_declared_before_it_per_element(declaration, code):
    result = _check(f"""
        const N = 2
        buffer w1: f32[256]
        buffer w2: f32[64]
        buffer inner: ptr[1] = addresses(w1)
        {declaration}
        buffer later: f32[4]
    """)
    assert code in _codes(result)


def test_a_table_declaration_keeps_its_entries_and_a_pointer_to_pointers_binds_it():
    result = _check("""
        buffer w1: f32[256]
        buffer w2: f32[128]
        buffer t: ptr[2, 1] = addresses(w1, w2[64:])
        buffer sizes: i32[2] = fill(64)
        buffer norms: f32[2]
        step { launch sum_squares<<<2, 32>>>(t, in sizes, out norms) }
    """)
    assert _codes(result) == []
    table = result.program.buffers["t"]
    assert table.is_table and table.dtype.name == "ptr" and table.shape == (2, 1)
    assert [(e.buffer.name, e.start, e.stop) for e in table.init.entries] == [("w1", 0, 256), ("w2", 64, 128)]
    assert not result.program.buffers["w1"].is_table


def _accesses(result, index: int) -> list[tuple[str, int, int, Mode]]:
    node = result.program.step.items[index]
    assert isinstance(node, LaunchNode)
    return [(a.buffer.name, a.start, a.stop, a.mode) for a in node.accesses]


def test_a_launch_reads_and_writes_the_buffers_its_table_names_in_the_bound_slice():
    result = _check("""
        buffer w1: f32[256]
        buffer w2: f32[128]
        buffer t: ptr[2] = addresses(w1, w2[0:64])
        buffer sizes: i32[2] = fill(64)
        buffer norms: f32[2]
        step {
            launch sum_squares<<<2, 32>>>(t, in sizes, out norms)
            launch scale_all<<<1, 32>>>(t[1:2], in sizes, 2.0)
        }
    """)
    assert _codes(result) == []
    assert _accesses(result, 0) == [("t", 0, 2, Mode.READ), ("w1", 0, 256, Mode.READ), ("w2", 0, 64, Mode.READ),
                                    ("sizes", 0, 2, Mode.READ), ("norms", 0, 2, Mode.WRITE)]
    assert _accesses(result, 1) == [("t", 1, 2, Mode.READ), ("w2", 0, 64, Mode.READ_WRITE),
                                    ("sizes", 0, 2, Mode.READ)]
    hazards = result.plan.graphs[result.plan.step].hazards
    assert ("WAR", "w2") in {(e.kind, e.buffer) for e in hazards}  # the scale waits for the norms that read w2


def test_writers_of_a_tables_buffers_come_before_the_launch_that_reads_through_it():
    result = _check("""
        buffer w1: f32[256]
        buffer w2: f32[128]
        buffer t: ptr[2] = addresses(w1, w2)
        buffer sizes: i32[2] = fill(64)
        buffer norms: f32[2]
        step {
            launch accumulate<<<1, 128>>>(inout w2, in w1, 128)
            launch sum_squares<<<2, 32>>>(t, in sizes, out norms)
        }
    """)
    hazards = result.plan.graphs[result.plan.step].hazards
    assert {(e.kind, e.buffer) for e in hazards} == {("RAW", "w2")}


def test_a_launch_through_plain_addresses_is_reported_and_one_through_a_table_is_not():
    result = _check("""
        buffer w1: f32[64]
        buffer raw: u64[1]
        buffer t: ptr[1] = addresses(w1)
        buffer sizes: i32[1] = fill(64)
        buffer norms: f32[1]
        step {
            launch sum_squares_raw<<<1, 32>>>(in raw, in sizes, out norms)
            launch sum_squares<<<1, 32>>>(t, in sizes, out norms)
        }
    """)
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "PC324" and diagnostic.span.line == 9
    assert [label.span.line for label in diagnostic.labels] == [22]  # the load in table_kernels.cu


@pytest.mark.parametrize("binding", ["out t", "inout t"])
def test_a_table_bound_for_writing_is_reported(binding):
    result = _check(f"""
        buffer w1: f32[64]
        buffer t: ptr[1] = addresses(w1)
        buffer sizes: i32[1] = fill(64)
        step {{ launch scale_all<<<1, 32>>>({binding}, in sizes, 2.0) }}
    """)
    assert "PC325" in _codes(result)


def test_a_table_copied_into_is_reported_and_copied_from_is_a_type_mismatch():
    result = _check("""
        buffer w1: f32[64]
        buffer t: ptr[1] = addresses(w1)
        buffer u: ptr[1] = addresses(w1)
        buffer raw: u64[1]
        step {
            fill w1 = 0.0
            copy t -> u
            copy t -> raw
        }
    """)
    assert _codes(result) == ["PC303", "PC325"]


def test_the_plan_holds_a_table_as_u64_words_with_the_byte_offsets_of_its_buffers():
    result = _check("""
        buffer w1: f32[256]
        buffer w2: f64[128]
        buffer t: ptr[2] = addresses(w1[16:], w1)
        buffer u: ptr[1] = addresses(w2[3:7])
        buffer sizes: i32[2] = fill(64)
        buffer norms: f32[2]
        step { launch sum_squares<<<2, 32>>>(t, in sizes, out norms) }
    """)
    plan = result.plan
    assert plan.buffer("t").dtype == "u64" and plan.buffer("t").nbytes == 16
    assert plan.buffer("t").init == schema.InitSpec("addresses", (), None, None, (
        schema.AddressSpec("w1", 64), schema.AddressSpec("w1", 0)))
    assert plan.buffer("u").init.addresses == (schema.AddressSpec("w2", 24),)
    assert plan.buffer("w1").init.addresses == ()
    assert schema.from_json(json.loads(json.dumps(schema.to_json(plan)))) == plan


def test_a_plan_written_before_tables_reads_back_without_them():
    result = _check("""
        buffer w1: f32[4]
        step { fill w1 = 1.0 }
    """)
    data = schema.to_json(result.plan)
    for buffer in data["buffers"]:
        del buffer["init"]["addresses"]
    assert schema.from_json(data) == result.plan
    del data["buffers"][0]["init"]["kind"]  # a field without a default stays required
    with pytest.raises(KeyError):
        schema.from_json(data)


def test_the_runtime_fills_a_table_with_its_own_addresses_and_keeps_them_through_a_restore():
    pipeline = load(TABLES, backends=Backends(fake_driver(TABLES)))
    with pipeline:
        expected = [pipeline.buffer("a").device_ptr, pipeline.buffer("b").device_ptr + 256 * 4]
        assert pipeline.snapshot()["tensors"].tolist() == expected
        snapshot = pipeline.snapshot()
        snapshot["tensors"] = np.zeros(2, dtype=np.uint64)  # as another process's state would hold
        snapshot["sums"] = np.ones(256, dtype=np.float32)
        pipeline.restore(snapshot)
        assert pipeline.snapshot()["tensors"].tolist() == expected
        assert pipeline.snapshot()["sums"].tolist() == [1.0] * 256


def test_a_bundle_holds_no_bytes_for_a_table_and_its_runtime_fills_it(tmp_path):
    compilation = compile_file(TABLES, load_settings(TABLES))
    write_bundle(compilation.plan, ("sm_90",), tmp_path / "bundle", str(TABLES))
    assert not (tmp_path / "bundle" / "buffers" / "tensors.bin").exists()
    # a reader of version 1 would leave the table unfilled: the bundle asks for version 2
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["readers"] == [2, 2]
    with load_bundle(tmp_path / "bundle", backends=Backends(fake_driver(TABLES))) as pipeline:
        assert pipeline.snapshot()["tensors"].tolist() == [pipeline.buffer("a").device_ptr,
                                                           pipeline.buffer("b").device_ptr + 256 * 4]


def test_a_table_cannot_be_bound():
    with pytest.raises(BindError, match="`tensors` is a table of addresses, which the runtime fills"):
        load(TABLES, backends=Backends(fake_driver(TABLES)), bind={"tensors": object()})


def test_a_tables_hover_and_an_update_refusal_name_its_buffers():
    result = _check("""
        buffer w1: f32[256]
        buffer t: ptr[2] = addresses(w1, w1[8:16])
        buffer sizes: i32[2] = fill(64)
        buffer norms: f32[2]
        step { launch sum_squares<<<2, 32>>>(t, in sizes, out norms) }
    """)
    assert "initial value: addresses(w1, w1[8:16])" in _buffer_hover(result.program.buffers["t"])
    assert _buffer(result.plan.buffer("t")) == "u64[2] device = addresses(w1+0, w1+32)"
