"""Completion and document symbols of `pipec lsp`, as plain data (server.py turns them into the
protocol's types). Quick fixes are the findings' own (`Diagnostic.fixes`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...dsl import Span, ast
from ..model import ADDRESS, BUFFER_DTYPES
from ..resolve.declare import STATEMENT_KEYWORDS
from ..resolve.gemm import OPTION_WORDS as GEMM_OPTION_WORDS
from ..resolve.gemm import VIEW_OPTIONS as GEMM_VIEW_OPTIONS
from ..resolve.options import OPTION_NAMES
from .index import DocumentIndex, kernels_in

DECLARATION_KEYWORDS = ("import", "from", "const", "buffer", "graph", "step", "init", "option", "waive")
ACCESS_WORDS = ("in", "out", "inout")
_FROM_CU = re.compile(r'^\s*from\s+"([^"]+\.cuh?)"\s+import\b[\w\s,]*$')
_GEMM = re.compile(r"^\s*gemm\b.*\bwith\b(?P<rest>.*)$")
_GEMM_VALUE = re.compile(r"\b(\w+)\s*=\s*\w*$")


@dataclass(frozen=True)
class Completion:
    label: str
    kind: str  # keyword | constant | buffer | graph | kernel | option | type | value
    detail: str = ""


def completions(index: DocumentIndex, before: str) -> list[Completion]:
    """What may come at the cursor, given the text of its line before it."""
    imported = _FROM_CU.match(before)
    if imported:
        return [Completion(name, "kernel", f"kernel in {imported.group(1)}")
                for name in kernels_in(index, imported.group(1))]
    gemm = _GEMM.match(before)
    if gemm:
        value = _GEMM_VALUE.search(gemm.group("rest"))
        if value and value.group(1) in GEMM_OPTION_WORDS:
            return [Completion(word, "value", f"{value.group(1)} of a gemm")
                    for word in GEMM_OPTION_WORDS[value.group(1)]]
        if not value:
            return [Completion(word, "option", "gemm option") for word in (*GEMM_OPTION_WORDS, *GEMM_VIEW_OPTIONS)]
    if re.match(r"^\s*option\s+\w*$", before):
        return [Completion(word, "option", "pipeline option") for word in OPTION_NAMES]
    if re.match(r"^\s*buffer\s+\w+\s*:\s*\w*$", before):
        return [Completion(word, "type", "element type") for word in BUFFER_DTYPES] + [
            Completion(ADDRESS.name, "type", "a table of addresses, `= addresses(a, b, ...)`")]
    found = [Completion(word, "keyword") for word in (*STATEMENT_KEYWORDS, *DECLARATION_KEYWORDS, *ACCESS_WORDS)]
    for name, entry in sorted(index.definitions.items()):
        found.append(Completion(name, entry.kind, f"{entry.kind} ({entry.span.source.path.name})"))
    if index.program is not None:
        for name, kernel in sorted(index.program.kernels.items()):
            found.append(Completion(name, "kernel", f"kernel in {kernel.source.path.name}"))
    return found


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # const | buffer | graph | step | init | import | option | waive
    span: Span       # the whole declaration
    selection: Span  # its name


def document_symbols(tree: ast.Module | None) -> list[Symbol]:
    symbols: list[Symbol] = []
    for decl in tree.decls if tree is not None else ():
        if isinstance(decl, (ast.ConstDecl, ast.BufferDecl, ast.GraphDecl, ast.OptionDecl)):
            kind = {ast.ConstDecl: "const", ast.BufferDecl: "buffer", ast.GraphDecl: "graph",
                    ast.OptionDecl: "option"}[type(decl)]
            symbols.append(Symbol(decl.name.text, kind, decl.span, decl.name.span))
        elif isinstance(decl, (ast.StepDecl, ast.InitDecl)):
            word = "step" if isinstance(decl, ast.StepDecl) else "init"
            symbols.append(Symbol(word, word, decl.span, Span(decl.span.source, decl.span.start,
                                                                decl.span.start + len(word))))
        elif isinstance(decl, ast.Import):
            symbols.append(Symbol(decl.path.value, "import", decl.span, decl.path.span))
    return symbols
