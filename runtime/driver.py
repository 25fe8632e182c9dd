"""The CUDA driver, one object: the driver API module and the checker every call goes through.

`Driver` wraps `cuda.bindings.driver`, or a stand-in with the same functions and types (the
CPU tests' fake driver): every runtime module reaches the driver through the `Device` it works
on, so swapping the module swaps every call. Every call returns `(CUresult, *outputs)`;
`call` raises `CudaError` naming the call and the driver's error name. A missing driver or GPU
is reported as `NoDevice`, with one line a person can act on.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Error
from ..wording import counted


class NoDevice(Error):
    """No usable GPU: no cuda-bindings, no driver, no device, or a driver that is too old."""


class CudaError(Error):
    def __init__(self, call: str, name: str, detail: str = "") -> None:
        self.call, self.name = call, name
        super().__init__(f"{call} failed: {name}" + (f" ({detail})" if detail else ""))


MIN_DRIVER = 12040  # CUDA 12.4: conditional nodes and the graph API pipec uses


class Driver:
    def __init__(self, cu) -> None:
        self.cu = cu
        self.success = cu.CUresult.CUDA_SUCCESS

    def error_name(self, err) -> str:
        try:
            return self.cu.CUresult(err).name
        except (ValueError, TypeError):
            return f"CUDA error {int(err)}"

    def call(self, name: str, *args):
        """`cu.<name>(*args)`, unwrapped: None, one output, or a tuple of outputs."""
        result = getattr(self.cu, name)(*args)
        err = result[0]
        if err != self.success:
            raise CudaError(name, self.error_name(err))
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]


def cuda_driver() -> Driver:
    """The real driver, through cuda-python."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as error:
        raise NoDevice(f"cuda-python is not installed ({error}); "
                       "install `pipec[cu12]` or `pipec[cu13]`") from None
    return Driver(cu)


@dataclass(frozen=True)
class Device:
    ordinal: int
    driver: Driver
    handle: object
    context: object
    name: str
    arch: str  # sm_90
    multiprocessors: int
    max_threads_per_block: int
    max_registers_per_block: int
    max_shared_per_block: int  # opt-in limit for static plus dynamic shared memory
    driver_version: int

    def describe(self) -> str:
        major, minor = divmod(self.driver_version // 10, 100)
        return f"{self.name} ({self.arch}, {self.multiprocessors} SMs, driver API {major}.{minor})"


def open_device(ordinal: int = 0, driver: Driver | None = None) -> Device:
    """Make the device's primary context current (the one CuPy and PyTorch use)."""
    driver = driver or cuda_driver()
    cu, call = driver.cu, driver.call
    try:
        (err,) = cu.cuInit(0)
    except Exception as error:  # the driver library itself cannot be loaded
        raise NoDevice(f"no CUDA driver: {error}") from None
    if err != driver.success:
        raise NoDevice(f"no CUDA device: cuInit failed with {driver.error_name(err)}")
    version = call("cuDriverGetVersion")
    if version < MIN_DRIVER:
        raise NoDevice(f"the CUDA driver supports API {version // 1000}.{version % 1000 // 10}; "
                       f"pipec needs {MIN_DRIVER // 1000}.{MIN_DRIVER % 1000 // 10} or newer")
    count = call("cuDeviceGetCount")
    if not 0 <= ordinal < count:
        raise NoDevice(f"device {ordinal} does not exist ({counted(count, 'CUDA device')} found)")
    handle = call("cuDeviceGet", ordinal)
    context = call("cuDevicePrimaryCtxRetain", handle)
    call("cuCtxSetCurrent", context)

    def attribute(name: str) -> int:
        return call("cuDeviceGetAttribute", getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"),
                    handle)

    name = call("cuDeviceGetName", 256, handle).split(b"\0", 1)[0].decode()
    return Device(
        ordinal, driver, handle, context, name,
        f"sm_{attribute('COMPUTE_CAPABILITY_MAJOR')}{attribute('COMPUTE_CAPABILITY_MINOR')}",
        attribute("MULTIPROCESSOR_COUNT"), attribute("MAX_THREADS_PER_BLOCK"),
        attribute("MAX_REGISTERS_PER_BLOCK"), attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        version,
    )


def as_stream(cu, stream):
    """A `CUstream` from a raw handle (an int), or the stream itself."""
    return cu.CUstream(stream) if isinstance(stream, int) else stream


def wait_for(driver: Driver, waiter, producer) -> None:
    """`waiter` waits, on the device, for the work enqueued on `producer` so far (both streams,
    or raw handles): an event recorded on one, waited for by the other. The host never waits."""
    cu = driver.cu
    event = driver.call("cuEventCreate", cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    try:
        driver.call("cuEventRecord", event, as_stream(cu, producer))
        driver.call("cuStreamWaitEvent", as_stream(cu, waiter), event, 0)
    finally:
        driver.call("cuEventDestroy", event)


def release_device(device: Device) -> None:
    device.driver.call("cuDevicePrimaryCtxRelease", device.handle)
