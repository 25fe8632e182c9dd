"""Test tiers: everything runs without a GPU except tests marked `gpu`, which are skipped
with the reason when no CUDA device can be opened (`scripts/gpu-check.sh` runs them on one),
and tests marked `gpu2`, which need two devices and torchrun (tests/gpu2/).

Property tests: with CI=true every hypothesis test runs the profile "ci", which derives its
random seed from the test itself (`derandomize`), so a run passes or fails the same way every
time; a failure prints the blob that `@reproduce_failure` replays. Hypothesis refuses an
example database together with `derandomize`, so regressions it found are kept as `@example`
cases next to the tests. Locally the profile "dev" explores freshly each run and remembers
failures in .hypothesis/. `HYPOTHESIS_PROFILE` picks either explicitly."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The tests never write into the user's own cache (~/.cache/pipec): they keep one of their own
# beside pytest's, reused between runs; a PIPEC_CACHE_DIR set for the run is kept.
os.environ.setdefault("PIPEC_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "pipec"))

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                     "ci" if os.environ.get("CI") == "true" else "dev"))


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


@functools.cache
def two_gpus_unavailable() -> str | None:
    """Why no two-GPU test can run here (they start their ranks with torchrun), or None."""
    reason = gpu_unavailable()
    if reason is not None:
        return reason
    from cuda.bindings import driver
    count = driver.cuDeviceGetCount()[1]
    if count < 2:
        return "one CUDA device, two needed"
    try:
        import torch.distributed.run  # noqa: F401  (torchrun)
    except ImportError:
        return "torchrun (PyTorch) is not installed"
    return None


def pytest_collection_modifyitems(config, items):
    for marker, reason in (("gpu", gpu_unavailable()), ("gpu2", two_gpus_unavailable())):
        if reason is None:
            continue
        skip = pytest.mark.skip(reason=f"needs {'a GPU' if marker == 'gpu' else 'two GPUs'}: {reason}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
