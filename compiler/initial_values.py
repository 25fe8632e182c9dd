"""The initial contents of buffers that the host computes and uploads: seeded random values and
loaded files, as the buffer holds them. A leaf of the compiler (it imports only the element
types and the plan), shared by the runtime, which uploads these bytes when it allocates a
buffer, and by `pipec build`, which stores the same bytes in a bundle (buffers/NAME.bin)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .dtypes import DTYPES, host_array
from .plan_schema import BufferSpec


def host_dtype(name: str) -> np.dtype:
    """The NumPy type of a buffer's elements on the host: bf16 is `ml_dtypes.bfloat16`."""
    if name == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPES[name].numpy)


def random_values(spec: BufferSpec, dtype) -> np.ndarray:
    """Seeded values (PCG64, so the same seed gives the same buffer on every machine)."""
    rng = np.random.Generator(np.random.PCG64(spec.init.seed or 0))
    a, b = spec.init.args
    if dtype.kind in "iu":
        return rng.integers(int(a), int(b), size=spec.shape, endpoint=False).astype(dtype.numpy)
    values = rng.uniform(a, b, spec.shape) if spec.init.kind == "uniform" else rng.normal(a, b, spec.shape)
    return host_array(dtype, values)


def initial_array(spec: BufferSpec) -> np.ndarray:
    """The values of a buffer declared with random (`uniform`, `normal`) or loaded (`load`)
    contents, of the buffer's host type and shape."""
    init = spec.init
    if init.kind in ("uniform", "normal"):
        values = random_values(spec, DTYPES[spec.dtype])
    elif init.kind == "load":
        values = np.load(Path(init.path), allow_pickle=False)
    else:  # pragma: no cover - the other kinds are memsets, never uploaded values
        raise ValueError(f"no host-computed values for an initial value {init.kind}")
    if spec.dtype == "bf16" and values.dtype == np.uint16:
        values = values.view(host_dtype("bf16"))  # bit patterns (what random values and older files hold)
    return np.ascontiguousarray(values, dtype=host_dtype(spec.dtype)).reshape(spec.shape)
