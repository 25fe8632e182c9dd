"""DLPack and the CUDA array interface on CPU (the fake driver): the capsules a buffer view
exports, their structs and deleters, binding other frameworks' arrays, and bf16 wherever it
leaves pipec (ml_dtypes on the host, BF16 in state files, kDLBfloat in DLPack)."""

from __future__ import annotations

import ctypes
import gc
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from fake_cuda import fake_driver
from pipec import load
from pipec.runtime import Backends
from pipec.runtime import dlpack
from pipec.runtime.memory import BindError

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "tests" / "fixtures" / "runtime" / "live.pipe"
BF16 = ROOT / "tests" / "fixtures" / "runtime" / "bf16.pipe"

_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))
_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@pytest.fixture
def live():
    with load(LIVE, backends=Backends(fake_driver(LIVE))) as pipeline:
        yield pipeline, pipeline.driver.cu


def _consume(capsule, versioned: bool):
    """What a consumer does: take the struct, rename the capsule, call the deleter when done."""
    name = b"dltensor_versioned" if versioned else b"dltensor"
    struct_type = dlpack.DLManagedTensorVersioned if versioned else dlpack.DLManagedTensor
    managed = struct_type.from_address(_pointer(capsule, name))
    _set_name(capsule, b"used_" + name)
    return managed


@pytest.mark.parametrize("versioned", [False, True])
def test_a_view_exports_a_capsule_over_the_buffer(live, versioned):
    pipeline, _ = live
    before = dlpack.outstanding()
    view = pipeline.buffers["x"]
    capsule = view.__dlpack__(stream=-1, max_version=(1, 1) if versioned else None)
    managed = _consume(capsule, versioned)
    tensor = managed.dl_tensor
    assert tensor.data == pipeline.buffer("x").device_ptr and tensor.byte_offset == 0
    assert (tensor.device.device_type, tensor.device.device_id) == (2, 0)
    assert (tensor.ndim, tensor.shape[0], bool(tensor.strides)) == (1, 1000, False)
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (2, 32, 1)
    if versioned:
        assert (managed.version.major, managed.version.minor, managed.flags) == (1, 1, 0)
    assert dlpack.outstanding() == before + 1
    del capsule, view
    gc.collect()
    assert dlpack.outstanding() == before + 1, "a consumed capsule waits for its consumer's deleter"
    managed.deleter(ctypes.addressof(managed))
    assert dlpack.outstanding() == before


def test_a_capsule_never_consumed_releases_itself(live):
    pipeline, _ = live
    before = dlpack.outstanding()
    capsule = pipeline.buffers["x"].__dlpack__(stream=-1)
    assert dlpack.outstanding() == before + 1
    del capsule
    gc.collect()
    assert dlpack.outstanding() == before


def test_the_consumer_stream_waits_for_the_pipeline_on_the_device(live):
    pipeline, fake = live
    fake.calls.clear()
    pipeline.buffers["x"].__dlpack__(stream=0x7000)
    assert [c.name for c in fake.calls] == ["cuEventCreate", "cuEventRecord", "cuStreamWaitEvent", "cuEventDestroy"]
    assert fake.named("cuEventRecord")[0].args[1] == pipeline.stream
    assert fake.named("cuStreamWaitEvent")[0].args[0] == fake.CUstream(0x7000)
    fake.calls.clear()
    pipeline.buffers["x"].__dlpack__()  # None: the legacy default stream
    assert fake.named("cuStreamWaitEvent")[0].args[0] == fake.CUstream(1)
    fake.calls.clear()
    pipeline.buffers["x"].__dlpack__(stream=-1)
    assert fake.calls == []


def test_an_export_the_view_cannot_make_is_a_buffer_error(live):
    pipeline, _ = live
    with pytest.raises(BufferError, match="device 0"):
        pipeline.buffers["x"].__dlpack__(dl_device=(2, 1))
    with pytest.raises(BufferError, match="without copying"):
        pipeline.buffers["x"].__dlpack__(copy=True)


class DLPackOnly:
    """A producer with nothing but DLPack (what a JAX array may be)."""

    def __init__(self, pointer: int, dtype: str, shape: tuple[int, ...]) -> None:
        self.args = (pointer, dtype, shape)
        self.streams: list = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        pointer, dtype, shape = self.args
        return dlpack.export(self, pointer, 0, dtype, shape, versioned=False)


class ArrayInterfaceOnly:
    def __init__(self, pointer: int, typestr: str, shape, strides=None, stream=None) -> None:
        self.__cuda_array_interface__ = {"data": (pointer, False), "typestr": typestr, "shape": shape,
                                         "strides": strides, "version": 3, "stream": stream}


def _memory(fake, nbytes: int) -> int:
    return fake.cuMemAlloc(nbytes)[1]


def test_bind_takes_a_dlpack_producer():
    driver = fake_driver(LIVE)
    pointer = _memory(driver.cu, 4000)
    producer = DLPackOnly(pointer, "f32", (10, 100))
    with load(LIVE, backends=Backends(driver), bind={"x": producer}) as pipeline:
        assert pipeline.buffer("x").device_ptr == pointer
        assert producer.streams == [int(pipeline.stream)], "the producer orders its work before the pipeline's"


def test_bind_takes_the_array_interface_and_waits_for_its_stream():
    driver = fake_driver(LIVE)
    pointer = _memory(driver.cu, 4000)
    with load(LIVE, backends=Backends(driver), bind={"x": ArrayInterfaceOnly(pointer, "<f4", (1000,), stream=0x9000)}) as p:
        assert p.buffer("x").device_ptr == pointer
        assert driver.cu.named("cuStreamWaitEvent")[0].args[0] == p.stream
        assert driver.cu.named("cuEventRecord")[0].args[1] == driver.cu.CUstream(0x9000)


@pytest.mark.parametrize("producer,message", [
    (lambda p: DLPackOnly(p, "f64", (500,)), "holds float64, the buffer f32"),
    (lambda p: DLPackOnly(p, "f32", (999,)), "has 999 elements"),
    (lambda p: ArrayInterfaceOnly(p, "<f4", (10, 100), strides=(4, 40)), "not C-contiguous"),
    (lambda p: ArrayInterfaceOnly(p, "<i4", (1000,)), "holds int32"),
    (lambda p: object(), "neither __cuda_array_interface__ nor __dlpack__"),
])
def test_bind_refuses_what_does_not_fit(producer, message):
    driver = fake_driver(LIVE)
    with pytest.raises(BindError, match=message):
        load(LIVE, backends=Backends(driver), bind={"x": producer(_memory(driver.cu, 4000))})


# --- bf16 ----------------------------------------------------------------------------------

def test_bf16_is_bfloat16_on_the_host_in_state_files_and_in_dlpack(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with load(BF16, backends=Backends(fake_driver(BF16))) as pipeline:
        pipeline.step(1)
        h = pipeline.read("h")
        assert h.dtype == ml_dtypes.bfloat16 and h.shape == (2, 8)
        assert h.astype(np.float32).tolist() == [[1.5] * 8, [2.5] * 8]
        view = pipeline.buffers["h"]
        assert view.dtype == ml_dtypes.bfloat16 and view.strides == (16, 2)
        managed = _consume(view.__dlpack__(stream=-1), versioned=False)
        dtype = managed.dl_tensor.dtype
        assert (dtype.code, dtype.bits, dtype.lanes) == (dlpack.KDL_BFLOAT, 16, 1)
        managed.deleter(ctypes.addressof(managed))
        with pytest.raises(AttributeError, match="DLPack"):
            view.__cuda_array_interface__
        pipeline.write("h", np.full((2, 8), 3.0, np.float32))
        assert (pipeline.read("h").astype(np.float32) == 3.0).all()
        path = pipeline.save_state(tmp_path)
        data = path.read_bytes()
        header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
        assert header["h"]["dtype"] == "BF16" and header["f"]["dtype"] == "F32"
        pipeline.write("h", np.zeros((2, 8), np.float32))
        pipeline.load_state(tmp_path)
        assert (pipeline.read("h").astype(np.float32) == 3.0).all()


def test_state_files_with_bf16_as_bit_patterns_still_load(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from safetensors.numpy import save_file

    bits = np.full((2, 8), 2.0, ml_dtypes.bfloat16).view(np.uint16)
    save_file({"h": bits, "f": np.zeros(4, np.float32)}, str(tmp_path / "state.safetensors"),
              metadata={"dtypes": json.dumps({"h": "bf16", "f": "f32"})})
    with load(BF16, backends=Backends(fake_driver(BF16))) as pipeline:
        pipeline.load_state(tmp_path)
        assert (pipeline.read("h").astype(np.float32) == 2.0).all()
