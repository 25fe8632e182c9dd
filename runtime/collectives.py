"""Collective nodes on the device: the one NCCL call of each (the one NCCL group of a node with
several operands), issued on a stream (eager execution) or recorded into a graph pipec owns
and added to the step as a child graph node (runtime/library.py's rules: a private stream, a
capture scoped to the call or the group, kernel and memset nodes, and what `COLLECTIVE_NODE_TYPES`
adds: NCCL's host node, and device-to-device copies, which NCCL records on a communicator of one
rank, where a plan with collectives runs without a launcher).

Waiting is where a failed rank would hang the others: NCCL's kernels spin until every rank has
joined. So a run with collectives never waits blindly: `wait` polls the stream, NCCL's
asynchronous error and the other ranks' failure reports, and past `timeout_s` aborts the
communicator (ncclCommAbort ends the spinning kernels) and raises with a message.
"""

from __future__ import annotations

import time

from ..plan.schema import CollectiveNodeSpec, CollectiveOperandSpec
from ..errors import Error
from .distributed import Distributed
from .driver import Device
from .library import ALLOWED_NODE_TYPES, DEVICE_COPIES, Recording, record_call
from .memory import BufferSet
from .nccl import IN_PROGRESS
from .process_launchers import TIMEOUTS, timeout_from_environment

WAIT_TIMEOUT_S = TIMEOUTS["PIPEC_NCCL_TIMEOUT"]  # the default
# A recorded collective may also hold NCCL's host node: when a collective's plan has proxy
# operations (a network transport, between machines), NCCL's graph capture adds a host callback
# that hands the proxy thread its operations at every replay (NCCL's own supported path for
# graphs; the callback touches none of pipec's memory). Event nodes stay refused: NCCL adds them
# only with NCCL_GRAPH_MIXING_SUPPORT=1, which runtime/distributed.py turns off. And copies within
# device memory: on a communicator of one rank NCCL (ncclLaunchOneRank) does an out-of-place call
# as one cudaMemcpyAsync, an explicit node of the recording (runtime/library.py says why a copy
# touching host memory, say into a `mapped` buffer, stays refused).
COLLECTIVE_NODE_TYPES = (*ALLOWED_NODE_TYPES, "HOST", DEVICE_COPIES)
FAILURE_POLL_S = 0.5  # how often a waiting rank asks whether another one failed


class CollectiveFailed(Error):
    """A collective cannot complete: NCCL reported an error, another rank failed, or it timed out."""


def require_collectives(collectives: Collectives | None, node: CollectiveNodeSpec) -> Collectives:
    """The pipeline's collectives, which a plan with collective nodes cannot run without."""
    if collectives is None:
        raise CollectiveFailed(f"`{node.name}` ({node.location}) is a collective, but this pipeline "
                               "was built without a communicator")
    return collectives


class Collectives:
    """The collective nodes of one pipeline, bound to its buffers and its communicator."""

    def __init__(self, distributed: Distributed, buffers: BufferSet, device: Device,
                 timeout_s: float | None = None) -> None:
        self.distributed = distributed
        self.communicator = distributed.communicator
        self.buffers = buffers
        self.device = device
        self.timeout_s = (timeout_from_environment("PIPEC_NCCL_TIMEOUT")
                          if timeout_s is None else timeout_s)
        self.failed = False

    def issue(self, node: CollectiveNodeSpec, stream) -> None:
        """Enqueue the node's NCCL call on `stream`; several operands as one NCCL group, whose
        calls NCCL runs as one kernel (one synchronisation of the ranks for all of them)."""
        if self.failed:  # nothing may reach a communicator that is being aborted
            raise CollectiveFailed(f"rank {self.distributed.launch.rank}: the NCCL communicator is aborted")
        comm, handle, grouped = self.communicator, int(stream), len(node.operands) > 1
        try:
            if grouped:
                comm.group_start()
            try:
                for operand in node.operands:
                    self._call(node, operand, handle)
            finally:  # NCCL's group depth stays balanced even when a call is refused
                if grouped:
                    comm.group_end()
        except Error:
            raise
        except Exception as error:  # the bindings' own exception types
            raise CollectiveFailed(f"`{node.name}` ({node.location}): NCCL refused the call: {error}") from None

    def _call(self, node: CollectiveNodeSpec, operand: CollectiveOperandSpec, handle: int) -> None:
        comm, count, dtype = self.communicator, operand.count, operand.dtype
        src, dst = self._address(operand.src, operand.src_offset), self._address(operand.dst, operand.dst_offset)
        if node.collective == "allreduce":
            comm.allreduce(src, dst, count, dtype, node.op, handle)
        elif node.collective == "broadcast":
            comm.broadcast(src, dst, count, dtype, node.root, handle)
        elif node.collective == "allgather":
            comm.allgather(src, dst, count, dtype, handle)
        else:
            comm.reducescatter(src, dst, count, dtype, node.op, handle)

    def _address(self, buffer: str, offset: int) -> int:
        return int(self.buffers.pointer(buffer, offset))

    def record(self, node: CollectiveNodeSpec) -> Recording:
        """The node's NCCL call (or group) recorded into a graph of its own, for a child graph
        node; the caller closes it."""
        return record_call(self.device, f"{node.collective} `{node.name}` ({node.location})",
                           lambda stream: self.issue(node, stream), COLLECTIVE_NODE_TYPES)

    def wait(self, stream, event=None) -> None:
        """Wait for `stream` (with `event`, for the work before that event's record) without
        hanging on a failed rank (see the module's docstring)."""
        if self.failed:  # the step will not finish, and NCCL may no longer be asked
            raise CollectiveFailed(f"rank {self.distributed.launch.rank}: the NCCL communicator is aborted")
        driver = self.device.driver
        if event is None:
            what, query, synchronize = stream, driver.cu.cuStreamQuery, "cuStreamSynchronize"
        else:
            what, query, synchronize = event, driver.cu.cuEventQuery, "cuEventSynchronize"
        not_ready = driver.cu.CUresult.CUDA_ERROR_NOT_READY
        started = last_poll = time.monotonic()
        pause = 20e-6
        while True:
            (err,) = query(what)
            if err == driver.success:
                return
            if err != not_ready:
                driver.call(synchronize, what)  # raises with the driver's own error
            state = self.communicator.async_error()
            if state not in (0, IN_PROGRESS):
                self.fail(f"NCCL reported error {state} while the step ran")
            now = time.monotonic()
            if now - last_poll >= FAILURE_POLL_S:
                last_poll = now
                other = self.distributed.channel.failure()
                if other is not None:
                    self.fail(f"another rank failed ({other})")
            if now - started > self.timeout_s:
                self.fail(f"the step did not finish within {self.timeout_s:.0f} s (PIPEC_NCCL_TIMEOUT): "
                          "a rank stopped issuing its collectives")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def fail(self, message: str) -> None:
        """Tell the other ranks, begin the abort, and raise."""
        rank = self.distributed.launch.rank
        self.abort(message)
        raise CollectiveFailed(f"rank {rank}: {message}; the NCCL communicator is aborted")

    def abort(self, message: str) -> None:
        """Mark this rank failed, tell the others, and begin aborting the communicator now: its
        abort flag ends the NCCL kernels still waiting for the other ranks, which the step
        graph's destruction in `Pipeline.close` would otherwise wait for forever
        (`Distributed.begin_abort` says why the abort runs on a thread of its own)."""
        if self.failed:
            return
        self.failed = True
        self.distributed.channel.report_failure(message)
        self.distributed.begin_abort()

