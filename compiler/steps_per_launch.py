"""Many steps per launch (`piperun --steps-per-launch K`, `pipec.load(..., steps_per_launch=K)`),
all of it here and driven by the compile options `steps_per_launch` and `unroll`: the step's
body repeated in the program (`unroll`), or the plan's step wrapped in a device-side `repeat`.
compiler/stages.py calls `unroll_step` before resolving and `per_launch` after planning.

`unroll_step(tree, k)` returns the syntax tree with the step block's body inside a loop of `k`
iterations, as if the file had written `step { for copy in 0 .. k { ... } }`: the compiler then
unrolls it like any loop, so the copies get their own graph instances, module instances and
conditional handles, and the hazards between one copy and the next are derived as between any
two nodes. One launch runs `k` steps with no conditional node (3 to 8 us each on an H200) and a
graph `k` times larger.

`repeat_step(plan, k)` returns a plan whose root graph is a WHILE node counting `k` iterations
on the device (the same generated kernels as `repeat K` in a program), with the step as its
body: one `cuGraphLaunch` (or one eager run) then runs `k` steps. The step's own graph keeps its
index and node names, so verification names the same writers; the counter lives in a buffer of
its own, `pipec.control.launch`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..dsl import ast
from ..errors import Error
from . import codegen
from .config import CompileOptions
from ..plan.schema import (
    AccessSpec, ArgSpec, BufferSpec, ConditionalNodeSpec, GraphSpec, InitSpec, KernelNodeSpec, Location,
    ModuleSpec, Plan,
)

CONTROL = "pipec.control.launch"


# The loop variable: a name no program can write, so it shadows nothing.
COPY = "step copy"


class StepsPerLaunchRefused(Error):
    """The program cannot run its steps per launch the way the options ask; the message says why."""


def per_launch(plan: Plan, options: CompileOptions, path: Path) -> Plan:
    """The planned program with `options.steps_per_launch` steps in one launch: the step wrapped
    in a device-side loop, or (`unroll`, the copies made before resolving) the plan as it is."""
    if options.steps_per_launch == 1 or plan.step is None:
        return plan
    if not options.unroll:
        return repeat_step(plan, options.steps_per_launch)
    if any(isinstance(n, ConditionalNodeSpec) and n.construct == "every" for g in plan.graphs for n in g.nodes):
        # each copy would count its own replays, once a launch, not the steps
        raise StepsPerLaunchRefused(f"{path}: the step has an `every` block, which counts replays: "
                                    "unrolled, each copy would count launches; use the device-side loop "
                                    "(without unroll)")
    return plan


def unroll_step(tree: ast.Module, copies: int) -> ast.Module:
    if copies == 1:
        return tree
    decls = []
    for decl in tree.decls:
        if isinstance(decl, ast.StepDecl):
            at = decl.body.span
            loop = ast.For(ast.Ident(COPY, at), ast.IntLit(0, at), ast.IntLit(copies, at), decl.body, at)
            decl = replace(decl, body=ast.Block((loop,), at))
        decls.append(decl)
    return replace(tree, decls=tuple(decls))


def repeat_step(plan: Plan, steps: int) -> Plan:
    if steps == 1 or plan.step is None:
        return plan
    modules = plan.modules
    module = next((m.index for m in modules if m.name == codegen.CONDITIONS_MODULE_NAME), None)
    if module is None:
        module = len(modules)
        modules += (ModuleSpec(module, codegen.CONDITIONS_MODULE_NAME, None, codegen.conditions_source(), ()),)
    handle = 1 + max((n.handle for g in plan.graphs for n in g.nodes if isinstance(n, ConditionalNodeSpec)),
                     default=-1)
    where = Location(plan.pipe, 1, 1)
    control = (AccessSpec(CONTROL, 0, 2, "rw"),)

    def decide(node_id: int, name: str, restart: int) -> KernelNodeSpec:
        args = (ArgSpec("handle", "u64", value=handle), ArgSpec("in_graph", "u32"),
                ArgSpec("pointer", "ptr", CONTROL, 0), ArgSpec("scalar", "u32", value=steps),
                ArgSpec("scalar", "u32", value=restart))
        return KernelNodeSpec(node_id, name, where, control, module, "pipec_condition_repeat",
                              (1, 1, 1), (1, 1, 1), 0, args)

    step = plan.graphs[plan.step]
    # the body decides again once every node of the step has finished: no edge is needed
    body = replace(step, nodes=step.nodes + (decide(len(step.nodes), f"{step.name}/decide:launch", 0),))
    root_index = len(plan.graphs)
    loop = ConditionalNodeSpec(1, "launch/repeat", where, control, "while", "repeat", handle,
                               (plan.step,), None, None, CONTROL)
    root = GraphSpec(root_index, "launch", step.scope, (decide(0, "launch/decide:repeat", 1), loop),
                     ((0, 1),), ())
    graphs = tuple(body if g.index == plan.step else g for g in plan.graphs) + (root,)
    buffer = BufferSpec(CONTROL, "u32", (2,), "device", InitSpec("zeros", (), None, None), (), 8, where, "write")
    return replace(plan, modules=modules, graphs=graphs, step=root_index, buffers=plan.buffers + (buffer,))
