"""Element types: names, sizes, the NumPy type that holds each on the host, and the bit
patterns of values. A leaf module: the compiler types buffers and parameters with it, the
runtime packs arguments and initial values with it, and neither needs the other for that."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    size: int
    kind: str  # "f" float, "i" signed integer, "u" unsigned integer, "b" bool
    numpy: str  # the NumPy dtype that holds it on the host (bf16 travels as its raw bits)

    @property
    def bits(self) -> int:
        return self.size * 8

    def int_range(self) -> tuple[int, int]:
        if self.kind == "u":
            return 0, (1 << self.bits) - 1
        if self.kind == "b":
            return 0, 1
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("f32", 4, "f", "float32"),
        DType("f16", 2, "f", "float16"),
        DType("bf16", 2, "f", "uint16"),
        DType("f64", 8, "f", "float64"),
        DType("i8", 1, "i", "int8"),
        DType("i16", 2, "i", "int16"),
        DType("i32", 4, "i", "int32"),
        DType("i64", 8, "i", "int64"),
        DType("u8", 1, "u", "uint8"),
        DType("u16", 2, "u", "uint16"),
        DType("u32", 4, "u", "uint32"),
        DType("u64", 8, "u", "uint64"),
        DType("bool", 1, "b", "bool"),
    )
}

BUFFER_DTYPES = ("f32", "f16", "bf16", "f64", "i32", "u32", "i64", "u64", "u8")


def bfloat16_bits(values) -> np.ndarray:
    """The bf16 bit patterns of `values`, rounded to nearest even (NumPy has no bfloat16)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def host_array(dtype: DType, values) -> np.ndarray:
    """`values` as the host holds elements of `dtype` (bf16 as rounded bit patterns)."""
    if dtype.name == "bf16":
        return bfloat16_bits(values)
    return np.asarray(values).astype(dtype.numpy)


def fill_pattern(dtype: DType, value) -> tuple[int, int]:
    """(element size, bit pattern) of one element holding `value`; 4-byte elements for 8-byte
    types whose two halves agree, since a 32-bit memset moves four times the bytes per clock
    of an 8-bit one."""
    if dtype.kind == "f":
        if dtype.name == "f32":
            return 4, struct.unpack("<I", struct.pack("<f", float(value)))[0]
        if dtype.name == "f64":
            bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
        elif dtype.name == "f16":
            return 2, struct.unpack("<H", struct.pack("<e", float(value)))[0]
        else:
            return 2, int(bfloat16_bits([value])[0])
    else:
        bits = int(value) & ((1 << dtype.bits) - 1)
        if dtype.size < 8:
            return dtype.size, bits
    low, high = bits & 0xFFFFFFFF, bits >> 32
    return (4, low) if low == high else (8, bits)
