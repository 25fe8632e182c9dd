"""The CUDA driver through cuda-python: one checker for every call, and the device context.

Every call returns `(CUresult, *outputs)`; `call` raises `CudaError` naming the call and the
driver's error name. Importing this module needs cuda-bindings; a missing driver or GPU is
reported as `NoDevice`, with one line a person can act on.
"""

from __future__ import annotations

from dataclasses import dataclass


class NoDevice(Exception):
    """No usable GPU: no cuda-bindings, no driver, no device, or a driver that is too old."""


class CudaError(Exception):
    def __init__(self, call: str, name: str, detail: str = "") -> None:
        self.call, self.name = call, name
        super().__init__(f"{call} failed: {name}" + (f" ({detail})" if detail else ""))


try:
    from cuda.bindings import driver as cu
except ImportError as error:  # pragma: no cover - depends on the installation
    cu = None
    _IMPORT_ERROR: Exception | None = error
else:
    _IMPORT_ERROR = None

MIN_DRIVER = 12040  # CUDA 12.4: conditional nodes and the graph API pipec uses


def error_name(err) -> str:
    try:
        return cu.CUresult(err).name
    except (ValueError, TypeError):
        return f"CUDA error {int(err)}"


def call(name: str, *args):
    """`cu.<name>(*args)`, unwrapped: None, one output, or a tuple of outputs."""
    result = getattr(cu, name)(*args)
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CudaError(name, error_name(err))
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


@dataclass(frozen=True)
class Device:
    ordinal: int
    handle: object
    context: object
    name: str
    arch: str  # sm_90
    multiprocessors: int
    max_shared_per_block: int  # opt-in limit for dynamic shared memory
    driver_version: int

    def describe(self) -> str:
        major, minor = divmod(self.driver_version // 10, 100)
        return f"{self.name} ({self.arch}, {self.multiprocessors} SMs, driver API {major}.{minor})"


def open_device(ordinal: int = 0) -> Device:
    """Make the device's primary context current (the one CuPy and PyTorch use)."""
    if cu is None:
        raise NoDevice(f"cuda-python is not installed ({_IMPORT_ERROR}); install `pipec[cu12]` or `pipec[cu13]`")
    try:
        (err,) = cu.cuInit(0)
    except Exception as error:  # the driver library itself cannot be loaded
        raise NoDevice(f"no CUDA driver: {error}") from None
    if err != cu.CUresult.CUDA_SUCCESS:
        raise NoDevice(f"no CUDA device: cuInit failed with {error_name(err)}")
    version = call("cuDriverGetVersion")
    if version < MIN_DRIVER:
        raise NoDevice(f"the CUDA driver supports API {version // 1000}.{version % 1000 // 10}; "
                       f"pipec needs {MIN_DRIVER // 1000}.{MIN_DRIVER % 1000 // 10} or newer")
    count = call("cuDeviceGetCount")
    if not 0 <= ordinal < count:
        raise NoDevice(f"device {ordinal} does not exist ({count} CUDA device{'s' * (count != 1)} found)")
    handle = call("cuDeviceGet", ordinal)
    context = call("cuDevicePrimaryCtxRetain", handle)
    call("cuCtxSetCurrent", context)

    def attribute(name: str) -> int:
        return call("cuDeviceGetAttribute", getattr(cu.CUdevice_attribute, name), handle)

    major = attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
    minor = attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
    name = call("cuDeviceGetName", 256, handle).split(b"\0", 1)[0].decode()
    return Device(
        ordinal, handle, context, name, f"sm_{major}{minor}",
        attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        version,
    )


def release_device(device: Device) -> None:
    call("cuDevicePrimaryCtxRelease", device.handle)
