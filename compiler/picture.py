"""`pipec FILE --emit svg`: the DAG as a picture drawn by pipec itself, no Graphviz needed.

Each graph is a box titled with its name, its nodes in rows by dependency depth (a node sits
one row below the deepest node it waits for); a child graph is a box inside its parent, a
conditional node a diamond above the boxes of its bodies. Nodes are coloured by kind (kernel,
gemm, memset, memcpy, collective). Hazard edges are solid and labelled with the hazard and the
buffer, edges that only bound the plan's width dashed, programmatic ones bold, blue and marked
(as in the DOT). Given a profile (the Chrome trace of
`piperun --trace`), each node shows its median time and the critical path is drawn in red.
Every element carries its kind and plan name (`class`, `data-name`) for tools and tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from statistics import median

from ..cli.arguments import UsageError
from ..plan.schema import NODE_KINDS, ChildGraphNodeSpec, ConditionalNodeSpec, Plan
from .emit import _label

CHAR_W, LINE_H, PAD, GAP, TITLE_H = 7.2, 14, 8, 28, 20
FONT = "font-family:monospace;font-size:12px"
FILL = {"kernel": "#dbe9f6", "gemm": "#e6dcf3", "memset": "#eeeeee", "memcpy": "#eeeeee",
        "collective": "#fde4c8", "conditional": "#fff4bf"}


@dataclass(frozen=True)
class Profile:
    """What the picture shows of a profile: median microseconds and the critical path."""

    microseconds: dict[str, float]
    critical: frozenset[str]


def read_profile(path: Path) -> Profile:
    """A Chrome trace written by `piperun --trace`: one complete event per node per replay.
    It is named on the command line (`--profile`): one that is no such trace is a usage error."""
    try:
        events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
        durations: dict[str, list[float]] = {}
        critical = set()
        for event in events:
            if event.get("ph") == "X" and "graph_node_id" in event.get("args", {}):
                durations.setdefault(event["name"], []).append(float(event["dur"]))
                if event["args"].get("critical"):
                    critical.add(event["name"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"cannot read the profile {path}: it is not a trace of `piperun --trace` "
                         f"({error})") from None
    return Profile({name: median(d) for name, d in durations.items()}, frozenset(critical))


@dataclass
class Box:
    """A laid-out element: its size, and the SVG it draws at an origin."""

    width: float
    height: float
    parts: list = field(default_factory=list)  # (dx, dy, Box) children, or None for a leaf
    draw: Callable[[float, float], list[str]] | None = None  # its own shapes, drawn at an origin

    def render(self, x: float, y: float) -> list[str]:
        out = list(self.draw(x, y)) if self.draw else []
        for dx, dy, child in self.parts:
            out += child.render(x + dx, y + dy)
        return out


def _text(x: float, y: float, lines: list[str], **attrs) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(str(v))}"' for k, v in attrs.items())
    spans = "".join(f'<tspan x="{x:.1f}" dy="{LINE_H if i else 0}">{escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    return f'<text x="{x:.1f}" y="{y:.1f}" style="{FONT}"{extra}>{spans}</text>'


def _leaf(node, kind: str, profile: Profile | None) -> Box:
    lines = _label(node).split("\n")
    if profile is not None and node.name in profile.microseconds:
        lines.append(f"{profile.microseconds[node.name]:.1f} us")
    critical = profile is not None and node.name in profile.critical
    text_w, text_h = max(len(line) for line in lines) * CHAR_W, len(lines) * LINE_H
    # a diamond holds its text in its middle half
    scale = 1.6 if kind == "conditional" else 1.0
    width, height = (text_w + 2 * PAD) * scale, (text_h + 2 * PAD) * scale

    def draw(x, y):
        classes = f"node {kind}" + (" critical" if critical else "")
        stroke = 'stroke="#c0392b" stroke-width="3"' if critical else 'stroke="#333" stroke-width="1"'
        shape = (f'<polygon points="{x + width / 2:.1f},{y:.1f} {x + width:.1f},{y + height / 2:.1f} '
                 f'{x + width / 2:.1f},{y + height:.1f} {x:.1f},{y + height / 2:.1f}" ' if kind == "conditional"
                 else f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" rx="4" ')
        return [f'<g class="{classes}" data-name="{escape(node.name)}">'
                f'{shape}fill="{FILL.get(kind, "#fff")}" {stroke}/>'
                + _text(x + (width - text_w) / 2, y + (height - text_h) / 2 + LINE_H - 3, lines) + "</g>"]

    return Box(width, height, draw=draw)


def _ranks(count: int, edges) -> list[int]:
    rank = [0] * count
    for _ in range(count):  # edges go forward in program order, so one pass each suffices
        changed = False
        for a, b in edges:
            if rank[b] < rank[a] + 1:
                rank[b], changed = rank[a] + 1, True
        if not changed:
            break
    return rank


def layout_graph(plan: Plan, index: int, profile: Profile | None) -> Box:
    graph = plan.graphs[index]
    boxes = [_node_box(plan, node, profile) for node in graph.nodes]
    rows: dict[int, list[int]] = {}
    for node, rank in zip(graph.nodes, _ranks(len(graph.nodes), graph.edges)):
        rows.setdefault(rank, []).append(node.id)
    positions: dict[int, tuple[float, float]] = {}
    y = float(TITLE_H + PAD)
    width = float(len(graph.name) * CHAR_W + 2 * PAD)
    for rank in sorted(rows):
        x = float(PAD)
        for node_id in rows[rank]:
            positions[node_id] = (x, y)
            x += boxes[node_id].width + GAP
        width = max(width, x - GAP + PAD)
        y += max(boxes[i].height for i in rows[rank]) + GAP
    height = y - GAP + PAD if graph.nodes else TITLE_H + PAD
    hazards = {(h.src, h.dst): h for h in graph.hazards}
    critical = profile.critical if profile else frozenset()
    programmatic = graph.programmatic()

    def draw(x0, y0):
        out = [f'<g class="graph" data-name="{escape(graph.name)}">'
               f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{width:.1f}" height="{height:.1f}" fill="none" '
               f'stroke="#888" stroke-dasharray="4 3"/>' + _text(x0 + PAD, y0 + 14, [graph.name], font_weight="bold")
               + "</g>"]
        for a, b in graph.edges:
            out.append(_edge(graph.nodes[a], graph.nodes[b], boxes, positions, x0, y0, hazards.get((a, b)),
                             (a, b) in programmatic, critical))
        return out

    parts = [(positions[n.id][0], positions[n.id][1], boxes[n.id]) for n in graph.nodes]
    return Box(width, height, parts, draw)


def _node_box(plan: Plan, node, profile: Profile | None) -> Box:
    if isinstance(node, ChildGraphNodeSpec):
        return layout_graph(plan, node.graph, profile)
    kind = NODE_KINDS[type(node)]
    if not isinstance(node, ConditionalNodeSpec):
        return _leaf(node, kind, profile)
    head = _leaf(node, kind, profile)
    bodies = [layout_graph(plan, body, profile) for body in node.bodies]
    width = max(head.width, sum(b.width for b in bodies) + GAP * (len(bodies) - 1))
    parts = [((width - head.width) / 2, 0.0, head)]
    x = 0.0
    for body in bodies:
        parts.append((x, head.height + GAP, body))
        x += body.width + GAP
    return Box(width, head.height + GAP + max((b.height for b in bodies), default=0), parts)


def _edge(src, dst, boxes, positions, x0, y0, hazard, programmatic, critical) -> str:
    (ax, ay), (bx, by) = positions[src.id], positions[dst.id]
    a, b = boxes[src.id], boxes[dst.id]
    x1, y1 = x0 + ax + a.width / 2, y0 + ay + a.height
    x2, y2 = x0 + bx + b.width / 2, y0 + by
    on_path = src.name in critical and dst.name in critical  # the profile names leaf nodes only
    classes = ("edge " + ("hazard" if hazard else "order") + (" programmatic" if programmatic else "")
               + (" critical" if on_path else ""))
    # as in the DOT: a programmatic edge (the consumer may start early) bold and blue
    stroke = "#c0392b" if on_path else "#1f5fbf" if programmatic else "#555"
    dash = "" if hazard else ' stroke-dasharray="5 4"'
    middle = (y1 + y2) / 2
    words = " ".join(([f"{hazard.kind} {hazard.buffer}"] if hazard else []) + (["(programmatic)"] if programmatic else []))
    label = _text((x1 + x2) / 2 + 4, middle, [words], fill="#555") if words else ""
    return (f'<g class="{classes}" data-src="{escape(src.name)}" data-dst="{escape(dst.name)}">'
            f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{middle:.1f} {x2:.1f},{middle:.1f} {x2:.1f},{y2 - 2:.1f}" '
            f'fill="none" stroke="{stroke}" stroke-width="{3 if on_path else 2.4 if programmatic else 1.2}"{dash} '
            f'marker-end="url(#arrow)"/>{label}</g>')


def plan_svg(plan: Plan, profile: Profile | None = None) -> str:
    """The step's DAG, and the init block's beside it, as one SVG document."""
    roots = [layout_graph(plan, g, profile) for g in (plan.init, plan.step) if g is not None]
    width = sum(r.width for r in roots) + GAP * (len(roots) + 1)
    height = max((r.height for r in roots), default=0) + 2 * GAP
    body: list[str] = []
    x = float(GAP)
    for root in roots:
        body += root.render(x, GAP)
        x += root.width + GAP
    title = escape(f"{plan.pipe}: the DAG of the step" + (" and init" if plan.init is not None else ""))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">\n<title>{title}</title>\n'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")
