"""Device control flow: PC321 (a branch writes its own flag), PC322 (a `while` body never
writes its flag) and PC403 (a buffer written only inside a device branch, read after it).

PC320, a condition that is not one element of an integer buffer, is reported while resolving
(compiler/resolve/control.py); a flag nothing writes before its node is PC401's."""

from __future__ import annotations

from ..codes import PC321, PC322, PC403
from ..diagnostics import Label
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


def _events(body: GraphBody, branch: ConditionalNode | None, out: list) -> None:
    """(node, innermost device branch it sits in) in program order. A write made in both
    bodies of an `if`/`else` counts as made at the level of the `if`."""
    for item in body.items:
        if isinstance(item, GraphNode):
            _events(item.body, branch, out)
        elif isinstance(item, ConditionalNode):
            always = item.construct == "repeat"
            for child in item.bodies:
                _events(child, branch if always else item, out)
            if item.construct == "if" and len(item.bodies) == 2:
                both = set.intersection(*({(a.buffer.name, a.start, a.stop) for n in b.walk()
                                           if not isinstance(n, (ConditionalNode, GraphNode))
                                           for a in n.accesses if a.mode & Mode.WRITE} for b in item.bodies))
                out.append((None, branch, both))
        else:
            out.append((item, branch, None))


def stale_after_branch(ctx: CheckContext) -> None:
    step = ctx.program.step
    if step is None or not ctx.accesses_known:
        return
    events: list = []
    _events(step, None, events)
    always_written: set[str] = set()
    for node, branch, both in events:
        if branch is None:
            always_written |= {name for name, _, _ in both} if node is None else \
                {a.buffer.name for a in node.accesses if a.mode & Mode.WRITE}
    branch_writes: dict[str, tuple[Access, ConditionalNode]] = {}
    for node, branch, _ in events:
        if node is None:
            continue
        for access in node.accesses:
            name = access.buffer.name
            if name in always_written or name.startswith(CONTROL_PREFIX):
                continue
            if branch is not None and access.mode & Mode.WRITE:
                branch_writes.setdefault(name, (access, branch))
            elif branch is None and access.mode & Mode.READ and name in branch_writes:
                write, where = branch_writes.pop(name)
                always_written.add(name)  # once per buffer
                ctx.sink.add(PC403, f"`{name}` is written only inside the {where.construct} and "
                             "read here on every step: when the branch is not taken it holds an "
                             "older value", access.span,
                             "write it on every path (before the branch, or in both bodies of an "
                             "`if`/`else`), or read it inside the branch",
                             labels=(Label(write.span, "written only here"),), label="read on every step",
                             uses=ctx.uses(node))
