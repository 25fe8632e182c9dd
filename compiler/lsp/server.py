"""`pipec lsp`'s protocol side, on pygls: documents in, the check's findings and index.py's and
features.py's answers out. Columns: the protocol counts UTF-16 code units and spans count code
points; a position the client sends is converted with pygls's codec, the ranges sent back are
code points (the same units for text within the Basic Multilingual Plane)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from ..._version import __version__
from ...errors import Error
from ...dsl import Span
from ..codes import Severity
from ..diagnostics import Diagnostic
from .features import completions, document_symbols
from .index import DocumentIndex, check_document, definition, hover

_SEVERITY = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning}
_COMPLETION_KIND = {
    "keyword": types.CompletionItemKind.Keyword, "const": types.CompletionItemKind.Constant,
    "buffer": types.CompletionItemKind.Variable, "graph": types.CompletionItemKind.Function,
    "kernel": types.CompletionItemKind.Function, "option": types.CompletionItemKind.Property,
    "type": types.CompletionItemKind.TypeParameter, "value": types.CompletionItemKind.Value,
}
_SYMBOL_KIND = {
    "const": types.SymbolKind.Constant, "buffer": types.SymbolKind.Array, "graph": types.SymbolKind.Function,
    "step": types.SymbolKind.Function, "init": types.SymbolKind.Function, "import": types.SymbolKind.Module,
    "option": types.SymbolKind.Property,
}


class PipeServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("pipec", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.indexes: dict[str, DocumentIndex] = {}   # open .pipe documents by URI
        self.published: dict[str, set[str]] = {}      # document URI -> URIs it published findings to


def _range(span: Span) -> types.Range:
    line, column = span.source.line_col(span.start)
    end_line, end_column = span.end_line_col()
    return types.Range(types.Position(line - 1, column - 1), types.Position(end_line - 1, end_column - 1))


def _diagnostic(d: Diagnostic) -> types.Diagnostic:
    related = [types.DiagnosticRelatedInformation(types.Location(from_fs_path(str(label.span.source.path)),
                                                                 _range(label.span)), label.message)
               for label in d.labels]
    message = d.message + (f"\nhint: {d.hint}" if d.hint else "")
    return types.Diagnostic(_range(d.span), message, severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Information),
                            code=d.code, source="pipec", related_information=related or None,
                            data={"code": d.code, "hint": d.hint})


def recheck(server: PipeServer, uri: str) -> None:
    """Check one open document and publish its findings, file by file: a finding may lie in
    an imported file or a kernel source; files that had findings and have none are cleared."""
    document = server.workspace.get_text_document(uri)
    try:
        index = check_document(Path(to_fs_path(uri)), document.source, server.indexes.get(uri))
    except (Error, OSError) as error:  # no NVRTC, an invalid [tool.pipec], an unreadable import
        server.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"pipec: {error}"))
        return
    server.indexes[uri] = index
    by_file: dict[str, list[types.Diagnostic]] = {uri: []}
    for d in index.diagnostics:
        target = from_fs_path(str(d.span.source.path))
        by_file.setdefault(uri if Path(to_fs_path(target)) == index.path else target, []).append(_diagnostic(d))
    for stale in server.published.get(uri, set()) - set(by_file):
        by_file[stale] = []
    server.published[uri] = {u for u, found in by_file.items() if found}
    for target, found in by_file.items():
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(target, found))


def recheck_dependents(server: PipeServer, changed: Path) -> None:
    """Re-check the open pipelines that read `changed` (an imported file or a kernel source)."""
    for uri, index in list(server.indexes.items()):
        if any(source.path == changed for source in index.sources):
            recheck(server, uri)


def build() -> PipeServer:
    server = PipeServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PipeServer, params: types.DidOpenTextDocumentParams) -> None:
        if params.text_document.uri.endswith(".pipe"):
            recheck(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PipeServer, params: types.DidChangeTextDocumentParams) -> None:
        if params.text_document.uri.endswith(".pipe"):
            recheck(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PipeServer, params: types.DidSaveTextDocumentParams) -> None:
        recheck_dependents(ls, Path(to_fs_path(params.text_document.uri)).resolve())

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PipeServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.indexes.pop(params.text_document.uri, None)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: PipeServer, params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            recheck_dependents(ls, Path(to_fs_path(change.uri)).resolve())

    _register_queries(server)
    return server


def _position(ls: PipeServer, uri: str, position: types.Position) -> tuple[DocumentIndex | None, str, int, int]:
    document = ls.workspace.get_text_document(uri)
    column = document.position_codec.position_from_client_units(document.lines, position).character
    return ls.indexes.get(uri), document.source, position.line + 1, column + 1


def _register_queries(server: PipeServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: PipeServer, params: types.HoverParams) -> types.Hover | None:
        index, text, line, column = _position(ls, params.text_document.uri, params.position)
        shown = hover(index, text, line, column) if index else None
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, shown)) if shown else None

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: PipeServer, params: types.DefinitionParams) -> types.Location | None:
        index, text, line, column = _position(ls, params.text_document.uri, params.position)
        target = definition(index, text, line, column) if index else None
        if isinstance(target, Path):
            return types.Location(from_fs_path(str(target)), types.Range(types.Position(0, 0), types.Position(0, 0)))
        return types.Location(from_fs_path(str(target.source.path)), _range(target)) if target else None

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[" ", ":", "="]))
    def on_completion(ls: PipeServer, params: types.CompletionParams) -> types.CompletionList:
        index, text, line, column = _position(ls, params.text_document.uri, params.position)
        before = text.split("\n")[line - 1][: column - 1] if index else ""
        items = [types.CompletionItem(c.label, kind=_COMPLETION_KIND[c.kind], detail=c.detail or None)
                 for c in (completions(index, before) if index else [])]
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def on_symbols(ls: PipeServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        index = ls.indexes.get(params.text_document.uri)
        return [types.DocumentSymbol(s.name, _SYMBOL_KIND[s.kind], _range(s.span), _range(s.selection))
                for s in document_symbols(index.tree if index else None)]

    _register_fixes(server)


def _register_fixes(server: PipeServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    def on_code_action(ls: PipeServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        index = ls.indexes.get(uri)
        actions = []
        for d in index.diagnostics if index else ():
            if d.span.source.path != index.path or not _overlaps(_range(d.span), params.range):
                continue
            for fix in d.fixes:
                changes: dict[str, list[types.TextEdit]] = {}
                for e in fix.edits:  # an edit in another file is the same as one in this document
                    target = uri if e.span.source.path == index.path else from_fs_path(str(e.span.source.path))
                    changes.setdefault(target, []).append(types.TextEdit(_range(e.span), e.text))
                actions.append(types.CodeAction(fix.title, kind=types.CodeActionKind.QuickFix,
                                                edit=types.WorkspaceEdit(changes=changes),
                                                diagnostics=[_diagnostic(d)], is_preferred=len(d.fixes) == 1))
        return actions


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and \
        (b.start.line, b.start.character) <= (a.end.line, a.end.character)
