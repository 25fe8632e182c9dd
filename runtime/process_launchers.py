"""Which launcher started this process, and its rank: torchrun, mpirun (Open MPI, MPICH, Intel
MPI) or Slurm's srun, read from the variables each sets in its processes. Without a launcher,
`launch_from_environment` returns None and piperun runs on one GPU."""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import Error

DEFAULT_PORT = 29500


class DistributedError(Error):
    """The ranks cannot run together: a bad launcher environment, a mismatch, a failed rank."""


@dataclass(frozen=True)
class Launch:
    launcher: str  # torchrun | mpirun | srun | none
    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None = None  # torchrun, srun: the TCPStore's host and port
    master_port: int | None = None
    # torchrun's agent hosts the store itself (TORCHELASTIC_USE_AGENT_STORE); keys are then
    # scoped by its run id and restart count, so that a restarted group reads no stale keys
    agent_store: bool = False
    namespace: str = "pipec"

    def constants(self) -> dict[str, int]:
        """The compile-time constants of this rank (compiler/resolve/collectives.py)."""
        return {"RANK": self.rank, "WORLD_SIZE": self.world_size, "LOCAL_RANK": self.local_rank}


SINGLE = Launch("none", 0, 1, 0)  # no launcher: one process (a communicator of one rank)


# The timeouts a user may set, in seconds, and their defaults: how long a rank waits for a
# collective (runtime/collectives.py) and for the others at the rendezvous (runtime/distributed.py)
TIMEOUTS = {"PIPEC_NCCL_TIMEOUT": 120.0, "PIPEC_RENDEZVOUS_TIMEOUT": 300.0}


def timeout_from_environment(name: str, env: Mapping[str, str] | None = None) -> float:
    """The timeout `name` of TIMEOUTS, from the environment or its default; read when it is
    needed, not at import, so that a bad value is one error, not a crash of every `piperun`."""
    text = (os.environ if env is None else env).get(name)
    if text is None or not text.strip():
        return TIMEOUTS[name]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise DistributedError(f"{name}={text!r} is not a timeout: give a positive number of seconds")
    return value


def launch_from_environment(env: Mapping[str, str] | None = None) -> Launch | None:
    """The launcher that started this process, from its variables; None without one. The MPI
    launchers come before Slurm's variables: under Slurm, mpirun starts its daemons (Open MPI)
    or proxies (Hydra) through srun, and the ranks inherit the srun task variables of those."""
    env = os.environ if env is None else env
    for name in TIMEOUTS:  # refused before any GPU work, like the launcher's own variables
        timeout_from_environment(name, env)
    try:
        if "TORCHELASTIC_RUN_ID" in env or ("RANK" in env and "WORLD_SIZE" in env and "MASTER_ADDR" in env):
            return Launch(
                "torchrun", int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0")),
                env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", DEFAULT_PORT)),
                env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
                f"pipec/{env.get('TORCHELASTIC_RUN_ID', 'run')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}")
        if "OMPI_COMM_WORLD_RANK" in env:
            return Launch("mpirun", int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                          int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
        srun_step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID"))
        local = env.get("MPI_LOCALRANKID", env.get("PMI_LOCAL_RANK"))
        # MPICH's Hydra and Intel MPI set MPI_LOCALRANKID; srun's own PMI plugin (--mpi=pmi2)
        # sets PMI_RANK and PMI_SIZE but no local rank, and srun's variables describe its tasks
        if "PMI_RANK" in env and (local is not None or srun_step is None):
            if local is None:
                raise DistributedError("an MPI launcher set PMI_RANK but neither MPI_LOCALRANKID nor "
                                       "PMI_LOCAL_RANK: pipec cannot tell this rank's local rank")
            return Launch("mpirun", int(env["PMI_RANK"]), int(env["PMI_SIZE"]), int(local))
        # srun sets SLURM_STEP_ID (and SLURM_STEPID) in each task it starts; a batch script has
        # SLURM_PROCID and SLURM_NTASKS but no step id (the "OUTPUT ENVIRONMENT VARIABLES" of
        # https://slurm.schedmd.com/srun.html and sbatch.html), so a piperun started in one
        # without srun runs alone
        if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and srun_step is not None:
            return Launch("srun", int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
                          int(env.get("SLURM_LOCALID", "0")), env.get("MASTER_ADDR") or _slurm_first_host(env),
                          int(env.get("MASTER_PORT", DEFAULT_PORT)), False,
                          f"pipec/{env.get('SLURM_JOB_ID', 'job')}.{srun_step}")
    except (KeyError, ValueError) as error:
        raise DistributedError(f"the launcher's environment is incomplete or not a number: {error}") from None
    return None


def _slurm_first_host(env: Mapping[str, str]) -> str:
    """The job's first node, the store's host when MASTER_ADDR is not exported."""
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    if not out:
        raise DistributedError("under srun, pipec needs MASTER_ADDR (the first node's name) when "
                               "`scontrol show hostnames` cannot tell it: export it in the batch script")
    return out[0]
