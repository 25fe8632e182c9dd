"""Live updates without the compiler: new values for constants applied from the plan's
live-update record (docs/plan.md, "Live updates"), as a pipeline loaded from a bundle does them.

The record says, for each constant of the main file, why it cannot change in place, or which
fields of the step's kernel nodes it reaches and how each is computed. An update gives the named
constants their new values (as `-D` would: a constant derived from one follows it, one given a
value keeps it), computes every value of the record again in the compiler's order, then every
site the named constants reach, checks each as the compiler's checks would, and returns the
plan with the new kernel nodes and the new values. Nothing is returned on a refusal, so the
caller changes nothing. native/src/live.c does the same in C.
"""

from __future__ import annotations

import numbers
from dataclasses import replace

from ..api_arguments import ArgumentError
from ..plan.live import LiveProblem, argument, dimension, encode, evaluate, parse_value
from ..plan.schema import Expression, KernelNodeSpec, LiveSiteSpec, Plan
from .update import UpdateRefused

Number = int | float | bool


def new_values(name: str, values: object) -> dict[str, Number]:
    """The values an update of a bundle's pipeline takes: numbers and booleans, or their text as
    `-D` writes them (`"0.5"`, `"-3"`, `"true"`); an expression needs the compiler."""
    if not isinstance(values, dict):
        raise ArgumentError(f"{name}: expected constant names and values")
    out: dict[str, Number] = {}
    for key, value in values.items():
        if isinstance(value, str):
            parsed = parse_value(value)
            if parsed is None:
                raise ArgumentError(f"{name}[{key!r}] = {value!r}: a bundle's pipeline takes numbers and booleans; "
                                    "an expression needs the compiler (load the .pipe file)")
            value = parsed
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            value = int(value)
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            value = float(value)
        elif not isinstance(value, bool):
            raise ArgumentError(f"{name}[{key!r}] = {value!r}: expected a number or a boolean")
        out[key] = value
    return out


def live_update(plan: Plan, changes: dict[str, Number]) -> tuple[Plan, list[KernelNodeSpec]]:
    """`plan` with `changes` applied through its record, and the step's kernel nodes that
    changed (as the new plan has them). Raises ArgumentError for a name that is no constant of
    the main file, UpdateRefused for a structural constant or a value the program cannot take."""
    record = plan.live
    index = {v.name: i for i, v in enumerate(record.values) if v.updatable}
    for name in changes:
        if name not in index:
            raise ArgumentError(f"update: {plan.pipe} has no constant `{name}` (its constants: "
                                f"{', '.join(sorted(index)) or 'none'})")
        if (why := record.values[index[name]].structural) is not None:
            raise UpdateRefused(f"`{name}` cannot change in place: it {why}; only constants that reach kernel "
                                f"scalar arguments and launch shapes can (rebuild with `-D {name}=...`)")
    exprs: list[Expression | None] = [v.expr for v in record.values]
    for name, value in changes.items():
        exprs[index[name]] = encode(value)
    named = ", ".join(f"{name} = {value!r}" for name, value in changes.items())
    values: list = []
    for spec, expr in zip(record.values, exprs):
        try:
            values.append(None if expr is None else evaluate(expr, values))
        except LiveProblem as problem:
            raise UpdateRefused(f"{named}: `{spec.name}` ({spec.location}) cannot be computed: {problem}") from None
    nodes: dict[tuple[int, int], KernelNodeSpec] = {}
    for s in sorted({s for name in changes for s in record.values[index[name]].sites}):
        site = record.sites[s]
        node = nodes.get((site.graph, site.node)) or plan.graphs[site.graph].nodes[site.node]
        assert isinstance(node, KernelNodeSpec)
        try:
            nodes[site.graph, site.node] = _with_site(node, site, evaluate(site.expr, values))
        except LiveProblem as problem:
            raise UpdateRefused(f"{named}: {_field(site)} of `{node.name}` ({node.location}): {problem}") from None
    for (graph, node_id), node in nodes.items():
        threads = min((s.threads for s in record.sites if (s.graph, s.node, s.field) == (graph, node_id, "block")),
                      default=None)
        if threads is not None and node.block[0] * node.block[1] * node.block[2] > threads:
            raise UpdateRefused(f"{named}: the block {node.block} of `{node.name}` ({node.location}) holds more than "
                                f"the {threads} threads the kernel allows")
    new_record = replace(record, values=tuple(
        replace(spec, expr=expr, value=spec.value if value is None else encode(value))
        for spec, expr, value in zip(record.values, exprs, values)))
    graphs = tuple(replace(g, nodes=tuple(nodes.get((g.index, i), n) for i, n in enumerate(g.nodes)))
                   if any(key[0] == g.index for key in nodes) else g for g in plan.graphs)
    updated = replace(plan, graphs=graphs, live=new_record)
    changed = [node for g in updated.graph_tree(updated.step) for node in g.nodes
               if (g.index, node.id) in nodes and node != plan.graphs[g.index].nodes[node.id]]
    return updated, changed


def _with_site(node: KernelNodeSpec, site: LiveSiteSpec, value) -> KernelNodeSpec:
    what = _field(site)
    if site.field == "arg":
        if site.low is not None and site.high is not None:
            value = dimension(value, what, site.low, site.high, 1)
        arg = node.args[site.index]
        args = node.args[:site.index] + (replace(arg, value=argument(value, arg.ctype)),) + node.args[site.index + 1:]
        return replace(node, args=args)
    assert site.low is not None and site.high is not None
    value = dimension(value, what, site.low, site.high, site.multiple)
    if site.field == "shared_bytes":
        return replace(node, shared_bytes=value)
    shape = list(node.grid if site.field == "grid" else node.block)
    shape[site.index] = value
    dims = (shape[0], shape[1], shape[2])
    return replace(node, grid=dims) if site.field == "grid" else replace(node, block=dims)


def _field(site: LiveSiteSpec) -> str:
    if site.field == "arg":
        return f"argument {site.index + 1}"
    if site.field == "shared_bytes":
        return "the dynamic shared memory"
    return f"{site.field}.{'xyz'[site.index]}"
