"""Values an importing file gives the constants of a `.pipe` file it imports:
`import "f.pipe" with (ENVS = ENVS, SEED = RANK_SEED)`.

The imported file's own values are defaults. A binding is evaluated in the importing file, so
the `-D` values of the main file and its per-rank constants (PC603) flow into the imported one;
a file loaded with other values is another instance of it (its own buffers and graphs).
"""

from __future__ import annotations

from ...dsl import ast
from ..codes import PC113
from ..consteval import Value
from ..diagnostics import Fix, Label
from ..live import LiveTerm
from .context import Context
from .ranks import reads_rank
from .scope import Abort, ConstSymbol, InvalidSymbol, LoadedModule
from .spelling import did_you_mean

# name: value, binding, differs per rank, its live-update term (compiler/live.py; None: not held)
Bindings = dict[str, tuple[Value, ast.Keyword, bool, LiveTerm | None]]


def evaluate_bindings(ctx: Context, module: LoadedModule, decl: ast.Import) -> Bindings:
    """The values of `with (NAME = EXPR, ...)`, evaluated in the importing file, so that
    its `-D` values and its per-rank constants flow into the imported file."""
    bindings: Bindings = {}
    for binding in decl.bindings:
        name = binding.name.text
        if name in bindings:
            ctx.sink.add(PC113, f"`{name}` is bound twice", binding.name.span, "give each constant one value",
                         labels=(Label(bindings[name][1].span, "first bound here"),))
            continue
        try:
            value, term = ctx.flow(module, binding.value)
        except Abort:
            continue  # reported; the file's own value stands
        bindings[name] = (value, binding, reads_rank(module, {}, binding.value), term)
    return bindings


def check_bindings(ctx: Context, module: LoadedModule, bound: set[tuple[int, str]]) -> None:
    """PC113 for each binding that names no constant the file itself declares; `bound` holds
    (id of module, constant) for each constant the importer's value replaced."""
    for name, (_, binding, _, _) in module.bindings.items():
        if (id(module), name) in bound:
            continue
        symbol = module.scope.get(name)
        fixes: tuple[Fix, ...] = ()
        if symbol is None or isinstance(symbol, InvalidSymbol):
            what = f"declares no constant `{name}`"
            similar = did_you_mean(name, module.names_of(ConstSymbol), "constants", binding.name.span)
            hint, fixes = similar.hint, similar.fixes
        elif not isinstance(symbol, ConstSymbol):
            what, hint = f"declares `{name}` as a {symbol.what}, not a constant", "bind constants only"
        else:
            what = f"takes `{name}` from elsewhere (another import or the launcher)"
            hint = "bind a constant where it is declared; launcher constants are set by `-D`"
        ctx.sink.add(PC113, f"`{module.path.name}` {what}", binding.name.span, hint, fixes=fixes)


def instance(bindings: Bindings) -> tuple:
    """What tells two loads of one file apart: the values bound to its constants."""
    return tuple(sorted((name, type(value).__name__, repr(value), per_rank)
                        for name, (value, _, per_rank, _) in bindings.items()))
