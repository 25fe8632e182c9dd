"""The command-line kit both front doors share (cli/): one exit-status table for every error
pipec raises, one way to report it, and piperun no longer borrowing pipec's own module."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import pipec
from pipec.cli.exits import EXIT_FAILED, EXIT_USAGE, EXIT_CODES, exit_status, report
from pipec.compiler.diagnostics import Diagnostic
from pipec.dsl.source import SourceFile, Span
from pipec.runtime.load import PipelineError

ROOT = Path(__file__).resolve().parents[1]
RAISED = {**pipec.ERRORS, "PipeSyntaxError": "dsl.errors"}


@pytest.mark.parametrize("name", sorted(RAISED))
def test_every_public_error_has_its_own_row(name):
    cls = getattr(importlib.import_module(f"pipec.{RAISED[name]}"), name)
    assert issubclass(cls, pipec.Error) and name in EXIT_CODES


def test_every_row_names_an_error_pipec_raises():
    assert set(EXIT_CODES) - set(RAISED) == {"Error", "OSError"}


def test_an_error_that_is_not_listed_takes_its_base_row():
    from pipec.dsl.errors import InputLimitError

    assert exit_status(InputLimitError("too long", None)) == EXIT_CODES["PipeSyntaxError"]
    assert exit_status(FileNotFoundError("x.pipe")) == EXIT_CODES["OSError"]
    with pytest.raises(TypeError, match="ValueError"):
        exit_status(ValueError("a bug"))


def test_a_program_that_does_not_check_stops_a_start_and_fails_a_run(capsys):
    source = SourceFile(Path("p.pipe"), "const N = 1\n")
    error = PipelineError([Diagnostic("PC101", "a finding", Span(source, 0, 5), "a hint")])
    assert report("piperun", error, color=False) == EXIT_USAGE
    assert report("piperun", error, color=False, running=True) == EXIT_FAILED
    assert capsys.readouterr().err == error.render() * 2  # the diagnostics' report, not one line


def test_the_lead_comes_before_the_message(capsys):
    from pipec.compiler.toolchain import ToolchainUnavailable

    assert report("pipec", ToolchainUnavailable("no NVRTC"), color=False) == EXIT_USAGE
    assert capsys.readouterr().err == "pipec: error: cannot compile kernels: no NVRTC\n"


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add("." * node.level + node.module)
    return found


def test_piperun_borrows_nothing_of_pipec_s_own_front_end():
    imported = _imported_modules(ROOT / "runtime" / "cli.py")
    assert not {m for m in imported if m.startswith(("..compiler.cli", "..compiler.render"))}
    assert {"..cli.arguments", "..cli.exits", "..cli.terminal"} <= imported


def test_no_front_door_maps_error_classes_itself():
    """The exit table is the one place: neither CLI names an exit status in an `except` of its own
    beyond the table's `report` (the one `except ImportError` guards an incomplete install)."""
    for path in (ROOT / "compiler" / "cli.py", ROOT / "runtime" / "cli.py"):
        caught = [ast.unparse(handler.type) for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Try) for handler in node.handlers if handler.type is not None]
        assert set(caught) <= {"Error", "(Error, OSError)", "KeyboardInterrupt", "BaseException",
                               "BrokenPipeError", "ImportError", "OSError",
                               "(argparse.ArgumentTypeError, ValueError)"}, (path, caught)


def test_the_kit_imports_no_runtime():
    for path in (ROOT / "cli").glob("*.py"):
        assert not any(m.lstrip(".").startswith("runtime") for m in _imported_modules(path)), path
