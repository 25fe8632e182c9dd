"""Device control flow: PC321 (a branch writes its own flag), PC322 (a `while` body never
writes its flag) and PC403 (elements of a buffer written only inside a device branch, read
after it on every step; per element, so a branch writing one slice of a packed buffer leaves
reads of the others alone).

PC320, a condition that is not one element of an integer buffer, is reported while resolving
(compiler/resolve/control.py); a flag nothing writes before its node is PC401's."""

from __future__ import annotations

from collections import defaultdict

from ..codes import PC321, PC322, PC403
from ..diagnostics import Label
from ..intervals import Intervals
from ..model import Access, ConditionalNode, GraphBody, GraphNode, Mode
from ..resolve.control import CONTROL_PREFIX
from .context import CheckContext


def _conditionals(ctx: CheckContext):
    return [node for node in ctx.nodes if isinstance(node, ConditionalNode)]


def _writes(node: ConditionalNode, flag: Access):
    """The accesses inside the node's bodies that write the flag element."""
    for body in node.bodies:
        for item in body.walk():
            if isinstance(item, (ConditionalNode, GraphNode)):
                continue  # their nodes follow in the walk
            for access in item.accesses:
                if access.mode & Mode.WRITE and access.overlaps(flag):
                    yield access


def condition_written_in_body(ctx: CheckContext) -> None:
    for node in _conditionals(ctx):
        if node.flag is None or node.kind == "while":
            continue
        for access in _writes(node, node.flag):
            ctx.sink.add(PC321, f"the {node.construct} on `{node.flag.span.text}` writes that flag in "
                         "its own body", access.span,
                         "the node has decided before its body runs: write the flag before the "
                         "branch (or for the next step, after it)",
                         labels=(Label(node.flag.span, "decided here"),), label="written here",
                         uses=ctx.uses(node))
            break


def unbounded_while(ctx: CheckContext) -> None:
    for node in _conditionals(ctx):
        if node.construct == "while" and next(_writes(node, node.flag), None) is None:
            ctx.sink.add(PC322, f"nothing in the body of this `while` writes `{node.flag.span.text}`, "
                         "so once the loop starts it never ends", node.flag.span,
                         "let a node of the body clear the flag (a kernel, a fill or a copy), or "
                         "use `repeat K` for a fixed count", label="never written in the body",
                         uses=ctx.uses(node))


def _writes_in(body: GraphBody) -> dict[str, Intervals]:
    """The elements of each buffer some node of a body (or of its children) writes."""
    found: defaultdict[str, Intervals] = defaultdict(Intervals)
    for node in body.walk():
        if not isinstance(node, (ConditionalNode, GraphNode)):
            for access in node.accesses:
                if access.mode & Mode.WRITE:
                    found[access.buffer.name].add(access.start, access.stop)
    return found


def _events(body: GraphBody, branch: ConditionalNode | None, out: list) -> None:
    """(node, innermost device branch it sits in, None) in program order, and (None, branch,
    elements by buffer) for the elements both bodies of an `if`/`else` write: a write made in
    both counts as made at the level of the `if`."""
    for item in body.items:
        if isinstance(item, GraphNode):
            _events(item.body, branch, out)
        elif isinstance(item, ConditionalNode):
            always = item.construct == "repeat"
            for child in item.bodies:
                _events(child, branch if always else item, out)
            if item.construct == "if" and len(item.bodies) == 2:
                then, otherwise = (_writes_in(b) for b in item.bodies)
                out.append((None, branch, {name: elements.intersection(otherwise[name])
                                           for name, elements in then.items() if name in otherwise}))
        else:
            out.append((item, branch, None))


def _always_written(events: list) -> dict[str, Intervals]:
    """The elements of each buffer some node outside every device branch writes, in the step."""
    always: defaultdict[str, Intervals] = defaultdict(Intervals)
    for node, branch, both in events:
        if branch is not None:
            continue
        if node is None:
            for name, elements in both.items():
                for start, stop in elements:
                    always[name].add(start, stop)
        else:
            for access in node.accesses:
                if access.mode & Mode.WRITE:
                    always[access.buffer.name].add(access.start, access.stop)
    return always


def _stale(pending: Intervals, always: Intervals, read: Access) -> int | None:
    """The first element the read takes that only a branch wrote, or None; what it finds
    always written is dropped from `pending`, so each element is looked at once."""
    for start, stop in pending.within(read.start, read.stop):
        if (gap := always.first_gap(start, stop)) is not None:
            return gap
        pending.remove(start, stop)
    return None


def stale_after_branch(ctx: CheckContext) -> None:
    step = ctx.program.step
    if step is None or not ctx.accesses_known:
        return
    events: list = []
    _events(step, None, events)
    always = _always_written(events)
    pending: defaultdict[str, Intervals] = defaultdict(Intervals)  # written inside a branch, not yet read after it
    writes: dict[str, list[tuple[Access, ConditionalNode]]] = {}
    reported: set[str] = set()  # once per buffer
    for node, branch, _ in events:
        if node is None:
            continue
        for access in node.accesses:
            name = access.buffer.name
            if name in reported or name.startswith(CONTROL_PREFIX):
                continue
            if branch is not None and access.mode & Mode.WRITE:
                pending[name].add(access.start, access.stop)
                writes.setdefault(name, []).append((access, branch))
            elif branch is None and access.mode & Mode.READ and name in pending:
                known = always.get(name, Intervals())
                element = _stale(pending[name], known, access)
                if element is None:
                    continue
                write, where = next((w, b) for w, b in writes[name] if w.start <= element < w.stop)
                reported.add(name)
                # from the first stale element up to what this write, the read or the step's
                # unconditional writes leave off
                stop = min(write.stop, access.stop, known.next_start(element) or access.stop)
                what = name if (element, stop) == (0, access.buffer.count) else f"{name}[{element}:{stop}]"
                ctx.sink.add(PC403, f"`{what}` is written only inside the {where.construct} and "
                             "read here on every step: when the branch is not taken it holds an "
                             "older value", access.span,
                             "write it on every path (before the branch, or in both bodies of an "
                             "`if`/`else`), or read it inside the branch",
                             labels=(Label(write.span, "written only here"),), label="read on every step",
                             uses=ctx.uses(node))
