"""Per launch, not per name: two kernels called `k` in two sources are analysed and waived
apart, and a waiver names the kernel's source when the bare name is ambiguous."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipec.compiler import Settings, compile_file

CLEAN = 'extern "C" __global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n'
ATOMIC = 'extern "C" __global__ void k(float* x, int n) { if (threadIdx.x < n) atomicAdd(x, 1.0f); }\n'


def compile_with(tmp_path: Path, main: str, *, first: str = CLEAN, second: str = ATOMIC):
    """a.cu and b.cu both define `k`; ga.pipe and gb.pipe each import one into a graph."""
    (tmp_path / "a.cu").write_text(first)
    (tmp_path / "b.cu").write_text(second)
    for name, source in (("ga", "a.cu"), ("gb", "b.cu")):
        (tmp_path / f"{name}.pipe").write_text(
            f'from "{source}" import k\nbuffer {name}_x: f32[4]\n'
            f"graph {name} {{ launch k<<<1, 4>>>({name}_x, 4) }}\n")
    path = tmp_path / "main.pipe"
    path.write_text('from "ga.pipe" import ga\nfrom "gb.pipe" import gb\n' + main)
    result = compile_file(path, Settings(), until="check")
    return [(d.code, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("order", ["ga gb", "gb ga"])
def test_the_second_source_of_a_name_is_analysed_too(tmp_path, order):
    found = compile_with(tmp_path, f"step {{ {order} }}\n")
    assert [code for code, _ in found] == ["PC305"]
    assert '`"b.cu":k`' in found[0][1]


def test_a_bare_waiver_of_an_ambiguous_name_is_an_error(tmp_path):
    found = compile_with(tmp_path, 'waive atomics for k: "two kinds of k"\nstep { ga gb }\n')
    assert ("PC108", "`k` names 2 kernels of different sources") in found
    assert "PC305" in [code for code, _ in found]


def test_a_waiver_naming_the_source_exempts_that_kernel_only(tmp_path):
    found = compile_with(tmp_path, 'waive atomics for "b.cu":k: "one counter, order-free"\nstep { ga gb }\n')
    assert found == []
    found = compile_with(tmp_path, 'waive atomics for "a.cu":k: "the wrong one"\nstep { ga gb }\n')
    assert sorted(code for code, _ in found) == ["PC003", "PC305"]


def test_both_sources_with_the_finding_report_twice(tmp_path):
    found = compile_with(tmp_path, "step { ga gb }\n", first=ATOMIC)
    assert sorted(message.split("`")[1] for _, message in found) == ['"a.cu":k', '"b.cu":k']


def test_a_bare_waiver_of_a_name_used_once_stays_valid(tmp_path):
    (tmp_path / "b.cu").write_text(ATOMIC)
    (tmp_path / "gb.pipe").write_text(
        'from "b.cu" import k\nbuffer x: f32[4]\ngraph gb { launch k<<<1, 4>>>(x, 4) }\n')
    path = tmp_path / "main.pipe"
    path.write_text('import "gb.pipe"\nwaive atomics for k: "one counter"\nstep { gb }\n')
    assert compile_file(path, Settings(), until="check").diagnostics == []


def test_a_waiver_of_a_source_not_imported_is_reported(tmp_path):
    found = compile_with(tmp_path, 'waive atomics for "c.cu":k: "no such source"\nstep { ga gb }\n')
    assert ("PC103", "no kernel `k` is imported from `c.cu`") in found
