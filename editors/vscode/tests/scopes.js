// The TextMate grammar's tokens of each file named, as VS Code computes them (vscode-textmate
// with the Oniguruma engine): a JSON object by file of [line, start, end, scopes] lists, lines
// from 0, columns in UTF-16 units. tests/test_highlighting.py compares them with the Pygments
// lexer's tokens (`node tests/scopes.js FILE...`, after `npm ci`).
"use strict";

const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const GRAMMAR = path.join(__dirname, "..", "syntaxes", "pipe.tmLanguage.json");

async function grammar() {
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (text) => new oniguruma.OnigString(text),
    }),
    loadGrammar: async (scope) =>
      scope === "source.pipe" ? vsctm.parseRawGrammar(fs.readFileSync(GRAMMAR, "utf8"), GRAMMAR) : null,
  });
  return registry.loadGrammar("source.pipe");
}

function tokens(tm, text) {
  const found = [];
  let stack = vsctm.INITIAL;
  text.split("\n").forEach((line, number) => {
    const result = tm.tokenizeLine(line, stack);
    for (const token of result.tokens) {
      found.push([number, token.startIndex, Math.min(token.endIndex, line.length), token.scopes]);
    }
    stack = result.ruleStack;
  });
  return found;
}

grammar().then((tm) => {
  const out = {};
  for (const file of process.argv.slice(2)) {
    out[file] = tokens(tm, fs.readFileSync(file, "utf8"));
  }
  process.stdout.write(JSON.stringify(out));
}).catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
