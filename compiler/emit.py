"""Writing the plan for people and tools: JSON (the runtime's input) and Graphviz DOT."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from functools import cache
from json.encoder import encode_basestring_ascii

from ..plan.schema import (
    NODE_KINDS, ChildGraphNodeSpec, ConditionalNodeSpec, GemmNodeSpec, KernelNodeSpec, MemcpyNodeSpec,
    MemsetNodeSpec, Plan,
)


def plan_json(plan: Plan) -> str:
    """What `json.dumps(to_json(plan), indent=1)` writes, in a third of the time and memory."""
    return _indented(plan, "") + "\n"


def _indented(value, indent: str) -> str:
    """`value`, a part of the plan, as indented JSON. It reads the dataclasses directly rather
    than converting them with `to_json` first: the plan of a large program has millions of
    values, and the dicts and lists of the conversion cost as much time as the text. Nor does
    it use `json.dumps` with an indent: that is Python's encoder (the C one does not indent),
    twice as slow and holding every piece of the text in one list (millions of small strings,
    ten times the text: 1.9 GiB for a plan of 40,000 nodes)."""
    kind: type = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:  # every argument leaves its buffer or its value out
        return "null"
    inner = indent + " "
    keys = _keys(kind)
    if keys is not None:  # a dataclass, as `to_json` writes it: a node first says its kind
        items = [key + _indented(getattr(value, name), inner) for name, key in keys]
        if kind in NODE_KINDS:
            items.insert(0, '"kind": ' + encode_basestring_ascii(NODE_KINDS[kind]))
        opening, closing = "{", "}"
    elif isinstance(value, (list, tuple)):
        items = [_indented(v, inner) for v in value]
        opening, closing = "[", "]"
    else:
        return json.dumps(value)  # floats and booleans
    if not items:
        return opening + closing
    # brackets joined onto the first and last items: the text is copied once, not thrice
    items[0] = f"{opening}\n{inner}{items[0]}"
    items[-1] = f"{items[-1]}\n{indent}{closing}"
    return f",\n{inner}".join(items)


@cache
def _keys(kind: type) -> tuple[tuple[str, str], ...] | None:
    """A dataclass's field names, each with its JSON key and separator; None for any other
    type. Asked once per type, not per value."""
    if not is_dataclass(kind):
        return None
    return tuple((f.name, encode_basestring_ascii(f.name) + ": ") for f in fields(kind))


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _label(node) -> str:
    if isinstance(node, KernelNodeSpec):
        grid = "x".join(map(str, node.grid))
        block = "x".join(map(str, node.block))
        return f"{node.function}\n<<<{grid}, {block}>>>"
    if isinstance(node, MemsetNodeSpec):
        return f"memset {node.buffer}\n{node.count} x {node.element_size} B"
    if isinstance(node, MemcpyNodeSpec):
        return f"memcpy {node.src} -> {node.dst}\n{node.nbytes} B"
    if isinstance(node, GemmNodeSpec):
        ops = f"{node.a.buffer}{'.T' if node.trans_a else ''} @ {node.b.buffer}{'.T' if node.trans_b else ''}"
        batch = f" x {node.batch}" if node.batch > 1 else ""
        return (f"gemm {node.c.buffer} = {ops}\n{node.m}x{node.n}x{node.k}{batch} {node.c.dtype}, "
                f"{node.epilogue}")
    if isinstance(node, ConditionalNodeSpec):
        on = f" {node.flag}[{node.flag_element}]" if node.flag is not None else ""
        return f"{node.construct}{on}\n{node.type.upper()} node, handle {node.handle}"
    return node.name.rsplit("/", 1)[-1]


def plan_dot(plan: Plan) -> str:
    """The step's DAG (and the init block's), child graphs as clusters; hazard edges are solid
    and labelled, edges added to bound the width dashed. A gemm node is a 3-D box. A
    conditional node is a diamond with a dotted edge to each of its bodies, drawn as clusters
    beside it."""
    lines = ["digraph pipec {", "  rankdir=TB;", '  node [shape=box, fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=8];']
    roots = [g for g in (plan.init, plan.step) if g is not None]
    for root in roots:
        _emit_graph(plan, root, lines, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_id(graph: int, node: int) -> str:
    return _quote(f"g{graph}n{node}")


def _anchor(plan: Plan, graph: int, node: int, last: bool) -> str:
    """Edges to a child graph attach to its first or last node (DOT has no edges to clusters)."""
    spec = plan.graphs[graph].nodes[node]
    if isinstance(spec, ChildGraphNodeSpec) and plan.graphs[spec.graph].nodes:
        child = plan.graphs[spec.graph]
        return _anchor(plan, spec.graph, len(child.nodes) - 1 if last else 0, last)
    return _node_id(graph, node)


def _emit_graph(plan: Plan, index: int, lines: list[str], indent: str) -> None:
    graph = plan.graphs[index]
    lines.append(f"{indent}subgraph {_quote('cluster_' + str(index))} {{")
    lines.append(f"{indent}  label={_quote(graph.name)};")
    for node in graph.nodes:
        if isinstance(node, ChildGraphNodeSpec):
            _emit_graph(plan, node.graph, lines, indent + "  ")
        elif isinstance(node, ConditionalNodeSpec):
            _emit_conditional(plan, index, node, lines, indent + "  ")
        else:
            # a library call (a graph of the library's kernels) drawn as a box of its own
            shape = "shape=box3d, " if isinstance(node, GemmNodeSpec) else ""
            lines.append(f"{indent}  {_node_id(index, node.id)} [{shape}label={_quote(_label(node))}];")
    hazards = {(h.src, h.dst): h for h in graph.hazards}
    for src, dst in graph.edges:
        a, b = _anchor(plan, index, src, True), _anchor(plan, index, dst, False)
        hazard = hazards.get((src, dst))
        attrs = f"label={_quote(f'{hazard.kind} {hazard.buffer}')}" if hazard else "style=dashed"
        lines.append(f"{indent}  {a} -> {b} [{attrs}];")
    lines.append(f"{indent}}}")


def _emit_conditional(plan: Plan, index: int, node: ConditionalNodeSpec, lines: list[str], indent: str) -> None:
    lines.append(f"{indent}{_node_id(index, node.id)} [shape=diamond, label={_quote(_label(node))}];")
    for number, body in enumerate(node.bodies):
        _emit_graph(plan, body, lines, indent)
        if plan.graphs[body].nodes:
            label = ("then", "else")[number] if node.construct == "if" else (
                f"case {number}" if node.construct == "switch" else "body")
            lines.append(f"{indent}{_node_id(index, node.id)} -> {_anchor(plan, body, 0, False)} "
                         f"[style=dotted, label={_quote(label)}];")
