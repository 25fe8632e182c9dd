"""The seam between compiler and runtime: the runtime consumes the plan and the compiled
modules, nothing else. Only the front doors (`pipec.load`, `piperun`) run the compiler."""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
# what the runtime may know of the compiler: the plan, element types, the bundle format and the
# initial values the host uploads (leaves that import nothing else of the compiler)
SCHEMA = {"plan_schema", "dtypes", "bundle_format", "initial_values"}
FRONT_DOORS = {"load.py", "cli.py", "bundle.py", "bundle_cli.py"}  # pipec.load, piperun, pipec.load_bundle


def compiler_imports(path: Path) -> set[str]:
    """The compiler modules a runtime file imports (`pipec.compiler.X` or `..compiler.X`;
    importing names from the package itself counts as `compiler`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            parts = module.split(".")
            if node.level == 0 and parts[0] == "pipec":
                parts = parts[1:]
            elif node.level != 2:  # `.x` stays in the runtime
                continue
            if parts and parts[0] == "compiler":
                found.add(".".join(parts[1:2]) or "compiler")
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] if a.name.count(".") >= 2 else "compiler"
                      for a in node.names if a.name.startswith("pipec.compiler")}
    return found


def test_runtime_modules_import_only_the_plan_schema_and_dtypes():
    offenders = {p.name: compiler_imports(p) - SCHEMA
                 for p in sorted(RUNTIME.glob("*.py")) if p.name not in FRONT_DOORS}
    assert {name: sorted(bad) for name, bad in offenders.items() if bad} == {}


def test_the_checker_sees_every_form_of_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from ..compiler.plan_schema import Plan\nfrom ..compiler import kernels\n"
                      "from pipec.compiler.lower import build_plan\nimport pipec.compiler.resolve\n"
                      "from .memory import BufferSet\n")
    assert compiler_imports(sample) == {"plan_schema", "compiler", "lower", "resolve"}


def test_the_compiler_never_imports_the_runtime():
    compiler = RUNTIME.parent / "compiler"
    for path in compiler.rglob("*.py"):
        modules = [n.module.split(".") for n in ast.walk(ast.parse(path.read_text()))
                   if isinstance(n, ast.ImportFrom) and n.module and n.level >= 2]
        assert not any(parts[0] == "runtime" for parts in modules), path
