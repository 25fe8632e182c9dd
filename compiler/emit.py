"""Writing the plan for people and tools: JSON (the runtime's input) and Graphviz DOT."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass
from functools import cache
from json.encoder import encode_basestring_ascii
from operator import attrgetter

from ..plan.schema import (
    NODE_KINDS, AccessSpec, ArgSpec, ChildGraphNodeSpec, ConditionalNodeSpec, GemmNodeSpec, GraphSpec,
    KernelNodeSpec, LiveSpec, Location, MemcpyNodeSpec, MemsetNodeSpec, Plan,
)


PIECE = 1 << 20  # characters gathered into one piece of plan_json_pieces
SHARED_TEXTS = 1 << 16  # texts of shared values kept at most (the cache starts over past it)


def plan_json(plan: Plan) -> str:
    """What `json.dumps(to_json(plan), indent=1)` writes, in a fraction of the time and memory."""
    return "".join(plan_json_pieces(plan))


def plan_json_pieces(plan: Plan) -> Iterator[str]:
    """plan_json's text in pieces of about PIECE characters, each made when it is asked for: the
    plan of a large program is hundreds of MB of text (325 MB at 100,000 nodes of rl_step), which
    a writer passes on piece by piece instead of holding it, and a copy of it, whole."""
    pieces: list[str] = []
    size = 0
    for piece in _JsonWriter().stream(plan, ""):
        pieces.append(piece)
        size += len(piece)
        if size >= PIECE:
            yield "".join(pieces)
            pieces.clear()
            size = 0
    pieces.append("\n")
    yield "".join(pieces)


class _JsonWriter:
    """The plan's dataclasses written directly as indented JSON, rather than converted with
    `to_json` first: a large plan has millions of values, and the dicts and lists of the
    conversion cost as much time as the text. Nor through `json.dumps` with an indent: that is
    Python's encoder (the C one does not indent), twice as slow and holding every piece of the
    text in one list (ten times the text).

    Lowering shares one object per distinct location, access and argument (compiler/lower.py):
    the text of each is made once per indent and kept, by its id (equal values of other types,
    1 and 1.0, have other texts). The plan holds every object while it is written, so no id is
    reused meanwhile."""

    def __init__(self) -> None:
        self.shared: dict[str, dict[int, str]] = {}  # indent -> id -> text

    def stream(self, value, indent: str) -> Iterator[str]:
        """`value`'s text in pieces: the plan, its graphs and its live-update record field by
        field, the tuples they hold (graphs, nodes, edges, sites) item by item, every other value
        whole."""
        kind: type = type(value)
        if kind not in _STREAMED:
            yield self.text(value, indent)
            return
        inner = indent + " "
        separator = "{\n" + inner
        for key, item in zip(_keys(kind) or (), _fields(kind)(value)):
            yield separator + key
            separator = ",\n" + inner
            if type(item) is not tuple or not item:
                yield from self.stream(item, inner)
                continue
            deeper = inner + " "
            opening = "[\n" + deeper
            for member in item:
                yield opening
                opening = ",\n" + deeper
                yield from self.stream(member, deeper)
            yield "\n" + inner + "]"
        yield "\n" + indent + "}"

    def text(self, value, indent: str) -> str:
        """`value`, a part of the plan, as indented JSON."""
        kind = type(value)
        if kind is str:
            return encode_basestring_ascii(value)
        if kind is int:
            return int.__repr__(value)
        if value is None:  # every argument leaves its buffer or its value out
            return "null"
        if kind is bool:  # every edge says whether it is programmatic
            return "true" if value else "false"
        if kind in _SHARED:
            texts = self.shared.setdefault(indent, {})
            text = texts.get(id(value))
            if text is None:
                if len(texts) >= SHARED_TEXTS:
                    texts.clear()
                text = texts[id(value)] = self._composite(value, kind, indent)
            return text
        return self._composite(value, kind, indent)

    def _composite(self, value, kind: type, indent: str) -> str:
        inner = indent + " "
        if _is_record(kind):  # a dataclass: its fields' texts put into its form; ints and strings inline:
            # most fields are, and a call for each costs more than its text
            return _form(kind, indent) % tuple([
                int.__repr__(v) if type(v) is int else encode_basestring_ascii(v) if type(v) is str
                else self.text(v, inner) for v in _fields(kind)(value)])
        if (kind is tuple or kind is list) and value and type(value[0]) in _SHARED:
            # a node's accesses or arguments: their texts found in one pass in C (an id that
            # is no shared object's finds nothing), any others one by one
            items = list(map(self.shared.setdefault(inner, {}).get, map(id, value)))
            if None in items:
                items = [t if t is not None else self.text(v, inner) for t, v in zip(items, value)]
            opening, closing = "[", "]"
        elif kind is tuple or kind is list:
            items = [int.__repr__(v) if type(v) is int else self.text(v, inner) for v in value]
            opening, closing = "[", "]"
        else:
            return json.dumps(value)  # floats
        if not items:
            return opening + closing
        # brackets joined onto the first and last items: the text is copied once, not thrice
        items[0] = f"{opening}\n{inner}{items[0]}"
        items[-1] = f"{items[-1]}\n{indent}{closing}"
        return f",\n{inner}".join(items)


_STREAMED = (Plan, GraphSpec, LiveSpec)  # the plan, its graphs, its live-update record's sites
_SHARED = (Location, AccessSpec, ArgSpec)


@cache
def _is_record(kind: type) -> bool:
    return is_dataclass(kind)


@cache
def _form(kind: type, indent: str) -> str:
    """A dataclass's text at `indent` as `to_json` and `json.dumps` write it, with `%s` for each
    field's value: a node first says its kind."""
    inner = indent + " "
    keys = _keys(kind) or ()
    items = (['"kind": ' + encode_basestring_ascii(NODE_KINDS[kind])] if kind in NODE_KINDS else []) + \
        [key + "%s" for key in keys]
    return f"{{\n{inner}" + f",\n{inner}".join(items) + f"\n{indent}}}" if items else "{}"


@cache
def _keys(kind: type) -> tuple[str, ...] | None:
    """A dataclass's JSON keys, each with its separator; None for any other type. Asked once
    per type, not per value."""
    if not is_dataclass(kind):
        return None
    return tuple(encode_basestring_ascii(f.name) + ": " for f in fields(kind))


@cache
def _fields(kind: type) -> Callable[[object], tuple]:
    """A function returning a dataclass's field values in order, in one call."""
    getter = attrgetter(*(f.name for f in fields(kind)))
    return getter if len(fields(kind)) > 1 else lambda value: (getter(value),)


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
    and labelled, edges added to bound the width dashed; programmatic edges bold and blue, each
    ordinary one with the reason it is not programmatic as its tooltip. A gemm node is a 3-D box. A
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
    kinds = {(k.src, k.dst): k for k in graph.edge_kinds}
    for src, dst in graph.edges:
        a, b = _anchor(plan, index, src, True), _anchor(plan, index, dst, False)
        hazard, kind = hazards.get((src, dst)), kinds.get((src, dst))
        label = f"{hazard.kind} {hazard.buffer}" if hazard else ""
        attrs = [] if hazard else ["style=dashed"]
        if kind is not None and kind.programmatic:  # the consumer may start early: bold, marked
            label, attrs = f"{label} (programmatic)".lstrip(), attrs + ["penwidth=2", "color=blue"]
        elif kind is not None:
            attrs.append(f"tooltip={_quote('ordinary: ' + kind.reason)}")
        lines.append(f"{indent}  {a} -> {b} [{', '.join(([f'label={_quote(label)}'] if label else []) + attrs)}];")
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
