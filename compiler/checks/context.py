"""What every check sees: the program, its DAGs, the target, and where to report."""

from __future__ import annotations

from dataclasses import dataclass

from ..dag import Dag
from ..diagnostics import DiagnosticSink
from ..model import GraphBody, LaunchNode, Program


@dataclass
class CheckContext:
    program: Program
    dags: list[Dag]
    sink: DiagnosticSink
    arch: str

    def launches(self, body: GraphBody | None = None):
        """Every launch of the init block and the step (or of one body), in program order."""
        bodies = [body] if body is not None else list(self.program.bodies())
        for b in bodies:
            for node in b.walk():
                if isinstance(node, LaunchNode):
                    yield node

    def bindings(self):
        """(launch, parameter, argument) for every argument that has a parameter."""
        for node in self.launches():
            for param, arg in zip(node.kernel.params, node.args):
                yield node, param, arg
