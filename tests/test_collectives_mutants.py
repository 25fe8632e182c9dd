"""Tests that kill mutants scripts/mutate.py left alive in the multi-GPU code (CONTRIBUTING.md,
"Mutation testing"): the launcher variables' edge cases and srun's first host, and
`Collectives.wait`'s polling, back-off, failure reports and timeout, over a stand-in driver and a
clock that advances a quarter second per reading, so that every boundary is met exactly and
nothing really sleeps."""

from __future__ import annotations

import os
import subprocess
import threading
from types import SimpleNamespace

import pytest

from fake_cuda import fake_driver
from fake_nccl import CapturingCuda, FakeCommunicator, FakeLibrary, load_on_fake_ranks
from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.plan.schema import CollectiveNodeSpec
from pipec.runtime import collectives as collectives_module
from pipec.runtime import distributed as distributed_module
from pipec import load
from pipec.runtime import Backends, process_launchers
from pipec.runtime.collectives import WAIT_TIMEOUT_S, CollectiveFailed, Collectives, require_collectives
from pipec.runtime.distributed import Distributed, LocalChannel, StoreChannel, connect
from pipec.runtime.cli import IN_FLIGHT, _bounded, _emit
from pipec.runtime.driver import CudaError
from pipec.runtime.process_launchers import DistributedError, Launch, launch_from_environment
from pipec.runtime.nccl import IN_PROGRESS

NOT_READY, ILLEGAL_ADDRESS = 600, 700
ALLREDUCE = "buffer x: f32[8] = fill(1.5)\nstep {\n    allreduce sum x\n}\n"


# --- launchers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("env, expected", [
    # torch's older launchers and hand-set variables: no TORCHELASTIC_RUN_ID, but all three
    ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "node0"},
     Launch("torchrun", 1, 2, 0, "node0", 29500, False, "pipec/run/0")),
    # a RANK and WORLD_SIZE without MASTER_ADDR are some other tool's: no launcher
    ({"RANK": "1", "WORLD_SIZE": "2"}, None),
    ({"WORLD_SIZE": "2", "MASTER_ADDR": "node0"}, None),
    ({"RANK": "1", "MASTER_ADDR": "node0"}, None),
])
def test_torchrun_is_told_by_its_run_id_or_by_all_three_variables(env, expected):
    assert launch_from_environment(env) == expected


def test_without_an_argument_the_process_environment_is_read(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("TORCHELASTIC_", "OMPI_", "PMI_", "MPI_", "SLURM_")) or name in (
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            monkeypatch.delenv(name)
    assert launch_from_environment() is None
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    assert launch_from_environment() == Launch("mpirun", 3, 4, 0)


def test_without_a_launcher_a_collective_plan_opens_a_communicator_of_one_rank(tmp_path):
    path = tmp_path / "prog.pipe"
    path.write_text(ALLREDUCE)
    driver = fake_driver(path, fake=CapturingCuda)
    library = FakeLibrary(FakeCommunicator(driver.cu, 1, 0))
    ranks = lambda plan, launch: connect(plan, launch, LocalChannel(), library)  # noqa: E731
    with load(path, backends=Backends(driver, connect_ranks=ranks)) as pipeline:
        # (constants() also runs a line of runtime/process_launchers.py, so that scripts/mutate.py picks
        # this test for the import-time mutants of SINGLE)
        launch = pipeline.distributed.launch
        assert launch == Launch("none", 0, 1, 0)
        assert launch.constants() == {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0}
    assert library.opened == [(bytes(range(128)), 1, 0)]


SRUN = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77"}


def _scontrol(monkeypatch, answer):
    """`subprocess.run` in runtime/process_launchers.py answering `answer` (a stdout, or an exception to
    raise); the calls it was asked, with their options."""
    asked = []

    def run(argv, **options):
        asked.append((argv, options))
        if isinstance(answer, BaseException):
            raise answer
        return SimpleNamespace(stdout=answer)
    monkeypatch.setattr(process_launchers, "subprocess", SimpleNamespace(run=run, SubprocessError=subprocess.SubprocessError))
    return asked


@pytest.mark.parametrize("nodelists, asked_for", [
    ({"SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_NODELIST": "gpu[01-08]"}, "gpu[07-08]"),
    ({"SLURM_STEP_NODELIST": "gpu[07-08]"}, "gpu[07-08]"),
    ({"SLURM_JOB_NODELIST": "gpu[07-08]"}, "gpu[07-08]"),
])
def test_under_srun_without_master_addr_the_store_is_on_the_steps_first_node(monkeypatch, nodelists, asked_for):
    asked = _scontrol(monkeypatch, "gpu07\ngpu08\n")
    launch = launch_from_environment({**SRUN, **nodelists})
    assert launch == Launch("srun", 1, 2, 0, "gpu07", 29500, False, "pipec/77.0")
    assert asked == [(["scontrol", "show", "hostnames", asked_for],
                      {"capture_output": True, "text": True, "check": True, "timeout": 30})]


@pytest.mark.parametrize("answer", ["", FileNotFoundError("scontrol"),
                                    subprocess.CalledProcessError(1, "scontrol")])
def test_under_srun_a_first_node_scontrol_cannot_tell_is_one_message(monkeypatch, answer):
    _scontrol(monkeypatch, answer)
    with pytest.raises(DistributedError) as error:
        launch_from_environment(SRUN)
    assert str(error.value) == ("under srun, pipec needs MASTER_ADDR (the first node's name) when `scontrol show "
                                "hostnames` cannot tell it: export it in the batch script")


# --- Collectives.wait over a stand-in driver and clock ---------------------------------------------


class _Clock:
    """`time` for runtime/collectives.py: each reading is a quarter second after the one before
    (exact in binary, so boundaries are met exactly); `sleep` only records its pause."""

    def __init__(self, start: float = 100.0) -> None:
        self.now, self.pauses = start - 0.25, []

    def monotonic(self) -> float:
        self.now += 0.25
        assert self.now < 200, "the wait never ends"
        return self.now

    def sleep(self, pause: float) -> None:
        self.pauses.append(pause)


class _Driver:
    """runtime/driver.py's Driver, reduced to what `wait` uses: the queries answer `answers` in
    turn (then the last one for ever); a synchronize fails with `synchronize_error`."""

    success = 0

    def __init__(self, answers, synchronize_error=None) -> None:
        self.answers, self.synchronize_error = list(answers), synchronize_error
        self.queried, self.called = [], []
        self.cu = SimpleNamespace(cuStreamQuery=lambda what: self._answer("stream", what),
                                  cuEventQuery=lambda what: self._answer("event", what),
                                  CUresult=SimpleNamespace(CUDA_ERROR_NOT_READY=NOT_READY))

    def _answer(self, kind, what):
        self.queried.append((kind, what))
        return (self.answers.pop(0) if len(self.answers) > 1 else self.answers[0],)

    def call(self, name, *args):
        self.called.append((name, *args))
        if self.synchronize_error is not None:
            raise CudaError(name, self.synchronize_error)


class _Channel(LocalChannel):
    """A host channel whose failure reports answer `reports` in turn, at the clock's times."""

    def __init__(self, clock: _Clock, reports=(None,)) -> None:
        self.clock, self.reports = clock, list(reports)
        self.asked, self.failures = [], []

    def failure(self):
        self.asked.append(self.clock.now)
        return self.reports.pop(0) if len(self.reports) > 1 else self.reports[0]

    def report_failure(self, message: str) -> None:
        self.failures.append(message)


class _Communicator:
    def __init__(self, state: int = IN_PROGRESS) -> None:
        self.state, self.aborted = state, False

    def async_error(self) -> int:
        return self.state

    def abort(self) -> None:
        self.aborted = True


def _waiting(monkeypatch, answers, reports=(None,), timeout_s=WAIT_TIMEOUT_S, synchronize_error=None):
    clock = _Clock()
    monkeypatch.setattr(collectives_module, "time", clock)
    distributed = Distributed(Launch("torchrun", 0, 2, 0), _Channel(clock, reports), _Communicator())
    driver = _Driver(answers, synchronize_error)
    collectives = Collectives(distributed, None, SimpleNamespace(driver=driver), timeout_s)
    return collectives, clock, driver


def _closed(collectives) -> bool:
    """Join the abort `fail` began; whether it ran."""
    communicator = collectives.distributed.communicator
    collectives.distributed.close(failed=True)
    return communicator.aborted


def test_a_wait_polls_with_pauses_doubling_from_20us_to_1ms_and_never_synchronizes(monkeypatch):
    collectives, clock, driver = _waiting(monkeypatch, [NOT_READY] * 9 + [0])
    assert collectives.timeout_s == WAIT_TIMEOUT_S
    collectives.wait("stream")
    assert clock.pauses == pytest.approx([20e-6, 40e-6, 80e-6, 160e-6, 320e-6, 640e-6, 1e-3, 1e-3, 1e-3])
    assert driver.queried == [("stream", "stream")] * 10 and driver.called == []
    collectives.wait("stream", event="mark")
    assert driver.queried[10:] == [("event", "mark")]


def test_a_wait_asks_for_failure_reports_every_half_second(monkeypatch):
    collectives, clock, driver = _waiting(monkeypatch, [NOT_READY], [None, None, "rank 1: it exited with status 1"])
    with pytest.raises(CollectiveFailed) as error:
        collectives.wait("stream")
    assert str(error.value) == ("rank 0: another rank failed (rank 1: it exited with status 1); the NCCL "
                                "communicator is aborted")
    assert collectives.distributed.channel.asked == [100.5, 101.0, 101.5] and _closed(collectives)


def test_a_wait_gives_up_once_more_than_its_timeout_has_passed(monkeypatch):
    collectives, clock, driver = _waiting(monkeypatch, [NOT_READY], timeout_s=3.0)
    with pytest.raises(CollectiveFailed) as error:
        collectives.wait("stream")
    assert str(error.value) == ("rank 0: the step did not finish within 3 s (PIPEC_NCCL_TIMEOUT): a rank stopped "
                                "issuing its collectives; the NCCL communicator is aborted")
    assert clock.now == 103.25 and len(clock.pauses) == 12 and driver.called == []
    assert collectives.distributed.channel.failures == [
        "the step did not finish within 3 s (PIPEC_NCCL_TIMEOUT): a rank stopped issuing its collectives"]
    assert _closed(collectives)


@pytest.mark.parametrize("event, synchronize", [(None, "cuStreamSynchronize"), ("mark", "cuEventSynchronize")])
def test_a_failed_query_raises_the_drivers_own_error(monkeypatch, event, synchronize):
    collectives, clock, driver = _waiting(monkeypatch, [NOT_READY, ILLEGAL_ADDRESS],
                                          synchronize_error="CUDA_ERROR_ILLEGAL_ADDRESS")
    with pytest.raises(CudaError, match=f"{synchronize} failed: CUDA_ERROR_ILLEGAL_ADDRESS"):
        collectives.wait("stream", event)
    assert driver.called == [(synchronize, event or "stream")]


def test_an_abort_tells_the_other_ranks_once(monkeypatch):
    collectives, clock, driver = _waiting(monkeypatch, [0])
    collectives.abort("first")
    collectives.abort("second")
    assert collectives.distributed.channel.failures == ["first"] and _closed(collectives)


# --- issuing ------------------------------------------------------------------------------------------


def _collective_node(pipeline) -> CollectiveNodeSpec:
    return next(n for g in pipeline.plan.graph_tree(pipeline.plan.step) for n in g.nodes
                if isinstance(n, CollectiveNodeSpec))


def test_pipecs_own_errors_pass_through_issue_unchanged(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, ALLREDUCE)
    with pipeline:
        refusal = DistributedError("rank 0: the communicator was closed")

        def refuse(*args):
            raise refusal
        comm.allreduce = refuse
        with pytest.raises(DistributedError) as error:
            pipeline.collectives.issue(_collective_node(pipeline), pipeline.stream)
        assert error.value is refusal


def test_a_collective_node_without_a_communicator_is_one_message(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, ALLREDUCE)
    with pipeline:
        node = _collective_node(pipeline)
        assert require_collectives(pipeline.collectives, node) is pipeline.collectives
        with pytest.raises(CollectiveFailed) as error:
            require_collectives(None, node)
        assert str(error.value) == (f"`{node.name}` ({node.location}) is a collective, but this pipeline was "
                                    "built without a communicator")


# --- the TCPStore channel's reads over a stand-in store and the same clock ----------------------------


class _Store:
    """TCPStore's set, check and get over a dict."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def set(self, key: str, value) -> None:
        self.values[key] = value.encode() if isinstance(value, str) else bytes(value)

    def check(self, keys: list[str]) -> bool:
        return all(key in self.values for key in keys)

    def get(self, key: str) -> bytes:
        return self.values[key]


def _store_channels() -> tuple[StoreChannel, StoreChannel]:
    """Ranks 0 and 1 of two on one store, their keys agreeing (as every rank opens its channels
    in the same order)."""
    store = _Store()
    zero, one = (StoreChannel(Launch("srun", r, 2, r, "node0", 29500), store) for r in (0, 1))
    one.prefix = zero.prefix
    return zero, one


def test_a_channel_read_polls_with_pauses_doubling_from_1ms_to_100ms_until_its_timeout(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(distributed_module, "time", clock)
    zero, one = _store_channels()
    one.timeout_s = 3.0
    with pytest.raises(DistributedError) as error:
        one.broadcast(b"", 0)  # rank 0 never broadcasts
    assert str(error.value) == ("rank 1: no answer on the host channel within 3 s (PIPEC_RENDEZVOUS_TIMEOUT): "
                                "a rank stopped")
    assert clock.now == 103.25
    assert clock.pauses == pytest.approx([1e-3, 2e-3, 4e-3, 8e-3, 16e-3, 32e-3, 64e-3, 0.1, 0.1, 0.1, 0.1, 0.1])


def test_each_broadcast_is_a_round_of_its_own_and_only_the_root_sets_it():
    zero, one = _store_channels()
    assert [zero.broadcast(b"first", 0), zero.broadcast(b"second", 0)] == [b"first", b"second"]
    assert [one.broadcast(b"", 0), one.broadcast(b"ignored", 0)] == [b"first", b"second"]
    assert LocalChannel().broadcast(b"alone", 0) == b"alone"


# --- Distributed: the abort on its thread, joined at close ---------------------------------------------


class _Closing:
    """A communicator that counts its aborts and destroys; its abort raises `error`, or waits
    for `release` first."""

    def __init__(self, error: BaseException | None = None, release: threading.Event | None = None) -> None:
        self.error, self.release = error, release
        self.aborts = self.destroys = 0

    def abort(self) -> None:
        self.aborts += 1
        if self.release is not None:
            self.release.wait(10)
        if self.error is not None:
            raise self.error

    def destroy(self) -> None:
        self.destroys += 1


def _distributed(communicator) -> Distributed:
    return Distributed(Launch("torchrun", 0, 2, 0), LocalChannel(), communicator)


def test_a_clean_close_destroys_the_communicator_once():
    communicator = _Closing()
    distributed = _distributed(communicator)
    distributed.close()
    distributed.close()
    assert (communicator.destroys, communicator.aborts, distributed.communicator) == (1, 0, None)
    _distributed(None).close()  # no collectives: nothing to close
    _distributed(None).begin_abort()


def test_an_abort_begins_once_on_a_daemon_thread_and_close_joins_it():
    communicator = _Closing()
    distributed = _distributed(communicator)
    distributed.begin_abort()
    thread = distributed._abort
    distributed.begin_abort()
    assert distributed._abort is thread and thread.daemon  # a hung abort must not keep the process alive
    distributed.close()
    distributed.close()
    assert (communicator.aborts, communicator.destroys, distributed.communicator) == (1, 0, None)
    assert not thread.is_alive()


def test_close_after_a_failure_raises_the_aborts_own_error():
    refusal = RuntimeError("ncclInvalidUsage")
    distributed = _distributed(_Closing(error=refusal))
    with pytest.raises(RuntimeError) as error:
        distributed.close(failed=True)
    assert error.value is refusal and distributed.communicator is None


def test_close_gives_up_on_an_abort_that_does_not_return(monkeypatch):
    monkeypatch.setattr(distributed_module, "ABORT_JOIN_S", 0.05)
    release = threading.Event()
    communicator = _Closing(release=release)
    distributed = _distributed(communicator)
    try:
        with pytest.raises(DistributedError) as error:
            distributed.close(failed=True)
        assert str(error.value) == ("ncclCommAbort did not return within 0 s of the step graph's destruction; "
                                    "the process should exit")
        assert communicator.aborts == 1 and distributed.communicator is None
    finally:
        release.set()


# --- piperun's bounded replay and its JSON lines ---------------------------------------------------------


def _bounded_over(nodes: int):
    """runtime/cli.py's `_bounded` over a stand-in pipeline of `nodes` nodes a step: what it
    ran, recorded and waited for, in order."""
    done = []
    pipeline = SimpleNamespace(
        eager=SimpleNamespace(nodes=range(nodes)), stream="stream",
        driver=SimpleNamespace(call=lambda name, event, stream: done.append(("record", event))),
        collectives=SimpleNamespace(wait=lambda stream, event: done.append(("wait", event))))
    run = _bounded(lambda n: done.append(("run", n)), pipeline, ["m0", "m1"])
    return run, done


def test_each_bounded_wait_is_for_the_chunk_before_the_one_just_enqueued():
    run, done = _bounded_over(1)
    run(300)
    half = IN_FLIGHT // 2
    assert done == [("run", half), ("record", "m0"),
                    ("run", half), ("record", "m1"), ("wait", "m0"),
                    ("run", 300 - 2 * half), ("record", "m0"), ("wait", "m1")]
    run(1)  # the chunks count on across calls
    assert done[8:] == [("run", 1), ("record", "m1"), ("wait", "m0")]


@pytest.mark.parametrize("nodes, per_chunk", [(18, IN_FLIGHT // 2 // 18), (IN_FLIGHT // 2, 1)])
def test_a_launch_counts_as_the_nodes_of_its_step(nodes, per_chunk):
    # an 18-node graph filled the H200's launch queue at 256 launches: launches are bounded by nodes
    run, done = _bounded_over(nodes)
    run(3 * per_chunk)
    assert [n for what, n in done if what == "run"] == [per_chunk] * 3


@pytest.mark.parametrize("nodes", [IN_FLIGHT // 2 - 28, IN_FLIGHT // 2 + 1])
def test_a_step_with_more_nodes_than_half_in_flight_is_a_chunk_of_its_own(nodes):
    run, done = _bounded_over(nodes)
    run(2)
    assert done == [("run", 1), ("record", "m0"), ("run", 1), ("record", "m1"), ("wait", "m0")]


def test_each_json_line_is_flushed_at_once():
    events = []
    _emit({"event": "summary"}, SimpleNamespace(write=lambda text: events.append(text),
                                                flush=lambda: events.append("flush")))
    assert events == ['{"event": "summary"}\n', "flush"]


# --- the checks of grouped collectives (compiler/resolve/collectives.py) ------------------------------------


def _errors(tmp_path, text: str) -> list:
    path = tmp_path / "prog.pipe"
    path.write_text(text)
    settings = override(load_settings(path), defines=(("WORLD_SIZE", "2"),))
    return [d for d in compile_file(path, settings).diagnostics if d.severity.value == "error"]


def test_views_that_only_touch_are_distinct_in_either_order(tmp_path):
    assert _errors(tmp_path, "buffer a: f32[8]\nstep { allreduce sum a[4:8], a[0:4] }") == []


def test_a_group_naming_one_view_three_times_is_one_error(tmp_path):
    [error] = _errors(tmp_path, "buffer a: f32[8]\nstep { allreduce sum a, a, a }")
    assert error.code == "PC604" and error.message == "`allreduce` names elements [0:8] of `a` twice"


def test_inside_nested_device_branches_the_innermost_flag_is_named(tmp_path):
    [error] = _errors(tmp_path, "buffer a: f32[8]\nbuffer f: i32[1]\nbuffer g: i32[1]\n"
                                "step { if f[0] { if g[0] { allreduce sum a } } }")
    assert error.code == "PC603" and "`g` decides on the device" in error.message, error.message
