"""What every check sees: the program, its DAGs, the target, and where to report."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..dag import Dag
from ..diagnostics import DiagnosticSink
from ..model import GraphBody, LaunchNode, Node, Param, Program
from ..programmatic_edges import UnitHazards, unit_hazards


@dataclass
class CheckContext:
    program: Program
    dags: list[Dag]
    sink: DiagnosticSink
    arch: str

    @cached_property
    def nodes(self) -> list[Node]:
        """Every node of the init block and the step, containers before their contents, in
        program order: walked once, for all the checks."""
        return [node for body in self.program.bodies() for node in body.walk()]

    @cached_property
    def unit_hazards(self) -> UnitHazards:
        """What each launch touches before its wait that an earlier node touches (PC323), per
        body with child graphs opened: lowering decides the programmatic edges from it too."""
        return unit_hazards(self.program.bodies())

    @cached_property
    def _launches(self) -> list[LaunchNode]:
        return [node for node in self.nodes if isinstance(node, LaunchNode)]

    @cached_property
    def _bindings(self) -> list[tuple[LaunchNode, Param, object]]:
        return [(node, param, arg) for node in self._launches
                for param, arg in zip(node.kernel.params, node.args)]

    def launches(self, body: GraphBody | None = None):
        """Every launch of the init block and the step (or of one body), in program order."""
        if body is None:
            return self._launches
        return [node for node in body.walk() if isinstance(node, LaunchNode)]

    def bindings(self):
        """(launch, parameter, argument) for every argument that has a parameter."""
        return self._bindings
