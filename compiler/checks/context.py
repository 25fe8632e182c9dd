"""What every check sees: the program, its DAGs, the target, and where to report."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..dag import Dag
from ..diagnostics import DiagnosticSink, Use
from ..model import GraphBody, LaunchNode, Node, Param, Program, child_bodies
from ..programmatic_edges import UnitHazards, unit_hazards


@dataclass
class CheckContext:
    program: Program
    dags: list[Dag]
    sink: DiagnosticSink
    arch: str
    # by id: launches whose binding a check found wrong (PC201, PC202, PC205, PC309, PC318).
    # What they touch is not what their kernel does, so the rules over every node's accesses
    # stay silent rather than report what follows from that one mistake.
    misbound: set[int] = field(default_factory=set)

    def misbind(self, node: LaunchNode) -> None:
        self.misbound.add(id(node))

    @property
    def accesses_known(self) -> bool:
        """Whether every statement became nodes (none dropped after an error) and every launch
        touches what its kernel does: PC401, PC402 and PC403 need both."""
        return not self.program.dropped_statements and not self.misbound

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
    def _uses(self) -> dict[int, tuple[Use, ...]]:
        """By id of node: the graph uses that made the instance it belongs to."""
        found: dict[int, tuple[Use, ...]] = {}
        stack = list(self.program.bodies())
        while stack:
            body = stack.pop()
            for item in body.items:
                found[id(item)] = body.uses
                stack.extend(child_bodies(item))
        return found

    def uses(self, node: Node) -> tuple[Use, ...]:
        """The graph uses whose instance `node` belongs to: a finding about it names them."""
        return self._uses.get(id(node), ())

    @cached_property
    def _launches(self) -> list[LaunchNode]:
        return [node for node in self.nodes if isinstance(node, LaunchNode)]

    @cached_property
    def _bindings(self) -> list[tuple[LaunchNode, Param, object]]:
        return [(node, param, arg) for node in self._launches if len(node.args) == len(node.kernel.params)
                for param, arg in zip(node.kernel.params, node.args)]

    def launches(self, body: GraphBody | None = None):
        """Every launch of the init block and the step (or of one body), in program order."""
        if body is None:
            return self._launches
        return [node for node in body.walk() if isinstance(node, LaunchNode)]

    def bindings(self):
        """(launch, parameter, argument) for every argument of the launches that bind as many
        arguments as their kernel has parameters: of a launch that binds fewer or more, which
        argument meets which parameter is unknown (PC201 reports it, alone)."""
        return self._bindings
