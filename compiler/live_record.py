"""The plan's live-update record (docs/plan.md, "Live updates"): what the tracker of
compiler/live.py saw during resolution, joined with the kernel nodes' places in the plan.

Lowering hands each kernel node field that updatable constants reach as a `PendingSite`: a
scalar argument, a launch dimension or the dynamic shared memory of a launch, the operand of a
kernel deciding `every` or `repeat`, with the range the checks accept for it (PC204, PC311,
PC312, PC313, the operand's). A site outside the step's graphs runs in the `init` block, which
has run when an update comes: the constants reaching it are structural. The record is then
checked against the plan: every value and every site, evaluated by plan/live.py at the compiled
values, must give exactly what the compiler computed (a value the record's 127-bit integers
cannot hold makes its constants structural instead).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..dsl import Span
from ..plan.arithmetic import Value
from ..plan.live import LiveProblem, argument, dimension, evaluate
from ..plan.schema import KernelNodeSpec, LiveSiteSpec, LiveSpec, LiveValueSpec, Location, Plan
from .checks.block_too_large import MAX_BLOCK_DIMS, MAX_THREADS
from .checks.invalid_grid import MAX_GRID
from .checks.shared_memory_over_limit import shared_limit
from .live import LiveTerm, LiveTracker, encode_value
from .model import DecideNode, LaunchNode
from .resolve.control import OPERAND_RANGE


@dataclass(frozen=True)
class PendingSite:
    site: LiveSiteSpec
    roots: frozenset[int]
    span: Span
    what: str  # the field, for messages: "argument 3 of `k`"


def launch_sites(graph: int, node: int, item: LaunchNode, arch: str) -> list[PendingSite]:
    """The fields of a launch's kernel node that updatable constants reach."""
    if item.live is None:
        return []
    kernel, live = item.kernel.name, item.live
    threads = min(MAX_THREADS, item.kernel.max_threads or MAX_THREADS)
    cluster = item.kernel.cluster or (1, 1, 1)
    # (field, index, term, low, high, multiple, threads, span, what), `what` made only for a
    # field that updatable values reach: most of an unrolled program's arguments have none
    fields: list[tuple[str, int, LiveTerm, int | None, int | None, int, int, Span, str]] = [
        ("arg", i, term, None, None, 1, 0, item.args[i].span, f"argument {i + 1} of `{kernel}`")
        for i, term in enumerate(live.args) if term is not None]
    for axis in range(3):
        if (term := live.grid[axis]) is not None:
            fields.append(("grid", axis, term, 1, MAX_GRID[axis], cluster[axis], 0, item.config_span,
                           f"grid.{'xyz'[axis]} of `{kernel}`"))
        if (term := live.block[axis]) is not None:
            fields.append(("block", axis, term, 1, MAX_BLOCK_DIMS[axis], 1, threads, item.config_span,
                           f"block.{'xyz'[axis]} of `{kernel}`"))
    if live.shared is not None:
        fields.append(("shared_bytes", 0, live.shared, 0, shared_limit(arch), 1, 0, item.config_span,
                       f"the dynamic shared memory of `{kernel}`"))
    return [PendingSite(LiveSiteSpec(graph, node, field, index, term.tree, low, high, multiple, threads), term.roots,
                        span, what)
            for field, index, term, low, high, multiple, threads, span, what in fields]


def operand_site(graph: int, node: int, item: DecideNode, index: int) -> list[PendingSite]:
    """The operand of a kernel deciding `every` or `repeat`, argument `index`, when updatable
    constants reach it."""
    if item.operand_live is None:
        return []
    low, high = OPERAND_RANGE["every" if item.role == "every" else "repeat"]
    site = LiveSiteSpec(graph, node, "arg", index, item.operand_live.tree, low, high, 1, 0)
    return [PendingSite(site, item.operand_live.roots, item.span, f"the operand of `{item.name}`")]


def live_record(plan: Plan, tracker: LiveTracker, pending: list[PendingSite]) -> LiveSpec:
    step = {g.index for g in plan.graph_tree(plan.step)} if plan.step is not None else set()
    for p in pending:
        if p.site.graph not in step:
            tracker.mark(p.roots, f"{p.what} in the `init` block, which has run when an update comes,", p.span)
    values = _values(tracker)
    evaluated: dict[int, tuple[Value | None, LiveProblem | None]] = {}
    sites = [p for p in pending if p.site.graph in step and _site_checked(plan, tracker, values, p, evaluated)]
    sites = [p for p in sites if not p.roots <= tracker.structural.keys()]  # every constant reaching it is fixed
    reaching: dict[int, list[int]] = {}  # entry -> the sites it reaches, in order
    for i, p in enumerate(sites):
        for root in p.roots:
            reaching.setdefault(root, []).append(i)
    specs = []
    for entry in tracker.entries:
        structural = tracker.structural.get(entry.index) if entry.updatable else None
        reached = () if structural is not None or not entry.updatable else tuple(reaching.get(entry.index, ()))
        location = Location(entry.span.source.display_path(), entry.span.line, entry.span.column)
        specs.append(LiveValueSpec(entry.name, location, entry.updatable, entry.tree, encode_value(entry.value),
                                   structural, reached))
    return LiveSpec(tuple(specs), tuple(p.site for p in sites))


def _values(tracker: LiveTracker) -> list:
    """The compiled values, each entry's definition checked to compute it."""
    values: list = []
    for entry in tracker.entries:
        if entry.tree is not None:
            try:
                computed = evaluate(entry.tree, values)
            except LiveProblem as problem:
                tracker.mark(entry.roots, f"`{entry.name}`, which the live-update record cannot compute ({problem}),",
                             entry.span)
            else:
                assert _same(computed, entry.value), \
                    f"live record: `{entry.name}` computes {computed!r}, compiled as {entry.value!r}"
        values.append(entry.value)
    return values


def _site_checked(plan: Plan, tracker: LiveTracker, values: list, p: PendingSite,
                  evaluated: dict[int, tuple[Value | None, LiveProblem | None]]) -> bool:
    """Whether the site computes the plan's field exactly (a value it cannot compute makes its
    constants structural). `evaluated` keeps each expression's value or problem by id: the sites
    of an unrolled launch share their argument's expression."""
    site = p.site
    node = plan.graphs[site.graph].nodes[site.node]
    assert isinstance(node, KernelNodeSpec)
    if id(site.expr) not in evaluated:
        try:
            evaluated[id(site.expr)] = evaluate(site.expr, values), None
        except LiveProblem as failed:
            evaluated[id(site.expr)] = None, failed
    value, problem = evaluated[id(site.expr)]
    if problem is None:
        assert value is not None
        try:
            if site.field == "arg":
                if site.low is not None and site.high is not None:
                    value = dimension(value, p.what, site.low, site.high, 1)
                computed = argument(value, node.args[site.index].ctype)
            else:
                assert site.low is not None and site.high is not None
                computed = dimension(value, p.what, site.low, site.high, site.multiple)
        except LiveProblem as found:
            problem = found
    if problem is not None:
        tracker.mark(p.roots, f"{p.what}, which the live-update record cannot compute ({problem}),", p.span)
        return False
    compiled = (node.args[site.index].value if site.field == "arg" else node.grid[site.index] if site.field == "grid"
                else node.block[site.index] if site.field == "block" else node.shared_bytes)
    assert _same(computed, compiled), f"live record: {p.what} computes {computed!r}, compiled as {compiled!r}"
    return True


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def with_record(plan: Plan, tracker: LiveTracker, pending: list[PendingSite]) -> Plan:
    return replace(plan, live=live_record(plan, tracker, pending))
