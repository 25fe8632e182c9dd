/* A kernel node's kernelParams array (runtime/launch.py): each argument's bytes in one block,
 * and the array of pointers into it that the driver reads. Built once per node; kept alive for
 * as long as a launch or a node may use it. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

static size_t arg_size(const arg_spec *a) {
    switch (a->kind) {
    case ARG_POINTER: case ARG_HANDLE: return 8;
    case ARG_IN_GRAPH: return 4;
    default: return dtype_size(a->ctype);
    }
}

pipec_status kernel_args_make(const pipec_pipeline *p, const node_spec *node, const CUgraphConditionalHandle *handles,
                              kernel_args *out) {
    size_t n = node->arg_count;
    out->storage = calloc(n ? n : 1, 8);
    out->pointers = calloc(n ? n : 1, sizeof *out->pointers);
    if (!out->storage || !out->pointers) {
        kernel_args_free(out);
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    for (size_t i = 0; i < n; i++) {
        const arg_spec *a = &node->args[i];
        unsigned char *slot = out->storage + 8 * i; /* 8-byte slots: every argument aligned */
        uint64_t u = 0;
        uint32_t in_graph = handles != NULL;
        switch (a->kind) {
        case ARG_POINTER: u = buffer_pointer(p, a->buffer, a->byte_offset); memcpy(slot, &u, 8); break;
        case ARG_HANDLE: u = handles ? handles[a->handle] : 0; memcpy(slot, &u, 8); break;
        case ARG_IN_GRAPH: memcpy(slot, &in_graph, 4); break;
        default: memcpy(slot, a->value, arg_size(a)); break;
        }
        out->pointers[i] = slot;
    }
    return PIPEC_OK;
}

void kernel_args_free(kernel_args *a) {
    free(a->storage);
    free(a->pointers);
    a->storage = NULL;
    a->pointers = NULL;
}
