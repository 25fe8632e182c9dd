"""The CUPTI collection and `piperun --profile` / `--trace` on CPU: the fake driver
(tests/fake_cuda.py) runs the runtime, and `FakeCupti` stands in for cupti-python, turning the
fake's graph launches into activity records and clone callbacks."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from fake_cuda import fake_driver
from pipec import load
from pipec.runtime import Backends, cli, cli_reports, profile_collect

ROOT = Path(__file__).resolve().parents[1]
NODES = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
CLONE = 1_000_000  # a clone's id: its original's id plus this


class FakeCupti:
    """The parts of `cupti.cupti` the profiler uses. A node's id is its fake handle's number.
    The fake driver neither clones nor times anything, so at a flush this reports what CUPTI
    would have: each node of a launched executable as a clone of the node built (the profiler
    builds its graph flattened, so there are no child graph nodes), with activity records on a
    timeline that follows the edges (`DURATION_NS` per node, `GAP_NS` before a dependent node)."""

    class ActivityKind(enum.IntEnum):
        MEMCPY = 1
        MEMSET = 2
        CONCURRENT_KERNEL = 10

    class CallbackDomain(enum.IntEnum):
        RESOURCE = 3

    class ActivityFlag(enum.IntEnum):
        FLUSH_FORCED = 1

    class CallbackIdResource(enum.IntEnum):
        GRAPHNODE_CLONED = 20

    DURATION_NS: ClassVar = {"kernel": 1000, "memset": 300, "memcpy": 400}
    SLOW: ClassVar = {"sum": 5000}  # kernels slower than the rest
    GAP_NS, REPLAY_GAP_NS = 700, 2000

    def __init__(self, fake) -> None:
        self.fake, self.callback, self.completed = fake, None, None
        self.enabled: set[int] = set()
        self.descriptors: dict[int, SimpleNamespace] = {}  # "pointers" to callback data
        self.cloned: set = set()
        self.seen_calls, self.clock = 0, 10_000
        self.ResourceData = SimpleNamespace(from_ptr=lambda ptr: self.descriptors[ptr])
        self.GraphData = SimpleNamespace(from_ptr=lambda ptr: self.descriptors[ptr])

    def subscribe(self, callback, userdata):
        assert self.callback is None, "one subscriber at a time"
        self.callback = callback
        return 7

    def unsubscribe(self, subscriber):
        assert subscriber == 7
        self.callback = None

    def enable_callback(self, enable, subscriber, domain, cbid):
        assert (enable, subscriber, domain, cbid) == (1, 7, self.CallbackDomain.RESOURCE,
                                                      self.CallbackIdResource.GRAPHNODE_CLONED)

    def activity_register_callbacks(self, requested, completed):
        assert requested()[0] > 0
        self.completed = completed

    def activity_enable(self, kind):
        self.enabled.add(kind)

    def activity_disable(self, kind):
        self.enabled.remove(kind)

    def get_graph_node_id(self, node: int) -> int:
        return int(node)

    def _pointer(self, **fields) -> int:
        self.descriptors[len(self.descriptors) + 1] = SimpleNamespace(**fields)
        return len(self.descriptors)

    def _clone(self, original: int, copy: int, raw: bool) -> None:
        graph = self._pointer(node=copy, original_node=original)
        resource = self._pointer(resource_descriptor=graph)
        self.callback(None, self.CallbackDomain.RESOURCE, self.CallbackIdResource.GRAPHNODE_CLONED,
                      resource if raw else self.descriptors[resource])

    def _run(self, graph, ready: int, records: list) -> int:
        ends: dict = {}
        for node in graph.nodes:
            start = max((ends[d] for d in node.deps), default=ready)
            if node.kind == "graph":
                ends[node.handle] = self._run(node.child, start, records)
                continue
            start += self.GAP_NS if node.deps else 0
            kind = "kernel" if node.kind == "kernel" else node.kind
            end = start + self.SLOW.get(getattr(node.work, "function", ""), self.DURATION_NS[kind])
            ends[node.handle] = end
            executed = int(node.handle) + CLONE
            if node.handle not in self.cloned:  # callback data as an object or a raw pointer, in turn
                self.cloned.add(node.handle)
                self._clone(int(node.handle), executed, raw=len(self.cloned) % 2 == 0)
            activity = {"kernel": self.ActivityKind.CONCURRENT_KERNEL, "memset": self.ActivityKind.MEMSET,
                        "memcpy": self.ActivityKind.MEMCPY}[kind]
            if activity in self.enabled:
                records.append(SimpleNamespace(kind=activity, start=start, end=end, graph_node_id=executed))
        return max(ends.values(), default=ready)

    def activity_flush_all(self, flag):
        assert flag == self.ActivityFlag.FLUSH_FORCED
        outside = SimpleNamespace(kind=self.ActivityKind.MEMCPY, start=0, end=1, graph_node_id=0)  # no node's
        records = [outside]
        for call in self.fake.calls[self.seen_calls:]:
            if call.name == "cuGraphLaunch":
                self.clock = self._run(self.fake.executables[call.args[0]], self.clock, records)
                self.clock += self.REPLAY_GAP_NS
        self.seen_calls = len(self.fake.calls)
        self.completed(records)


@pytest.fixture
def traced():
    driver = fake_driver(NODES)
    with load(NODES, backends=Backends(driver)) as pipeline:
        yield pipeline, driver.cu, FakeCupti(driver.cu)


def _build(pipeline):
    from pipec.runtime.graph import BuiltGraph

    return lambda: BuiltGraph(pipeline.plan, pipeline.plan.step, pipeline._buffers, pipeline.modules,
                              pipeline.device, pipeline.stream, flatten=True)


def test_collect_maps_every_record_to_a_plan_node_through_clones(traced):
    pipeline, fake, cupti = traced
    collection = profile_collect.collect(pipeline, _build(pipeline), replays=4, cupti=cupti)
    leaves = [n.name for n in pipeline.plan.leaves(pipeline.plan.step)]
    assert len(collection.records) == 4 * len(leaves), "the warm-up replays and non-graph work are left out"
    named = [collection.node_names[r.graph_node_id] for r in collection.records]
    assert sorted(set(named)) == sorted(leaves) and all(named.count(n) == 4 for n in leaves)
    assert collection.event_us == pytest.approx(1 / 4)  # the fake's events are 1 us apart
    assert cupti.callback is None and not cupti.enabled, "unsubscribed, activities off"
    graphs = len(list(pipeline.plan.graph_tree(pipeline.plan.step)))
    assert len(fake.graphs) == graphs, "the profile's graph is gone"
    assert len(fake.executables) == 1


def test_profile_of_the_fake_timeline(traced):
    pipeline, _, cupti = traced
    before = pipeline.snapshot()
    report = profile_collect.profile(pipeline, _build(pipeline), replays=3, cupti=cupti)
    after = pipeline.snapshot()
    assert all(after[k].tobytes() == v.tobytes() for k, v in before.items()), "the state is restored"
    # One chain of edges runs the whole replay here: the floor is the replay.
    assert report.critical_path == ["step/bump/add_one", "step/saxpy", "step/copy:y->copy_of_y", "step/sum",
                                    "step/report"]
    assert report.kernel_us == pytest.approx(1 + 1 + 0.4 + 5 + 1)
    assert report.latency_us == pytest.approx(4 * 0.7)
    assert report.critical_path_us == pytest.approx(report.replay_us)
    nodes = {n.name: n for n in report.nodes}
    assert nodes["step/sum"].microseconds == pytest.approx(5) and report.nodes[0].name == "step/sum"
    assert nodes["step/tick"].slack_us == pytest.approx(report.replay_us - 1 - 0.7 - 1)  # tick, then report
    assert nodes["step/copy:y->copy_of_y"].kind == "memcpy" and nodes["step/fill:halves"].kind == "memset"
    assert all(n.critical == (n.slack_us == pytest.approx(0)) for n in report.nodes)


def test_piperun_profile_prints_the_table_and_writes_the_trace(monkeypatch, tmp_path, capsys):
    driver = fake_driver(NODES)
    front_door = sys.modules["pipec.runtime.load"]
    real_load = front_door.load
    monkeypatch.setattr(front_door, "load", lambda path, options: real_load(path, options, Backends(driver)))
    monkeypatch.setattr(profile_collect, "load_cupti", lambda: FakeCupti(driver.cu))
    trace = tmp_path / "step.json"
    assert cli.main([str(NODES), "--profile", "--trace", str(trace)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "profile of 12 nodes inside 200 graph replays" in out
    assert "* step/sum" in out and "nodes.pipe:36:5" in out
    assert "critical path    5 nodes" in out and "where time goes" in out
    events = json.loads(trace.read_text())["traceEvents"]
    work = [e for e in events if e.get("cat") in ("kernel", "memset", "memcpy")]
    assert len(work) == 12 * cli_reports.TRACE_REPLAYS


def test_piperun_profile_without_cupti_names_the_package(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupti", None)  # importing it fails, installed or not
    assert cli.main([str(NODES), "--trace", "t.json"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'pipec[profile12]'" in err and "Traceback" not in err


def test_cupti_that_cannot_trace_is_one_error_and_leaves_no_subscriber(traced):
    pipeline, _, cupti = traced

    def refuse(kind):
        raise RuntimeError("CUPTI_ERROR_NOT_SUPPORTED")

    cupti.activity_enable = refuse  # as on a driver too old for this CUPTI
    with pytest.raises(profile_collect.ProfilerUnavailable, match="CUPTI cannot trace here.*NOT_SUPPORTED"):
        profile_collect.profile(pipeline, _build(pipeline), replays=2, cupti=cupti)
    assert cupti.callback is None
