"""The launcher constants `RANK`, `WORLD_SIZE` and `LOCAL_RANK`, and which values differ between
the ranks of one run: the declaration pass marks the constants that read the rank
(`ConstSymbol.per_rank`), and the unrolling pass refuses a collective under a decision that
reads one (PC603), since NCCL needs every rank to issue the same collectives in the same order.
"""

from __future__ import annotations

from pathlib import Path

from ...dsl import SourceFile, Span, ast
from ...wording import counted
from ..codes import PC105, PC603
from ..consteval import ConstError, RuntimeValue, evaluate, names_read
from ..diagnostics import DiagnosticSink, Label
from .scope import Abort, ConstSymbol, GraphSymbol, LoadedModule

# The launcher constants and their one-process values; `-D NAME=VALUE` sets them, and
# piperun passes the launcher's (runtime/process_launchers.py).
LAUNCHER_CONSTANTS = {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0}
# Constants whose value differs between the ranks of one run (WORLD_SIZE does not).
PER_RANK = ("RANK", "LOCAL_RANK")
_BUILTIN = SourceFile(Path("<pipec launcher constants>"), " ".join(LAUNCHER_CONSTANTS))
BUILTIN_SPAN = Span(_BUILTIN, 0, 0)  # where what pipec itself declares is "declared"


def builtin_span(name: str) -> Span:
    start = _BUILTIN.text.index(name)
    return Span(_BUILTIN, start, start + len(name))


def launcher_constants(sink: DiagnosticSink, defines: dict[str, tuple[ast.Expr, Span]],
                       used: set[str]) -> dict[str, int]:
    """RANK, WORLD_SIZE and LOCAL_RANK: their defaults, or the `-D` values given (each one
    given is added to `used`)."""
    values = dict(LAUNCHER_CONSTANTS)
    for name in values:
        if name not in defines:
            continue
        expr, span = defines[name]
        used.add(name)
        try:
            value = evaluate(expr, _no_names)
        except (ConstError, RuntimeValue):
            value = None
        if isinstance(value, bool) or not isinstance(value, int) or value < (name == "WORLD_SIZE"):
            least = 1 if name == "WORLD_SIZE" else 0
            sink.add(PC105, f"`-D {name}` must be an integer of at least {least}", span,
                     "piperun sets it from the launcher's environment; `pipec -D` only to check")
            continue
        values[name] = value
    if values["RANK"] >= values["WORLD_SIZE"]:
        span = defines.get("RANK", defines.get("WORLD_SIZE", (None, builtin_span("RANK"))))[1]
        sink.add(PC105, f"RANK {values['RANK']} lies outside a world of "
                 f"{counted(values['WORLD_SIZE'], 'process')}", span, "ranks run from 0 to WORLD_SIZE - 1")
        values["RANK"] = 0
    return values


def _no_names(ident: ast.Ident):
    raise ConstError(f"`{ident.text}`: a launcher constant's value names nothing", ident.span, "")


def reads_rank(module: LoadedModule, env: dict, expr: ast.Expr, names: tuple[str, ...] | None = None) -> bool:
    """Whether `expr` reads RANK, LOCAL_RANK or a constant computed from them; `names`: the
    names it reads, when known already."""
    if names is None:  # a name directly: the commonest graph argument and bound (`u`, `N`)
        names = (expr.ident.text,) if type(expr) is ast.Name else names_read(expr)
    for name in names:
        symbol = None if name in env else module.scope.get(name)
        if isinstance(symbol, ConstSymbol) and symbol.per_rank:
            return True
    return False


def check_rank_decision(sink: DiagnosticSink, module: LoadedModule, env: dict, decision: ast.Expr | None,
                        reason: str, span: Span, bodies, names: tuple[str, ...] | None = None) -> None:
    """PC603 when `decision` (a compile-time condition, loop bound or graph argument) depends
    on the rank and any of `bodies` (statements, blocks) can reach a collective: checked on
    the syntax, since the branch this rank does not take is never resolved. `names`: the
    names the decision reads, when known already."""
    if decision is None or not reads_rank(module, env, decision, names):
        return
    found = first_collective(module, list(bodies), set())
    if found is not None:
        report_divergence(sink, found, reason, span)
        raise Abort


def report_divergence(sink: DiagnosticSink, stmt: ast.Collective, reason: str, span: Span) -> None:
    sink.add(PC603, f"`{stmt.kind}` runs only where {reason}, which may differ between "
             "ranks: the other ranks would wait for it forever", stmt.span,
             "every rank must issue the same collectives in the same order: move it out "
             "of the branch (or decide on a `replicated` flag)",
             labels=(Label(span, "decided here"),))


def first_collective(module: LoadedModule, pending: list, seen: set[int]) -> ast.Collective | None:
    """The first collective statement the statements can reach, through the graphs they use."""
    while pending:
        item = pending.pop(0)
        match item:
            case ast.Collective():
                return item
            case ast.Block():
                pending[:0] = item.stmts
            case ast.If():
                pending[:0] = [b for b in (item.then, item.orelse) if b is not None]
            case ast.For() | ast.DeviceLoop() | ast.Parallel():
                pending.insert(0, item.body)
            case ast.Switch():
                pending[:0] = [c.body for c in item.cases]
            case ast.GraphCall():
                symbol = module.scope.get(item.name.text)
                if isinstance(symbol, GraphSymbol) and id(symbol.decl) not in seen:
                    seen.add(id(symbol.decl))
                    found = first_collective(symbol.module, [symbol.decl.body], seen)
                    if found is not None:
                        return found
    return None
