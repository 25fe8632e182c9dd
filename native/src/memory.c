/* Buffers at fixed addresses (runtime/memory.py): device memory, or pinned host memory mapped
 * into the device's address space; allocated once (or bound to the host's allocation),
 * initialised as declared, freed on close. Initial values: zeros and uninit (poison) by memset,
 * fills by memset of their bit pattern (or written from the host for 8-byte patterns whose
 * halves differ), tables of addresses once every buffer has one (addresses.c), and everything
 * else from the bundle's buffers/<name>.bin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

static void poison_pattern(dtype t, unsigned *size, uint32_t *value) {
    switch (t) {
    case DT_F32: *size = 4; *value = 0x7FC0DEAD; return;
    case DT_F64: *size = 4; *value = 0x7FF8DEAD; return;
    case DT_F16: *size = 2; *value = 0x7E5A; return;
    case DT_BF16: *size = 2; *value = 0x7FDA; return;
    default: *size = 1; *value = 0xA5; return;
    }
}

/* compiler/dtypes.py fill_pattern: (element size, bit pattern); 8 for 8-byte patterns whose
 * 32-bit halves differ. */
static void fill_pattern(dtype t, const json *value, unsigned *size, uint64_t *pattern) {
    unsigned char bytes[8];
    scalar_bytes(t, value, bytes);
    uint64_t bits = 0;
    memcpy(&bits, bytes, 8);
    *size = (unsigned)dtype_size(t);
    *pattern = bits;
    if (*size == 8) {
        uint32_t low = (uint32_t)bits, high = (uint32_t)(bits >> 32);
        if (low == high) {
            *size = 4;
            *pattern = low;
        }
    }
}

static pipec_status memset_sync(pipec_pipeline *p, CUdeviceptr dst, unsigned size, uint32_t value, size_t count,
                                const char *name) {
    driver *d = &p->driver;
    if (size == 1) CU(p, d->MemsetD8(dst, (unsigned char)value, count), "cuMemsetD8", name);
    else if (size == 2) CU(p, d->MemsetD16(dst, (unsigned short)value, count), "cuMemsetD16", name);
    else CU(p, d->MemsetD32(dst, value, count), "cuMemsetD32", name);
    return PIPEC_OK;
}

pipec_status buffer_write(pipec_pipeline *p, int index, const void *host) {
    const buffer_spec *spec = &p->plan.buffers[index];
    if (p->buffers[index].host) {
        memcpy(p->buffers[index].host, host, spec->nbytes);
        return PIPEC_OK;
    }
    CU(p, p->driver.MemcpyHtoD(p->buffers[index].pointer, host, spec->nbytes), "cuMemcpyHtoD", spec->name);
    return PIPEC_OK;
}

pipec_status buffer_read(pipec_pipeline *p, int index, void *host) {
    const buffer_spec *spec = &p->plan.buffers[index];
    if (p->buffers[index].host) {
        memcpy(host, p->buffers[index].host, spec->nbytes);
        return PIPEC_OK;
    }
    CU(p, p->driver.MemcpyDtoH(host, p->buffers[index].pointer, spec->nbytes), "cuMemcpyDtoH", spec->name);
    return PIPEC_OK;
}

pipec_status buffer_poison(pipec_pipeline *p, int index, CUstream stream) {
    const buffer_spec *spec = &p->plan.buffers[index];
    unsigned size;
    uint32_t value;
    poison_pattern(spec->type, &size, &value);
    CUdeviceptr dst = p->buffers[index].pointer;
    size_t count = spec->nbytes / size;
    driver *d = &p->driver;
    if (!stream) return memset_sync(p, dst, size, value, count, spec->name);
    if (size == 1) CU(p, d->MemsetD8Async(dst, (unsigned char)value, count, stream), "cuMemsetD8Async", spec->name);
    else if (size == 2) CU(p, d->MemsetD16Async(dst, (unsigned short)value, count, stream), "cuMemsetD16Async", spec->name);
    else CU(p, d->MemsetD32Async(dst, value, count, stream), "cuMemsetD32Async", spec->name);
    return PIPEC_OK;
}

static pipec_status initialise_from_bundle(pipec_pipeline *p, int index) {
    const buffer_spec *spec = &p->plan.buffers[index];
    char path[1024];
    snprintf(path, sizeof path, "buffers/%s.bin", spec->name);
    const bundle_file *f = bundle_find(&p->bundle, path);
    if (!f)
        return fail(PIPEC_ERROR_BUNDLE, "%s: the bundle has no %s, the initial value of `%s` (declared at %s)",
                    p->bundle.where, path, spec->name, spec->location);
    if (f->size != spec->nbytes)
        return fail(PIPEC_ERROR_BUNDLE, "%s: %s has %zu bytes, the buffer `%s` %llu", p->bundle.where, path, f->size,
                    spec->name, (unsigned long long)spec->nbytes);
    return buffer_write(p, index, f->data);
}

static pipec_status initialise(pipec_pipeline *p, int index) {
    const buffer_spec *spec = &p->plan.buffers[index];
    CUdeviceptr dst = p->buffers[index].pointer;
    if (spec->init == INIT_ZEROS) {
        unsigned size = spec->nbytes % 4 == 0 ? 4 : 1;
        return memset_sync(p, dst, size, 0, spec->nbytes / size, spec->name);
    }
    if (spec->init == INIT_UNINIT) return buffer_poison(p, index, NULL);
    if (spec->init == INIT_DATA) return initialise_from_bundle(p, index);
    if (spec->init == INIT_ADDRESSES) return PIPEC_OK; /* once every buffer has its address: tables_fill */
    unsigned size;
    uint64_t pattern;
    fill_pattern(spec->type, spec->fill, &size, &pattern);
    if (size <= 4 && spec->nbytes % size == 0)
        return memset_sync(p, dst, size, (uint32_t)pattern, spec->nbytes / size, spec->name);
    uint64_t *host = malloc(spec->nbytes ? spec->nbytes : 1);
    if (!host) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory filling `%s`", spec->name);
    for (size_t i = 0; i < spec->nbytes / 8; i++) host[i] = pattern;
    pipec_status status = buffer_write(p, index, host);
    free(host);
    return status;
}

static pipec_status allocate(pipec_pipeline *p, int index) {
    const buffer_spec *spec = &p->plan.buffers[index];
    device_buffer *b = &p->buffers[index];
    CUresult result;
    const char *call;
    if (spec->mapped) {
        call = "cuMemHostAlloc";
        result = p->driver.MemHostAlloc(&b->host, spec->nbytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        if (result == CUDA_SUCCESS) {
            result = p->driver.MemHostGetDevicePointer(&b->pointer, b->host, 0);
            call = "cuMemHostGetDevicePointer";
            if (result != CUDA_SUCCESS) {
                p->driver.MemFreeHost(b->host);
                b->host = NULL;
            }
        }
    } else {
        call = "cuMemAlloc";
        result = p->driver.MemAlloc(&b->pointer, spec->nbytes);
    }
    if (result == CUDA_ERROR_OUT_OF_MEMORY)
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of %s memory allocating `%s` (%llu bytes, declared at %s)",
                    spec->mapped ? "mapped" : "device", spec->name, (unsigned long long)spec->nbytes, spec->location);
    if (result != CUDA_SUCCESS) return fail_cuda(&p->driver, call, result, spec->name);
    return PIPEC_OK;
}

static pipec_status bind(pipec_pipeline *p, int index, const pipec_binding *binding) {
    const buffer_spec *spec = &p->plan.buffers[index];
    if (spec->mapped)
        return fail(PIPEC_ERROR_BIND, "`%s` is mapped host memory; only device buffers can be bound", spec->name);
    if (spec->init == INIT_ADDRESSES)
        return fail(PIPEC_ERROR_BIND, "`%s` is a table of addresses, which the runtime fills; bind the buffers it names",
                    spec->name);
    int accepted = (int)binding->dtype == (int)spec->type || (spec->type == DT_BF16 && binding->dtype == PIPEC_U16);
    if ((int)binding->dtype < 0 || (int)binding->dtype > PIPEC_U16)
        return fail(PIPEC_ERROR_BIND, "cannot bind `%s`: the binding's type %d is not a pipec_dtype", spec->name,
                    (int)binding->dtype);
    if (!accepted)
        return fail(PIPEC_ERROR_BIND, "cannot bind `%s`: the allocation holds %s, the buffer %s", spec->name,
                    dtype_name((dtype)binding->dtype), dtype_name(spec->type));
    if (binding->bytes != spec->nbytes)
        return fail(PIPEC_ERROR_BIND, "cannot bind `%s`: the allocation has %zu bytes, the buffer %llu (declared at %s)",
                    spec->name, binding->bytes, (unsigned long long)spec->nbytes, spec->location);
    if (!binding->pointer) return fail(PIPEC_ERROR_BIND, "cannot bind `%s`: the pointer is NULL", spec->name);
    p->buffers[index].pointer = binding->pointer;
    p->buffers[index].bound = 1;
    return PIPEC_OK;
}

static pipec_status check_bindings(const pipec_pipeline *p, const pipec_binding *bindings, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (!bindings[i].buffer) return fail(PIPEC_ERROR_BIND, "binding %zu names no buffer", i);
        if (plan_buffer_index(&p->plan, bindings[i].buffer) < 0)
            return fail(PIPEC_ERROR_BIND, "no buffer named %s in %s", bindings[i].buffer, p->plan.pipe);
        for (size_t j = 0; j < i; j++)
            if (strcmp(bindings[i].buffer, bindings[j].buffer) == 0)
                return fail(PIPEC_ERROR_BIND, "`%s` is bound twice", bindings[i].buffer);
    }
    return PIPEC_OK;
}

pipec_status buffers_open(pipec_pipeline *p, const pipec_binding *bindings, size_t count) {
    pipec_status status = check_bindings(p, bindings, count);
    if (status != PIPEC_OK) return status;
    p->buffers = calloc(p->plan.buffer_count ? p->plan.buffer_count : 1, sizeof *p->buffers);
    if (!p->buffers) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        const pipec_binding *binding = NULL;
        for (size_t j = 0; j < count; j++)
            if (strcmp(bindings[j].buffer, p->plan.buffers[i].name) == 0) binding = &bindings[j];
        status = binding ? bind(p, (int)i, binding) : allocate(p, (int)i);
        if (status != PIPEC_OK) return status;
        p->buffers_made = i + 1;
        if (!binding && (status = initialise(p, (int)i)) != PIPEC_OK) return status;
    }
    return tables_fill(p);
}

void buffers_close(pipec_pipeline *p) {
    for (size_t i = 0; i < p->buffers_made; i++) {
        device_buffer *b = &p->buffers[i];
        if (b->bound) continue;
        if (b->host) p->driver.MemFreeHost(b->host);
        else p->driver.MemFree(b->pointer);
    }
    free(p->buffers);
    p->buffers = NULL;
    p->buffers_made = 0;
}

CUdeviceptr buffer_pointer(const pipec_pipeline *p, int buffer, int64_t offset) {
    return p->buffers[buffer].pointer + (CUdeviceptr)offset;
}
