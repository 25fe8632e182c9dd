"""Saving and restoring every buffer, so a run can stop and resume where it was.

The format is safetensors (one file, `state.safetensors`, no pickles): what ML users already
read. bf16 buffers are stored as BF16 tensors (files written before held their bit patterns as
U16, which loading still takes); the metadata records the types, the pipeline's hash and the
steps run. safetensors' NumPy reader knows no BF16, so reading parses the file itself: an
8-byte header length, a JSON header, the tensors' bytes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
from safetensors.numpy import save

from ..errors import Error
from ..files import write_atomically
from ..plan.initial_values import host_dtype

STATE_FILE = "state.safetensors"


class StateError(Error):
    pass


def save_state(pipeline, folder: Path, steps: int) -> Path:
    """Every buffer into `folder`/state.safetensors, written whole or not at all (files.py):
    a full disk leaves the state saved before, never a truncated one."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise StateError(f"steps = {steps!r}: the steps run so far, an integer >= 0")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StateError(f"cannot save the state in {folder}: {error.strerror or error}") from None
    arrays = {name: np.ascontiguousarray(a) for name, a in pipeline.snapshot().items()}
    plan = pipeline.plan
    metadata = {
        "pipe": plan.pipe, "pipe_sha256": plan.pipe_sha256, "pipec_version": plan.pipec_version,
        "steps": str(steps), "dtypes": json.dumps({b.name: b.dtype for b in plan.buffers}),
    }
    path = folder / STATE_FILE
    try:  # serialised in memory: safetensors' own file writer does not report a full disk
        write_atomically(path, save(arrays, metadata=metadata))
    except OSError as error:
        raise StateError(f"cannot write {path}: {error.strerror or error}") from None
    return path


def load_state(pipeline, folder: Path) -> dict[str, str]:
    """Write a saved state into the pipeline's buffers; returns the file's metadata."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise StateError(f"no saved state at {path}")
    plan = pipeline.plan
    expected = {b.name: b for b in plan.buffers}
    metadata, tensors = _read(path)
    missing, extra = set(expected) - set(tensors), set(tensors) - set(expected)
    if missing or extra:
        raise StateError(f"{path} does not match {plan.pipe}: "
                         + "; ".join(p for p in (
                             f"missing {', '.join(sorted(missing))}" if missing else "",
                             f"unknown {', '.join(sorted(extra))}" if extra else "") if p))
    try:
        dtypes = json.loads(metadata.get("dtypes", "{}"))
        int(metadata.get("steps", "0"))  # piperun resumes from it
    except (TypeError, ValueError):
        raise StateError(f"{path}: its metadata is not pipec's (dtypes, steps)") from None
    if not isinstance(dtypes, dict):
        raise StateError(f"{path}: its metadata is not pipec's (dtypes, steps)")
    arrays = {}
    for name, spec in expected.items():
        array = tensors[name]
        if tuple(array.shape) != spec.shape or dtypes.get(name, spec.dtype) != spec.dtype:
            raise StateError(f"{path}: `{name}` is {dtypes.get(name)}{list(array.shape)}, the pipeline "
                             f"declares {spec.dtype}{list(spec.shape)}")
        arrays[name] = array
    pipeline.restore(arrays)
    return metadata


SAFETENSORS_TYPES = {"F64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "I64": "i64", "U64": "u64",
                     "I32": "i32", "U32": "u32", "I16": "i16", "U16": "u16", "I8": "i8", "U8": "u8"}


def _read(path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """The metadata and tensors of a safetensors file."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise StateError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        tensors = {}
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            start, stop = entry["data_offsets"]
            raw = data[8 + length + start: 8 + length + stop]
            tensors[name] = np.frombuffer(raw, host_dtype(SAFETENSORS_TYPES[entry["dtype"]])).reshape(entry["shape"])
    except (struct.error, ValueError, KeyError, TypeError) as error:
        raise StateError(f"{path} is not a safetensors file pipec can read ({error})") from None
    return header.get("__metadata__") or {}, tensors
