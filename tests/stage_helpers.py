"""Compiling small programs written inline in tests, against tests/fixtures/stage_kernels.cu."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from dataclasses import replace

from pipec.compiler import Settings, compile_file
from pipec.compiler.codes import EXAMPLES
from pipec.compiler.config import CompileOptions

KERNELS = Path(__file__).parent / "fixtures" / "stage_kernels.cu"
# the programs import the test kernels, the rule examples' kernels and kernel sources tests
# write to temporary folders: all outside the temporary project a program is compiled in
ALLOWED = (KERNELS.parent.resolve(), EXAMPLES.resolve(), Path(tempfile.gettempdir()).resolve())


def check_text(body: str, *, header: str | None = None, settings: Settings | None = None):
    """Compile `body` (dedented) after an import of every test kernel; returns the Compilation."""
    header = header if header is not None else f'from "{KERNELS}" import writer, copier, reader\n'
    folder = Path(tempfile.mkdtemp(prefix="pipec-test-"))
    path = folder / "t.pipe"
    path.write_text(header + textwrap.dedent(body))
    settings = settings or Settings(CompileOptions())
    return compile_file(path, replace(settings, compile=replace(settings.compile, allow_paths=ALLOWED)))
