"""Where a run with a failed rank could wait longer than it should, without a GPU: piperun's
replay never has more than IN_FLIGHT nodes (a launch counting as its step's nodes) enqueued and
not known finished when the pipeline has collectives (chunks of half of it, each followed by a
polling wait for the chunk before), and the TCPStore channel's reads poll for failure reports instead of blocking in
TCPStore.get (over a stand-in store: no torch needed)."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import pytest

from fake_cuda import fake_driver
from fake_nccl import CapturingCuda, load_on_fake_ranks
from pipec import load
from pipec.runtime import Backends
from pipec.runtime.cli import IN_FLIGHT, _replay
from pipec.runtime.collectives import CollectiveFailed
from pipec.runtime.distributed import StoreChannel
from pipec.runtime.process_launchers import DistributedError, Launch

COLLECTIVE = """
buffer x: f32[8] = fill(1.5)
step {
    allreduce max x
}
"""
WAITS = {"cuStreamQuery", "cuEventQuery", "cuStreamSynchronize", "cuEventSynchronize"}


def _replay_args(steps: int, **options) -> SimpleNamespace:
    defaults = dict(prog="piperun", eager=False, sync_each=False, no_progress=True, json=True,
                    steps=steps, log_every=steps, steps_per_launch=1, updates=[])
    return SimpleNamespace(**{**defaults, **options})


def _launches_between_waits(fake, launch: str = "cuGraphLaunch") -> list[int]:
    """The number of `launch` calls between two waits, for each stretch that has any."""
    names = [call.name for call in fake.calls if call.name == launch or call.name in WAITS]
    return [len(list(group)) for launched, group in itertools.groupby(names, lambda n: n == launch) if launched]


def _replay_quietly(pipeline, args, tmp_path) -> int:
    with open(tmp_path / "out.jsonl", "w") as out:
        return _replay(args, pipeline, 0, out, out)[1]


def _unfinished_at_each_launch(fake, launch: str = "cuGraphLaunch") -> list[int]:
    """How many launches are enqueued and not known finished as each launch is made: a wait on
    a chunk's event (the fake's events are handed out in order, one per chunk record) proves
    every launch before that record finished."""
    recorded: dict = {}  # event -> launches made when it was recorded
    launched = finished = 0
    unfinished = []
    for call in fake.calls:
        if call.name == launch:
            launched += 1
            unfinished.append(launched - finished)
        elif call.name == "cuEventRecord":
            recorded[call.args[0]] = launched
        elif call.name == "cuEventQuery":
            finished = max(finished, recorded[call.args[0]])
        elif call.name in ("cuStreamQuery", "cuStreamSynchronize"):
            finished = launched
    return unfinished


@pytest.mark.parametrize("steps, per_launch", [(600, 1), (2 * IN_FLIGHT, 1), (1200, 2)],
                         ids=["600-launches", "twice-in-flight", "600-launches-of-2-steps"])
def test_with_collectives_piperun_never_has_more_than_in_flight_nodes_unfinished(tmp_path, steps, per_launch):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, COLLECTIVE, steps_per_launch=per_launch)
    with pipeline:
        fake.calls.clear()
        assert _replay_quietly(pipeline, _replay_args(steps, steps_per_launch=per_launch), tmp_path) == steps
        unfinished = _unfinished_at_each_launch(fake)
        in_flight = 2 * (IN_FLIGHT // 2 // len(pipeline.eager.nodes))  # a launch counts as its nodes
        assert in_flight == (IN_FLIGHT if per_launch == 1 else 84)  # two steps a launch: a device loop of 3 nodes
        assert len(unfinished) == steps // per_launch and max(unfinished) == in_flight
        # and the queue never drains at a wait: each wait is for the chunk before the last
        runs = _launches_between_waits(fake)
        assert runs[0] == in_flight and set(runs[1:-1]) == {in_flight // 2}


def test_steps_count_as_their_nodes_eagerly_and_in_graph_launches(tmp_path):
    three_nodes = COLLECTIVE.replace("}", "    fill y = 1\n    fill z = 2\n}") + "buffer y: f32[8]\nbuffer z: f32[8]\n"
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, three_nodes)
    with pipeline:
        steps = IN_FLIGHT // 2 // 3  # a chunk
        fake.calls.clear()
        _replay_quietly(pipeline, _replay_args(300, eager=True), tmp_path)
        # eagerly each step is its two memsets (the fake communicator's calls are no driver calls)
        assert max(_unfinished_at_each_launch(fake, "cuMemsetD32Async")) <= 2 * 2 * steps
        assert _launches_between_waits(fake, "cuMemsetD32Async")[:2] == [2 * 2 * steps, 2 * steps]
        fake.calls.clear()
        _replay_quietly(pipeline, _replay_args(300), tmp_path)
        assert max(_unfinished_at_each_launch(fake)) == 2 * steps
        assert _launches_between_waits(fake)[:2] == [2 * steps, steps]


def test_a_rank_that_failed_stops_the_replay_at_the_next_bounded_wait(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, COLLECTIVE)
    with pipeline:
        pipeline.collectives.timeout_s = 0.0
        fake.not_ready = True  # the first launches never finish: a peer died
        fake.calls.clear()
        with pytest.raises(CollectiveFailed, match="did not finish within 0 s"):
            _replay_quietly(pipeline, _replay_args(10 * IN_FLIGHT), tmp_path)
        assert [c.name for c in fake.calls].count("cuGraphLaunch") == IN_FLIGHT
        fake.not_ready = False


def test_without_collectives_the_replay_waits_only_at_log_points(tmp_path):
    path = tmp_path / "plain.pipe"
    path.write_text("buffer x: f32[8]\nstep {\n    fill x = 1\n}\n")
    with load(path, backends=Backends(fake_driver(path, fake=CapturingCuda))) as pipeline:
        assert pipeline.collectives is None
        fake = pipeline.driver.cu
        fake.calls.clear()
        _replay_quietly(pipeline, _replay_args(1000, log_every=500), tmp_path)
        assert _launches_between_waits(fake) == [500, 500]


# --- the TCPStore channel's reads ----------------------------------------------------------------


class _Store:
    """TCPStore's set, check and get over a dict. `get` of a missing key fails at once where the
    real one would block up to the rendezvous timeout first; `arrive` runs before every check,
    as another rank's writes."""

    def __init__(self, arrive=lambda store: None) -> None:
        self.values: dict[str, bytes] = {}
        self.arrive = arrive
        self.checks = 0

    def set(self, key: str, value) -> None:
        self.values[key] = value.encode() if isinstance(value, str) else bytes(value)

    def check(self, keys: list[str]) -> bool:
        self.checks += 1
        self.arrive(self)
        return all(key in self.values for key in keys)

    def get(self, key: str) -> bytes:
        if key not in self.values:
            raise RuntimeError(f"wait timeout after the rendezvous timeout for key {key}")
        return self.values[key]


def _channels(store: _Store) -> tuple[StoreChannel, StoreChannel]:
    """Ranks 1 and 0 of two, on one store (their channels' keys agree, as every rank opens its
    channels in the same order)."""
    mine = StoreChannel(Launch("srun", 1, 2, 1, "node0", 29500), store)
    other = StoreChannel(Launch("srun", 0, 2, 0, "node0", 29500), store)
    other.prefix = mine.prefix
    return mine, other


def test_a_channel_read_waits_for_a_value_that_arrives_later():
    def arrive(store):
        if store.checks == 5:  # rank 0's value, a few polls late
            other.store.set(other._key("gather1/0"), b"zero")
    mine, other = _channels(_Store(arrive))
    assert mine.allgather(b"one") == [b"zero", b"one"]


def test_a_channel_read_stops_at_another_ranks_failure_report():
    def arrive(store):
        if store.checks == 3:
            other.report_failure("it exited with status 1")
    mine, other = _channels(_Store(arrive))
    mine.timeout_s = 60.0
    started = time.monotonic()
    with pytest.raises(DistributedError) as error:
        mine.broadcast(b"", 0)
    assert str(error.value) == ("rank 1: another rank failed (rank 0: it exited with status 1) while this one "
                                "waited for it on the host channel")
    assert time.monotonic() - started < 5


def test_a_channel_read_gives_up_at_the_rendezvous_timeout():
    mine, _ = _channels(_Store())
    mine.timeout_s = 0.05
    with pytest.raises(DistributedError, match=r"rank 1: no answer on the host channel within 0 s "
                                               r"\(PIPEC_RENDEZVOUS_TIMEOUT\)"):
        mine.allgather(b"one")


def test_a_store_that_stops_answering_is_one_message():
    def gone(store):
        raise RuntimeError("Connection reset by peer")
    mine, _ = _channels(_Store(gone))
    with pytest.raises(DistributedError) as error:
        mine.allgather(b"one")
    assert str(error.value) == "rank 1: the host channel's store stopped answering: Connection reset by peer"


def test_a_store_that_fails_while_asked_for_failure_reports_is_one_message_too():
    class Flaky(_Store):
        def check(self, keys):
            if any(key.endswith("/failed") for key in keys):
                raise RuntimeError("Broken pipe")
            return super().check(keys)
    mine, _ = _channels(Flaky())
    with pytest.raises(DistributedError) as error:
        mine.allgather(b"one")
    assert str(error.value) == "rank 1: the host channel's store stopped answering: Broken pipe"
