"""Test tiers: everything runs without a GPU except tests marked `gpu`, which are skipped
with the reason when no CUDA device can be opened (`scripts/gpu-check.sh` runs them on one)."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_unavailable() -> str | None:
    """Why no GPU test can run here, or None when a CUDA device is usable."""
    try:
        from cuda.bindings import driver
    except ImportError as error:
        return f"cuda-python is not installed ({error})"
    try:
        (err,) = driver.cuInit(0)
    except Exception as error:  # the driver library is missing
        return f"no CUDA driver ({str(error).splitlines()[0]})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"no CUDA device (cuInit: {err.name})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA device"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
