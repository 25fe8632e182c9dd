"""`pipec lsp`, driven as an editor drives it: pygls's own client starts `python -m pipec lsp`
and talks to it over stdio. Findings as the text changes, hover, go to definition, completion,
document symbols, quick fixes, and a re-check when a kernel source changes on disk."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the lsp extra (pygls) is not installed: pip install 'pipec[lsp]'")
from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

KERNELS = '''/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
'''
LIB = "const N = 1024\n"
PIPE = '''from "kernels.cu" import scale
from "lib.pipe" import N

buffer x: f32[N] = uniform(-1.0, 1.0, seed=1)
buffer y: f32[N] = uninit

step {
    launch scale<<<N / 256, 256>>>(in x, out y, 0.5, NN)
}
'''
TIMEOUT = 60


class Session:
    """A client of a running server, with the findings it published per URI."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.published: asyncio.Queue = asyncio.Queue()

    async def findings(self, uri: str) -> list[types.Diagnostic]:
        while True:
            params = await asyncio.wait_for(self.published.get(), TIMEOUT)
            if params.uri == uri:
                return params.diagnostics

    def at(self, uri: str, line: int, column: int) -> dict:
        return {"text_document": types.TextDocumentIdentifier(uri), "position": types.Position(line, column)}


async def _session(root: Path, scenario) -> None:
    client = LanguageClient("pipec-tests", "1")
    session = Session(client)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(ls, params):
        session.published.put_nowait(params)

    await client.start_io(sys.executable, "-m", "pipec", "lsp", cwd=str(root))
    finished = False
    try:
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                             root_uri=root.as_uri()))
        client.initialized(types.InitializedParams())
        await scenario(session)
        await client.shutdown_async(None)
        client.exit(None)
        finished = True
    finally:
        if not finished:  # a failed scenario leaves the server running; pygls keeps its process here
            client._server.kill()
        await asyncio.wait_for(client.stop(), TIMEOUT)


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "kernels.cu").write_text(KERNELS)
    (tmp_path / "lib.pipe").write_text(LIB)
    (tmp_path / "main.pipe").write_text(PIPE)
    return tmp_path


def test_the_server_over_stdio(project):
    main = project / "main.pipe"
    uri = main.as_uri()

    async def scenario(s: Session) -> None:
        c = s.client
        c.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "pipe", 1, PIPE)))
        found = await s.findings(uri)
        assert [(d.code, d.range.start.line, d.range.start.character) for d in found] == [("PC103", 7, 53)]
        assert "undefined" in found[0].message and "`N`" in found[0].message
        # the quick fix is the similar name
        actions = await c.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(uri), found[0].range, types.CodeActionContext(found)))
        assert [a.title for a in actions] == ["Change to `N`"]
        edit = actions[0].edit.changes[uri][0]
        assert edit.new_text == "N" and edit.range == found[0].range
        # the text as it is edited: fixed, the findings go
        fixed = PIPE.replace("NN)", "N)")
        c.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri), [types.TextDocumentContentChangeWholeDocument(fixed)]))
        assert not await s.findings(uri)

        hover = await c.text_document_hover_async(types.HoverParams(**s.at(uri, 7, 12)))
        assert "void scale(const float* x, float* y, float a, int n)" in hover.contents.value
        assert "/// pipec: extent x = n" in hover.contents.value and "/// pipec: out y" in hover.contents.value
        hover = await c.text_document_hover_async(types.HoverParams(**s.at(uri, 3, 8)))
        assert "buffer x: f32[1024]" in hover.contents.value and "device memory" in hover.contents.value
        assert "uniform(-1.0, 1.0), seed 1" in hover.contents.value
        hover = await c.text_document_hover_async(types.HoverParams(**s.at(uri, 3, 15)))
        assert "const N = 1024" in hover.contents.value

        where = await c.text_document_definition_async(types.DefinitionParams(**s.at(uri, 7, 12)))
        assert where.uri == (project / "kernels.cu").as_uri() and where.range.start.line == 3
        where = await c.text_document_definition_async(types.DefinitionParams(**s.at(uri, 3, 15)))
        assert where.uri == (project / "lib.pipe").as_uri() and where.range.start == types.Position(0, 6)
        where = await c.text_document_definition_async(types.DefinitionParams(**s.at(uri, 0, 8)))
        assert where.uri == (project / "kernels.cu").as_uri()

        symbols = await c.text_document_document_symbol_async(
            types.DocumentSymbolParams(types.TextDocumentIdentifier(uri)))
        assert [(x.name, x.kind) for x in symbols] == [
            ("kernels.cu", types.SymbolKind.Module), ("lib.pipe", types.SymbolKind.Module),
            ("x", types.SymbolKind.Array), ("y", types.SymbolKind.Array), ("step", types.SymbolKind.Function)]

        # a kernel source changed on disk: the pipeline that imports it is checked again
        (project / "kernels.cu").write_text(KERNELS.replace("void scale(", "void scale2("))
        c.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent((project / "kernels.cu").as_uri(), types.FileChangeType.Changed)]))
        assert [d.code for d in await s.findings(uri)] == ["PC106"]  # no kernel `scale` any more

    asyncio.run(_session(project, scenario))


# (the step's launch as written, the code of its one finding, the quick fix's title, the launch
# after the fix): each finding with one obvious edit, through the real server
FIXES = [
    ("launch scale<<<N / 256, 256>>>(in x)", "PC201", "Bind `y`, `a`, `N`",
     "launch scale<<<N / 256, 256>>>(in x, y, a, N)"),
    ("launch scale<<<N / 256, 256>>>(in x, out y, 0.5, N, N, 7)", "PC201", "Remove the extra arguments",
     "launch scale<<<N / 256, 256>>>(in x, out y, 0.5, N)"),
    ("launch scale<<<N / 256, 256>>>(in x, in y, 0.5, N)", "PC318", "Bind `y` as `inout`",
     "launch scale<<<N / 256, 256>>>(in x, inout y, 0.5, N)"),
    ("launch scale<<<N / 256, 256>>>(out x, out y, 0.5, N)", "PC205", "Drop `out`",
     "launch scale<<<N / 256, 256>>>(x, out y, 0.5, N)"),
    ("launch scale<<<N / 256, 256>>>(in x, out y, 0.5, 7.0)", "PC204", None, None),
    ("launch scael<<<N / 256, 256>>>(in x, out y, 0.5, N)", "PC103", "Change to `scale`",
     "launch scale<<<N / 256, 256>>>(in x, out y, 0.5, N)"),
    ("launch scale<<<N / 256, 256>>>(in xx, out y, 0.5, N)", "PC103", "Change to `x`",
     "launch scale<<<N / 256, 256>>>(in x, out y, 0.5, N)"),
]


def _apply(text: str, edits) -> str:
    """The text with the edits (ranges of one line, as the fixes here make) applied, last first."""
    lines = text.split("\n")
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        assert e.range.start.line == e.range.end.line
        line = lines[e.range.start.line]
        lines[e.range.start.line] = line[:e.range.start.character] + e.new_text + line[e.range.end.character:]
    return "\n".join(lines)


def test_quick_fixes_over_stdio(project):
    uri = (project / "main.pipe").as_uri()
    launch = "launch scale<<<N / 256, 256>>>(in x, out y, 0.5, NN)"

    async def scenario(s: Session) -> None:
        c = s.client
        c.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "pipe", 1, PIPE)))
        await s.findings(uri)
        for version, (written, code, title, fixed) in enumerate(FIXES, start=2):
            text = PIPE.replace(launch, written)
            c.text_document_did_change(types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(text)]))
            found = await s.findings(uri)
            assert [d.code for d in found] == [code], (written, [d.message for d in found])
            actions = await c.text_document_code_action_async(types.CodeActionParams(
                types.TextDocumentIdentifier(uri), found[0].range, types.CodeActionContext(found)))
            assert [a.title for a in actions] == ([title] if title else []), written
            if title:
                assert _apply(text, actions[0].edit.changes[uri]) == PIPE.replace(launch, fixed)

    asyncio.run(_session(project, scenario))


def _labels(items) -> list[str]:
    return [item.label for item in items.items]


def test_completion(project):
    uri = (project / "main.pipe").as_uri()
    text = PIPE.replace("NN)", "N)") + 'from "kernels.cu" import \nstep2\n'

    async def scenario(s: Session) -> None:
        c = s.client
        c.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "pipe", 1, PIPE)))
        await s.findings(uri)
        c.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri), [types.TextDocumentContentChangeWholeDocument(text)]))
        await s.findings(uri)
        kernels = await c.text_document_completion_async(types.CompletionParams(**s.at(uri, 9, 25)))
        assert _labels(kernels) == ["scale"]
        anything = _labels(await c.text_document_completion_async(types.CompletionParams(**s.at(uri, 10, 0))))
        assert {"launch", "gemm", "buffer", "inout", "x", "y", "N", "scale"} <= set(anything)

    asyncio.run(_session(project, scenario))


def test_word_lists_of_completion(project):
    from pipec.compiler.lsp.features import completions
    from pipec.compiler.lsp.index import check_document

    index = check_document(project / "main.pipe", PIPE)
    assert [c.label for c in completions(index, "    gemm c = a @ b with ")] == [
        "activation", "gradient", "compute", "aux", "bias_grad"]
    assert [c.label for c in completions(index, "    gemm c = a @ b with activation = ")] == ["none", "relu", "gelu"]
    assert [c.label for c in completions(index, "option ")] == ["lanes", "copy", "share_modules", "gemm_workspace", "pdl"]
    assert "bf16" in [c.label for c in completions(index, "buffer z: ")]


def test_without_pygls_the_command_names_the_extra(monkeypatch, capsys):
    import builtins

    from pipec.compiler.cli import main

    real = builtins.__import__

    def no_pygls(name, *args, **kwargs):
        if name.startswith(("pygls", "lsprotocol")):
            raise ImportError(f"No module named {name!r}", name=name)
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "pipec.compiler.lsp.server", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_pygls)
    assert main(["lsp"]) == 2
    assert "install it with `pip install 'pipec[lsp]'`" in capsys.readouterr().err


def test_a_broken_configuration_is_one_message(project):
    (project / "pyproject.toml").write_text("[tool.pipec]\ncolour = 1\n")
    uri = (project / "main.pipe").as_uri()

    async def scenario(s: Session) -> None:
        shown: asyncio.Queue = asyncio.Queue()
        s.client.feature(types.WINDOW_SHOW_MESSAGE)(lambda ls, params: shown.put_nowait(params))
        s.client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "pipe", 1, PIPE)))
        message = await asyncio.wait_for(shown.get(), TIMEOUT)
        assert message.type == types.MessageType.Error
        assert message.message.startswith("pipec: ") and "unknown key in [tool.pipec]: colour" in message.message

    asyncio.run(_session(project, scenario))
