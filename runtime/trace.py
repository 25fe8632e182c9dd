"""The replay timeline in the Chrome trace event format (JSON), which Perfetto and
chrome://tracing open: one complete event (`"ph": "X"`) per node per replay, named after the
`.pipe` node, with its location and graph node id. Nodes that overlap in time go to separate
rows ("lanes", one `tid` each); each replay's span is on a row of its own above them."""

from __future__ import annotations

import json
from pathlib import Path

from ..files import write_atomically
from .profile_analysis import ReplayProfile

PID = 1
REPLAY_ROW = 0


def _lanes(intervals: list[tuple[int, int]]) -> list[int]:
    """A row for each (start, end), in the given order (by start): the first row free by then."""
    ends: list[int] = []
    rows = []
    for start, end in intervals:
        row = next((i for i, last in enumerate(ends) if last <= start), len(ends))
        if row == len(ends):
            ends.append(end)
        else:
            ends[row] = end
        rows.append(row)
    return rows


def chrome_trace(profile: ReplayProfile, pipe: str, replays: int = 3) -> dict:
    """The first `replays` profiled replays, times in microseconds from the first one's start."""
    traced = profile.timeline[:replays]
    nodes = {n.name: n for n in profile.nodes}
    if not traced:
        return {"traceEvents": [], "displayTimeUnit": "ns"}
    origin = min(r.start_ns for r in traced[0].values())
    events: list[dict] = []
    executions = sorted(((record.start_ns, record.end_ns, index, name)
                         for index, replay in enumerate(traced) for name, record in replay.items()))
    rows = _lanes([(start, end) for start, end, _, _ in executions])
    for (start, end, index, name), row in zip(executions, rows):
        node = nodes[name]
        events.append({"name": name, "cat": node.kind, "ph": "X", "pid": PID, "tid": REPLAY_ROW + 1 + row,
                       "ts": (start - origin) / 1000, "dur": (end - start) / 1000,
                       "args": {"location": str(node.location), "graph_node_id": node.graph_node_id,
                                "replay": index, "critical": node.critical}})
    for index, replay in enumerate(traced):
        start = min(r.start_ns for r in replay.values())
        end = max(r.end_ns for r in replay.values())
        events.append({"name": f"replay {index}", "cat": "replay", "ph": "X", "pid": PID, "tid": REPLAY_ROW,
                       "ts": (start - origin) / 1000, "dur": (end - start) / 1000, "args": {"replay": index}})
    names = {REPLAY_ROW: "replays", **{REPLAY_ROW + 1 + row: f"lane {row}" for row in set(rows)}}
    events.append({"name": "process_name", "ph": "M", "pid": PID, "args": {"name": f"{pipe}: step replays"}})
    events += [{"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": label}}
               for tid, label in sorted(names.items())]
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(profile: ReplayProfile, pipe: str, path: Path, replays: int = 3) -> None:
    write_atomically(path, json.dumps(chrome_trace(profile, pipe, replays)) + "\n")
