"""What `pipec` and `piperun` share about the terminal: when to colour, one-line messages on
stderr, and stdout that a reader closing the pipe (`pipec ... | head -1`) ends quietly."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from ..errors import Error

from ..compiler.render.safe import visible
from ..compiler.render.text import Paint

COLOR_CHOICES = ("auto", "always", "never")


def use_color(choice: str, stream) -> bool:
    """`--color always|never` wins; under `auto`, a non-empty NO_COLOR (no-color.org) turns colour
    off, then a non-empty FORCE_COLOR (force-color.org) turns it on, else only a terminal gets it.
    NO_COLOR before FORCE_COLOR is CPython's order, so both tools agree with the interpreter."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return stream.isatty()


def say(prog: str, label: str, message: str, *, color: bool) -> None:
    """One line on stderr: `pipec: error: ...` (label `error`) or `pipec: hint: ...`. The message
    may quote a file name or a file's text, so it is shown through `visible`."""
    style = "error" if label == "error" else "help"
    sys.stderr.write(f"{prog}: {Paint(color)(style, label + ':')} {visible(message)}\n")


class OutputError(Error):
    """Standard output cannot be written: a full disk, an I/O error (a reader that closed the
    pipe is none: the output is then dropped quietly)."""


def write_stdout(text: str) -> None:
    """Write and flush now, so a closed pipe or a full disk surfaces here rather than at the
    interpreter's exit (raises OutputError)."""
    with stdout_failures():
        sys.stdout.write(text)
        sys.stdout.flush()


def finish_stdout() -> None:
    """Flush what print() left buffered; call once before exiting (raises OutputError)."""
    with stdout_failures():
        sys.stdout.flush()


@contextlib.contextmanager
def stdout_failures(quiet_broken_pipe: bool = True) -> Iterator[None]:
    """Writes to stdout inside the block: a closed pipe drops the output (or, unless
    `quiet_broken_pipe`, raises BrokenPipeError for the caller to stop at), any other failure
    raises OutputError."""
    try:
        yield
    except BrokenPipeError:
        if not quiet_broken_pipe:
            raise
        _drop_stdout()
    except OSError as error:
        _drop_stdout()  # what is still buffered must not fail again at the interpreter's exit
        raise OutputError(f"cannot write to standard output: {error.strerror or error}") from None


def _drop_stdout() -> None:
    # The reader is gone: later writes and the final flush go to /dev/null instead of raising
    # (Python's own recipe for SIGPIPE, docs.python.org/3/library/signal.html#note-on-sigpipe).
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
