"""Text from the user made safe to print: control characters and bidi overrides escaped, and
long source lines clipped around the span they show.

A `.pipe` file, a kernel source or a file name can hold terminal escape sequences (which
recolour, retitle or clear a terminal) and bidi overrides (the "Trojan Source" characters,
which make a line read differently from what the compiler sees). The renderers for people
(text, concise, GitHub annotations, one-line messages on stderr) show them as `\\x1b` or
`\\u202e` instead; the data formats (JSON, SARIF) keep the exact text, which the json module
already escapes."""

from __future__ import annotations

import re
from dataclasses import dataclass

TAB_WIDTH = 4
# The most columns of a source line a snippet shows: a 262,144-character line stays readable.
LINE_WIDTH = 120
ELLIPSIS = "…"

# C0 but tab, DEL, C1, and the bidi embeddings, overrides and isolates (U+202A-E, U+2066-9).
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every unsafe character written as its escape, for one line of output."""
    return _UNSAFE.sub(lambda m: _escape(m.group()), text)


@dataclass(frozen=True)
class Excerpt:
    """One source line as a snippet shows it, and where the marked span sits in it (display
    columns from 0; `width` at least 1)."""

    text: str
    start: int
    width: int


def excerpt(line: str, start: int, end: int) -> Excerpt:
    """The part of `line` a snippet shows for the characters `start:end` of it: unsafe
    characters escaped, tabs expanded, and at most LINE_WIDTH columns around the span, with
    ELLIPSIS where the line is cut."""
    end = max(end, start)
    # Every character shows as at least one column, so no more than LINE_WIDTH characters on
    # either side of the span's start can be seen: a long line costs no more than this.
    first = max(0, start - LINE_WIDTH)
    last = min(len(line), start + LINE_WIDTH)
    pieces, columns = [], [0]
    for char in line[first:last]:
        if char == "\t":
            # Tab stops count from the first character examined (the line's start unless the
            # line is long); the caret is placed by the same columns, so it lines up.
            piece = " " * (TAB_WIDTH - columns[-1] % TAB_WIDTH)
        else:
            piece = _escape(char) if _UNSAFE.match(char) else char
        pieces.append(piece)
        columns.append(columns[-1] + len(piece))
    span_start = columns[min(start, last) - first]
    span_end = columns[min(end, last) - first]
    total = columns[-1]
    if first == 0 and last == len(line) and total <= LINE_WIDTH:
        return Excerpt("".join(pieces), span_start, max(1, span_end - span_start))
    window = LINE_WIDTH - 2 * len(ELLIPSIS)
    span_width = span_end - span_start
    left = span_start - (window - span_width) // 2 if span_width < window else span_start - 8
    left = max(0, min(left, total - window))
    shown = [i for i in range(len(pieces)) if columns[i] >= left and columns[i + 1] <= left + window]
    lo, hi = (shown[0], shown[-1] + 1) if shown else (0, 0)
    prefix = ELLIPSIS if first + lo > 0 else ""
    suffix = ELLIPSIS if first + hi < len(line) else ""
    offset = len(prefix) - columns[lo]
    return Excerpt(prefix + "".join(pieces[lo:hi]) + suffix, span_start + offset,
                   max(1, min(span_end, columns[hi]) - span_start))
