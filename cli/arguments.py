"""What `pipec` and `piperun` parse alike: usage errors as one line, `--version`, `-D NAME=EXPR`,
the colour options, and the kernel compiler checked before any file is read."""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

from .._version import __version__
from ..compiler.config import CompileOptions
from ..compiler.toolchain import ToolchainUnavailable, get_toolchain
from ..errors import Error
from .exits import EXIT_OK, EXIT_USAGE
from .terminal import COLOR_CHOICES, finish_stdout, say, use_color, write_stdout


class UsageError(Error):
    """A mistake on the command line or in what it names; exit 2 with this one line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (the usage itself is one `--help` away)."""

    def _print_message(self, message: str, file=None) -> None:
        if message and file in (None, sys.stdout):  # `--help` on a full disk is an OutputError
            write_stdout(message)
        elif message:
            super()._print_message(message, file)

    def error(self, message: str) -> NoReturn:
        say(self.prog, "error", f"{message} (see `{self.prog} --help`)", color=use_color("auto", sys.stderr))
        self.exit(EXIT_USAGE)


class ShowVersion(argparse.Action):
    """`--version`: the tool's version and the NVRTC it would compile with."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and the NVRTC in use")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        write_stdout(f"{parser.prog} {__version__} ({describe_nvrtc()})\n")
        finish_stdout()
        parser.exit(EXIT_OK)


def describe_nvrtc() -> str:
    nvrtc = get_toolchain("nvrtc")
    try:
        return f"NVRTC {nvrtc.version.removeprefix('nvrtc-')} from {nvrtc.library_path}"
    except ToolchainUnavailable:
        return "NVRTC not found"


def define(text: str) -> tuple[str, str]:
    """`-D NAME=EXPR` as (NAME, EXPR)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier() or not value.strip():
        raise argparse.ArgumentTypeError(f"`{text}` is not NAME=EXPR")
    return name.strip(), value.strip()


def add_color_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                   help="colour: auto (a terminal, unless NO_COLOR; or FORCE_COLOR), always or never")
    p.add_argument("--no-color", action="store_const", const="never", dest="color",
                   help="the same as --color never")


def check_toolchain(options: CompileOptions) -> None:
    """Load the kernel compiler before any file is read, so a missing one is one error, and an
    architecture NVRTC cannot target is a usage error that lists the ones it can."""
    toolchain = get_toolchain(options.compiler)
    version = toolchain.version  # loads NVRTC or runs `nvcc --version`: a missing one fails here
    if options.compiler != "nvrtc":
        return
    supported = toolchain.supported_archs
    match = re.fullmatch(r"(sm_\d+)[af]?", options.arch)
    if match is None or match.group(1) not in supported:
        raise UsageError(f"architecture `{options.arch}` is not supported by NVRTC "
                         f"{version.removeprefix('nvrtc-')}; it supports {', '.join(supported)}")
