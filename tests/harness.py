"""Fixture files carry their expected diagnostics inline: `# error: [PC302]` on the line the
diagnostic points at, or `# error: [PC305] kernels.cu:14` for one that points into another
file (a kernel source). The harness compares the set of expected (file, line, code) with what
the compiler reports, so a missing and an extra diagnostic both fail."""

from __future__ import annotations

import re
from pathlib import Path

from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override

_EXPECTATION = re.compile(r"#\s*(?:error|warning):\s*\[([A-Z0-9, ]+)\](?:\s+([\w./-]+):(\d+))?")


def expected_diagnostics(path: Path) -> set[tuple[str, int, str]]:
    found = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for match in _EXPECTATION.finditer(line):
            file, at = (match.group(2), int(match.group(3))) if match.group(2) else (path.name, number)
            for code in match.group(1).split(","):
                found.add((file, at, code.strip()))
    return found


def compile_fixture(path: Path, **settings):
    result = compile_file(path, override(load_settings(path), **settings))
    actual = {(Path(d.span.source.path).name, d.span.line, d.code) for d in result.diagnostics}
    return actual, result


# Rules checked when a pipeline is loaded, against the device: their fixtures are loaded on
# the fake CUDA driver describing a small device.
LOAD_TIME_RULES = {"PC316"}


def load_fixture(path: Path):
    from fake_cuda import SMALL_DEVICE, fake_driver
    from pipec import load
    from pipec.runtime import Backends, PipelineError

    result = compile_fixture(path)[1]
    try:
        load(path, backends=Backends(fake_driver(path, **SMALL_DEVICE))).close()
    except PipelineError as error:
        result.diagnostics += [d for d in error.diagnostics if d.code in LOAD_TIME_RULES]
    actual = {(Path(d.span.source.path).name, d.span.line, d.code) for d in result.diagnostics}
    return actual, result


def explain(actual, expected, result) -> str:
    lines = ["diagnostics differ from the fixture's expectations"]
    lines += [f"  unexpected: {a}" for a in sorted(actual - expected)]
    lines += [f"  missing:    {e}" for e in sorted(expected - actual)]
    lines += [f"  reported:   {d.span.location()} {d.code} {d.message}" for d in result.diagnostics]
    return "\n".join(lines)
