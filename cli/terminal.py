"""What `pipec` and `piperun` share about the terminal: when to colour, one-line messages on
stderr, and stdout that a reader closing the pipe (`pipec ... | head -1`) ends quietly."""

from __future__ import annotations

import os
import sys

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


def write_stdout(text: str) -> None:
    """Write and flush now, so a closed pipe surfaces here rather than at the interpreter's exit."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()


def finish_stdout() -> None:
    """Flush what print() left buffered; call once before exiting."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()


def _drop_stdout() -> None:
    # The reader is gone: later writes and the final flush go to /dev/null instead of raising
    # (Python's own recipe for SIGPIPE, docs.python.org/3/library/signal.html#note-on-sigpipe).
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
