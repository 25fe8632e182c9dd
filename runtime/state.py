"""Saving and restoring every buffer, so a run can stop and resume where it was.

The format is safetensors (one file, `state.safetensors`, no pickles): what ML users already
read. bf16 buffers are stored as their raw 16-bit patterns; the metadata records the types,
the pipeline's hash and the steps run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

STATE_FILE = "state.safetensors"


class StateError(Exception):
    pass


def save_state(pipeline, folder: Path, steps: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {name: np.ascontiguousarray(a) for name, a in pipeline.snapshot().items()}
    plan = pipeline.plan
    metadata = {
        "pipe": plan.pipe, "pipe_sha256": plan.pipe_sha256, "pipec_version": plan.pipec_version,
        "steps": str(steps), "dtypes": json.dumps({b.name: b.dtype for b in plan.buffers}),
    }
    path = folder / STATE_FILE
    tmp = folder / (STATE_FILE + ".tmp")
    save_file(arrays, str(tmp), metadata=metadata)
    tmp.replace(path)
    return path


def load_state(pipeline, folder: Path) -> dict[str, str]:
    """Write a saved state into the pipeline's buffers; returns the file's metadata."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise StateError(f"no saved state at {path}")
    plan = pipeline.plan
    expected = {b.name: b for b in plan.buffers}
    with safe_open(str(path), framework="np") as f:
        metadata = f.metadata() or {}
        names = set(f.keys())
        missing, extra = set(expected) - names, names - set(expected)
        if missing or extra:
            raise StateError(f"{path} does not match {plan.pipe}: "
                             + "; ".join(p for p in (
                                 f"missing {', '.join(sorted(missing))}" if missing else "",
                                 f"unknown {', '.join(sorted(extra))}" if extra else "") if p))
        dtypes = json.loads(metadata.get("dtypes", "{}"))
        arrays = {}
        for name, spec in expected.items():
            array = f.get_tensor(name)
            if tuple(array.shape) != spec.shape or dtypes.get(name, spec.dtype) != spec.dtype:
                raise StateError(f"{path}: `{name}` is {dtypes.get(name)}{list(array.shape)}, the pipeline "
                                 f"declares {spec.dtype}{list(spec.shape)}")
            arrays[name] = array
    pipeline.restore(arrays)
    return metadata
