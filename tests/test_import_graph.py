"""No import circle in the product code: the modules of pipec, each an arrow to every pipec module
it imports at its top level (type-only imports included; imports inside functions, which run
after every module has loaded, are not arrows), form a DAG."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "compiler", "dsl", "plan", "runtime")
TOP_MODULES = ("__init__", "__main__", "_version", "errors")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("pipec", *parts))


def product_modules() -> dict[str, Path]:
    paths = [ROOT / f"{name}.py" for name in TOP_MODULES]
    paths += [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    return {_module_name(p): p for p in paths}


def _top_level_imports(tree: ast.Module):
    """The module's own import statements: at its top level, or under an `if` or `try` there."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try)):
            pending += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                        *(s for h in getattr(node, "handlers", []) for s in h.body)]


def imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _top_level_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
            continue
        base = package.split(".")
        if node.level:
            base = base[:len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            found.add(submodule if submodule in modules else target)
    return {m for m in found if m in modules and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_product_modules_import_no_circle():
    modules = product_modules()
    graph = {name: imports(name, path, modules) for name, path in modules.items()}
    assert cycles(graph) == []


def test_the_checker_finds_a_circle_and_every_form_of_import(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    sample = tmp_path / "sample.py"
    sample.write_text("from . import codes\nfrom ..plan.schema import Plan\nimport pipec.errors\n"
                      "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model import Program\n"
                      "def later():\n    from ..runtime import load\n")
    modules = dict.fromkeys(["pipec.compiler.codes", "pipec.plan.schema", "pipec.errors",
                             "pipec.compiler.model", "pipec.runtime", "pipec.compiler.sample"], sample)
    assert imports("pipec.compiler.sample", sample, modules) == {
        "pipec.compiler.codes", "pipec.plan.schema", "pipec.errors", "pipec.compiler.model"}
