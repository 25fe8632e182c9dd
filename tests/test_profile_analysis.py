"""The replay profile's analysis and trace on synthetic activity records: graph node ids to
plan nodes, per-replay grouping, the critical path and its floor (never above the replay),
slack, where the time goes, and the Chrome trace."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.runtime.profile_analysis import (
    Collection, LeafDag, NodeRecord, ProfileError, analyze, leaf_dag, name_graph_nodes,
)
from pipec.runtime.trace import chrome_trace

ROOT = Path(__file__).resolve().parents[1]
PIPES = {"nodes": "tests/fixtures/runtime/nodes.pipe", "rl_step": "pipelines/rl_step.pipe"}
# The analysis expects one record per leaf per replay, which conditional bodies that skip
# replays do not give: rl_step is analysed in its form without device branches.
DEFINES = {"rl_step": (("DEVICE_BRANCHES", "0"),)}
PLANS = {name: compile_file(ROOT / path, override(load_settings(ROOT / path), defines=DEFINES.get(name))).plan
         for name, path in PIPES.items()}


def _ids(plan) -> dict[str, int]:
    return {node.name: 100 + i for i, node in enumerate(plan.leaves(plan.step))}


def _timeline(plan, seed: int, replays: int, jitter: bool = True) -> Collection:
    """Replays that respect the DAG: each node starts after its predecessors end, plus a
    latency and (with `jitter`) waits of every size; sources start at staggered times."""
    rng = random.Random(seed)
    dag, ids = leaf_dag(plan, plan.step), _ids(plan)
    records, clock = [], 1_000_000
    for _ in range(replays):
        ends = {}
        for name in (n.name for n in plan.leaves(plan.step)):  # program order is topological
            ready = max((ends[p] for p in dag.predecessors(name)), default=clock)
            latency = rng.randint(300, 3000) + rng.choice([0, 0, 5000]) if jitter else 1000  # some wait long
            stagger = rng.randint(0, 2000) if jitter else 0
            start = ready + latency if dag.in_degree(name) else clock + stagger
            duration = rng.randint(500, 20_000) if jitter else 2000
            ends[name] = start + duration
            records.append(NodeRecord(ids[name], start, start + duration, "kernel"))
        clock = max(ends.values()) + 4000
    rng.shuffle(records)  # CUPTI delivers buffers in no promised order
    return Collection(records, {i: n for n, i in ids.items()}, replays, 99.0)


@pytest.mark.parametrize("plan", PLANS.values(), ids=PLANS.keys())
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), replays=st.integers(1, 9))
def test_the_floor_is_never_above_the_replay(plan, seed, replays):
    report = analyze(plan, _timeline(plan, seed, replays))
    assert 0 < report.kernel_us <= report.critical_path_us <= report.replay_us
    assert report.idle_us >= 0 and report.latency_us >= 0
    dag = leaf_dag(plan, plan.step)
    path = report.critical_path
    assert dag.in_degree(path[0]) == 0 and dag.out_degree(path[-1]) == 0
    assert all(dag.has_edge(a, b) for a, b in itertools.pairwise(path))
    nodes = {n.name: n for n in report.nodes}
    assert all(nodes[name].slack_us == pytest.approx(0, abs=1e-6) for name in path)
    assert all(n.slack_us >= 0 for n in report.nodes)


def test_durations_latencies_slack_and_the_breakdown_on_a_fixed_timeline():
    plan = PLANS["nodes"]
    report = analyze(plan, _timeline(plan, 0, 3, jitter=False))
    # Every node takes 2 us and starts 1 us after its last predecessor; sources start at 0.
    assert all(n.microseconds == 2 for n in report.nodes)
    assert {n.latency_us for n in report.nodes if n.name != "step/tick"} <= {0.0, 1.0}
    assert report.critical_path == ["step/bump/add_one", "step/saxpy", "step/copy:y->copy_of_y", "step/sum",
                                    "step/report"]
    assert report.kernel_us == 10 and report.latency_us == 4 and report.critical_path_us == 14
    assert report.replay_us == 14 and report.idle_us == 0 and report.replay_over_floor == 1
    nodes = {n.name: n for n in report.nodes}
    assert nodes["step/tick"].slack_us == 14 - 2 - 1 - 2  # it only has to precede report
    assert nodes["step/fill:halves"].slack_us == 12 and not nodes["step/fill:halves"].critical
    assert report.event_us == 99.0 and report.replays == 3


def test_records_that_do_not_describe_the_step_are_errors():
    plan = PLANS["nodes"]
    collection = _timeline(plan, 1, 2)
    with pytest.raises(ProfileError, match="1 graph node id in the records matches no node of the plan"):
        analyze(plan, Collection(collection.records + [NodeRecord(7, 0, 1, "kernel")], collection.node_names,
                                 2, 0.0))
    missing = [r for r in collection.records if collection.node_names[r.graph_node_id] != "step/sum"]
    with pytest.raises(ProfileError, match="1 node.* `step/sum` has 0 for 2 replays$"):
        analyze(plan, Collection(missing, collection.node_names, 2, 0.0))
    names = {i: n for i, n in collection.node_names.items() if n != "step/sum"}  # its id not traced back
    with pytest.raises(ProfileError, match="`step/sum` has 0 for 2 replays; 1 graph node id"):
        analyze(plan, Collection(collection.records, names, 2, 0.0))


def test_clones_lead_back_to_the_nodes_built():
    built = {10: "step/a", 20: "step/b/k"}
    clones = {11: 10, 21: 20, 22: 21, 23: 22, 5: 6, 6: 5, 40: 41}  # chains, a cycle, a stranger
    assert name_graph_nodes(built, clones) == {10: "step/a", 11: "step/a", 20: "step/b/k", 21: "step/b/k",
                                               22: "step/b/k", 23: "step/b/k"}


def test_the_chrome_trace_has_one_event_per_node_per_traced_replay():
    plan = PLANS["rl_step"]
    report = analyze(plan, _timeline(plan, 3, 5))
    trace = json.loads(json.dumps(chrome_trace(report, plan.pipe, replays=2)))
    work = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert len(work) == 2 * len(plan.leaves(plan.step))
    locations = {n.name: str(n.location) for n in plan.leaves(plan.step)}
    assert all(e["ph"] == "X" and e["args"]["location"] == locations[e["name"]] for e in work)
    assert min(e["ts"] for e in work) == 0 and all(e["dur"] > 0 for e in work)
    for tid in {e["tid"] for e in work}:  # a lane never holds two nodes at once
        row = sorted((e["ts"], e["ts"] + e["dur"]) for e in work if e["tid"] == tid)
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(row))
    replays = [e for e in trace["traceEvents"] if e.get("cat") == "replay"]
    assert [e["args"]["replay"] for e in replays] == [0, 1]
    first = [e for e in work if e["args"]["replay"] == 0]
    assert replays[0]["dur"] == pytest.approx(max(e["ts"] + e["dur"] for e in first))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert "pipelines/rl_step.pipe: step replays" in names and "lane 0" in names


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), data=st.data())
def test_the_leaf_dag_orders_its_nodes_as_networkx_does(n, data):
    """The critical path between ties is the one ending first in this order, as it was with
    networkx (now a test dependency only)."""
    import networkx as nx

    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    names = data.draw(st.permutations([f"n{i}" for i in range(n)]))  # insertion order
    dag, graph = LeafDag(), nx.DiGraph()
    for name in names:
        dag.add_node(name)
        graph.add_node(name)
    dag.add_edges_from((f"n{a}", f"n{b}") for a, b in edges)
    graph.add_edges_from((f"n{a}", f"n{b}") for a, b in edges)
    assert dag.topological_order() == list(nx.topological_sort(graph))
    assert all(dag.has_edge(f"n{a}", f"n{b}") and not dag.has_edge(f"n{b}", f"n{a}") for a, b in edges)
    assert [dag.in_degree(v) for v in dag] == [graph.in_degree(v) for v in graph]
