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
from ..diagnostics import Label
from .collectives import Collectives
from .scope import Abort, LoadedModule

Bindings = dict[str, tuple[Value, ast.Keyword, bool]]  # name: value, binding, differs per rank


class ImportBindings(Collectives):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.bound_names: set[tuple[int, str]] = set()  # (id of module, constant) given a binding

    def _bindings(self, module: LoadedModule, decl: ast.Import) -> Bindings:
        """The values of `with (NAME = EXPR, ...)`, evaluated in the importing file, so that
        its `-D` values and its per-rank constants flow into the imported file."""
        bindings: Bindings = {}
        for binding in decl.bindings:
            name = binding.name.text
            if name in bindings:
                self.sink.add(PC113, f"`{name}` is bound twice", binding.name.span, "give each constant one value",
                              labels=(Label(bindings[name][1].span, "first bound here"),))
                continue
            try:
                value = self._const(module, binding.value)
            except Abort:
                continue  # reported; the file's own value stands
            bindings[name] = (value, binding, self.reads_rank(module, {}, binding.value))
        return bindings

    def _is_bound(self, module: LoadedModule, name: str) -> bool:
        """Whether the importer gave `module`'s constant `name` its value."""
        return (id(module), name) in self.bound_names

    def _check_bindings(self, module: LoadedModule) -> None:
        """PC113 for each binding that names no constant the file itself declares."""
        for name, (_, binding, _) in module.bindings.items():
            if self._is_bound(module, name):
                continue
            symbol = module.scope.get(name)
            if symbol is None or symbol.kind == "invalid":
                what = f"declares no constant `{name}`"
                hint = self._suggest(name, [n for n, s in module.scope.items() if s.kind == "const"],
                                     "constants")
            elif symbol.kind != "const":
                what, hint = f"declares `{name}` as a {symbol.kind}, not a constant", "bind constants only"
            else:
                what = f"takes `{name}` from elsewhere (another import or the launcher)"
                hint = "bind a constant where it is declared; launcher constants are set by `-D`"
            self.sink.add(PC113, f"`{module.path.name}` {what}", binding.name.span, hint)


def instance(bindings: Bindings) -> tuple:
    """What tells two loads of one file apart: the values bound to its constants."""
    return tuple(sorted((name, type(value).__name__, repr(value), per_rank)
                        for name, (value, _, per_rank) in bindings.items()))
