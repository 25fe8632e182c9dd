"""Mutants of a Python module, derived with `ast`, for scripts/mutate.py.

Operators: comparison swaps (`<`/`<=`, `>`/`>=`, `==`/`!=`, `is`/`is not`, `in`/`not in`),
arithmetic swaps (`+`/`-`, `*`/`//`, ...), `and`/`or`, dropping `not` or a unary minus, a
constant nudged (`n` to `n + 1`, `1` to `0`, `True`/`False`), a slice bound moved by one,
`break`/`continue`, `return x` to `return None`, and deleting a statement of a function.
Docstrings, annotations, decorators and f-strings are left alone.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_ARITHMETIC = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
               ast.Div: ast.Mult, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr,
               ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr, ast.LShift: ast.RShift, ast.RShift: ast.LShift}
_BOOLEAN = {ast.And: ast.Or, ast.Or: ast.And}
# Subtrees that cannot change behaviour (annotations), only build messages (f-strings), or only
# run at type-checking time are not mutated.
# Deleting these is either meaningless or covered by another operator.
_KEPT_STATEMENTS = (ast.Pass, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal,
                    ast.Import, ast.ImportFrom, ast.Break, ast.Continue)
_SKIPPED_FIELDS = {"annotation", "returns", "decorator_list", "type_comment"}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the root
    line: int
    node: int  # position of the mutated node in `_walk` order
    choice: int  # which of that node's replacements
    kind: str
    original: str
    mutated: str
    module_level: bool  # runs at import time, so any test of the module may see it
    scope: tuple[int, int]  # first and last line of the enclosing function (or module)

    def label(self) -> str:
        return f"{self.path}:{self.line}: {self.original} -> {self.mutated}"


def _snippet(node: ast.AST | None) -> str:
    if node is None:
        return "(deleted)"
    lines = ast.unparse(node).splitlines() or [""]
    text = lines[0] + (" ..." if len(lines) > 1 else "")
    return text if len(text) <= 70 else text[:67] + "..."


def _is_docstring(node: ast.AST, parent: ast.AST, field: str, index: int | None) -> bool:
    return (index == 0 and field == "body" and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and isinstance(parent, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))


def _skipped_block(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:`, `if __name__ == "__main__":` and `__all__ = ...` are not behaviour."""
    if isinstance(node, ast.If):
        test = ast.unparse(node.test)
        return test in ("TYPE_CHECKING", "typing.TYPE_CHECKING") or test.startswith("__name__ ==")
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    return False


def _walk(tree: ast.Module):
    """(node, parent, field, index, enclosing function or None) for every mutable node, in a
    fixed order."""
    def visit(node, function):
        for field, value in ast.iter_fields(node):
            if field in _SKIPPED_FIELDS:
                continue
            children = value if isinstance(value, list) else [value]
            for index, child in enumerate(children):
                if (not isinstance(child, ast.AST) or isinstance(child, ast.JoinedStr)
                        or _skipped_block(child) or _is_docstring(child, node, field, index)):
                    continue
                yield child, node, field, index if isinstance(value, list) else None, function
                is_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from visit(child, child if is_function else function)
    yield from visit(tree, None)


def _with_op(node: ast.AST, op: type) -> ast.AST:
    new = copy.deepcopy(node)
    new.op = op()
    return new


def _plus(expr: ast.expr, delta: int) -> ast.expr:
    return ast.BinOp(copy.deepcopy(expr), ast.Add() if delta > 0 else ast.Sub(), ast.Constant(1))


def _replacements(node: ast.AST, in_function: bool) -> list[tuple[str, ast.AST | None]]:
    """The mutants of one node, as (operator name, replacement); None deletes a statement."""
    out: list[tuple[str, ast.AST | None]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                new = copy.deepcopy(node)
                new.ops[i] = _COMPARE[type(op)]()
                out.append(("compare", new))
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC:
        out.append(("arithmetic", _with_op(node, _ARITHMETIC[type(node.op)])))
    elif isinstance(node, ast.BoolOp):
        out.append(("boolean", _with_op(node, _BOOLEAN[type(node.op)])))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
        out.append(("unary", copy.deepcopy(node.operand)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        out.append(("constant", ast.Constant(not node.value)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if node.value + 1 != node.value:  # a large float absorbs the 1
            out.append(("constant", ast.Constant(node.value + 1)))
        if node.value == 1:
            out.append(("constant", ast.Constant(type(node.value)(0))))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        for bound in ("lower", "upper"):
            if getattr(node.slice, bound) is not None:
                for delta in (1, -1):
                    new = copy.deepcopy(node)
                    setattr(new.slice, bound, _plus(getattr(node.slice, bound), delta))
                    out.append(("slice", new))
    elif isinstance(node, ast.Break):
        out.append(("loop", ast.Continue()))
    elif isinstance(node, ast.Continue):
        out.append(("loop", ast.Break()))
    if isinstance(node, ast.Return) and node.value is not None:
        if ast.unparse(node.value) != "None":
            out.append(("return", ast.Return(ast.Constant(None))))
    elif in_function and isinstance(node, ast.stmt) and not isinstance(node, _KEPT_STATEMENTS):
        out.append(("delete", None))
    return out


def generate(source: str, path: str) -> list[Mutant]:
    tree = ast.parse(source)
    mutants = []
    whole = (1, len(source.splitlines()))
    for number, (node, _, _, _, function) in enumerate(_walk(tree)):
        scope = (function.lineno, function.end_lineno) if function else whole
        for choice, (kind, new) in enumerate(_replacements(node, function is not None)):
            mutants.append(Mutant(path, node.lineno, number, choice, kind, _snippet(node), _snippet(new),
                                  function is None, scope))
    return mutants


def mutated_tree(source: str, mutant: Mutant) -> ast.Module:
    """The module with `mutant` applied (a statement deletion becomes `pass`)."""
    tree = ast.parse(source)
    for number, (node, parent, field, index, function) in enumerate(_walk(tree)):
        if number == mutant.node:
            _, new = _replacements(node, function is not None)[mutant.choice]
            new = ast.copy_location(new or ast.Pass(), node)
            if index is None:
                setattr(parent, field, new)
            else:
                getattr(parent, field)[index] = new
            return ast.fix_missing_locations(tree)
    raise ValueError(f"{mutant.label()}: no such node")
