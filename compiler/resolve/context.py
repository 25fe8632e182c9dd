"""What every resolver pass holds: the options, the diagnostics, the toolchain, and constant
evaluation over a module's scope with its value cache. Every evaluation reports the updatable
constants it reads to the live-update tracker (compiler/live.py): structural uses unless it is a
definition that passes its value on (`flow`) or a kernel node's argument or launch shape (`live`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeVar

from ...dsl import Span, ast
from ..codes import PC103, PC105, PC301, PC302
from ..config import CompileOptions
from ..consteval import (
    Arithmetic, ConstError, Lookup, NotPlain, RuntimeValue, Value, compile_arithmetic, evaluate, is_arithmetic,
    literal, names_read,
)
from ..diagnostics import DiagnosticSink, Label
from ..live import LiveTerm, LiveTracker, Resolved
from .scope import (
    Abort, BufferSymbol, ConstSymbol, GraphSymbol, InvalidSymbol, KernelSymbol, LoadedModule, follows_from_failure,
    undefined,
)
from .spelling import did_you_mean, not_imported

# Where a value is needed, which names the rule a run-time value breaks there: a decision
# (PC301), a value baked into a node (PC302), or a compile-time constant (PC105).
Place = Literal["branch", "value", "const"]
# What an evaluation that no caller describes is, as a structural use of the constants it reads.
_USES: dict[str, str] = {"branch": "a compile-time decision", "value": "a value fixed when the graph is built",
                         "const": "a compile-time constant"}
Reads = dict[int, Span]  # the record's values an evaluation read, each with where it was first read
Env = dict[str, Value]  # the loop variables and graph parameters in scope
S = TypeVar("S", KernelSymbol, BufferSymbol, GraphSymbol)

_UNBOUND = object()  # a name that is no loop variable or parameter here
_USE = {
    KernelSymbol: "launch kernels with `launch {name}<<<grid, block>>>(...)`",
    BufferSymbol: "use buffers as kernel arguments, fill or copy targets",
    GraphSymbol: "use a graph by writing its name: `{name}`",
}


@dataclass
class Context:
    options: CompileOptions
    sink: DiagnosticSink
    toolchain: object
    # Values of expressions by (expression, module, the loop variables and parameters it
    # reads): unrolling evaluates one statement's expressions once per iteration and per
    # graph use. Plain arithmetic (`is_arithmetic`) is not kept: it evaluates faster than
    # its key is built. None until the scopes are complete (they grow while declarations
    # resolve); `keep_values` starts it.
    values: dict[tuple, Value] | None = None
    # by id(expr): the names it reads, None for an expression whose value is not kept
    free_names: dict[int, tuple[str, ...] | None] = field(default_factory=dict)
    live: LiveTracker = field(default_factory=LiveTracker)
    # the record's values each kept value read (marked again where it is reused), and the
    # terms of live sites, by the same keys as `values`
    reads: dict[tuple, Reads] = field(default_factory=dict)
    terms: dict[tuple, tuple[Value, LiveTerm | None]] = field(default_factory=dict)
    # by (id(expr), id(module)): plain arithmetic, whose value is not kept, compiled after its
    # first evaluation (compile_arithmetic; None: it cannot be). Its reads are structural by then,
    # so each later evaluation is only its arithmetic.
    compiled: dict[tuple[int, int], Arithmetic | None] = field(default_factory=dict)

    def keep_values(self) -> None:
        self.values = {}

    def symbol(self, module: LoadedModule, ident: ast.Ident, kind: type[S]) -> S:
        """The symbol `ident` names, which must be a `kind`; reported and aborted otherwise."""
        symbol = module.scope.get(ident.text)
        if isinstance(symbol, InvalidSymbol) or (symbol is None and follows_from_failure(module, ident.text)):
            raise Abort
        if symbol is None:
            similar = ((kind is KernelSymbol and not_imported(ident.text, module.unimported_kernels))
                       or did_you_mean(ident.text, module.names_of(kind), f"{kind.what}s", ident.span))
            self.sink.add(PC103, f"undefined {kind.what} `{ident.text}`", ident.span, similar.hint,
                          fixes=similar.fixes, cause=undefined(module, ident.text))
            raise Abort
        if not isinstance(symbol, kind):
            hint = _USE.get(type(symbol), "check the name").format(name=ident.text)
            self.sink.add(PC103, f"`{ident.text}` is a {symbol.what}, not a {kind.what}", ident.span,
                          hint, labels=(Label(symbol.span, "declared here"),))
            raise Abort
        return symbol

    def lookup(self, module: LoadedModule, env: Env, reads: Reads | None = None,
               use: str = "a compile-time value") -> Lookup:
        """Name lookup for `evaluate`. A read of a value of the live-update record goes into
        `reads`; without, it is a structural use, `use`, marked at once."""
        def lookup(ident: ast.Ident) -> Value:
            if ident.text in env:
                return env[ident.text]
            symbol = module.scope.get(ident.text)
            match symbol:
                case InvalidSymbol():
                    raise Abort
                case None if follows_from_failure(module, ident.text):
                    raise Abort
                case None:
                    similar = did_you_mean(ident.text, list(env) + list(module.scope), "declarations", ident.span)
                    raise ConstError(f"undefined name `{ident.text}`", ident.span,
                                     _quoting_hint(ident) or similar.hint, rule=PC103,
                                     fixes=similar.fixes, cause=undefined(module, ident.text))
                case ConstSymbol():
                    if symbol.live is not None:
                        if reads is None:
                            self.live.read(symbol.live, use, ident.span)
                        else:
                            reads.setdefault(symbol.live, ident.span)
                    return symbol.value
                case BufferSymbol():
                    raise RuntimeValue(f"buffer `{ident.text}`", ident.span, ident.text)
            raise ConstError(f"`{ident.text}` is a {symbol.what}, not a value", ident.span,
                             "only constants, loop variables and graph parameters have values")
        return lookup

    def eval(self, module: LoadedModule, env: Env, expr: ast.Expr, *, context: Place, use: str | None = None) -> Value:
        """Evaluate a constant; report and abort on failure, by the rule of `context`. The
        constants it reads are used structurally: `use` says how."""
        # the commonest expressions, a literal (a launch's `32`) and a loop variable, directly
        if type(expr) is ast.IntLit:
            return expr.value
        if type(expr) is ast.Name and expr.ident.text in env:
            return env[expr.ident.text]
        # plain arithmetic compiled at its first evaluation (a slice bound), before the key
        # that it has none of
        if (run := self.compiled.get((id(expr), id(module)))) is not None:
            try:
                return run(env)
            except NotPlain:
                pass
        key = self._key(module, env, expr)
        arithmetic = key is None and self.values is not None  # values are kept from then on
        if key is not None and key in self.values:
            value, reads = self.values[key], self.reads[key]
        else:
            reads = {}
            value = self._evaluate(module, env, expr, context, reads)
            if key is not None:  # only values: a failure is reported at each place
                self.values[key], self.reads[key] = value, reads
        for entry, span in reads.items():
            self.live.read(entry, use or _USES[context], span)
        if arithmetic and (id(expr), id(module)) not in self.compiled:
            self.compiled[id(expr), id(module)] = compile_arithmetic(
                expr, frozenset(name for name in names_read(expr) if name in env), self._constant(module))
        return value

    @staticmethod
    def _constant(module: LoadedModule):
        def constant(name: str) -> Value | None:
            symbol = module.scope.get(name)
            return symbol.value if isinstance(symbol, ConstSymbol) else None
        return constant

    def _evaluate(self, module: LoadedModule, env: Env, expr: ast.Expr, context: Place, reads: Reads) -> Value:
        try:
            return evaluate(expr, self.lookup(module, env, reads))
        except ConstError as error:
            self.report(error)
        except RuntimeValue as rv:
            self._report_runtime_value(rv, context)
        raise Abort

    def report(self, error: ConstError) -> None:
        self.sink.add(error.rule, error.message, error.span, error.hint, fixes=error.fixes, cause=error.cause)

    def flow(self, module: LoadedModule, expr: ast.Expr) -> tuple[Value, LiveTerm | None]:
        """A constant's definition or an import binding: its value, reported and aborted on
        failure as a constant's, and its term (None when the record cannot hold it, and the
        values it read are then used structurally)."""
        reads: Reads = {}
        value = self._evaluate(module, {}, expr, "const", reads)
        term = self.live.term(expr, self._resolver(module, {}))
        if term is None:
            for entry, span in reads.items():
                self.live.read(entry, "a definition the live-update record cannot hold", span)
        return value, term

    def live_value(self, module: LoadedModule, env: Env, expr: ast.Expr) -> tuple[Value, LiveTerm | None]:
        """A kernel node's scalar argument or launch shape: its value and, when it reads values
        of the record, its term. Raises ConstError or RuntimeValue as `evaluate` does."""
        # a literal (a launch's `32`) and a loop variable read no value of the record: directly
        if type(expr) is ast.IntLit:
            return expr.value, None
        if type(expr) is ast.Name and expr.ident.text in env:
            return env[expr.ident.text], None
        key = self._key(module, env, expr)
        if key is not None and key in self.terms:
            return self.terms[key]
        reads: Reads = {}
        value = evaluate(expr, self.lookup(module, env, reads))
        term = self.live.term(expr, self._resolver(module, env)) if reads else None
        if reads and term is None:
            for entry, span in reads.items():
                self.live.read(entry, "an expression the live-update record cannot hold", span)
        if key is not None:
            self.terms[key] = value, term
        return value, term

    def live_integer(self, module: LoadedModule, env: Env, expr: ast.Expr, what: str,
                     context: Place = "const") -> tuple[int, LiveTerm | None]:
        """`live_value` of an integer (a launch shape), reported and aborted as `integer` does."""
        try:
            value, term = self.live_value(module, env, expr)
        except ConstError as error:
            self.report(error)
            raise Abort from None
        except RuntimeValue as rv:
            self._report_runtime_value(rv, context)
            raise Abort from None
        return self._integer(value, expr, what), term

    def _resolver(self, module: LoadedModule, env: Env):
        def resolve(ident: ast.Ident) -> Resolved:
            if ident.text in env:
                return "value", env[ident.text]
            symbol = module.scope.get(ident.text)
            if isinstance(symbol, ConstSymbol):
                return ("entry", symbol.live) if symbol.live is not None else ("value", symbol.value)
            return None
        return resolve

    def _key(self, module: LoadedModule, env: Env, expr: ast.Expr) -> tuple | None:
        if self.values is None:
            return None
        if id(expr) not in self.free_names:
            self.free_names[id(expr)] = None if is_arithmetic(expr) else names_read(expr)
        names = self.free_names[id(expr)]
        if names is None:
            return None
        return (id(expr), id(module), tuple((type(v), v) for v in (env.get(n, _UNBOUND) for n in names)))

    def _report_runtime_value(self, rv: RuntimeValue, context: Place) -> None:
        if context == "branch":
            self.sink.add(PC301, f"this decision depends on {rv.description}, which is only "
                          "known on the device while the step runs", rv.span,
                          "compile-time `if` and `for` take constants; to decide on the device, "
                          "let a kernel write the decision into an integer buffer and branch on "
                          "that one element: `if flag[0] { }` (docs/language.md)",
                          label="device data")
        elif context == "value":
            self.sink.add(PC302, f"{rv.description} changes between steps but would be read "
                          "once, when the graph is built", rv.span,
                          "bind the buffer as a pointer and let the kernel read the value",
                          label="baked at build time")
        else:
            self.sink.add(PC105, f"{rv.description} is not a compile-time constant", rv.span,
                          "use constants, loop variables and graph parameters here")

    def const(self, module: LoadedModule, expr: ast.Expr, use: str | None = None) -> Value:
        return self.eval(module, {}, expr, context="const", use=use)

    def integer(self, module: LoadedModule, env: Env, expr: ast.Expr, what: str,
                context: Place = "const", use: str | None = None) -> int:
        return self._integer(self.eval(module, env, expr, context=context, use=use or what), expr, what)

    def _integer(self, value: Value, expr: ast.Expr, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.sink.add(PC105, f"{what} must be an integer, found `{literal(value)}`", expr.span,
                          "use an integer expression")
            raise Abort
        return value


def _quoting_hint(ident: ast.Ident) -> str | None:
    """For `-D MODE=fast`, where a string was meant: the shell took the quotes."""
    source = ident.span.source
    define = source.path.name.removeprefix("<-D ").removesuffix(">")
    if define == source.path.name or source.text.strip() != ident.text:
        return None
    return (f"`-D {define}={ident.text}` reads `{ident.text}` as a name; if you meant the string, quote it "
            f"past the shell: -D {define}='\"{ident.text}\"'")
