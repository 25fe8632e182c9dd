"""Initial values and sizes are validated before anything is allocated (PC107), and the node
limit holds for the whole unrolled program and is checked before unrolling (PC111)."""

from __future__ import annotations

import resource
import time

import numpy as np
import pytest
from pipec.compiler.resolve.size import MAX_ITERATIONS, MAX_NODES
from stage_helpers import check_text


def findings(result, code: str) -> list[str]:
    return [d.message for d in result.diagnostics if d.code == code]


@pytest.mark.parametrize("decl, fragment", [
    ("u8[4] = fill(300)", "300 is outside the range of `u8`"),
    ("f32[4] = fill(1e39)", "overflows `f32`"),
    ("u32[4] = fill(-1)", "-1 is outside the range of `u32`"),
    ("i32[4] = fill(0.5)", "0.5 is not an integer"),
    ("f32[4] = uniform(1.0, 1.0)", "is empty"),
    ("f32[4] = uniform(2.0, -1.0)", "is empty"),
    ("f32[4] = uniform(0.0, 1e39)", "overflows `f32`"),
    ("f32[4] = uniform(0.0, 1e308 * 10.0)", "finite"),
    ("u8[4] = uniform(0, 257)", "draws up to 256"),
    ("i32[4] = uniform(0.5, 3)", "not an integer"),
    ("f32[4] = normal(0.0, -1.0)", "negative"),
    ("f32[4] = normal(1e308 * 10.0, 1.0)", "finite"),
    ("i32[4] = normal(0.0, 1.0)", "floating-point"),
    ("f32[4] = uniform(0.0, 1.0, seed=-1)", "seed -1"),
    ("f32[4] = uniform(0.0, 1.0, seed=1 << 64)", "seed 18446744073709551616"),
    ("f32[1 << 40]", "1 TiB"),
    ("u8[1 << 32, 1 << 32]", "more than a 64-bit count"),
])
def test_an_invalid_initial_value_or_size_is_reported(decl, fragment):
    result = check_text(f"""
        buffer b: {decl}
        step {{ launch reader<<<1, 4>>>(b, 4) }}
    """)
    messages = findings(result, "PC107")
    assert len(messages) == 1 and fragment in messages[0], messages
    assert result.plan is None


@pytest.mark.parametrize("decl", [
    "u8[4] = fill(255)", "f32[4] = fill(-3.4e38)", "u8[4] = uniform(0, 256)",
    "f32[4] = uniform(-1.0, 1.0, seed=18446744073709551615)", "f32[4] = normal(0.0, 0.0)",
    "u8[1 << 40]",
])
def test_a_valid_initial_value_or_size_is_accepted(decl):
    result = check_text(f"""
        buffer b: {decl}
        step {{ launch reader<<<1, 4>>>(b, 4) }}
    """)
    assert not findings(result, "PC107")


def test_a_truncated_npy_file_is_reported(tmp_path):
    np.save(tmp_path / "full.npy", np.zeros(4, np.float32))
    data = (tmp_path / "full.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-4])
    result = check_text(f"""
        buffer b: f32[4] = load("{tmp_path / 'cut.npy'}")
        buffer c: f32[4] = load("{tmp_path / 'full.npy'}")
        step {{ launch reader<<<1, 4>>>(b, 4) launch reader<<<1, 4>>>(c, 4) }}
    """)
    assert [m for m in findings(result, "PC107")] == ["`" + str(tmp_path / "cut.npy") + "` is truncated: "
                                                      "it holds 12 bytes of data, its header promises 16"]


PROGRAMS = {
    "one huge loop": """
        step { for i in 0 .. 1000000000 { launch writer<<<1, 4>>>(x, 4) } }
    """,
    "nested loops": """
        step { for i in 0 .. 1000 { for j in 0 .. 1000 { for k in 0 .. 1000 {
            launch writer<<<1, 4>>>(x, 4) } } } }
    """,
    "graph fan-out": """
        graph leaf { for k in 0 .. 1000 { launch writer<<<1, 4>>>(x, 4) } }
        graph mid { for j in 0 .. 1000 { leaf } }
        step { for i in 0 .. 1000 { mid } }
    """,
    "empty loops": """
        step { for i in 0 .. 1000000 { for j in 0 .. 1000000 { } } }
    """,
    "a body that depends on the loop variable": """
        step { for i in 0 .. 100000 { for j in 0 .. 100000 {
            if i == j and i < 0 { launch writer<<<1, 4>>>(x, 4) } } } }
    """,
    "graph arguments that depend on the loop variable": """
        graph g(n) { for k in 0 .. n { launch writer<<<1, 4>>>(x, 4) } }
        step { for i in 0 .. 100000 { g(i) } }
    """,
    "step and init together": """
        init { for i in 0 .. 600000 { launch writer<<<1, 4>>>(x, 4) } }
        step { for i in 0 .. 600000 { launch writer<<<1, 4>>>(x, 4) } }
    """,
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_an_oversized_program_fails_fast_in_bounded_memory(name):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = check_text("buffer x: f32[4]\n" + PROGRAMS[name])
    elapsed = time.perf_counter() - start
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    messages = findings(result, "PC111")
    assert len(messages) == 1, [d.message for d in result.diagnostics]
    assert str(MAX_NODES) in messages[0] or str(MAX_ITERATIONS) in messages[0]
    assert elapsed < 1.0 and grown_mb < 100, (elapsed, grown_mb)
    assert result.plan is None


def test_the_count_in_the_message_is_the_whole_programs():
    result = check_text("""
        buffer x: f32[4]
        graph leaf { for k in 0 .. 1000 { launch writer<<<1, 4>>>(x, 4) } }
        step { for i in 0 .. 1001 { leaf } }
    """)
    assert findings(result, "PC111") == [(
        f"unrolling would reach at least {1001 * 1001} nodes; a program holds at most {MAX_NODES} "
        "(step and init together)")]


def test_a_program_just_under_the_limits_unrolls_exactly():
    result = check_text("""
        buffer x: f32[4]
        graph g(n) { for k in 0 .. n { launch writer<<<1, 4>>>(x, 4) } }
        step { for i in 0 .. 40 { if i % 2 == 0 { g(i) } else { launch writer<<<1, 4>>>(x, 4) } } }
    """)
    assert not findings(result, "PC111")
    step = result.program.step
    children = [item for item in step.items if hasattr(item, "body")]
    assert len(step.items) == 40 and sum(len(c.body.items) for c in children) == sum(range(0, 40, 2))
