"""The exit status of everything the front doors report, in one table, and the one way they
report it. 0: done (pipec: clean); 1: pipec found something, or piperun's run failed; 2: the
tool could not start (usage, configuration, no kernel compiler, a file that does not check,
no GPU)."""

from __future__ import annotations

import sys
from typing import NamedTuple, Protocol, runtime_checkable

from .terminal import say

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, what a shell reports for a command it interrupted


class ExitStatus(NamedTuple):
    starting: int  # raised before the pipeline runs: reading, checking, loading, connecting ranks
    running: int  # raised by the run itself (replays, --verify, --profile, --set, --save-state)
    lead: str = ""  # said before the error's own text


# Each error by its class name: the runtime's classes are not imported here, since `pipec`
# loads no GPU code. A class not listed takes its nearest listed base's row; `Error`, the base
# of them all, is the last resort. A program that does not check stops a start (2), and the
# same diagnostics from an update's new values fail the run that was under way (1).
EXIT_CODES: dict[str, ExitStatus] = {
    # the command line, the configuration and the tools pipec needs
    "UsageError": ExitStatus(EXIT_USAGE, EXIT_USAGE),
    "ConfigError": ExitStatus(EXIT_USAGE, EXIT_USAGE),
    "ToolchainUnavailable": ExitStatus(EXIT_USAGE, EXIT_USAGE, "cannot compile kernels: "),
    "ProfilerUnavailable": ExitStatus(EXIT_USAGE, EXIT_USAGE),
    "NoDevice": ExitStatus(EXIT_USAGE, EXIT_USAGE),
    "OSError": ExitStatus(EXIT_USAGE, EXIT_FAILED),  # a file named on the command line
    "OutputError": ExitStatus(EXIT_USAGE, EXIT_FAILED),  # stdout on a full disk: the report is lost
    "ArgumentError": ExitStatus(EXIT_USAGE, EXIT_USAGE),  # a value the Python API refuses
    # the program and its launch
    "PipeSyntaxError": ExitStatus(EXIT_USAGE, EXIT_FAILED),
    "PipelineError": ExitStatus(EXIT_USAGE, EXIT_FAILED),
    "BundleError": ExitStatus(EXIT_USAGE, EXIT_FAILED),  # pipec build's folder, piperun DIR's bundle
    "CompileFailed": ExitStatus(EXIT_USAGE, EXIT_FAILED),
    "LaunchLimitsExceeded": ExitStatus(EXIT_USAGE, EXIT_FAILED),
    "DistributedError": ExitStatus(EXIT_USAGE, EXIT_FAILED),  # running: --verify's exchange
    # the work on the GPU
    "OutOfMemory": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "BindError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "StateError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "CudaError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "NodeFailed": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "CollectiveFailed": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "GemmError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "LibraryRecordingError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "ProfileError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "UpdateRefused": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "ClosedError": ExitStatus(EXIT_FAILED, EXIT_FAILED),
    "Error": ExitStatus(EXIT_USAGE, EXIT_FAILED),
}


@runtime_checkable
class CarriesReport(Protocol):
    """An error that carries the compiler's diagnostics (`PipelineError`): its report, not one
    line, is what the user reads."""

    def render(self, *, color: bool = False) -> str: ...


def exit_status(error: BaseException) -> ExitStatus:
    for cls in type(error).__mro__:
        if cls.__name__ in EXIT_CODES:
            return EXIT_CODES[cls.__name__]
    raise TypeError(f"{type(error).__name__} is no error a front door reports") from error


def report(prog: str, error: BaseException, *, color: bool, running: bool = False) -> int:
    """Write `error` on stderr (`prog: error: ...`, or the diagnostics it carries) and return
    its exit status, `running` or not."""
    status = exit_status(error)
    if isinstance(error, CarriesReport):
        sys.stderr.write(error.render(color=color))
    else:
        say(prog, "error", status.lead + str(error), color=color)
    return status.running if running else status.starting
