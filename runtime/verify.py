"""Graph replay against eager execution, bit for bit.

Both sides start from the same state. Every buffer the step writes before reading (outputs and
scratch) is poisoned first, so an output that a side never writes cannot match by accident.
The graph side runs twice, so non-deterministic kernels show up as well. A difference is
reported with the first differing element and the nodes that write it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..plan.schema import Location
from ..wording import counted, verb


@dataclass(frozen=True)
class Writer:
    name: str
    location: Location


@dataclass(frozen=True)
class Mismatch:
    buffer: str
    index: tuple[int, ...]
    expected: object  # first side's value
    found: object  # second side's value
    differing: int  # how many elements differ
    writers: tuple[Writer, ...]
    sides: tuple[str, str]

    def describe(self) -> str:
        where = ", ".join(f"`{w.name}` ({w.location})" for w in self.writers) or "no node of the step"
        return (f"`{self.buffer}`{list(self.index)}: {self.sides[0]} {self.expected!r}, {self.sides[1]} "
                f"{self.found!r} ({counted(self.differing, 'element')} {verb('differs', self.differing)}); "
                f"written by {where}")


@dataclass
class VerifyReport:
    steps: int
    buffers: int
    poisoned: list[str]
    mismatches: list[Mismatch] = field(default_factory=list)
    # per conditional node, how often eager execution ran each body (by index); the graph's
    # decisions land in the same control buffers, which the comparison covers
    branches: dict[str, dict[int, int]] = field(default_factory=dict)

    def describe_branches(self) -> list[str]:
        return [f"`{name}`: " + (", ".join(f"body {b} {n}x" for b, n in sorted(counts.items())) or "no body run")
                for name, counts in self.branches.items()]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _bits(array: np.ndarray) -> np.ndarray:
    return array.reshape(-1).view(f"u{array.dtype.itemsize}") if array.dtype.itemsize in (1, 2, 4, 8) else array.reshape(-1).view(np.uint8)


def compare(first: dict[str, np.ndarray], second: dict[str, np.ndarray], writers_of, sides) -> list[Mismatch]:
    """The first differing element of every buffer whose bits differ, in declaration order."""
    found = []
    for name, a in first.items():
        b = second[name]
        differ = np.flatnonzero(_bits(a) != _bits(b))
        if differ.size == 0:
            continue
        flat = int(differ[0])
        index = tuple(int(i) for i in np.unravel_index(flat, a.shape))
        found.append(Mismatch(name, index, a.reshape(-1)[flat].item(), b.reshape(-1)[flat].item(),
                              int(differ.size), tuple(writers_of(name, flat)), sides))
    return found


def verify(pipeline, steps: int) -> VerifyReport:
    plan = pipeline.plan
    poisoned = [b.name for b in plan.buffers if b.step_first_access == "write"]
    start = pipeline.snapshot()

    def run(side) -> dict[str, np.ndarray]:
        pipeline.restore(start)
        for name in poisoned:
            pipeline.buffer(name).poison(pipeline.stream)
        side(steps)
        return pipeline.snapshot()

    pipeline.eager.taken.clear()
    try:
        eager = run(pipeline.run_eager)
        branches = {name: dict(counts) for name, counts in pipeline.eager.taken.items()}
        graph = run(pipeline.step)
        again = run(pipeline.step)
    finally:
        pipeline.restore(start)
    report = VerifyReport(steps, len(start), poisoned, branches=branches)
    report.mismatches += compare(eager, graph, pipeline.writers_of, ("eager", "graph"))
    report.mismatches += compare(graph, again, pipeline.writers_of, ("graph", "graph again"))
    return report
