"""The `.pipe` language: source files, the grammar, and the syntax tree.

`parse(source)` turns a `SourceFile` into an `ast.Module` or raises `PipeSyntaxError`.
"""

from . import ast
from .errors import PipeSyntaxError
from .parser import parse, parse_expression
from .source import SourceFile, Span

__all__ = ["PipeSyntaxError", "SourceFile", "Span", "ast", "parse", "parse_expression"]
