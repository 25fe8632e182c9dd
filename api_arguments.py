"""The values the Python API takes, checked where it takes them: `pipec.check`, `pipec.load`
and the `Pipeline` methods refuse nonsense (`lanes=0`, `step(-1)`, a path holding a NUL,
`defines={"N": float("inf")}`) with one `ArgumentError` naming the argument, instead of
accepting it or failing later with an internal exception. A wrong type at the call itself (an
unknown keyword, a missing argument) stays Python's TypeError."""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from .compiler import codes
from .dsl.errors import MAX_INT_BITS
from .errors import Error

T = TypeVar("T")


class ArgumentError(Error, ValueError):
    """An argument of the Python API that cannot mean anything: the message names it and
    says what it takes."""


def whole_number(name: str, value: object, minimum: int = 0) -> int:
    """`value` as an int of at least `minimum` (bool is refused: `step(True)` is a mistake)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum:
        raise ArgumentError(f"{name} = {value!r}: expected an integer >= {minimum}")
    return int(value)


def optional_whole_number(name: str, value: object, minimum: int) -> int | None:
    return None if value is None else whole_number(name, value, minimum)


def file_path(name: str, value: object) -> Path:
    """A path argument (str or os.PathLike): not empty, without NUL."""
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentError(f"{name} = {value!r}: expected a path (str or os.PathLike)")
    text = os.fspath(value)
    if isinstance(text, bytes) or not text or "\0" in text:
        raise ArgumentError(f"{name} = {value!r}: expected a path, not empty and without NUL characters")
    return Path(text)


def source_file(name: str, value: object) -> Path:
    """The path of a `.pipe` file to read: one that exists and is no folder."""
    path = file_path(name, value)
    try:
        if path.is_dir():
            raise ArgumentError(f"{name} = {value!r}: a folder, not a .pipe file")
        path.stat()
    except OSError as error:
        raise ArgumentError(f"{name} = {value!r}: cannot read it: {error.strerror or error}") from None
    return path


def folders(name: str, value: object) -> tuple[Path, ...]:
    """A list or tuple of folder paths (one string would be read as a list of letters)."""
    if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, (list, tuple)):
        raise ArgumentError(f"{name} = {value!r}: expected a list or tuple of paths")
    return tuple(file_path(f"{name}[{i}]", item) for i, item in enumerate(value))


def constants(name: str, value: object) -> dict[str, str]:
    """`defines` or update values: constant names to numbers, bools or expression texts (as
    `-D NAME=EXPR` takes them), each as the expression text the compiler reads."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgumentError(f"{name} = {value!r}: expected a mapping of constant names to values, "
                            "such as {\"ENVS\": 1024}")
    return {_constant_name(name, key): constant_text(f"{name}[{key!r}]", item) for key, item in value.items()}


def _constant_name(name: str, key: object) -> str:
    if not isinstance(key, str) or not key.isidentifier():
        raise ArgumentError(f"{name}: key {key!r} is not a constant's name")
    return key


def constant_text(name: str, value: object) -> str:
    """One constant's value as expression text: `true`/`false`, an integer within the
    language's, a finite float (its shortest exact decimal), or an expression text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        if int(value).bit_length() > MAX_INT_BITS:  # the language's integers hold no more
            raise ArgumentError(f"{name}: an integer of {int(value).bit_length()} bits; "
                                f"constants hold integers of up to {MAX_INT_BITS}")
        return str(int(value))
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise ArgumentError(f"{name} = {value!r}: expected a finite number")
        return repr(float(value))
    if isinstance(value, str):
        if not value.strip() or "\0" in value:
            raise ArgumentError(f"{name} = {value!r}: expected an expression, not empty and without NUL")
        return value
    raise ArgumentError(f"{name} = {value!r}: expected a number, a bool or an expression text, "
                        f"not {type(value).__name__}")


def flag(name: str, value: object) -> bool:
    """A yes-or-no argument: a bool, not anything truthy (`unroll="no"`)."""
    if not isinstance(value, bool):
        raise ArgumentError(f"{name} = {value!r}: expected True or False")
    return value


def instance(name: str, value: object, kind: type[T], what: str) -> T | None:
    """`value`, which must be None or a `kind` (`what` says what one is, for the message)."""
    if value is None:
        return None
    if not isinstance(value, kind):
        raise ArgumentError(f"{name} = {value!r}: expected {what}, not {type(value).__name__}")
    return value


def names(name: str, value: object) -> frozenset[str]:
    """A set of names (`drop_nodes`), not one string (which would be a set of letters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (set, frozenset, list, tuple)) \
            or not all(isinstance(item, str) for item in value):
        raise ArgumentError(f"{name} = {value!r}: expected a set of names")
    return frozenset(value)


def codes_of(name: str, value: object) -> tuple[str, ...] | None:
    """A rule selection (`select`, `ignore`): a list of codes, prefixes or names, each matching
    a rule; `select` must name one (an empty selection would check nothing and pass)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ArgumentError(f"{name} = {value!r}: expected a list of rule codes or names, such as [\"PC3\"]")
    if bad := codes.unmatched(list(value)):
        raise ArgumentError(f"{name}: `{bad[0]}` matches no rule code or name (see docs/rules.md)")
    if name == "select" and not value:
        raise ArgumentError("select = []: names no rule, so nothing would be checked; leave it out to check every rule")
    return tuple(value)


def check_arguments(path: object, text: object, *, defines: object, select: object, ignore: object,
                    arch: object, include_dirs: object, lanes: object) -> tuple[Path, dict]:
    """`pipec.check`'s arguments: the file's path, and the settings they change (for
    `compiler.config.override`; None where not given)."""
    if text is None:
        if path is None:
            raise ArgumentError("check: give the path of a .pipe file, or its source as text=")
        file = source_file("path", path)
    elif not isinstance(text, (str, bytes)):
        raise ArgumentError(f"text = {type(text).__name__}: expected the source as str or bytes")
    else:
        file = Path("stdin.pipe") if path is None else file_path("path", path)
    if arch is not None and (not isinstance(arch, str) or not re.fullmatch(r"sm_\d+[af]?", arch)):
        raise ArgumentError(f"arch = {arch!r}: expected an architecture such as \"sm_90\"")
    return file, {
        "defines": tuple(constants("defines", defines).items()) or None,
        "select": codes_of("select", select), "ignore": codes_of("ignore", ignore), "arch": arch,
        "include_dirs": None if include_dirs is None else folders("include_dirs", include_dirs),
        "lanes": optional_whole_number("lanes", lanes, 1),
    }
