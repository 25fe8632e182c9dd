"""A Pygments lexer for the `.pipe` language, so that any Pygments-based renderer (MkDocs,
Sphinx, Jupyter, `pygmentize`, most Markdown tools) highlights ```` ```pipe ```` blocks and
`.pipe` files once pipec is installed: pyproject.toml registers it under the `pygments.lexers`
entry point. Only Pygments imports this module, so pipec needs no Pygments of its own.

Its token classes follow the TextMate grammar of editors/vscode rule for rule (keywords,
names, numbers, strings, comments: tests/test_highlighting.py compares the two over every
shipped pipeline); dsl/grammar.lark is the language both follow."""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (
    Comment, Keyword, Name, Number, Operator, Punctuation, String, Whitespace,
)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


class PipeLexer(RegexLexer):
    name = "pipe"
    aliases = ["pipe", "pipec"]
    filenames = ["*.pipe"]
    mimetypes = ["text/x-pipe"]

    tokens = {
        "root": [
            # an element type after `:` (the whitespace is part of the match, as in the grammar)
            (r"(?<=:)(\s*)(f32|f16|bf16|f64|i32|u32|i64|u64|u8|ptr)\b", bygroups(Whitespace, Keyword.Type)),
            (r"\s+", Whitespace),
            (r"#", Comment.Single, "comment"),
            (r'"', String.Double, "string"),
            (rf"\b(const)(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Constant)),
            (rf"\b(buffer)(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Variable)),
            (rf"\b(graph)(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (rf"\b(option)(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Attribute)),
            (rf"\b(waive)(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Label)),
            (r"\b(step|init)(?=\s*\{)", Keyword.Declaration),
            (rf"\b(launch)(\s+)({_NAME})", bygroups(Keyword, Whitespace, Name.Function)),
            (words(("import", "from", "with"), prefix=r"\b", suffix=r"\b"), Keyword.Namespace),
            (words(("for", "in", "if", "else", "parallel", "switch", "case", "every", "while", "repeat"),
                   prefix=r"\b", suffix=r"\b"), Keyword),
            (words(("fill", "copy", "gemm", "allreduce", "broadcast", "allgather", "reducescatter"),
                   prefix=r"\b", suffix=r"\b"), Keyword),
            (words(("out", "inout"), prefix=r"\b", suffix=r"\b"), Keyword),
            (words(("mapped", "replicated", "labels"), prefix=r"\b", suffix=r"\b"), Keyword),
            (words(("and", "or", "not"), prefix=r"\b", suffix=r"\b"), Operator.Word),
            (r"\b0[xX][0-9a-fA-F_]+\b", Number.Hex),
            (r"\b[0-9][0-9_]*(\.[0-9][0-9_]*([eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)\b", Number.Float),
            (r"\b[0-9][0-9_]*\b", Number.Integer),
            (words(("true", "false", "null"), prefix=r"\b", suffix=r"\b"), Keyword.Constant),
            (r"\bstep\b", Name.Builtin.Pseudo),
            (words(("RANK", "WORLD_SIZE", "LOCAL_RANK"), prefix=r"\b", suffix=r"\b"), Name.Builtin),
            (r"<<<|>>>", Punctuation),
            (r"->|\.\.|==|!=|<=|>=|<<|>>|[-+*/%@&|^~<>=]", Operator),
            (rf"{_NAME}(?=\()", Name.Function),
            (_NAME, Name),
            (r"[{}(),.\[\]:;]", Punctuation),
        ],
        "comment": [
            (r"(pipec:)(\s*)(ignore)(\[)([^\]\n]*)(\])",
             bygroups(Comment.Special, Comment.Single, Comment.Special, Comment.Special, Comment.Special,
                      Comment.Special)),
            (r"[^\np]+|p", Comment.Single),
            (r"\n", Whitespace, "#pop"),
        ],
        "string": [
            (r"\\.", String.Escape),
            (r'"', String.Double, "#pop"),
            (r'[^"\\\n]+', String.Double),
            (r"\n", Whitespace, "#pop"),  # the grammar ends an unclosed string at the line's end
        ],
    }
