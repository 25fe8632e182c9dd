"""What `pipec lsp` knows about one open `.pipe` document, without any protocol: the check's
findings, and an index of the names it declares and imports, for hover, go to definition,
completion and document symbols. Positions are 1-based lines and columns, as in spans.

A check is `compile_file(..., until="check")` on the editor's text: kernels are analysed
through the on-disk kernel cache (compiler/cache.py), keyed by the kernel sources' contents,
so a keystroke in the pipeline recompiles nothing, and an edited `.cu` is analysed afresh."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ...dsl import PipeSyntaxError, SourceFile, Span, ast, parse
from ..config import Settings, load_settings
from ..diagnostics import Diagnostic
from ..model import Buffer, Kernel, Program
from ..source_scan import scan_declarations
from ..stages import compile_file

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r'"([^"\\\n]|\\.)*"')


@dataclass(frozen=True)
class Definition:
    name: str
    kind: str  # const | buffer | graph
    span: Span  # the name where it is declared
    decl: ast.ConstDecl | ast.BufferDecl | ast.GraphDecl


@dataclass
class DocumentIndex:
    path: Path
    settings: Settings
    diagnostics: list[Diagnostic]
    program: Program | None
    sources: list[SourceFile]  # the files the check read: the pipeline, its imports, kernels
    tree: ast.Module | None  # the document's own declarations (None after a syntax error)
    definitions: dict[str, Definition] = field(default_factory=dict)


def check_document(path: Path, text: str, previous: DocumentIndex | None = None) -> DocumentIndex:
    """Check the text as the file at `path`; after a syntax error, the names of the last text
    that parsed stay known (completion while a statement is half typed)."""
    settings = load_settings(path)
    result = compile_file(path, settings, until="check", text=text)
    index = DocumentIndex(path.resolve(), settings, result.diagnostics, result.program,
                          list(result.sources), result.tree)
    if index.tree is None and previous is not None:
        index.tree, index.program, index.definitions = previous.tree, previous.program, previous.definitions
        return index
    index.definitions = _definitions(index)
    return index


def _import_target(importer: Path, relative: str, settings: Settings) -> Path | None:
    for folder in (importer.parent, *settings.compile.include_dirs):
        candidate = folder / relative
        if candidate.is_file():
            return candidate.resolve()
    return None


def _declarations(tree: ast.Module):
    for decl in tree.decls:
        if isinstance(decl, ast.ConstDecl):
            yield decl.name, "const", decl
        elif isinstance(decl, ast.BufferDecl):
            yield decl.name, "buffer", decl
        elif isinstance(decl, ast.GraphDecl):
            yield decl.name, "graph", decl


def _definitions(index: DocumentIndex) -> dict[str, Definition]:
    """Declared names: the imported `.pipe` files' first, then the document's own over them."""
    found: dict[str, Definition] = {}
    for source in index.sources:
        if source.path.suffix != ".pipe" or source.path == index.path:
            continue
        try:
            tree = parse(source)
        except PipeSyntaxError:
            continue
        for ident, kind, decl in _declarations(tree):
            found.setdefault(ident.text, Definition(ident.text, kind, ident.span, decl))
    if index.tree is not None:
        for ident, kind, decl in _declarations(index.tree):
            found[ident.text] = Definition(ident.text, kind, ident.span, decl)
    return found


def word_at(text: str, line: int, column: int) -> str | None:
    """The name under a 1-based position (the cursor may stand just after it)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    for match in _WORD.finditer(lines[line - 1]):
        if match.start() < column <= match.end() + 1:
            return match.group()
    return None


def import_at(index: DocumentIndex, text: str, line: int, column: int) -> Path | None:
    """The file an import's path string under the position names."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines) or not re.match(r"\s*(from|import)\b", lines[line - 1]):
        return None
    for match in _STRING.finditer(lines[line - 1]):
        if match.start() < column <= match.end():
            return _import_target(index.path, match.group()[1:-1], index.settings)
    return None


def kernel(index: DocumentIndex, name: str) -> Kernel | None:
    return index.program.kernels.get(name) if index.program is not None else None


def definition(index: DocumentIndex, text: str, line: int, column: int) -> Span | Path | None:
    """Where the name (or import path) under the position is declared."""
    target = import_at(index, text, line, column)
    if target is not None:
        return target
    name = word_at(text, line, column)
    if name is None:
        return None
    found = kernel(index, name)
    if found is not None:
        return found.decl_span
    return index.definitions[name].span if name in index.definitions else None


def hover(index: DocumentIndex, text: str, line: int, column: int) -> str | None:
    """Markdown about the name under the position: a kernel's signature and annotations, a
    buffer's type, shape, placement and initial value, a constant's value (after `-D`)."""
    name = word_at(text, line, column)
    if name is None:
        return None
    found = kernel(index, name)
    if found is not None:
        return _kernel_hover(found)
    if index.program is not None and name in index.program.buffers:
        return _buffer_hover(index.program.buffers[name])
    if index.program is not None and name in index.program.consts:
        value = index.program.consts[name]
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        defined = dict(index.settings.compile.defines)
        note = f"\n\nset by `-D {name}={defined[name]}`" if name in defined else ""
        return f"```pipe\nconst {name} = {shown}\n```{note}"
    entry = index.definitions.get(name)
    if entry is not None and isinstance(entry.decl, ast.GraphDecl):
        params = ", ".join(p.text for p in entry.decl.params)
        return f"```pipe\ngraph {name}{f'({params})' if params else ''}\n```\n\n{_where(entry.span)}"
    return None


def _where(span: Span) -> str:
    return f"declared at `{span.source.display_path()}:{span.line}`"


def _kernel_hover(found: Kernel) -> str:
    text = found.decl_span.source.text
    start = found.decl_span.start
    signature = " ".join(text[start : found.decl_span.end].split())
    notes = _annotations(text, start)
    params = "\n".join(f"- `{p.name}`: {p.ctype or p.kind}"
                       + ("" if p.kind != "pointer" else f", written: {p.written}") for p in found.params)
    parts = [f"```cuda\n{signature}\n```", *([f"```cuda\n{notes}\n```"] if notes else []), params,
             _where(found.decl_span)]
    return "\n\n".join(part for part in parts if part)


def _annotations(text: str, start: int) -> str:
    """The `/// pipec:` comment lines right above a kernel's declaration."""
    lines = text[:start].rstrip("\n").split("\n")
    found = []
    while lines and lines[-1].strip().startswith("///"):
        line = lines.pop().strip()
        if "pipec:" in line:
            found.append(line)
    return "\n".join(reversed(found))


def _buffer_hover(buffer: Buffer) -> str:
    shape = ", ".join(str(n) for n in buffer.shape)
    init: str = buffer.init.kind
    if buffer.init.args or buffer.init.entries:
        init += "(" + ", ".join([str(a) for a in buffer.init.args] + [e.span.text for e in buffer.init.entries]) + ")"
    if buffer.init.seed is not None:
        init += f", seed {buffer.init.seed}"
    if buffer.init.path is not None:
        init += f" `{buffer.init.path.name}`"
    placement = "host memory mapped into the device" if buffer.mapped else "device memory"
    extra = [placement, f"initial value: {init}"]
    if buffer.replicated:
        extra.append("replicated: the same bits on every rank")
    if buffer.labels:
        extra.append("labels: " + ", ".join(buffer.labels))
    return (f"```pipe\nbuffer {buffer.name}: {buffer.dtype.name}[{shape}]\n```\n\n" + "\n\n".join(extra)
            + f"\n\n{_where(buffer.span)}")


def kernels_in(index: DocumentIndex, relative: str) -> list[str]:
    """The kernels a `.cu` file an import names declares (completion after `import`)."""
    target = _import_target(index.path, relative, index.settings)
    if target is None or target.suffix not in (".cu", ".cuh"):
        return []
    try:
        return sorted(scan_declarations(SourceFile.read(target).text))
    except OSError:
        return []
