/* The same nodes as the graph, launched one by one on the pipeline's stream in program order,
 * from the "eager" module instance (runtime/eager.py), a collective as its NCCL call (or group)
 * on the same stream (collectives.c). Everything a launch needs is prepared
 * once. A conditional node is decided by the same generated kernel as in the graph; eager
 * execution waits for it, reads the decision it stored in control[0], and runs the chosen body
 * (a loop body again while the decision stays nonzero). On sm_90 and later the kernels that the
 * graph's programmatic edges lead into are launched with programmatic stream serialization. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define EAGER_SCOPE "eager"

typedef struct item_list {
    eager_item *items;
    size_t count, capacity;
} item_list;

static eager_item *append(item_list *l) {
    if (l->count == l->capacity) {
        size_t next = l->capacity ? l->capacity * 2 : 16;
        eager_item *bigger = realloc(l->items, next * sizeof *bigger);
        if (!bigger) return NULL;
        l->items = bigger;
        l->capacity = next;
    }
    eager_item *item = &l->items[l->count++];
    memset(item, 0, sizeof *item);
    return item;
}

static void free_items(eager_item *items, size_t count) {
    for (size_t i = 0; i < count; i++) {
        kernel_args_free(&items[i].args);
        if (items[i].branch)
            for (size_t b = 0; b < items[i].node->body_count; b++) free_items(items[i].bodies[b], items[i].lengths[b]);
        free(items[i].bodies);
        free(items[i].lengths);
    }
    free(items);
}

static pipec_status prepare_op(pipec_pipeline *p, const node_spec *n, eager_item *item) {
    item->node = n;
    if (n->kind == NODE_KERNEL) {
        pipec_status status = module_function(p, EAGER_SCOPE, n->module, n->function, n->shared_bytes, &item->function);
        return status == PIPEC_OK ? kernel_args_make(p, n, NULL, &item->args) : status;
    }
    if (n->kind == NODE_GEMM) return gemm_prepare(p, n); /* described, its algorithm chosen, called once */
    return PIPEC_OK;
}

/* `root`'s graph tree decides which kernels a programmatic edge leads into: on a device with
 * programmatic launch those are launched with programmatic stream serialization, overlapping the
 * launch before them as the graph does. */
static pipec_status prepare_graph(pipec_pipeline *p, int root, int index, item_list *out, int *branching) {
    const graph_spec *g = &p->plan.graphs[index];
    pipec_status status = PIPEC_OK;
    for (size_t i = 0; i < g->node_count && status == PIPEC_OK; i++) {
        const node_spec *n = &g->nodes[i];
        if (n->kind == NODE_GRAPH) {
            status = prepare_graph(p, root, n->graph, out, branching);
            continue;
        }
        eager_item *item = append(out);
        if (!item) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
        if (n->kind != NODE_CONDITIONAL) {
            status = prepare_op(p, n, item);
            item->programmatic = n->kind == NODE_KERNEL && supports_programmatic_launch(p->arch) &&
                                 early_starter(&p->plan, root, n);
            continue;
        }
        *branching = 1;
        item->node = n;
        item->bodies = calloc(n->body_count ? n->body_count : 1, sizeof *item->bodies);
        item->lengths = calloc(n->body_count ? n->body_count : 1, sizeof *item->lengths);
        if (!item->bodies || !item->lengths) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
        item->branch = 1;
        for (size_t b = 0; b < n->body_count && status == PIPEC_OK; b++) {
            item_list body = {0};
            status = prepare_graph(p, root, n->bodies[b], &body, branching);
            item->bodies[b] = body.items;
            item->lengths[b] = body.count;
        }
    }
    return status;
}

pipec_status eager_prepare(pipec_pipeline *p, int graph, eager_program *out) {
    item_list list = {0};
    int branching = 0;
    pipec_status status = prepare_graph(p, graph, graph, &list, &branching);
    out->items = list.items;
    out->count = list.count;
    out->branching = branching;
    if (status != PIPEC_OK) eager_free(out);
    return status;
}

void eager_free(eager_program *program) {
    free_items(program->items, program->count);
    memset(program, 0, sizeof *program);
}

static pipec_status node_failed(pipec_status status, const node_spec *n) {
    return fail(status, "node `%s` (%s): %s", n->name, n->location, pipec_last_error());
}

/* cuLaunchKernelEx with programmatic stream serialization: the kernel may start before the
 * launch before it on the stream has finished, as over a programmatic edge (CUDA 12.3+). */
static pipec_status launch_programmatic(pipec_pipeline *p, const eager_item *item) {
    const node_spec *n = item->node;
    CUlaunchAttribute attribute;
    memset(&attribute, 0, sizeof attribute);
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config = {n->grid[0], n->grid[1], n->grid[2], n->block[0], n->block[1], n->block[2],
                             n->shared_bytes, p->stream, &attribute, 1};
    CUresult result = p->driver.LaunchKernelEx(&config, item->function, item->args.pointers, NULL);
    if (result == CUDA_SUCCESS) return PIPEC_OK;
    return node_failed(fail_cuda(&p->driver, "cuLaunchKernelEx", result, NULL), n);
}

static pipec_status run_op(pipec_pipeline *p, const eager_item *item) {
    const node_spec *n = item->node;
    driver *d = &p->driver;
    CUstream s = p->stream;
    CUresult result;
    const char *call;
    switch (n->kind) {
    case NODE_KERNEL:
        if (item->programmatic) return launch_programmatic(p, item);
        call = "cuLaunchKernel";
        result = d->LaunchKernel(item->function, n->grid[0], n->grid[1], n->grid[2], n->block[0], n->block[1],
                                 n->block[2], n->shared_bytes, s, item->args.pointers, NULL);
        break;
    case NODE_GEMM:
        return gemm_enqueue(p, n, s);
    case NODE_COLLECTIVE:
        return collective_issue(p, n, s);
    case NODE_MEMSET: {
        CUdeviceptr dst = buffer_pointer(p, n->buffer, n->byte_offset);
        call = n->element_size == 1 ? "cuMemsetD8Async" : n->element_size == 2 ? "cuMemsetD16Async" : "cuMemsetD32Async";
        result = n->element_size == 1 ? d->MemsetD8Async(dst, (unsigned char)n->value, n->count, s)
                 : n->element_size == 2 ? d->MemsetD16Async(dst, (unsigned short)n->value, n->count, s)
                 : d->MemsetD32Async(dst, n->value, n->count, s);
        break;
    }
    default:
        call = "cuMemcpyDtoDAsync";
        result = d->MemcpyDtoDAsync(buffer_pointer(p, n->dst, n->dst_offset), buffer_pointer(p, n->src, n->src_offset),
                                    n->nbytes, s);
    }
    if (result == CUDA_SUCCESS) return PIPEC_OK;
    return node_failed(fail_cuda(d, call, result, NULL), n);
}

/* The decision the branch's kernel stored, once everything before it has finished. */
static pipec_status decided(pipec_pipeline *p, const eager_item *branch, uint32_t *decision) {
    pipec_status waited = stream_wait(p, branch->node->name);
    if (waited != PIPEC_OK) return waited;
    CU(p, p->driver.MemcpyDtoH(decision, buffer_pointer(p, branch->node->control, 0), 4), "cuMemcpyDtoH",
       branch->node->name);
    return PIPEC_OK;
}

static pipec_status run_items(pipec_pipeline *p, const eager_item *items, size_t count);

static pipec_status run_branch(pipec_pipeline *p, const eager_item *branch) {
    uint32_t decision;
    pipec_status status = decided(p, branch, &decision);
    const node_spec *n = branch->node;
    if (n->cond_type == CU_GRAPH_COND_TYPE_WHILE) {
        while (status == PIPEC_OK && decision) {
            status = run_items(p, branch->bodies[0], branch->lengths[0]);
            if (status == PIPEC_OK) status = decided(p, branch, &decision);
        }
        return status;
    }
    if (status != PIPEC_OK) return status;
    /* IF: nonzero runs the first body, zero the second (if any); SWITCH: body `decision`. */
    size_t chosen = n->cond_type == CU_GRAPH_COND_TYPE_IF ? (decision ? 0 : 1) : decision;
    return chosen < n->body_count ? run_items(p, branch->bodies[chosen], branch->lengths[chosen]) : PIPEC_OK;
}

static pipec_status run_items(pipec_pipeline *p, const eager_item *items, size_t count) {
    for (size_t i = 0; i < count; i++) {
        pipec_status status = items[i].branch ? run_branch(p, &items[i]) : run_op(p, &items[i]);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}

pipec_status eager_run(pipec_pipeline *p, eager_program *program) {
    return run_items(p, program->items, program->count);
}

static eager_item *find(eager_item *items, size_t count, const char *name) {
    for (size_t i = 0; i < count; i++) {
        if (!items[i].branch && strcmp(items[i].node->name, name) == 0) return &items[i];
        for (size_t b = 0; items[i].branch && b < items[i].node->body_count; b++) {
            eager_item *found = find(items[i].bodies[b], items[i].lengths[b], name);
            if (found) return found;
        }
    }
    return NULL;
}

pipec_status eager_update_kernel(pipec_pipeline *p, eager_program *program, const node_spec *node) {
    eager_item *item = find(program->items, program->count, node->name);
    if (!item) return fail(PIPEC_ERROR_UPDATE_REFUSED, "kernel node `%s` is not in the eager program", node->name);
    eager_item fresh = {0};
    pipec_status status = prepare_op(p, node, &fresh);
    if (status != PIPEC_OK) {
        kernel_args_free(&fresh.args);
        return status;
    }
    fresh.programmatic = item->programmatic; /* launched as before, with its new arguments */
    kernel_args_free(&item->args);
    *item = fresh;
    return PIPEC_OK;
}
