"""`pipec lsp`: a language server for `.pipe` files on stdio (docs/editors.md). It needs the
`lsp` extra (pygls); everything it knows comes from the checker, through index.py."""

from __future__ import annotations

from ...cli.arguments import OneLineParser
from ...cli.exits import EXIT_OK, EXIT_USAGE
from ...cli.terminal import say


def parser() -> OneLineParser:
    p = OneLineParser(prog="pipec lsp", description="Serve the Language Server Protocol on stdin and stdout: "
                      "findings as you type, hover, go to definition, completion, symbols, quick fixes.")
    p.add_argument("--stdio", action="store_true", help="talk over stdin and stdout (the default and only way)")
    return p


def main(argv: list[str]) -> int:
    parser().parse_args(argv)
    try:
        from .server import build
    except ImportError as error:
        say("pipec lsp", "error", f"the language server needs pygls ({error.name} is not installed): "
            "install it with `pip install 'pipec[lsp]'`", color=False)
        return EXIT_USAGE
    build().start_io()
    return EXIT_OK
