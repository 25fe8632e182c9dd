"""Scope data of the resolver: the symbols each loaded `.pipe` module declares. Data and small
look-ups only; the passes that fill and read it are the other modules of this package.

A problem that makes a statement meaningless is reported once, then `Abort` unwinds to the
statement (or declaration) being resolved, which is dropped.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ...dsl import SourceFile, Span, ast
from ...errors import Error
from ..consteval import Value
from ..live import LiveTerm
from ..model import Buffer, Kernel


@dataclass(frozen=True)
class ConstSymbol:
    what: ClassVar[str] = "const"
    value: Value
    span: Span
    # RANK, LOCAL_RANK or a constant computed from them: its value differs between the ranks
    # of one run, so a decision on it may too (PC603)
    per_rank: bool = False
    # its value in the live-update record (compiler/live.py) when an update can change it: a
    # constant of the main file, or one an import binds from one; None when its value is fixed
    live: int | None = None


@dataclass(frozen=True)
class BufferSymbol:
    what: ClassVar[str] = "buffer"
    buffer: Buffer
    span: Span


@dataclass(frozen=True)
class KernelSymbol:
    what: ClassVar[str] = "kernel"
    kernel: Kernel
    span: Span


@dataclass(frozen=True)
class GraphSymbol:
    what: ClassVar[str] = "graph"
    decl: ast.GraphDecl
    span: Span
    module: LoadedModule  # where the graph was declared: its names resolve there


@dataclass(frozen=True)
class InvalidSymbol:
    """A name whose declaration failed and was reported: uses of it are dropped silently
    instead of being reported again as undefined."""

    what: ClassVar[str] = "invalid"
    span: Span


Symbol = ConstSymbol | BufferSymbol | KernelSymbol | GraphSymbol | InvalidSymbol


def declared(symbol: Symbol) -> object:
    """What the symbol declares: a second declaration of its name that declares the same
    object (one buffer imported along two paths) is no duplicate (PC104). A constant is its
    symbol, which imports pass on: its value is no identity (Python keeps one object for
    each small integer, so two `const X = 1` would look like one)."""
    match symbol:
        case ConstSymbol():
            return symbol
        case BufferSymbol():
            return symbol.buffer
        case KernelSymbol():
            return symbol.kernel
        case GraphSymbol():
            return symbol.decl
    return None


@dataclass(eq=False)
class LoadedModule:
    path: Path
    source: SourceFile
    tree: ast.Module
    scope: dict[str, Symbol] = field(default_factory=dict)
    # `import "f" with (NAME = EXPR)`: the importer's values for constants this file declares,
    # each with its binding, whether it differs per rank and its live-update term (the main
    # file's come from `-D`)
    bindings: dict[str, tuple[Value, ast.Keyword, bool, LiveTerm | None]] = field(default_factory=dict)
    # a whole file this module imports failed to load (reported): which names it would have
    # declared is unknown, so a name this module uses and nothing declares is no new mistake
    lost_import: bool = False
    # kernels that a kernel source this module imports by name declares but the import leaves
    # out, with that import: a launch of one is told to add it
    unimported_kernels: dict[str, ast.Import] = field(default_factory=dict)

    def names_of(self, kind: type) -> list[str]:
        """The names this module's scope binds to symbols of `kind`, for suggestions."""
        return [name for name, symbol in self.scope.items() if isinstance(symbol, kind)]


class Abort(Error):
    """A problem already reported that makes the current statement meaningless."""


def mark_invalid(module: LoadedModule, names) -> None:
    """Names whose declaration failed (and was reported)."""
    for ident in names:
        module.scope.setdefault(ident.text, InvalidSymbol(ident.span))


def lose_import(module: LoadedModule, decl: ast.Import) -> None:
    """An import that failed (and was reported): the names it lists are invalid; a whole file
    imported leaves every name of the module that nothing declares unreported."""
    if decl.names is None:
        module.lost_import = True
    mark_invalid(module, decl.names or ())


def undefined(module: LoadedModule, name: str) -> tuple:
    """The cause of the findings that `name` is undefined in `module`'s file: one finding, at
    its first use, names the others."""
    return ("undefined", module.path, name)


def follows_from_failure(module: LoadedModule, name: str) -> bool:
    """Whether `name`, which nothing declares, names what a reported failure left undeclared:
    anything, after a whole file failed to import; or a declaration that failed under a close
    spelling (`accumulat` imported from a file that has `accumulate`, then `accumulate` used).
    Its use is dropped silently: one mistake, one finding."""
    failed = [other for other, symbol in module.scope.items() if isinstance(symbol, InvalidSymbol)]
    return module.lost_import or bool(difflib.get_close_matches(name, failed, n=1))


def buffer_named(module: LoadedModule, name: str | None) -> Buffer | None:
    """The buffer `name` denotes in `module`, or None for anything else."""
    symbol = module.scope.get(name) if name else None
    return symbol.buffer if isinstance(symbol, BufferSymbol) else None
