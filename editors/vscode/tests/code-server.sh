#!/usr/bin/env sh
# Installs VS Code as code-server (coder/code-server from npm: VS Code's own server and workbench,
# with the Node extension host a desktop VS Code has) into DIR, default editors/vscode/.code-server,
# for tests/test_vscode.py, which runs the extension in it against `pipec lsp`.
#
# Why code-server: @vscode/test-electron downloads VS Code from update.code.visualstudio.com and
# Debian packages no VS Code; where only npm, PyPI and Debian are reachable, code-server's npm
# package is the VS Code there is. Its native modules are built against the system's Node.js
# (node-gyp with /usr/include/node), which needs, on Debian:
#     apt-get install -y build-essential pkg-config python3 libkrb5-dev libx11-dev libxkbfile-dev \
#         libsecret-1-dev ripgrep chromium
# and @vscode/ripgrep, which downloads ripgrep from GitHub, is given Debian's `rg` instead, in the
# cache its installer looks in first. Node.js 20 (code-server 4.99 needs that major).
set -eu

VERSION=4.99.4          # VS Code 1.99.3
RIPGREP_PACKAGE=1.15.11 # the @vscode/ripgrep code-server's VS Code pins, and the asset it expects
RIPGREP_ASSET=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz

here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/.code-server}

rg=$(command -v rg) || { echo "code-server.sh: ripgrep is not installed (apt-get install -y ripgrep)" >&2; exit 1; }
cache="${TMPDIR:-/tmp}/vscode-ripgrep-cache-$RIPGREP_PACKAGE"
if [ ! -f "$cache/$RIPGREP_ASSET" ]; then
    staging=$(mktemp -d)
    cp "$rg" "$staging/rg"
    mkdir -p "$cache"
    tar czf "$cache/$RIPGREP_ASSET" -C "$staging" rg
    rm -rf "$staging"
fi

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"private": true}' > package.json
# --unsafe-perm: code-server's postinstall refuses to run as root without it; npm_config_yes:
# node-pty's post-install script runs `npx node-gyp`, which would otherwise ask
npm_config_yes=true npm install --unsafe-perm --no-audit --no-fund --loglevel=error "code-server@$VERSION"
"$dir/node_modules/.bin/code-server" --version
