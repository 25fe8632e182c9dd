/* Element types and bit patterns (compiler/dtypes.py): what kernels receive as scalar arguments
 * and what fills write. */
#include <math.h>
#include <string.h>

#include "runtime.h"

static const struct { const char *name; size_t size; char kind; } DTYPES[DT_COUNT] = {
    [DT_F32] = {"f32", 4, 'f'}, [DT_F16] = {"f16", 2, 'f'}, [DT_BF16] = {"bf16", 2, 'f'},
    [DT_F64] = {"f64", 8, 'f'}, [DT_I32] = {"i32", 4, 'i'}, [DT_U32] = {"u32", 4, 'u'},
    [DT_I64] = {"i64", 8, 'i'}, [DT_U64] = {"u64", 8, 'u'}, [DT_U8] = {"u8", 1, 'u'},
    [DT_U16] = {"u16", 2, 'u'}, [DT_I8] = {"i8", 1, 'i'}, [DT_I16] = {"i16", 2, 'i'},
    [DT_BOOL] = {"bool", 1, 'b'},
};

int dtype_from_name(const char *name) {
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(DTYPES[i].name, name) == 0) return i;
    return -1;
}

const char *dtype_name(dtype t) { return DTYPES[t].name; }
size_t dtype_size(dtype t) { return DTYPES[t].size; }
char dtype_kind(dtype t) { return DTYPES[t].kind; }

uint16_t half_bits(double value) {
    uint64_t bits;
    memcpy(&bits, &value, 8);
    uint16_t sign = (uint16_t)(bits >> 48 & 0x8000);
    int exponent = (int)(bits >> 52 & 0x7FF);
    uint64_t mantissa = bits & 0xFFFFFFFFFFFFFull;
    if (exponent == 0x7FF) return sign | 0x7C00 | (mantissa ? 0x200 : 0);
    int e = exponent - 1023 + 15;
    if (e >= 31) return sign | 0x7C00;
    /* the significand with its implicit bit, as an integer of 53 bits */
    uint64_t significand = mantissa | (exponent ? 1ull << 52 : 0);
    int shift = e >= 1 ? 42 : 42 + 1 - e; /* bits dropped: to 10 fraction bits, or subnormal */
    if (exponent == 0 || shift > 63) return sign;
    uint64_t kept = significand >> shift, rest = significand & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) kept++;
    /* normal: kept holds the implicit bit at 10; a carry into bit 11 raises the exponent */
    if (e >= 1) return (uint16_t)(sign | (((uint64_t)(e - 1) << 10) + kept));
    return (uint16_t)(sign | kept);
}

uint16_t bfloat16_bits(double value) {
    float f = (float)value;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return (uint16_t)(((uint64_t)bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

void scalar_bytes(dtype t, const json *value, unsigned char out[8]) {
    memset(out, 0, 8);
    int integer = value->kind == JSON_NUMBER && value->is_integer;
    double number = value->kind == JSON_BOOL ? value->boolean : value->number;
    uint64_t bits = value->kind == JSON_BOOL ? (uint64_t)value->boolean
                    : integer ? value->uinteger : (uint64_t)(int64_t)number;
    switch (t) {
    case DT_F32: { float f = (float)number; memcpy(out, &f, 4); return; }
    case DT_F64: memcpy(out, &number, 8); return;
    case DT_F16: { uint16_t h = half_bits(number); memcpy(out, &h, 2); return; }
    case DT_BF16: { uint16_t h = bfloat16_bits(number); memcpy(out, &h, 2); return; }
    case DT_BOOL: out[0] = number != 0; return;
    default: memcpy(out, &bits, DTYPES[t].size); return; /* little-endian: the low bytes */
    }
}

double element_as_double(dtype t, const unsigned char *e) {
    switch (t) {
    case DT_F32: { float f; memcpy(&f, e, 4); return f; }
    case DT_F64: { double d; memcpy(&d, e, 8); return d; }
    case DT_F16: {
        uint16_t h;
        memcpy(&h, e, 2);
        int exponent = h >> 10 & 0x1F, fraction = h & 0x3FF;
        double magnitude = exponent == 0 ? ldexp(fraction, -24)
                           : exponent == 31 ? (fraction ? NAN : INFINITY) : ldexp(fraction | 0x400, exponent - 25);
        return h & 0x8000 ? -magnitude : magnitude;
    }
    case DT_BF16: { uint16_t h; memcpy(&h, e, 2); uint32_t bits = (uint32_t)h << 16; float f; memcpy(&f, &bits, 4); return f; }
    case DT_I32: { int32_t v; memcpy(&v, e, 4); return v; }
    case DT_U32: { uint32_t v; memcpy(&v, e, 4); return v; }
    case DT_I64: { int64_t v; memcpy(&v, e, 8); return (double)v; }
    case DT_U64: { uint64_t v; memcpy(&v, e, 8); return (double)v; }
    case DT_U16: { uint16_t v; memcpy(&v, e, 2); return v; }
    case DT_I16: { int16_t v; memcpy(&v, e, 2); return v; }
    case DT_I8: return (int8_t)e[0];
    default: return e[0];
    }
}
