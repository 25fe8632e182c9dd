// The VS Code side of pipec's language server: it starts `pipec lsp` (the setting
// `pipec.server.command`) in the user's environment and talks to it over stdio. Highlighting
// needs none of this: it is the grammar in syntaxes/.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("pipec").get("server.command");
  const server = { command, args, transport: TransportKind.stdio };
  client = new LanguageClient("pipec", "pipec", { run: server, debug: server }, {
    documentSelector: [{ language: "pipe" }],
    // a kernel source or an imported pipeline changed on disk: the server re-checks what reads it
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*.{pipe,cu,cuh}") },
  });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
