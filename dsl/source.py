"""Source files and spans.

A span is a pair of character offsets into one source file; line and column numbers are only
computed when a diagnostic is rendered (1-based, columns counted in code points).
"""

from __future__ import annotations

import bisect
import errno
import os
import re
import stat
from array import array
from dataclasses import dataclass, field
from pathlib import Path

# The most of any file pipec reads (kernel sources are read for diagnostics' spans too): a
# runaway input (`/dev/zero`, a log file) costs no more memory than this.
MAX_READ_BYTES = 4 << 20


def real_path(path: Path) -> Path:
    """The absolute path with every symbolic link followed, like `Path.resolve()`, except that
    a loop of links is kept as the path it reached instead of raising RuntimeError (Python 3.11
    and 3.12): opening it then fails with ELOOP, an OSError, which every reader reports."""
    return Path(os.path.realpath(path))


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def open_regular(path: Path):
    """`path` opened for reading in binary, when it is a regular file. Anything else (a FIFO
    would block the read until a writer came, forever in CI; a device never ends) raises
    OSError without being opened; the second check, on the open file, catches a file swapped
    for one in between, and the open itself never blocks."""
    _refuse_irregular(os.stat(path).st_mode, path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _refuse_irregular(os.fstat(fd).st_mode, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _refuse_irregular(mode: int, path: Path) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise OSError(errno.EINVAL, f"it is {kind}, not a regular file; pipec reads only regular files", str(path))


@dataclass(frozen=True)
class ReadProblem:
    """Why a file's text is not all of the file (it is too large, or not UTF-8), for the
    parser to report: `offset` is where in the text it starts; `limit` tells a resource limit
    from bad bytes."""

    message: str
    offset: int
    hint: str
    limit: bool


@dataclass(eq=False)
class SourceFile:
    path: Path
    text: str
    problem: ReadProblem | None = None
    _line_starts: array = field(init=False, repr=False)
    # (working directory, display path) of the last call: the plan asks once per node
    _display: tuple[str, str] = field(init=False, repr=False, default=("", ""))

    def __post_init__(self) -> None:
        # An array, not a list of ints: a file of empty lines costs 8 bytes a line.
        self._line_starts = array("q", [0])
        self._line_starts.extend(m.end() for m in re.finditer("\n", self.text))

    def __repr__(self) -> str:
        return f"SourceFile({str(self.path)!r})"

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        """The file as text: UTF-8 without a byte-order mark, line ends as `\\n`. At most
        MAX_READ_BYTES are read: a longer file has no text. Bad bytes in a file that is not
        UTF-8 are replaced. Either problem is recorded in `problem`. Raises OSError when the
        file cannot be opened or is not a regular file."""
        with open_regular(path) as file:
            return cls.from_bytes(path, file.read(MAX_READ_BYTES + 1))

    @classmethod
    def from_bytes(cls, path: Path, data: bytes) -> SourceFile:
        """The text of `data`, read from `path` (a file, or stdin standing for it), as `read`
        makes it; more than MAX_READ_BYTES is a recorded problem."""
        if len(data) > MAX_READ_BYTES:
            return cls(path, "", ReadProblem(
                f"the file is larger than {MAX_READ_BYTES >> 20} MiB, the most pipec reads",
                0, "split it into files that import each other", limit=True))
        try:
            return cls(path, _text(data.decode("utf-8")))
        except UnicodeDecodeError as error:
            problem = ReadProblem(
                f"the file is not UTF-8 text: byte 0x{data[error.start]:02x} cannot be decoded",
                len(_text(data[: error.start].decode("utf-8"))), "save the file as UTF-8", limit=False)
            return cls(path, _text(data.decode("utf-8", errors="replace")), problem)

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
        """The path relative to the working directory when it lies inside it."""
        cwd = os.getcwd()
        if self._display[0] != cwd:
            try:
                shown = str(real_path(self.path).relative_to(real_path(Path(cwd))))
            except ValueError:
                shown = str(self.path)
            self._display = (cwd, shown)
        return self._display[1]


def _text(decoded: str) -> str:
    """Decoded file content as the parser sees it: no byte-order mark, universal newlines
    (what `Path.read_text` gives)."""
    return decoded.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


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
