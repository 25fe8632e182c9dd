/* NCCL loaded with dlopen (runtime/nccl.py's role): only when a plan has collective nodes, from
 * `pipec_options.nccl_library`, else $PIPEC_NCCL_LIBRARY, else libnccl.so.2, the way the driver
 * is found. Element types and reductions are NCCL's own enum values (ncclDataType_t,
 * ncclRedOp_t), so every pipec element type NCCL has reaches it, bf16 included. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

#define DEFAULT_NCCL "libnccl.so.2"

pipec_status nccl_open(const char *path, const node_spec *n, nccl_library *out) {
    memset(out, 0, sizeof *out);
    if (!path || !*path) path = getenv("PIPEC_NCCL_LIBRARY");
    if (!path || !*path) path = DEFAULT_NCCL;
    snprintf(out->path, sizeof out->path, "%s", path);
    out->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!out->handle) {
        const char *why = dlerror();
        return fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): collective nodes need NCCL, and %s cannot be loaded (%s)",
                    n->collective->collective, n->name, n->location, path, why ? why : "not found");
    }
#define NCCL_LOAD(field, symbol, result, params) \
    if (!(*(void **)(&out->field) = dlsym(out->handle, symbol))) { \
        pipec_status status = fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): %s has no %s: pipec needs NCCL 2.18 or newer", \
                                   n->collective->collective, n->name, n->location, path, symbol); \
        nccl_close(out); \
        return status; \
    }
    NCCL_ENTRY_POINTS(NCCL_LOAD)
#undef NCCL_LOAD
    return PIPEC_OK;
}

void nccl_close(nccl_library *library) {
    if (library->handle) dlclose(library->handle);
    memset(library, 0, sizeof *library);
}

int nccl_type(dtype t) {
    switch (t) {
    case DT_I8: return 0;
    case DT_U8: return 1;
    case DT_I32: return 2;
    case DT_U32: return 3;
    case DT_I64: return 4;
    case DT_U64: return 5;
    case DT_F16: return 6;
    case DT_F32: return 7;
    case DT_F64: return 8;
    case DT_BF16: return 9;
    default: return -1;
    }
}

int nccl_op(const char *op) {
    static const struct { const char *name; int value; } OPS[] = {{"sum", 0}, {"max", 2}, {"min", 3}, {"avg", 4}};
    for (size_t i = 0; i < sizeof OPS / sizeof *OPS; i++)
        if (strcmp(op, OPS[i].name) == 0) return OPS[i].value;
    return -1;
}

const char *nccl_error(const nccl_library *library, nccl_result result) {
    const char *text = library->GetErrorString ? library->GetErrorString(result) : NULL;
    return text ? text : "unknown NCCL error";
}
