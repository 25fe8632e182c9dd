"""Several processes, one GPU each, started by a launcher pipec does not replace (which one,
and this process's rank: runtime/process_launchers.py). This module opens a host channel between the
ranks through the launcher's own rendezvous (torch.distributed's TCPStore for torchrun and
srun, MPI for mpirun), creates the NCCL communicator once, and refuses to start when the ranks'
plans would issue different collectives. Without a launcher, a plan with collectives runs on
a communicator of one rank.
"""

from __future__ import annotations

import os
import hashlib
import itertools
import json
import threading
import time
from dataclasses import dataclass
from collections.abc import MutableMapping
from typing import Protocol

from ..plan.schema import Plan, collective_sequence, collective_sequence_hash
from ..errors import Error
from ..wording import counted, plural
from .process_launchers import DistributedError, Launch, timeout_from_environment
from .nccl import Communicator

_CHANNELS = itertools.count()  # store channels opened by this process
STORE_POLL_S = 0.1  # the longest slice a host channel read waits before it looks for failure reports
NCCL_SETTINGS = (("NCCL_NVLS_ENABLE", "0"), ("NCCL_GRAPH_MIXING_SUPPORT", "0"), ("NCCL_RUNTIME_CONNECT", "0"))


def nccl_environment(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """NCCL's settings pipec needs, set whatever the environment held (each one is needed for
    pipec to be safe, not a preference): NVLink SHARP (NVLS, multicast objects) off, as the
    shared H200 machines require; graph mixing off, so that a recorded collective holds no
    event nodes (with it on, NCCL joins its internal stream by event nodes, which a library
    recording refuses; pipec never has an eager collective in flight beside a graph); and
    connections made when the communicator is created, not lazily inside the first collective,
    which for pipec is a recording. Returns the values it changed."""
    env = os.environ if env is None else env
    changed = {}
    for name, value in NCCL_SETTINGS:
        if env.get(name) != value:
            env[name] = value
            changed[name] = value
    return changed


# --- the host channel between the ranks ---------------------------------------------------------


class Channel(Protocol):
    """Small host messages between the ranks, through the launcher's own rendezvous."""

    def broadcast(self, value: bytes, root: int) -> bytes: ...
    def allgather(self, value: bytes) -> list[bytes]: ...
    def report_failure(self, message: str) -> None: ...
    def failure(self) -> str | None: ...  # another rank's failure message, if one was reported
    def abort_all(self) -> None: ...  # stop every rank now (MPI_Abort), where the launcher can


class StoreChannel:
    """torch.distributed's TCPStore: torchrun's agent store, or one rank 0 hosts (srun). `store`
    is a store already open (a test's stand-in); without it the channel opens the TCPStore."""

    def __init__(self, launch: Launch, store=None) -> None:
        self.launch = launch
        self.timeout_s = timeout_from_environment("PIPEC_RENDEZVOUS_TIMEOUT")
        self.store = store if store is not None else self._open_store(launch, self.timeout_s)
        # every rank opens its channels in the same order, so the count names the same keys
        self.prefix = f"{launch.namespace}/{next(_CHANNELS)}"
        self.rounds = 0

    @staticmethod
    def _open_store(launch: Launch, timeout_s: float):
        from datetime import timedelta

        from torch.distributed import TCPStore
        # torchrun's agent store runs already: join it without counting workers; otherwise
        # rank 0 hosts the store and waits until every rank has joined
        counted = not launch.agent_store
        return TCPStore(launch.master_addr, launch.master_port,
                        world_size=launch.world_size if counted else None,
                        is_master=counted and launch.rank == 0,
                        timeout=timedelta(seconds=timeout_s), wait_for_workers=counted)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def _read(self, key: str) -> bytes:
        """The value another rank sets at `key`. TCPStore.get would wait for it up to the whole
        rendezvous timeout, even for a rank that has failed and said so; this read polls in
        short slices and stops at a failure report."""
        deadline = time.monotonic() + self.timeout_s
        pause = 1e-3
        while True:
            try:
                if self.store.check([key]):
                    return bytes(self.store.get(key))
                other = self.failure()
            except RuntimeError as error:  # the store's own errors: its host (rank 0 under srun) is gone
                raise DistributedError(f"rank {self.launch.rank}: the host channel's store stopped answering: "
                                       f"{error}") from None
            if other is not None:
                raise DistributedError(f"rank {self.launch.rank}: another rank failed ({other}) while this one "
                                       "waited for it on the host channel")
            if time.monotonic() > deadline:
                raise DistributedError(f"rank {self.launch.rank}: no answer on the host channel within "
                                       f"{self.timeout_s:.0f} s (PIPEC_RENDEZVOUS_TIMEOUT): a rank stopped")
            time.sleep(pause)
            pause = min(pause * 2, STORE_POLL_S)

    def broadcast(self, value: bytes, root: int) -> bytes:
        self.rounds += 1
        key = self._key(f"bcast{self.rounds}")
        if self.launch.rank == root:
            self.store.set(key, value)
        return self._read(key)

    def allgather(self, value: bytes) -> list[bytes]:
        self.rounds += 1
        self.store.set(self._key(f"gather{self.rounds}/{self.launch.rank}"), value)
        return [self._read(self._key(f"gather{self.rounds}/{r}")) for r in range(self.launch.world_size)]

    def report_failure(self, message: str) -> None:
        self.store.set(self._key("failed"), f"rank {self.launch.rank}: {message}")

    def failure(self) -> str | None:
        key = self._key("failed")
        return bytes(self.store.get(key)).decode() if self.store.check([key]) else None

    def abort_all(self) -> None:
        """torchrun and srun stop the other ranks when this one exits non-zero."""


class MpiChannel:
    def __init__(self) -> None:
        from mpi4py import MPI
        self.comm = MPI.COMM_WORLD

    def broadcast(self, value: bytes, root: int) -> bytes:
        return self.comm.bcast(value, root=root)

    def allgather(self, value: bytes) -> list[bytes]:
        return self.comm.allgather(value)

    def report_failure(self, message: str) -> None:
        """MPI_Abort (abort_all) stops every rank; mpirun prints which one called it."""

    def failure(self) -> str | None:
        return None

    def abort_all(self) -> None:
        self.comm.Abort(1)


class LocalChannel:
    """One process, no launcher: a plan with collectives runs on a communicator of one rank."""

    def broadcast(self, value: bytes, root: int) -> bytes:
        return value

    def allgather(self, value: bytes) -> list[bytes]:
        return [value]

    def report_failure(self, message: str) -> None:
        """No other rank to tell."""

    def failure(self) -> str | None:
        return None

    def abort_all(self) -> None:
        """Nothing else runs."""


def open_channel(launch: Launch) -> Channel:
    if launch.launcher == "none":
        return LocalChannel()
    if launch.launcher == "mpirun":
        try:
            return MpiChannel()
        except ImportError:
            raise DistributedError("mpirun started pipec, but mpi4py is not installed: "
                                   "pip install mpi4py (or launch with torchrun)") from None
    try:
        return StoreChannel(launch)
    except ImportError:
        raise DistributedError(f"{launch.launcher} started pipec, which reaches the other ranks "
                               "through torch.distributed's TCPStore: pip install torch") from None
    except (RuntimeError, OSError) as error:  # the store's own errors (a timeout, a refused port)
        raise DistributedError(f"cannot reach the rendezvous at {launch.master_addr}:"
                               f"{launch.master_port}: {error}") from None


# --- start-up ------------------------------------------------------------------------------------


def check_collective_sequence(plan: Plan, channel: Channel, rank: int) -> None:
    """Every rank must issue the same collectives in the same order: the ranks exchange their
    plan's collective sequence hash, and on a mismatch every rank refuses, naming the first
    collective that differs from rank 0's."""
    mine = collective_sequence_hash(plan).encode()
    hashes = channel.allgather(mine)
    if all(h == hashes[0] for h in hashes):
        return
    ours = [node.describe() for node in collective_sequence(plan)]
    theirs = json.loads(channel.broadcast(json.dumps(ours).encode(), 0))
    other = next(r for r, h in enumerate(hashes) if h != hashes[0])
    raise DistributedError(first_difference(theirs, ours, rank, other))


def first_difference(reference: list[str], ours: list[str], rank: int, other: int) -> str:
    """The refusal's message: rank 0's sequence against this rank's."""
    if reference == ours:
        return (f"rank {other}'s plan issues different collectives than rank 0's; this rank "
                f"({rank}) agrees with rank 0: see rank {other}'s message")
    for index, (a, b) in enumerate(zip(reference, ours)):
        if a != b:
            return (f"rank {rank}'s plan differs from rank 0's at collective {index + 1}: "
                    f"rank 0 issues `{a}`, rank {rank} `{b}`; every rank must issue the same "
                    "collectives in the same order")
    shorter, longer = (reference, ours) if len(reference) < len(ours) else (ours, reference)
    who = 0 if longer is reference else rank
    return (f"rank {rank}'s plan differs from rank 0's after {counted(len(shorter), 'collective')}: rank "
            f"{who} also issues `{longer[len(shorter)]}`")


ABORT_JOIN_S = 60.0  # how long closing waits for ncclCommAbort once the graphs are gone


@dataclass
class Distributed:
    """This rank's part of the run: the launch, the host channel and the communicator."""

    launch: Launch
    channel: Channel
    communicator: Communicator | None  # None when the plan has no collectives
    _abort: threading.Thread | None = None
    _abort_error: BaseException | None = None

    def begin_abort(self) -> None:
        """Start ncclCommAbort on a thread of its own. It raises NCCL's abort flag at once, so
        the NCCL kernels still waiting for another rank return, and then waits until every graph
        holding a recorded collective is destroyed. Destroying an executable graph waits in turn
        for its launches in flight (measured on the H200s: a failed rank that destroyed its
        graph first hung there). So: abort begun, graphs destroyed, then `close` joins it."""
        if self.communicator is None or self._abort is not None:
            return
        communicator = self.communicator

        def abort() -> None:
            try:
                communicator.abort()
            except BaseException as error:  # handed to `close`, which runs on the caller's thread
                self._abort_error = error
        self._abort = threading.Thread(target=abort, name="pipec-nccl-abort", daemon=True)
        self._abort.start()

    def close(self, failed: bool = False) -> None:
        """Destroy the communicator after a clean run; abort it after a failure (destroy would
        wait for ranks that may never come), joining the abort `begin_abort` started."""
        if self.communicator is None:
            return
        if not (failed or self._abort is not None):
            self.communicator.destroy()
            self.communicator = None
            return
        self.begin_abort()
        assert self._abort is not None
        self._abort.join(ABORT_JOIN_S)
        self.communicator = None
        if self._abort.is_alive():
            raise DistributedError(f"ncclCommAbort did not return within {ABORT_JOIN_S:.0f} s of the "
                                   "step graph's destruction; the process should exit")
        if self._abort_error is not None:
            raise self._abort_error


def connect(plan: Plan, launch: Launch, channel: Channel | None = None, library=None) -> Distributed:
    """The channel, and the communicator for `plan`'s collectives once the ranks agree on them.
    The current CUDA device must already be this rank's (`launch.local_rank`). `library`
    provides `new_unique_id()` and `open_communicator(unique_id, world_size, rank)`:
    runtime/nccl.py, or a test's stand-in."""
    if library is None:
        from . import nccl as library
    channel = channel or open_channel(launch)
    check_collective_sequence(plan, channel, launch.rank)
    if not collective_sequence(plan):
        return Distributed(launch, channel, None)
    nccl_environment()
    started = time.monotonic()
    try:
        unique_id = channel.broadcast(library.new_unique_id() if launch.rank == 0 else b"", 0)
        communicator = library.open_communicator(unique_id, launch.world_size, launch.rank)
    except Error:
        raise
    except ImportError as error:  # neither nccl4py nor CuPy
        raise DistributedError(f"collective nodes need NCCL's Python bindings ({error}): install "
                               "`pipec[nccl12]` or `pipec[nccl13]`") from None
    except Exception as error:  # the bindings' own exception types
        raise DistributedError(f"rank {launch.rank}: creating the NCCL communicator failed after "
                               f"{time.monotonic() - started:.1f} s: {error}") from None
    return Distributed(launch, channel, communicator)


# --- after start-up --------------------------------------------------------------------------


def replicated_differences(pipeline, steps: int) -> list[str]:
    """The `replicated` buffers whose bits differ between ranks (compared by digest) after
    `steps` graph replays, one line each; leaves the state as it was. Every rank calls it at
    the same point."""
    names = [b.name for b in pipeline.plan.buffers if b.replicated]
    start = pipeline.snapshot()
    try:
        pipeline.step(steps)
        mine = {name: hashlib.sha256(pipeline.read(name).tobytes()).hexdigest() for name in names}
    finally:
        pipeline.restore(start)
    gathered = [json.loads(d) for d in pipeline.distributed.channel.allgather(json.dumps(mine).encode())]
    lines = []
    for name in names:
        ranks = [str(r) for r, digests in enumerate(gathered) if digests.get(name) != gathered[0].get(name)]
        if ranks:
            lines.append(f"replicated buffer `{name}` differs between rank 0 and {plural('rank', len(ranks))} "
                         f"{', '.join(ranks)} after {counted(steps, 'step')}")
    return lines


def stop_other_ranks(pipeline, reason: str) -> None:
    """This rank failed: tell the others (through the channel, which their waits poll), abort
    the communicator so that no NCCL kernel waits for this rank, and under mpirun stop every
    rank at once (MPI_Abort)."""
    distributed = pipeline.distributed
    if distributed is None or distributed.launch.world_size == 1:
        return
    if pipeline.collectives is not None:
        pipeline.collectives.abort(reason)
    else:
        distributed.channel.report_failure(reason)
    distributed.channel.abort_all()
