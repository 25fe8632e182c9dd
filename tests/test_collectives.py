"""Collectives without a GPU: the statements, their checks and lowering, the collective
sequence and its hash, the launcher environments, and the runtime built over the fake driver
with a fake NCCL communicator (tests/fake_nccl.py). The same on two real GPUs: tests/gpu2/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fake_cuda import fake_driver
from fake_nccl import CapturingCuda, FakeCommunicator, FakeLibrary, load_on_fake_ranks
from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.plan.schema import (
    CollectiveNodeSpec, collective_sequence, collective_sequence_hash, from_json, to_json,
)
from pipec.dsl import SourceFile, ast, parse
from pipec import load
from pipec.runtime import Backends, PipelineError
from pipec.runtime.memory import BindError
from pipec.runtime.collectives import CollectiveFailed
from pipec.runtime.profile_analysis import ProfileError

from pipec.runtime.distributed import (
    Distributed, LocalChannel, check_collective_sequence, connect, nccl_environment, replicated_differences,
    stop_other_ranks,
)
from pipec.runtime.process_launchers import DistributedError, Launch, launch_from_environment

ROOT = Path(__file__).resolve().parents[1]
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"

PROGRAM = """
const N = 8
buffer x: f32[N] replicated = fill(1.5)
buffer parts: f32[WORLD_SIZE * N]
buffer mine: f32[N]
buffer counts: i32[4] = fill(3)
init {
    broadcast x from 0
}
step {
    allreduce sum x
    allgather x -> parts
    reducescatter avg parts -> mine
    allreduce max counts
}
"""


def _compile(tmp_path: Path, text: str, **defines):
    path = tmp_path / "prog.pipe"
    path.write_text(text)
    settings = override(load_settings(path), defines=tuple((k, str(v)) for k, v in defines.items()) or None)
    return compile_file(path, settings)


def _codes(compilation) -> list[str]:
    return [d.code for d in compilation.diagnostics]


# --- the language ----------------------------------------------------------------------------


def test_the_four_statements_parse_and_max_stays_a_function():
    text = "step {\n allreduce max g\n broadcast g[0:4] from RANK\n allgather a -> b\n reducescatter sum b -> a\n" \
           " launch k<<<max(1, 2), 1>>>(g)\n}\n"
    stmts = parse(SourceFile(Path("t.pipe"), text)).decls[0].body.stmts
    assert [(s.kind, s.op.text if s.op else None) for s in stmts[:4]] == [
        ("allreduce", "max"), ("broadcast", None), ("allgather", None), ("reducescatter", "sum")]
    assert isinstance(stmts[1].views[0], ast.Slice) and stmts[1].root.ident.text == "RANK"
    assert stmts[2].dst.ident.text == "b" and isinstance(stmts[4].grid, ast.Call)


def test_lowering_gives_one_collective_node_per_statement_chained_by_the_token(tmp_path):
    compilation = _compile(tmp_path, PROGRAM, WORLD_SIZE=2, RANK=1)
    assert _codes(compilation) == []
    plan = compilation.plan
    nodes = [n for n in plan.graphs[plan.step].nodes if isinstance(n, CollectiveNodeSpec)]
    assert [(n.collective, n.op, o.dtype, o.count, o.src, o.dst, n.root) for n in nodes for o in n.operands] == [
        ("allreduce", "sum", "f32", 8, "x", "x", None), ("allgather", None, "f32", 8, "x", "parts", None),
        ("reducescatter", "avg", "f32", 8, "parts", "mine", None), ("allreduce", "max", "i32", 4, "counts", "counts", None)]
    # `counts` shares no buffer with the others: only the communicator's token orders it
    assert (2, 3) in plan.graphs[plan.step].edges
    assert [h.buffer for h in plan.graphs[plan.step].hazards if (h.src, h.dst) == (2, 3)] == ["pipec.nccl"]
    assert plan.buffer("x").replicated and not plan.buffer("parts").replicated
    assert from_json(to_json(plan)) == plan
    assert [n.describe() for n in collective_sequence(plan)][0] == "broadcast 8 x f32 from 0 (init/broadcast:x)"


@pytest.mark.parametrize("text, code, message", [
    ("buffer a: f32[8]\nbuffer b: f32[8]\nstep { allgather a -> b }", "PC602", "2 x 8 = 16 elements, found 8"),
    ("buffer a: f32[16]\nstep { allgather a[0:8] -> a }", None, ""),  # in place: rank 0's slot
    ("buffer a: f32[16]\nstep { allgather a[8:16] -> a }", "PC602", "outside this rank's slot [0:8]"),
    ("buffer a: f32[8]\nstep { broadcast a from WORLD_SIZE }", "PC602", "root rank 2 lies outside"),
    ("const ME = RANK + 1\nbuffer a: f32[8]\nstep { for i in 0 .. ME { allreduce sum a } }", "PC603",
     "a loop's bounds depend on the rank"),
    ("buffer a: f32[8]\ngraph g(k) { allreduce sum a }\nstep { g(RANK) }", "PC603", "a graph argument depends"),
    ("buffer a: f32[8]\nstep { if RANK == 1 { allreduce sum a } }", "PC603", "a condition depends on the rank"),
    ("buffer a: f32[8]\nstep { every 10 { allreduce sum a } }", None, ""),
    ("buffer a: f32[8]\nbuffer f: i32[1]\nstep { while f[0] { allreduce sum a\n fill f = 0 } }", "PC603",
     "`f` decides on the device"),
    ("const RANK = 3\nbuffer a: f32[8]\nstep { allreduce sum a }", "PC104", "a launcher constant"),
    ("buffer a: f32[8]\nstep { broadcast a from RANK }", "PC603", "root `RANK` reads the rank"),
    ("buffer a: f32[8]\nstep { allreduce sum a[0:8 - RANK] }", "PC603", "holds 8 on rank 0, 7 on rank 1"),
    ("buffer a: f32[16]\nstep { allgather a[RANK * 8:(RANK + 1) * 8] -> a }", None, ""),  # an offset only
    ("buffer a: f32[8]\nstep { every RANK + 1 { allreduce sum a } }", "PC603", "`RANK + 1`, reads the rank"),
    ("buffer a: f32[8]\nstep { repeat RANK { allreduce sum a } }", "PC603", "`RANK`, reads the rank"),
    ("buffer a: f32[8]\nstep { repeat WORLD_SIZE { allreduce sum a } }", None, ""),
])
def test_checks_at_a_world_of_two(tmp_path, text, code, message):
    compilation = _compile(tmp_path, text, WORLD_SIZE=2)
    found = [d for d in compilation.diagnostics if d.severity.value == "error"]
    if code is None:
        assert found == []
    else:
        assert [d.code for d in found] == [code] and message in found[0].message, found


def test_launcher_constants_out_of_range(tmp_path):
    compilation = _compile(tmp_path, "buffer a: f32[8]\nstep { allreduce sum a }", WORLD_SIZE=2, RANK=2)
    assert _codes(compilation) == ["PC105"] and "RANK 2 lies outside a world of 2" in compilation.diagnostics[0].message


# --- the collective sequence ----------------------------------------------------------------------


def _plan(path, **defines):
    settings = override(load_settings(path), defines=tuple((k, str(v)) for k, v in defines.items()) or None)
    return compile_file(path, settings).plan


def test_rl_step_is_data_parallel_beyond_one_rank_and_every_rank_agrees():
    one = _plan(RL_STEP)
    assert collective_sequence(one) == []
    ranks = [_plan(RL_STEP, WORLD_SIZE=2, RANK=r, LOCAL_RANK=r) for r in (0, 1)]
    sequence = [n.describe().split(" (")[0] for n in collective_sequence(ranks[0])]
    # the flag and the update count grouped, the gradient and its norm parts grouped
    assert sequence == ["broadcast 4610 x f32 from 0", "allreduce max 1 x i32, 1 x i32",
                        "allreduce avg 4610 x f32, 73 x f32", "allreduce avg 1 x f32"]
    assert collective_sequence_hash(ranks[0]) == collective_sequence_hash(ranks[1])
    assert collective_sequence_hash(ranks[0]) != collective_sequence_hash(_plan(RL_STEP, WORLD_SIZE=2, UPDATES=2))


class _Ranks:
    """The host channel as rank `rank` sees it, the other ranks' messages given."""

    def __init__(self, rank: int, gathered: list[bytes], broadcast: bytes) -> None:
        self.rank, self.gathered, self.from_root = rank, gathered, broadcast
        self.failures: list[str] = []

    def allgather(self, value: bytes) -> list[bytes]:
        return [value if r == self.rank else v for r, v in enumerate(self.gathered)]

    def broadcast(self, value: bytes, root: int) -> bytes:
        return value if self.rank == root else self.from_root

    def report_failure(self, message: str) -> None:
        self.failures.append(message)

    def failure(self):
        return None

    def abort_all(self) -> None:
        pass


def test_a_rank_whose_plan_differs_refuses_naming_the_first_difference():
    import json
    ours, theirs = _plan(RL_STEP, WORLD_SIZE=2, RANK=1, UPDATES=2), _plan(RL_STEP, WORLD_SIZE=2)
    reference = json.dumps([n.describe() for n in collective_sequence(theirs)]).encode()
    channel = _Ranks(1, [collective_sequence_hash(theirs).encode(), b""], reference)
    with pytest.raises(DistributedError) as refused:
        check_collective_sequence(ours, channel, 1)
    assert str(refused.value) == (
        "rank 1's plan differs from rank 0's at collective 4: rank 0 issues `allreduce avg 1 x f32 "
        "(step/allreduce:loss_ema)`, rank 1 `allreduce avg 4610 x f32, 73 x f32 "
        "(step/optimize[1]/allreduce:grad+gnorm_part)`; "
        "every rank must issue the same collectives in the same order")
    same = collective_sequence_hash(theirs).encode()
    with pytest.raises(DistributedError) as refused:  # a third rank differs; this one agrees with rank 0
        check_collective_sequence(theirs, _Ranks(1, [same, same, b"other"], reference), 1)
    assert str(refused.value) == ("rank 2's plan issues different collectives than rank 0's; this rank (1) "
                                  "agrees with rank 0: see rank 2's message")


# --- launchers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("env, expected", [
    ({}, None),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "29400",
      "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "2"},
     Launch("torchrun", 1, 2, 1, "node0", 29400, True, "pipec/abc/2")),
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1"},
     Launch("mpirun", 3, 4, 1)),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "MASTER_ADDR": "gpu07",
      "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}, Launch("srun", 5, 8, 1, "gpu07", 29500, False, "pipec/77.0")),
    # an older srun's step id only as SLURM_STEPID
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "MASTER_ADDR": "gpu07", "SLURM_JOB_ID": "77", "SLURM_STEPID": "2"},
     Launch("srun", 5, 8, 0, "gpu07", 29500, False, "pipec/77.2")),
    # a batch script run without srun: the job's task count, but no step: one process
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "77"}, None),
    # MPICH's Hydra and Intel MPI; another PMI launcher's local rank
    ({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1"}, Launch("mpirun", 3, 4, 1)),
    ({"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1"}, Launch("mpirun", 3, 4, 1)),
    # Hydra under Slurm: its proxies are srun tasks, one a node, whose variables the ranks inherit
    ({"PMI_RANK": "7", "PMI_SIZE": "8", "MPI_LOCALRANKID": "3", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
      "SLURM_STEP_ID": "0"}, Launch("mpirun", 7, 8, 3)),
    # srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE but no local rank: srun's variables tell it
    ({"PMI_RANK": "5", "PMI_SIZE": "8", "SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
      "MASTER_ADDR": "gpu07", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"},
     Launch("srun", 5, 8, 1, "gpu07", 29500, False, "pipec/77.0")),
    # Open MPI's variables come first
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "PMI_RANK": "0", "PMI_SIZE": "1"},
     Launch("mpirun", 3, 4, 0)),
])
def test_launcher_environments(env, expected):
    assert launch_from_environment(env) == expected


def test_a_broken_launcher_environment_is_one_message():
    with pytest.raises(DistributedError, match="incomplete or not a number"):
        launch_from_environment({"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "2"})
    with pytest.raises(DistributedError) as error:
        launch_from_environment({"PMI_RANK": "1", "PMI_SIZE": "2"})
    assert str(error.value) == ("an MPI launcher set PMI_RANK but neither MPI_LOCALRANKID nor PMI_LOCAL_RANK: "
                                "pipec cannot tell this rank's local rank")
    assert Launch("mpirun", 3, 4, 1).constants() == {"RANK": 3, "WORLD_SIZE": 4, "LOCAL_RANK": 1}


def test_nccl_settings_are_set_whatever_the_environment_held():
    env = {"NCCL_NVLS_ENABLE": "1", "NCCL_RUNTIME_CONNECT": "0", "NCCL_DEBUG": "WARN"}
    assert nccl_environment(env) == {"NCCL_NVLS_ENABLE": "0", "NCCL_GRAPH_MIXING_SUPPORT": "0"}
    assert env == {"NCCL_NVLS_ENABLE": "0", "NCCL_GRAPH_MIXING_SUPPORT": "0", "NCCL_RUNTIME_CONNECT": "0",
                   "NCCL_DEBUG": "WARN"}


# --- the runtime over the fake driver -----------------------------------------------------------------


class _NoBindings:
    """Neither nccl4py nor CuPy installed, as runtime/nccl.py meets it."""

    def new_unique_id(self) -> bytes:
        raise ImportError("No module named 'cupy'")


def test_without_nccl_bindings_a_collective_plan_says_what_to_install():
    plan = _plan(RL_STEP, WORLD_SIZE=1)
    single = Launch("none", 0, 1, 0)
    with pytest.raises(DistributedError) as error:
        connect(_plan(RL_STEP, WORLD_SIZE=2, RANK=0), Launch("torchrun", 0, 2, 0), LocalChannel(), _NoBindings())
    assert str(error.value) == ("collective nodes need NCCL's Python bindings (No module named 'cupy'): "
                                "install `pipec[nccl12]` or `pipec[nccl13]`")
    assert connect(plan, single, LocalChannel(), _NoBindings()).communicator is None  # no collective: no NCCL


def test_graph_and_eager_issue_the_same_nccl_calls(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, PROGRAM)
    with pipeline:
        # init ran eagerly (broadcast); the step's four calls were each recorded on a private stream
        assert [(c[0], c[4]) for c in comm.calls] == [("broadcast", False)] + [
            (k, True) for k in ("allreduce", "allgather", "reducescatter", "allreduce")]
        root = fake.executables[pipeline.graph.exec]
        assert [n.kind for n in root.nodes] == ["graph"] * 4
        assert [n.child.nodes[0].work.function for n in root.nodes] == [
            "ncclDevKernel_allreduce", "ncclDevKernel_allgather", "ncclDevKernel_reducescatter", "ncclDevKernel_allreduce"]
        pipeline.step()
        graph_state = pipeline.snapshot()
        assert graph_state["x"].tolist() == [3.0] * 8  # a sum over two ranks holding 1.5
        assert graph_state["parts"].tolist() == [3.0] * 16 and graph_state["mine"].tolist() == [3.0] * 8
        pipeline.restore({"x": np.full(8, 1.5, np.float32), "counts": np.full(4, 3, np.int32)})
        pipeline.run_eager()
        assert pipeline.snapshot()["x"].tolist() == [3.0] * 8 and len(comm.calls) == 9
        assert pipeline.verify(2).ok
        assert replicated_differences(pipeline, 2) == []  # one channel: nothing to differ from
        assert pipeline.snapshot()["x"].tolist() == [3.0] * 8  # verify and the comparison restore the state
        assert len(comm.calls) == 9 + 4 * 2  # verify's eager steps; the replays issue nothing new
    assert comm.destroyed and not comm.aborted
    assert fake.live() == dict.fromkeys(fake.live(), 0), "recordings must be destroyed with the pipeline"


def test_a_recording_may_hold_nccls_host_node_but_no_event_node(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, PROGRAM, extra_node="host")
    with pipeline:
        assert [n.kind for n in fake.executables[pipeline.graph.exec].nodes[0].child.nodes] == ["host", "kernel"]
    # pipec.load reports a refused recording as one PipelineError line, naming the node
    with pytest.raises(PipelineError, match=r"prog.pipe: allreduce `step/allreduce:x` \(.*prog.pipe:11:5\): the "
                       r"library call recorded 1 node of another kind \(event_record\); a library node may hold kernel, memset, "
                       "host nodes and device-to-device copies only"):
        load_on_fake_ranks(tmp_path, PROGRAM, extra_node="event_record")


def test_on_one_rank_nccls_copies_are_recorded_and_the_collectives_fixture_runs():
    """Without a launcher a plan with collectives runs on a communicator of one rank, where NCCL
    records an out-of-place call as a device-to-device copy (and an in-place one as nothing, a
    float average as its one-rank kernel): a recording may hold such copies."""
    path = ROOT / "tests" / "fixtures" / "runtime" / "collectives.pipe"
    driver = fake_driver(path, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, 1, 0)
    ranks = lambda plan, launch: connect(plan, launch, LocalChannel(), FakeLibrary(communicator))  # noqa: E731
    with load(path, backends=Backends(driver, connect_ranks=ranks)) as pipeline:
        recordings = [n.child.nodes for n in driver.cu.executables[pipeline.graph.exec].nodes if n.kind == "graph"]
        # allgather, allreduce sum, avg, max, sum (bf16), broadcast, reducescatter, the two groups
        assert [[n.kind for n in nodes] for nodes in recordings] == [
            ["memcpy"], [], ["kernel"], [], [], [], ["memcpy"], [], []]
        gather, scatter = recordings[0][0].work, recordings[6][0].work
        assert (gather.nbytes, scatter.nbytes) == (4096 * 4, 4096 * 4)
        pipeline.step(3)
        state = pipeline.snapshot()
        assert all((state[name] == 1).all() for name in ("x", "mean", "top", "gathered", "piece", "group_count"))
        assert pipeline.verify(2).ok
    assert driver.cu.live() == dict.fromkeys(driver.cu.live(), 0)


def test_a_recorded_copy_to_host_memory_is_refused_naming_it(tmp_path):
    """One rank's allgather into a `mapped` buffer is NCCL's copy from device to pinned host
    memory, which a replay must not do (PC304's pitfall)."""
    mapped = PROGRAM.replace("buffer parts: f32[WORLD_SIZE * N]", "buffer parts: f32[WORLD_SIZE * N] mapped")
    with pytest.raises(PipelineError, match=r"prog.pipe: allgather `step/allgather:parts` \(.*prog.pipe:12:5\): the "
                       r"library call recorded 1 node of another kind \(a copy from device to host memory\); a library "
                       "node may hold kernel, memset, host nodes and device-to-device copies only\n$"):
        load_on_fake_ranks(tmp_path, mapped, world_size=1)


class _Disagreeing(_Ranks):
    """A second rank whose `x` holds other bits."""

    def allgather(self, value: bytes) -> list[bytes]:
        import json
        other = {**json.loads(value), "x": "0" * 64}
        return [value, json.dumps(other).encode()]


def test_replicated_buffers_that_differ_are_named_and_a_failing_rank_stops_the_others(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, PROGRAM)
    with pipeline:
        channel = pipeline.distributed.channel = _Disagreeing(0, [], b"")
        assert replicated_differences(pipeline, 3) == [
            "replicated buffer `x` differs between rank 0 and rank 1 after 3 steps"]
        stop_other_ranks(pipeline, "it exited with status 1")
        assert channel.failures == ["it exited with status 1"]
        assert not comm.aborted  # begun, but NCCL's abort waits for the step graph, destroyed at close
    assert comm.aborted and not comm.destroyed


def test_an_nccl_error_aborts_and_tells_the_other_ranks(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, PROGRAM)
    with pipeline:
        channel = pipeline.distributed.channel = _Ranks(0, [b"", b""], b"")
        pipeline.step()
        fake.not_ready, comm.state = True, 5  # the step never finishes; NCCL reports ncclInternalError
        with pytest.raises(CollectiveFailed, match="rank 0: NCCL reported error 5 while the step ran; "
                                                   "the NCCL communicator is aborted"):
            pipeline.synchronize()
        assert channel.failures == ["NCCL reported error 5 while the step ran"]
        with pytest.raises(CollectiveFailed, match="rank 0: the NCCL communicator is aborted"):
            pipeline.read("x")  # nothing waits on a failed communicator
        with pytest.raises(CollectiveFailed, match="rank 0: the NCCL communicator is aborted"):
            pipeline.run_eager(1)  # nor issues to it
    # aborted (begun at the failure, which ended the spinning step; done once the graph holding
    # its recordings was destroyed), never destroyed: destroy would wait for the other ranks
    assert comm.aborted and not comm.destroyed


def test_a_pipeline_that_fails_to_build_aborts_its_communicator(tmp_path):
    path = tmp_path / "prog.pipe"
    path.write_text(PROGRAM)
    driver = fake_driver(path, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, 2, 0)
    with pytest.raises(BindError):  # a bind of no buffer: BufferSet fails, before any graph
        load(path, launch=Launch("torchrun", 0, 2, 0), bind={"no_such_buffer": object()},
             backends=Backends(driver, connect_ranks=lambda plan, launch: connect(plan, launch, LocalChannel(),
                                                                               FakeLibrary(communicator))))
    assert communicator.aborted


def test_the_profile_refuses_collective_nodes_in_one_line(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, PROGRAM)
    with pipeline, pytest.raises(ProfileError, match=r"prog.pipe: the profile does not cover collective nodes yet"):
        pipeline.profile()


def test_tuned_gemms_are_refused_on_several_ranks(tmp_path):
    with pytest.raises(PipelineError, match=r"--tune-gemms.*rank"):
        load_on_fake_ranks(tmp_path, PROGRAM, tune_gemms=True)


def test_a_wait_gives_up_after_its_timeout(tmp_path):
    pipeline, fake, comm = load_on_fake_ranks(tmp_path, PROGRAM)
    with pipeline:
        pipeline.collectives.timeout_s = 0.0
        fake.not_ready = True
        with pytest.raises(CollectiveFailed, match="did not finish within 0 s"):
            pipeline.synchronize()
        fake.not_ready = False
    assert comm.aborted


def test_rl_step_builds_on_two_fake_ranks():
    driver = fake_driver(RL_STEP, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, 2, 1)
    ranks = lambda plan, launch: Distributed(launch, LocalChannel(), communicator)  # noqa: E731
    with load(RL_STEP, launch=Launch("mpirun", 1, 2, 1), backends=Backends(driver, connect_ranks=ranks)) as pipeline:
        assert [c[0] for c in communicator.calls] == ["broadcast", "allreduce", "allreduce", "allreduce",
                                                     "allreduce", "allreduce"]
        # learn_on with adam_t, grad with gnorm_part: two groups of two, then loss_ema alone
        assert communicator.groups == [["allreduce", "allreduce"]] * 2
        step = pipeline.plan.graph_tree(pipeline.plan.step)
        assert sum(isinstance(n, CollectiveNodeSpec) for g in step for n in g.nodes) == 3
        assert len(pipeline.graph.library_kernels) == 3  # each recorded, and its recording destroyed
        assert [b.name for b in pipeline.plan.buffers if b.replicated][:3] == ["step_ctr", "sched", "learn_on"]


def test_each_json_line_is_one_write_so_ranks_sharing_stdout_cannot_interleave():
    from pipec.runtime.cli import _emit

    class Recorder:
        def __init__(self):
            self.writes: list[str] = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            pass

    out = Recorder()
    _emit({"event": "summary", "rank": 1}, out)
    assert out.writes == ['{"event": "summary", "rank": 1}\n']
