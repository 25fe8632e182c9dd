"""The VS Code extension (editors/vscode) run inside VS Code against `pipec lsp`: VS Code 1.99
as code-server, its workbench in headless Chromium, opens a pipeline with a mistake; the
extension activates on the `.pipe` file, starts the server command of its setting, and the
finding comes back to VS Code, which asks for its quick fix. The server is started through a
wrapper that logs what passes both ways, which the test reads.

Needs code-server (`editors/vscode/tests/code-server.sh`, or its executable in
$PIPEC_CODE_SERVER), Chromium, and `npm ci` in editors/vscode; skipped, saying which is missing,
without them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the lsp extra (pygls) is not installed: pip install 'pipec[lsp]'")

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
KERNEL = '''/// pipec: extent x = n
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
'''
PIPE = '''from "kernels.cu" import scale

const N = 1024
buffer x: f32[N] = uniform(-1.0, 1.0, seed=1)
buffer y: f32[N] = uninit

step {
    launch scale<<<N / 256, 256>>>(in x, out y, 0.5, NN)
}
'''
TIMEOUT_S = 120


def _code_server() -> Path | None:
    given = os.environ.get("PIPEC_CODE_SERVER")
    found = Path(given) if given else VSCODE / ".code-server" / "node_modules" / ".bin" / "code-server"
    return found if found.is_file() else None


def _missing() -> str | None:
    if _code_server() is None:
        return "no code-server: run editors/vscode/tests/code-server.sh (or set PIPEC_CODE_SERVER)"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "Chromium is not installed (apt-get install -y chromium)"
    if not (VSCODE / "node_modules" / "vscode-languageclient").is_dir():
        return "editors/vscode has no node_modules: run `npm ci` there"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _messages(path: Path) -> list[dict]:
    """The JSON-RPC messages of an LSP stream (Content-Length framed) written so far."""
    data = path.read_bytes() if path.exists() else b""
    found = []
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            return found
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        if len(rest) < length:
            return found
        found.append(json.loads(rest[:length]))
        data = rest[length:]


def _start(command: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_the_extension_in_vs_code_starts_the_server_and_shows_its_findings(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.cu").write_text(KERNEL)
    (project / "main.pipe").write_text(PIPE)
    (project / "pyproject.toml").write_text("[tool.pipec]\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    server = tmp_path / "server.sh"  # `pipec lsp`, with what passes both ways logged
    server.write_text(f'#!/bin/sh\necho "$@" > {logs}/started\n'
                      f'tee {logs}/to-server | {sys.executable} -m pipec lsp "$@" | tee {logs}/from-server\n')
    server.chmod(0o755)
    user = tmp_path / "user-data"
    (user / "User").mkdir(parents=True)
    (user / "User" / "settings.json").write_text(json.dumps({
        "pipec.server.command": [str(server)], "security.workspace.trust.enabled": False,
        "workbench.startupEditor": "none", "telemetry.telemetryLevel": "off"}))
    extensions = tmp_path / "extensions"
    extensions.mkdir()
    (extensions / "pipec.pipe-language-0.1.0").symlink_to(VSCODE)

    port = _free_port()
    vscode = _start([str(_code_server()), "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
                     "--user-data-dir", str(user), "--extensions-dir", str(extensions),
                     "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust"],
                    logs / "code-server", env=dict(os.environ))  # the server inherits this Python's pipec
    main = project / "main.pipe"
    # open main.pipe with the cursor on the mistake (line 8, column 54): VS Code then asks for
    # the code actions there, passing the findings it holds at that place
    payload = json.dumps([["openFile", f"vscode-remote://127.0.0.1:{port}{main}:8:54"], ["gotoLineMode", "true"]])
    url = f"http://127.0.0.1:{port}/?folder={urllib.parse.quote(str(project))}&payload={urllib.parse.quote(payload)}"
    browser = None
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while "HTTP server listening" not in (logs / "code-server").read_text():
            assert vscode.poll() is None and time.monotonic() < deadline, (logs / "code-server").read_text()
            time.sleep(0.5)
        browser = _start([shutil.which("chromium") or shutil.which("chromium-browser"), "--headless=new",
                          "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'chromium'}", url],
                         logs / "chromium")
        asked_for_fixes = []
        while not asked_for_fixes:
            assert time.monotonic() < deadline, "VS Code asked for no quick fix of the finding in time:\n" + \
                (logs / "code-server").read_text()[-3000:]
            time.sleep(1)
            asked_for_fixes = [m for m in _messages(logs / "to-server") if m.get("method") == "textDocument/codeAction"
                               and m["params"]["context"]["diagnostics"]]
        time.sleep(2)  # the answer
    finally:
        for process in (browser, vscode):
            if process is not None:
                _stop(process)

    # the extension started the command of its setting, over stdio (vscode-languageclient's --stdio)
    assert (logs / "started").read_text().split() == ["--stdio"]
    sent = _messages(logs / "to-server")
    initialize = next(m for m in sent if m.get("method") == "initialize")
    assert initialize["params"]["clientInfo"]["name"] == "code-server"
    opened = next(m for m in sent if m.get("method") == "textDocument/didOpen")["params"]["textDocument"]
    assert opened["uri"] == main.as_uri() and opened["languageId"] == "pipe" and opened["text"] == PIPE
    # the finding, published to VS Code; VS Code holds it and asks for its fixes
    answered = _messages(logs / "from-server")
    published = next(m for m in answered if m.get("method") == "textDocument/publishDiagnostics")["params"]
    assert published["uri"] == main.as_uri()
    assert [(d["code"], d["range"]["start"]) for d in published["diagnostics"]] == [
        ("PC103", {"line": 7, "character": 53})]
    request = asked_for_fixes[0]
    assert [d["code"] for d in request["params"]["context"]["diagnostics"]] == ["PC103"]
    reply = next(m for m in answered if m.get("id") == request["id"] and "result" in m)
    assert [action["title"] for action in reply["result"]] == ["Change to `N`"]
