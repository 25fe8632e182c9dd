"""Live updates: new values for a pipeline's constants, applied to the instantiated graph
without building it again.

The file is compiled again with the new `-D` values and the new plan compared with the one the
graph was built from. When the only differences are kernel nodes' scalar arguments and launch
shapes (grid, block, dynamic shared memory), the same node set, edges, buffers and modules,
each changed kernel node gets its new parameters through `cuGraphExecKernelNodeSetParams`, and
the eager program its new launch. Anything else (a buffer, its shape or initial value, a fill
value, a copy's size, a node more or less, an edge, a conditional node, the `init` block) would
need a new graph: refused, naming the first difference. A GEMM node is a recorded library call
whose descriptor, shape and alpha and beta are fixed when it is recorded: any change to one is
refused too.
"""

from __future__ import annotations

from dataclasses import fields

from ..plan.schema import ArgSpec, BufferSpec, GemmNodeSpec, KernelNodeSpec, NodeSpec, Plan
from ..errors import Error

# What an update may change on a kernel node; every other field must stay equal.
LAUNCH_FIELDS = ("grid", "block", "shared_bytes")


class UpdateRefused(Error):
    """The new values change more than kernel scalar arguments and launch shapes."""


def _buffer(spec: BufferSpec) -> str:
    init = spec.init
    values = [str(a) for a in init.args] + [f"{a.buffer}+{a.byte_offset}" for a in init.addresses]
    value = f"{init.kind}({', '.join(values)})" if values else init.kind
    return f"{spec.dtype}{list(spec.shape)} {spec.memory} = {value}"


def _arg(arg: ArgSpec) -> str:
    return f"{arg.buffer}+{arg.byte_offset}" if arg.kind == "pointer" else f"{arg.ctype} {arg.value}"


def _node_difference(old: NodeSpec, new: NodeSpec) -> str | None:
    """Why `new` cannot replace `old` in place, or None when it can."""
    if type(old) is not type(new) or old.name != new.name:
        return f"replaces the node `{old.name}` with `{new.name}`"
    if not (isinstance(old, KernelNodeSpec) and isinstance(new, KernelNodeSpec)):  # one type, as checked
        if old != new:
            changed = next(f.name for f in fields(old) if getattr(old, f.name) != getattr(new, f.name))
            what = "gemm node" if isinstance(old, GemmNodeSpec) else "node"
            why = ": a GEMM's recorded call cannot change in place" if isinstance(old, GemmNodeSpec) else ""
            return (f"changes `{changed}` of the {what} `{old.name}` ({old.location}) from "
                    f"{getattr(old, changed)} to {getattr(new, changed)}{why}")
        return None
    for f in fields(old):
        if f.name in (*LAUNCH_FIELDS, "args") or getattr(old, f.name) == getattr(new, f.name):
            continue
        return (f"changes `{f.name}` of the kernel node `{old.name}` ({old.location}) from "
                f"{getattr(old, f.name)} to {getattr(new, f.name)}")
    if len(old.args) != len(new.args):
        return f"changes the arguments of `{old.name}` ({old.location})"
    for i, (a, b) in enumerate(zip(old.args, new.args)):
        if (a.kind != "scalar" and a != b) or (a.kind, a.ctype) != (b.kind, b.ctype):
            return (f"changes argument {i + 1} of `{old.name}` ({old.location}) from {_arg(a)} to {_arg(b)}: "
                    "only scalar arguments can change")
    return None


def changed_kernels(old: Plan, new: Plan, constants: str) -> list[KernelNodeSpec]:
    """The step's kernel nodes whose arguments or launch shape differ between the plans, as the
    new plan has them; raises `UpdateRefused` at the first other difference. `constants`
    names what changed, for the message."""
    def refuse(why: str):
        raise UpdateRefused(f"{constants} {why}; only kernel scalar arguments and launch shapes can be "
                            "updated in place: load the pipeline again")

    old_buffers, new_buffers = {b.name: b for b in old.buffers}, {b.name: b for b in new.buffers}
    if list(old_buffers) != list(new_buffers):
        refuse(f"changes the set of buffers ({', '.join(sorted(set(old_buffers) ^ set(new_buffers)))})")
    for name, spec in old_buffers.items():
        if spec != new_buffers[name]:
            refuse(f"changes the buffer `{name}` from {_buffer(spec)} to {_buffer(new_buffers[name])}")
    if old.modules != new.modules:
        refuse("changes the kernel modules")
    if (old.step, old.init, len(old.graphs)) != (new.step, new.init, len(new.graphs)):
        refuse("changes the graphs")
    if old.init is not None and list(old.graph_tree(old.init)) != list(new.graph_tree(new.init)):
        refuse("changes the `init` block, which already ran")
    changed: list[KernelNodeSpec] = []
    for a, b in zip(old.graph_tree(old.step), new.graph_tree(new.step)):
        if (a.name, a.edges, len(a.nodes)) != (b.name, b.edges, len(b.nodes)):
            refuse(f"changes the nodes or edges of the graph `{a.name}`")
        for x, y in zip(a.nodes, b.nodes):
            if (why := _node_difference(x, y)) is not None:
                refuse(why)
            if x != y:
                changed.append(y)
    return changed
