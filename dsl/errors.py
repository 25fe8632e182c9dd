"""What the parser raises: a syntax error, or an input beyond the limits the compiler reads."""

from __future__ import annotations

from ..errors import Error
from .source import Span

# The longest text parsed at once. Parsing costs about 15 microseconds and a kilobyte per token
# (lark), so a file of this size, some 20 times the DQN pipeline, is checked within seconds
# even when it is one long expression.
MAX_PIPE_CHARS = 256 << 10

# The largest integer magnitude, as a power of two: far beyond any size or count, and within
# the range of a float (2**1024), so that mixed arithmetic and range checks never overflow.
MAX_INT_BITS = 1000
# How deep blocks and expressions may nest. Later stages walk the tree recursively, about two
# Python frames per level, so this keeps them well inside Python's default recursion limit.
MAX_NESTING = 200


class PipeSyntaxError(Error):
    """The text is not a `.pipe` program; `code` is the rule that reports it."""

    code = "PC101"

    def __init__(self, message: str, span: Span, hint: str | None = None, replacement: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint
        self.replacement = replacement  # the text the span should hold, where that is certain (`>>>`)


class InputLimitError(PipeSyntaxError):
    """The text may be a program, but larger or deeper than the compiler reads."""

    code = "PC112"
