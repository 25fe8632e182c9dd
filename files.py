"""Outputs written whole or not at all: reports, plans, DOT files, traces, plots, saved states.

Each output is written to a temporary file in the folder of its target, then renamed over the
target: a full disk, a crash or an interrupt leaves the previous file (or none), never a
truncated one that a later step would read as the real thing. A leaf module, like errors.py."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A fresh path to write the output to (it keeps the target's suffix, for writers that
    choose a format by it); when the block ends without an exception it replaces `path` in one
    rename, otherwise it is removed. A target that exists and is no regular file (`/dev/stdout`,
    a named pipe) cannot be renamed over: the block writes to it directly."""
    try:
        special = not stat.S_ISREG(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        special = False
    if special:
        yield path
        return
    temporary = _create_beside(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, data: str | bytes | Iterable[str]) -> None:
    """`data` (text as UTF-8, or text in pieces, each written as it comes, so that a large
    output is never held whole) as the whole content of `path`; raises OSError, with `path`
    as it was."""
    with replacing(path) as temporary, temporary.open("wb") as file:
        for piece in (data,) if isinstance(data, (str, bytes)) else data:
            file.write(piece.encode("utf-8") if isinstance(piece, str) else piece)


def _create_beside(path: Path) -> Path:
    """A new empty file next to `path`, created with the permissions a plain `open` would give
    it (the umask's), unlike `tempfile.mkstemp`'s owner-only ones."""
    while True:
        candidate = path.with_name(f".{secrets.token_hex(4)}.{path.name}")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return candidate
        except FileExistsError:
            continue
