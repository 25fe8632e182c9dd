"""Imports whose bindings multiply instances: each file imports the next twice with other
values, 2**depth instances in all. The resolver stops at MAX_INSTANCES with one PC112 naming
the chain of imports, instead of loading them all (24 levels once ran past 120 s at 2.9 GB)."""

from __future__ import annotations

from pipec.compiler import Settings, compile_file
from pipec.compiler.diagnostics import Severity
from pipec.compiler.resolve.declare import MAX_INSTANCES


def _diamond(folder, depth: int) -> None:
    for k in range(depth):
        imports = (f'import "f{k + 1}.pipe" with (V = V * 2)\nimport "f{k + 1}.pipe" with (V = V * 2 + 1)\n'
                   if k + 1 < depth else "")
        (folder / f"f{k}.pipe").write_text(f"const V = 0\n{imports}")
    (folder / "main.pipe").write_text('import "f0.pipe" with (V = 1)\nbuffer x: u32[1]\nstep {\n}\n')


def test_instances_beyond_the_limit_are_refused_once_with_the_import_chain(tmp_path):
    _diamond(tmp_path, 24)
    errors = [d for d in compile_file(tmp_path / "main.pipe", Settings(), until="check").diagnostics
              if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["PC112"]
    assert f"more than {MAX_INSTANCES} file instances" in errors[0].message
    assert "reached through `main.pipe` -> `f0.pipe` -> `f1.pipe`" in errors[0].message


def test_instances_within_the_limit_all_load(tmp_path):
    _diamond(tmp_path, 9)  # 2**9 - 1 instances, and the main file
    result = compile_file(tmp_path / "main.pipe", Settings(), until="check")
    assert [d.code for d in result.diagnostics if d.severity is Severity.ERROR] == []
