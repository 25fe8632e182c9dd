"""A PTX module with its analyses: the findings of each function (the body scan of ir.py, spin
waits, grid barriers) and, per entry, what it reads and writes through its pointer parameters
and the pointers it loads from them (writes.py), which parameters it reads before writing
(first_reads.py) and where it waits for its predecessor (programmatic dependent launch, pdl.py).

The analyses import the IR (ir.py) and never the reverse; this module is where they meet.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .calls import reachable_findings
from .cfg import spin_waits
from .first_reads import module_first_reads
from .ir import Finding, Location, PtxModule
from .ir import parse as read
from .pdl import LaunchControl, launch_control
from .writes import Summary, Written, grid_barriers, module_accesses, parameter_writes


@dataclass
class AnalysedModule(PtxModule):
    summaries: dict | None = None  # what each function reads and writes through its parameters, once computed
    reads_first: dict | None = None  # per function, the parameters it reads before writing, once computed

    def findings(self, entry: str) -> list[Finding]:
        """Findings of an entry and of every function a launch of it can reach."""
        return reachable_findings(self, entry)

    def accesses(self, entry: str) -> Summary:
        """What an entry reads and writes through its parameters, through pointers it loads from
        them, and through pointers of unknown origin (writes.py)."""
        if self.summaries is None:
            self.summaries = module_accesses(self)
        return self.summaries[entry]

    def first_reads(self, entry: str) -> dict[int, Location | None]:
        """Per parameter of an entry that some path reads before this thread writes what it
        reads: the first such read (first_reads.py)."""
        if self.reads_first is None:
            self.reads_first = module_first_reads(self)
        return self.reads_first[entry]

    def writes(self, entry: str) -> dict[int, tuple[Written, Location | None]]:
        """Per parameter of an entry: (Written.YES | NO | UNKNOWN, the location of the write)."""
        return parameter_writes(self.accesses(entry), self.functions[entry].params)

    def launch_control(self, entry: str) -> LaunchControl:
        """Where an entry waits for its predecessor, what it touches before, where it triggers."""
        return launch_control(self, entry)


def parse(ptx: str) -> AnalysedModule:
    """Read a PTX text and attach each function's findings: its own body's, its spin waits and
    its grid barriers (accesses to the grid-sync workspace are the barrier's, not the kernel's)."""
    structure = read(ptx)
    module = AnalysedModule(**{f.name: getattr(structure, f.name) for f in fields(PtxModule)})
    for function in module.functions.values():
        barriers, workspace = grid_barriers(function)
        findings = function.findings + spin_waits(function, module)
        function.findings = [f for f in findings if (f.instruction, f.location) not in workspace] + barriers
    return module
