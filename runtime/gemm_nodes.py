"""A pipeline's GEMM nodes: one cuBLASLt handle, one `GemmOp` per node, and the algorithm each
node runs, chosen once.

The algorithm is chosen when the pipeline is built, before the graph records any call, and the
graph's recording and the eager launches use the same one, so `--verify` compares the same
kernels. By default it is the heuristic's first answer for the node's descriptor within the
node's workspace; with `GemmSettings.tune`, the heuristic's best `TUNE_CANDIDATES` are timed
on the GPU with CUDA events and the fastest kept. A pipeline loaded from a `.pipe` file keeps
the choice in a JSON file per key (the node's descriptor in cuBLASLt terms, the GPU's name,
cuBLASLt's version) under the artifact cache (`$PIPEC_CACHE_DIR/gemm`), so later runs use it
too; a kept algorithm that the library no longer accepts (`cublasLtMatmulAlgoCheck`) is chosen
again. A pipeline loaded from a bundle never reads that cache: it runs the algorithm the bundle
stores for the node when the rule of plan/gemm_algorithms.py and `cublasLtMatmulAlgoCheck`
allow it, else the heuristic's first, as the C runtime does (native/src/gemm.c), so both
runtimes run the same kernels for one bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..plan.dtypes import DTYPES
from ..plan.gemm_algorithms import ChosenOn, GemmAlgorithms, StoredAlgorithm, gemm_spec, stored_for
from ..plan.schema import GemmNodeSpec
from .driver import Device
from .cublaslt import PREFERENCE_TYPES, GemmError, GemmOp, GemmSettings, cublaslt, describe, set_attribute
from .memory import BufferSet

TUNE_CANDIDATES = 8
TUNE_WARMUP = 2
TUNE_REPEATS = 10
ALGORITHM_BYTES = 64  # sizeof(cublasLtMatmulAlgo_t)


@dataclass(frozen=True)
class GemmChoice:
    """How a GEMM node's algorithm was chosen: `stored`, the bundle's; `why`, one line: `stored
    (tune)`, `heuristic: <why not the stored one>` (the words of the C runtime's `pipec_gemm_at`),
    or for a `.pipe` file `heuristic`, `tune` or `cached (tune)`."""

    node: str
    stored: bool
    why: str


class Gemms:
    """Shared by the graph build (each build records each node's call) and the eager program."""

    def __init__(self, device: Device, buffers: BufferSet, stream, settings: GemmSettings) -> None:
        self.device, self.buffers, self.stream, self.settings = device, buffers, stream, settings
        self.library: Any = settings.library
        self.handle = None
        self.ops: dict[str, GemmOp] = {}
        self.cache = AlgorithmCache(settings.cache)
        # By key: nodes with one descriptor run one algorithm (tuning twice could pick two):
        # the algorithm, how it was chosen (heuristic | tune) and why.
        self.chosen: dict[str, tuple[np.ndarray, str, str]] = {}
        self.choices: dict[str, GemmChoice] = {}  # by node, in the order the nodes were prepared
        self.chosen_by: dict[str, str] = {}  # by node: heuristic | tune

    def _open(self, node: GemmNodeSpec) -> None:
        if self.library is None:
            self.library = cublaslt()
        try:
            self.handle = self.library.create()
        except Exception as error:  # noqa: BLE001 - the library cannot be loaded, or no context
            raise GemmError(f"{describe(node)}: cuBLASLt cannot be opened: {type(error).__name__}: {error}") from None

    def op(self, node: GemmNodeSpec) -> GemmOp:
        """The node's matmul, described and its algorithm chosen on first use."""
        if node.name not in self.ops:
            if self.handle is None:
                self._open(node)
            op = GemmOp(self.library, self.handle, node, self.buffers, self.device.driver.success)
            try:
                op.algorithm, self.chosen_by[node.name], self.choices[node.name] = self._choose(op)
                self._first_call(op)
            except BaseException:
                op.close()
                raise
            self.ops[node.name] = op
        return self.ops[node.name]

    @property
    def algorithms(self) -> dict[str, str]:
        """Each GEMM node's algorithm, as the hex of its `cublasLtMatmulAlgo_t`."""
        return {name: op.algorithm.tobytes().hex() for name, op in self.ops.items() if op.algorithm is not None}

    def stored(self, pipe: str) -> GemmAlgorithms:
        """Every node's algorithm as a GEMM algorithms file holds it (plan/gemm_algorithms.py)."""
        return GemmAlgorithms(self.chosen_on(), {
            name: StoredAlgorithm(op.algorithm.tobytes(), op.problem.alignments, self.chosen_by[name], gemm_spec(op.node))
            for name, op in self.ops.items() if op.algorithm is not None}, pipe)

    def chosen_on(self) -> ChosenOn:
        device = self.device
        return ChosenOn(device.name, device.arch, device.multiprocessors, int(self.library.get_version()))

    def _choose(self, op: GemmOp) -> tuple[np.ndarray, str, GemmChoice]:
        """The node's algorithm, how it was chosen (heuristic | tune), and the choice as reported."""
        if self.settings.stored is not None and not self.settings.tune:
            return self._from_bundle(op)
        key = self.cache_key(op)
        if key not in self.chosen:
            self.chosen[key] = self._choose_anew(op, key)
        algorithm, chosen_by, why = self.chosen[key]
        return algorithm, chosen_by, GemmChoice(op.node.name, False, why)

    def _from_bundle(self, op: GemmOp) -> tuple[np.ndarray, str, GemmChoice]:
        """The bundle's algorithm for the node when plan/gemm_algorithms.py's rule and cuBLASLt
        (`cublasLtMatmulAlgoCheck`) accept it, else the heuristic's first; the C runtime's
        `choose` (native/src/gemm.c) follows the same steps with the same words."""
        assert self.settings.stored is not None
        name = op.node.name
        entry, why_not = stored_for(self.settings.stored, self.chosen_on(), name, op.problem.alignments)
        if entry is not None:
            algorithm = np.frombuffer(entry.algorithm, np.uint8).copy()
            if not (why_not := self._refusal(op, algorithm)):
                return algorithm, entry.chosen_by, GemmChoice(name, True, f"stored ({entry.chosen_by})")
        return self._heuristic(op, 1)[0], "heuristic", GemmChoice(name, False, f"heuristic: {why_not}")

    def _choose_anew(self, op: GemmOp, key: str) -> tuple[np.ndarray, str, str]:
        tune = self.settings.tune
        kept = self.cache.get(key)
        if kept is not None and (kept["mode"] == "tune" or not tune):
            algorithm = np.frombuffer(bytes.fromhex(kept["algorithm"]), np.uint8).copy()
            if algorithm.size == ALGORITHM_BYTES and not self._refusal(op, algorithm):
                return algorithm, kept["mode"], f"cached ({kept['mode']})"
        mode = "tune" if tune else "heuristic"
        candidates = self._heuristic(op, TUNE_CANDIDATES if tune else 1)
        algorithm = self._fastest(op, candidates) if tune and len(candidates) > 1 else candidates[0]
        self.cache.put(key, {"algorithm": algorithm.tobytes().hex(), "mode": mode, "gpu": self.device.name,
                             "cublaslt": int(self.library.get_version()), "gemm": json.loads(op.problem.key())})
        return algorithm, mode, mode

    def cache_key(self, op: GemmOp) -> str:
        """The problem, the GPU (name, architecture and the multiprocessors this context has:
        MPS and green contexts change the count under one name, and the heuristic with it) and
        the cuBLASLt version."""
        device = self.device
        text = "\0".join((op.problem.key(), device.name, device.arch, str(device.multiprocessors),
                          str(int(self.library.get_version()))))
        return hashlib.sha256(text.encode()).hexdigest()

    def _heuristic(self, op: GemmOp, count: int) -> list[np.ndarray]:
        """The heuristic's best `count` algorithms for the node, best first."""
        lib = self.library
        results = np.zeros(count, dtype=lib.matmul_heuristic_result_dtype)
        returned = np.zeros(1, np.int32)
        try:
            preference = lib.matmul_preference_create()
        except lib.cuBLASLtError as error:
            raise GemmError(f"{op.what}: cuBLASLt cannot serve this GEMM ({summary(op)}): {error}") from None
        try:
            set_preference = lambda name, value: set_attribute(
                lib.matmul_preference_set_attribute, preference, lib.MatmulPreferenceAttribute, PREFERENCE_TYPES,
                name, value)
            set_preference("MAX_WORKSPACE_BYTES", op.node.workspace_bytes)
            for operand, bytes_ in zip("ABCD", op.problem.alignments):
                set_preference(f"MIN_ALIGNMENT_{operand}_BYTES", bytes_)
            lib.matmul_algo_get_heuristic(self.handle, *op.operation, preference, count, results.ctypes.data,
                                          returned.ctypes.data)
        except lib.cuBLASLtError as error:
            raise GemmError(f"{op.what}: cuBLASLt cannot serve this GEMM ({summary(op)}): {error}") from None
        finally:
            lib.matmul_preference_destroy(preference)
        found = [r for r in results[:int(returned[0])] if int(r["state"]) == 0]
        if not found:
            raise GemmError(f"{op.what}: cuBLASLt has no algorithm for this GEMM ({summary(op)})")
        return [np.frombuffer(r["algo"].tobytes(), np.uint8).copy() for r in found]

    def _refusal(self, op: GemmOp, algorithm: np.ndarray) -> str:
        """Why cuBLASLt cannot run `algorithm` for the node (`cublasLtMatmulAlgoCheck` against its
        descriptor and layouts, and the workspace it needs), or "" when it can."""
        lib = self.library
        result = np.zeros(1, dtype=lib.matmul_heuristic_result_dtype)
        try:
            lib.matmul_algo_check(self.handle, *op.operation, algorithm.ctypes.data, result.ctypes.data)
            status = int(result[0]["state"])
        except lib.cuBLASLtError as error:
            status = int(getattr(error, "status", -1))  # nvmath's error carries cublasStatus_t
        if status != 0:
            return f"cublasLtMatmulAlgoCheck refuses the stored algorithm (cuBLAS status {status})"
        if (needed := int(result[0]["workspace_size"])) > op.node.workspace_bytes:
            return f"the stored algorithm needs {needed} bytes of workspace, and the node has {op.node.workspace_bytes}"
        return ""

    def _first_call(self, op: GemmOp) -> None:
        """One call outside any recording, its outputs restored after: what the library sets up
        lazily on a first call (loading its kernels) happens here, not inside the capture."""
        saved = _save_outputs(self.device, self.buffers, op.node, self.stream)
        try:
            op.enqueue(self.stream)
        finally:
            _restore_outputs(self.device, saved, self.stream)

    def _fastest(self, op: GemmOp, candidates: list[np.ndarray]) -> np.ndarray:
        """The candidate with the shortest GPU time over `TUNE_REPEATS` calls on the pipeline's
        stream. The calls write the node's outputs: what it writes is saved and restored."""
        call, stream = self.device.driver.call, self.stream
        saved = _save_outputs(self.device, self.buffers, op.node, stream)
        events = [call("cuEventCreate", 0) for _ in range(2)]
        try:
            times: list[tuple] = []
            for algorithm in candidates:
                try:
                    for _ in range(TUNE_WARMUP):
                        op.enqueue(stream, algorithm)
                    call("cuEventRecord", events[0], stream)
                    for _ in range(TUNE_REPEATS):
                        op.enqueue(stream, algorithm)
                    call("cuEventRecord", events[1], stream)
                    call("cuEventSynchronize", events[1])
                except GemmError:
                    continue  # a candidate that fails to run is not a candidate
                times.append((call("cuEventElapsedTime", events[0], events[1]), len(times), algorithm))
        finally:
            for event in events:
                call("cuEventDestroy", event)
            _restore_outputs(self.device, saved, stream)
        if not times:
            raise GemmError(f"{op.what}: none of cuBLASLt's candidate algorithms runs ({summary(op)})")
        return min(times, key=lambda t: t[:2])[2]

    def close(self) -> None:
        for op in self.ops.values():
            op.close()
        self.ops.clear()
        if self.handle is not None:
            self.library.destroy(self.handle)
            self.handle = None


def summary(op: GemmOp) -> str:
    node, p = op.node, op.problem
    return (f"m={node.m} n={node.n} k={node.k} batch={node.batch}, {node.a.dtype} x {node.b.dtype} -> "
            f"{node.c.dtype}, compute {node.compute}, epilogue {p.epilogue}, workspace {node.workspace_bytes} bytes")


def _save_outputs(device: Device, buffers: BufferSet, node: GemmNodeSpec, stream) -> list[tuple[int, int, int]]:
    """Copies of what the node writes (but its workspace): (address, copy, bytes) each."""
    call, saved = device.driver.call, []
    try:
        for access in node.accesses:
            if "w" not in access.mode or access.buffer == node.workspace:
                continue
            size = DTYPES[buffers[access.buffer].spec.dtype].size
            address, nbytes = buffers.pointer(access.buffer, access.start * size), (access.stop - access.start) * size
            copy = int(call("cuMemAlloc", nbytes))
            saved.append((address, copy, nbytes))
            call("cuMemcpyDtoDAsync", copy, address, nbytes, stream)
    except BaseException:
        _restore_outputs(device, saved, stream, restore=False)
        raise
    return saved


def _restore_outputs(device: Device, saved: list[tuple[int, int, int]], stream, restore: bool = True) -> None:
    call = device.driver.call
    try:
        for address, copy, nbytes in saved if restore else ():
            call("cuMemcpyDtoDAsync", address, copy, nbytes, stream)
        call("cuStreamSynchronize", stream)
    finally:
        for _, copy, _ in saved:
            call("cuMemFree", copy)


class AlgorithmCache:
    """Chosen algorithms by key, one JSON file each under `folder` (None: kept nowhere).
    Writes are atomic; a cache that cannot be written only costs a new choice next run."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def get(self, key: str) -> dict | None:
        if self.folder is None:
            return None
        try:
            entry = json.loads((self.folder / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        try:
            bytes.fromhex(entry["algorithm"])
            return entry if entry["mode"] in ("heuristic", "tune") else None
        except (TypeError, KeyError, ValueError):  # not an entry this module wrote
            return None

    def put(self, key: str, entry: dict) -> None:
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f, indent=1, sort_keys=True)
            os.replace(tmp, self.folder / f"{key}.json")
        except OSError:
            Path(tmp).unlink(missing_ok=True)
