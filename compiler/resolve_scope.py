"""Scope data of the resolver: the symbols each loaded `.pipe` module declares, and the
name look-ups and constant evaluation every resolver pass shares.

A problem that makes a statement meaningless is reported once, then `Abort` unwinds to the
statement (or declaration) being resolved, which is dropped.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

from ..dsl import SourceFile, Span, ast
from ..errors import Error
from .config import CompileOptions
from .consteval import ConstError, RuntimeValue, Value, evaluate, is_arithmetic, literal
from .diagnostics import DiagnosticSink, Label


@dataclass(frozen=True)
class Symbol:
    kind: str  # const | buffer | kernel | graph
    value: object
    span: Span
    module: LoadedModule | None = None  # where a graph was declared (its names resolve there)


@dataclass(eq=False)
class LoadedModule:
    path: Path
    source: SourceFile
    tree: ast.Module
    scope: dict[str, Symbol] = field(default_factory=dict)
    # `import "f" with (NAME = EXPR)`: the importer's values for constants this file declares,
    # each with its binding and whether it differs per rank (the main file's come from `-D`)
    bindings: dict[str, tuple[Value, ast.Keyword, bool]] = field(default_factory=dict)


class Abort(Error):
    """A problem already reported that makes the current statement meaningless."""


class Scope:
    """What every pass reads: the options, the diagnostics, and the loaded modules."""

    def __init__(self, options: CompileOptions, sink: DiagnosticSink, toolchain) -> None:
        self.options = options
        self.sink = sink
        self.toolchain = toolchain
        # by path and the values bound to the file's constants: one instance per set of values
        self.modules: dict[tuple[Path, tuple], LoadedModule] = {}
        # Values of expressions by (expression, module, the loop variables and parameters it
        # reads): unrolling evaluates one statement's expressions once per iteration and per
        # graph use. Plain arithmetic (`is_arithmetic`) is not kept: it evaluates faster than
        # its key is built. None until the scopes are complete (they grow while declarations
        # resolve).
        self.values: dict[tuple, Value] | None = None
        # by id(expr): the names it reads, None for an expression whose value is not kept
        self.free_names: dict[int, tuple[str, ...] | None] = {}

    @staticmethod
    def _mark_invalid(module: LoadedModule, names) -> None:
        """Names whose declaration failed (and was reported): uses of them are dropped
        silently instead of being reported again as undefined."""
        for ident in names:
            module.scope.setdefault(ident.text, Symbol("invalid", None, ident.span))

    def _declare(self, module: LoadedModule, name: ast.Ident, symbol: Symbol) -> None:
        existing = module.scope.get(name.text)
        if existing is not None and existing.value is not symbol.value:
            self.sink.add("PC104", f"`{name.text}` is declared twice", name.span,
                          "rename one of them", label="declared again here",
                          labels=(Label(existing.span, "first declared here"),))
            return
        module.scope[name.text] = symbol

    def _symbol(self, module: LoadedModule, ident: ast.Ident, kind: str) -> Symbol:
        symbol = module.scope.get(ident.text)
        if symbol is not None and symbol.kind == "invalid":
            raise Abort
        if symbol is None:
            candidates = [n for n, s in module.scope.items() if s.kind == kind]
            self.sink.add("PC103", f"undefined {kind} `{ident.text}`", ident.span,
                          self._suggest(ident.text, candidates, f"{kind}s"))
            raise Abort
        if symbol.kind != kind:
            hint = {
                "kernel": f"launch kernels with `launch {ident.text}<<<grid, block>>>(...)`",
                "buffer": "use buffers as kernel arguments, fill or copy targets",
                "graph": f"use a graph by writing its name: `{ident.text}`",
            }.get(symbol.kind, "")
            self.sink.add("PC103", f"`{ident.text}` is a {symbol.kind}, not a {kind}", ident.span,
                          hint or "check the name", labels=(Label(symbol.span, "declared here"),))
            raise Abort
        return symbol


    def _suggest(self, name: str, names, what: str) -> str:
        close = difflib.get_close_matches(name, list(names), n=1)
        if close:
            return f"a name with a similar spelling exists: `{close[0]}`"
        return f"check the spelling; no {what} with that name exist"

    def _lookup(self, module: LoadedModule, env: dict[str, Value]):
        def lookup(ident: ast.Ident) -> Value:
            if ident.text in env:
                return env[ident.text]
            symbol = module.scope.get(ident.text)
            if symbol is not None and symbol.kind == "invalid":
                raise Abort
            if symbol is None:
                raise ConstError(f"undefined name `{ident.text}`", ident.span,
                                 _quoting_hint(ident) or
                                 self._suggest(ident.text, list(env) + list(module.scope), "declarations"),
                                 code="PC103")
            if symbol.kind == "const":
                return symbol.value
            if symbol.kind == "buffer":
                raise RuntimeValue(f"buffer `{ident.text}`", ident.span, ident.text)
            raise ConstError(f"`{ident.text}` is a {symbol.kind}, not a value", ident.span,
                             "only constants, loop variables and graph parameters have values")
        return lookup

    def _eval(self, module: LoadedModule, env: dict[str, Value], expr: ast.Expr, *, context: str) -> Value:
        """Evaluate a constant; report and abort on failure. `context` names the place for the
        rule a run-time value breaks: `branch` (PC301), `value` (PC302) or `const` (PC105)."""
        # the commonest expressions, a literal (a launch's `32`) and a loop variable, directly
        if type(expr) is ast.IntLit:
            return expr.value
        if type(expr) is ast.Name and expr.ident.text in env:
            return env[expr.ident.text]
        key = None
        if self.values is not None:
            if id(expr) not in self.free_names:
                self.free_names[id(expr)] = None if is_arithmetic(expr) else names_read(expr)
            names = self.free_names[id(expr)]
            if names is not None:
                key = (id(expr), id(module), tuple((type(v), v) for v in (env.get(n, _UNBOUND) for n in names)))
                if key in self.values:
                    return self.values[key]
        try:
            value = evaluate(expr, self._lookup(module, env))
            if key is not None:  # only values: a failure is reported at each place
                self.values[key] = value
            return value
        except ConstError as error:
            self.sink.add(error.code, error.message, error.span, error.hint)
        except RuntimeValue as rv:
            self._report_runtime_value(rv, context)
        raise Abort

    def _report_runtime_value(self, rv: RuntimeValue, context: str) -> None:
        if context == "branch":
            self.sink.add("PC301", f"this decision depends on {rv.description}, which is only "
                          "known on the device while the step runs", rv.span,
                          "compile-time `if` and `for` take constants; to decide on the device, "
                          "let a kernel write the decision into an integer buffer and branch on "
                          "that one element: `if flag[0] { }` (docs/language.md)",
                          label="device data")
        elif context == "value":
            self.sink.add("PC302", f"{rv.description} changes between steps but would be read "
                          "once, when the graph is built", rv.span,
                          "bind the buffer as a pointer and let the kernel read the value",
                          label="baked at build time")
        else:
            self.sink.add("PC105", f"{rv.description} is not a compile-time constant", rv.span,
                          "use constants, loop variables and graph parameters here")

    def _const(self, module: LoadedModule, expr: ast.Expr) -> Value:
        return self._eval(module, {}, expr, context="const")

    def _int(self, module: LoadedModule, env: dict, expr: ast.Expr, what: str, context: str = "const") -> int:
        value = self._eval(module, env, expr, context=context)
        if isinstance(value, bool) or not isinstance(value, int):
            self.sink.add("PC105", f"{what} must be an integer, found `{literal(value)}`", expr.span,
                          "use an integer expression")
            raise Abort
        return value



_UNBOUND = object()  # a name that is no loop variable or parameter here


def names_read(expr: ast.Expr) -> tuple[str, ...]:
    """The names an expression reads, each once (iteratively: chains may be long)."""
    names: dict[str, None] = {}
    pending = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name):
            names[node.ident.text] = None
        else:
            for f in fields(node):
                value = getattr(node, f.name)
                pending.extend(v for v in (value if isinstance(value, tuple) else (value,))
                               if _is_expression(v))
    return tuple(names)


def _is_expression(value) -> bool:
    return is_dataclass(value) and not isinstance(value, (Span, ast.Ident))


def _quoting_hint(ident: ast.Ident) -> str | None:
    """For `-D MODE=fast`, where a string was meant: the shell took the quotes."""
    source = ident.span.source
    define = source.path.name.removeprefix("<-D ").removesuffix(">")
    if define == source.path.name or source.text.strip() != ident.text:
        return None
    return (f"`-D {define}={ident.text}` reads `{ident.text}` as a name; if you meant the string, quote it "
            f"past the shell: -D {define}='\"{ident.text}\"'")
