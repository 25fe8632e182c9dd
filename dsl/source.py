"""Source files and spans.

A span is a pair of character offsets into one source file; line and column numbers are only
computed when a diagnostic is rendered (1-based, columns counted in code points).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(eq=False)
class SourceFile:
    path: Path
    text: str
    _line_starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts = [0]
        starts.extend(i + 1 for i, ch in enumerate(self.text) if ch == "\n")
        self._line_starts = starts

    def __repr__(self) -> str:
        return f"SourceFile({str(self.path)!r})"

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        return cls(path, path.read_text(encoding="utf-8"))

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def offset(self, line: int, col: int = 1) -> int:
        """Character offset of a 1-based line and column (clamped to the file)."""
        line = max(1, min(line, len(self._line_starts)))
        start = self._line_starts[line - 1]
        return min(start + max(col, 1) - 1, len(self.text))

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def display_path(self) -> str:
        try:
            return str(self.path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(self.path)


@dataclass(frozen=True, eq=False)
class Span:
    source: SourceFile
    start: int
    end: int

    def __repr__(self) -> str:
        return f"Span({self.location()}, {self.text!r})"

    @property
    def line(self) -> int:
        return self.source.line_col(self.start)[0]

    @property
    def column(self) -> int:
        return self.source.line_col(self.start)[1]

    def end_line_col(self) -> tuple[int, int]:
        return self.source.line_col(max(self.start, self.end))

    @property
    def text(self) -> str:
        return self.source.text[self.start : self.end]

    def location(self) -> str:
        """`path:line:col`, as compilers print it."""
        return f"{self.source.display_path()}:{self.line}:{self.column}"

    def to(self, other: Span) -> Span:
        """The span from the start of this one to the end of `other` (same file)."""
        return Span(self.source, self.start, max(self.end, other.end))

    @classmethod
    def of_line(cls, source: SourceFile, line: int, col: int = 1) -> Span:
        start = source.offset(line, col)
        end = source.offset(line, len(source.line_text(line)) + 1)
        return cls(source, start, max(start, end))
