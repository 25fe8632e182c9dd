/* Building the CUDA graph explicitly from the plan, exactly as runtime/graph.py does: kernel,
 * memset and memcpy nodes, cuGraphAddChildGraphNode for child graphs (each built from its own
 * spec), cuGraphAddNode for conditional nodes (whose body graphs the driver creates and pipec
 * fills), each node added after its dependencies in the plan's order; a GEMM node is its one
 * cuBLASLt call recorded (gemm.c) and added as a child graph node. On sm_90 and later the plan's
 * programmatic edges join kernel nodes with edge data (pdl.c); a graph whose programmatic edges
 * start or end at child graph nodes opens pipec's child graphs into their parent, while each
 * library recording stays whole in its child graph node. Instantiated and uploaded once; a
 * replay is one cuGraphLaunch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define ELSE_AND_SWITCH_DRIVER 12080 /* CUDA 12.8: IF nodes with an else body, and SWITCH nodes */

typedef struct handles {
    CUgraphNode *items;
    size_t count, capacity;
} handles;

static int push(handles *h, CUgraphNode node) {
    if (h->count == h->capacity) {
        size_t next = h->capacity ? h->capacity * 2 : 8;
        CUgraphNode *bigger = realloc(h->items, next * sizeof *bigger);
        if (!bigger) return 0;
        h->items = bigger;
        h->capacity = next;
    }
    h->items[h->count++] = node;
    return 1;
}

static pipec_status oom(void) { return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory"); }

static leaf_handle *find_leaf(built_graph *g, const char *name) {
    for (size_t i = 0; i < g->leaf_count; i++)
        if (strcmp(g->leaves[i].name, name) == 0) return &g->leaves[i];
    return NULL;
}

static leaf_handle *leaf(built_graph *g, const char *name) {
    leaf_handle *found = find_leaf(g, name);
    if (found) return found;
    if (g->leaf_count == g->leaf_capacity) {
        size_t next = g->leaf_capacity ? g->leaf_capacity * 2 : 32;
        leaf_handle *bigger = realloc(g->leaves, next * sizeof *bigger);
        if (!bigger) return NULL;
        g->leaves = bigger;
        g->leaf_capacity = next;
    }
    found = &g->leaves[g->leaf_count++];
    memset(found, 0, sizeof *found);
    found->name = name;
    return found;
}

static pipec_status keep_graph(built_graph *g, CUgraph graph) {
    if (g->graph_count == g->graph_capacity) {
        size_t next = g->graph_capacity ? g->graph_capacity * 2 : 16;
        CUgraph *bigger = realloc(g->graphs, next * sizeof *bigger);
        if (!bigger) return oom();
        g->graphs = bigger;
        g->graph_capacity = next;
    }
    g->graphs[g->graph_count++] = graph;
    return PIPEC_OK;
}

static pipec_status add_body(pipec_pipeline *p, built_graph *g, CUgraph graph, int index, const handles *entry,
                             const handles *entry_early, handles *out);

static pipec_status build(pipec_pipeline *p, built_graph *g, int index, CUgraph *out) {
    CU(p, p->driver.GraphCreate(out, 0), "cuGraphCreate", p->plan.graphs[index].name);
    pipec_status status = keep_graph(g, *out);
    if (status != PIPEC_OK) {
        p->driver.GraphDestroy(*out);
        return status;
    }
    handles entry = {0}, ends = {0};
    status = add_body(p, g, *out, index, &entry, &entry, &ends);
    free(ends.items);
    return status;
}

static pipec_status kernel_params(pipec_pipeline *p, const built_graph *g, const node_spec *n, const char *scope,
                                  CUDA_KERNEL_NODE_PARAMS_v2 *params, kernel_args *args) {
    memset(params, 0, sizeof *params);
    pipec_status status = module_function(p, scope, n->module, n->function, n->shared_bytes, &params->func);
    if (status != PIPEC_OK) return status;
    if ((status = kernel_args_make(p, n, g->handles, args)) != PIPEC_OK) return status;
    params->gridDimX = n->grid[0], params->gridDimY = n->grid[1], params->gridDimZ = n->grid[2];
    params->blockDimX = n->block[0], params->blockDimY = n->block[1], params->blockDimZ = n->block[2];
    params->sharedMemBytes = n->shared_bytes;
    params->kernelParams = args->pointers;
    return PIPEC_OK;
}

/* The handle a deciding kernel sets, created on the graph that holds its conditional node (the
 * kernel before the node comes first); each launch starts it at 0 (ASSIGN_DEFAULT). */
static pipec_status create_handles(pipec_pipeline *p, built_graph *g, CUgraph graph, const node_spec *n) {
    for (size_t i = 0; i < n->arg_count; i++) {
        const arg_spec *a = &n->args[i];
        if (a->kind != ARG_HANDLE || g->handle_made[a->handle]) continue;
        CU(p, p->driver.GraphConditionalHandleCreate(&g->handles[a->handle], graph, p->context, 0,
                                                      CU_GRAPH_COND_ASSIGN_DEFAULT),
           "cuGraphConditionalHandleCreate", n->name);
        g->handle_made[a->handle] = 1;
    }
    return PIPEC_OK;
}

static pipec_status add_leaf(pipec_pipeline *p, built_graph *g, CUgraph graph, const node_spec *n,
                             const handles *deps, const char *scope, CUgraphNode *out) {
    if (n->kind == NODE_KERNEL) {
        CUDA_KERNEL_NODE_PARAMS_v2 params;
        kernel_args args = {0};
        pipec_status status = kernel_params(p, g, n, scope, &params, &args);
        if (status != PIPEC_OK) return status;
        CUresult result = p->driver.GraphAddKernelNode(out, graph, deps->items, deps->count, &params);
        kernel_args_free(&args); /* the driver copied the values */
        if (result != CUDA_SUCCESS) return fail_cuda(&p->driver, "cuGraphAddKernelNode", result, n->name);
        return PIPEC_OK;
    }
    if (n->kind == NODE_MEMSET) {
        CUDA_MEMSET_NODE_PARAMS params = {0};
        params.dst = buffer_pointer(p, n->buffer, n->byte_offset);
        params.elementSize = n->element_size;
        params.value = n->value;
        params.width = n->count;
        params.height = 1;
        params.pitch = n->count * n->element_size;
        CU(p, p->driver.GraphAddMemsetNode(out, graph, deps->items, deps->count, &params, p->context),
           "cuGraphAddMemsetNode", n->name);
        return PIPEC_OK;
    }
    CUDA_MEMCPY3D params;
    memset(&params, 0, sizeof params);
    params.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    params.srcDevice = buffer_pointer(p, n->src, n->src_offset);
    params.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    params.dstDevice = buffer_pointer(p, n->dst, n->dst_offset);
    params.WidthInBytes = n->nbytes;
    params.Height = 1;
    params.Depth = 1;
    CU(p, p->driver.GraphAddMemcpyNode(out, graph, deps->items, deps->count, &params, p->context),
       "cuGraphAddMemcpyNode", n->name);
    return PIPEC_OK;
}

static pipec_status add_conditional(pipec_pipeline *p, built_graph *g, CUgraph graph, const node_spec *n,
                                    const handles *deps, CUgraphNode *out) {
    if (!g->handle_made[n->handle])
        return fail(PIPEC_ERROR_BUNDLE, "conditional node `%s` (%s) has no deciding kernel before it", n->name,
                    n->location);
    CUgraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    params.u.conditional.handle = g->handles[n->handle];
    params.u.conditional.type = n->cond_type;
    params.u.conditional.size = (unsigned)n->body_count;
    params.u.conditional.ctx = p->context;
    CU(p, p->driver.GraphAddNode(out, graph, deps->items, deps->count, &params), "cuGraphAddNode", n->name);
    /* The driver creates the body graphs and owns them with the node: filled, never destroyed. */
    for (size_t i = 0; i < n->body_count; i++) {
        handles entry = {0}, ends = {0};
        pipec_status status = add_body(p, g, params.u.conditional.phGraph_out[i], n->bodies[i], &entry, &entry,
                                       &ends);
        free(ends.items);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}

static pipec_status embed_leaves(pipec_pipeline *p, built_graph *g, int index, CUgraphNode child_node) {
    size_t count = plan_leaves(&p->plan, index, NULL, 0);
    const node_spec **leaves = calloc(count ? count : 1, sizeof *leaves);
    if (!leaves) return oom();
    plan_leaves(&p->plan, index, leaves, count);
    for (size_t i = 0; i < count; i++) {
        leaf_handle *l = leaf(g, leaves[i]->name);
        CUgraphNode *bigger = l ? realloc(l->embedded_in, (l->embedded_count + 1) * sizeof *bigger) : NULL;
        if (!bigger) {
            free(leaves);
            return oom();
        }
        l->embedded_in = bigger;
        l->embedded_in[l->embedded_count++] = child_node;
    }
    free(leaves);
    return PIPEC_OK;
}

static pipec_status add_library(pipec_pipeline *p, built_graph *g, CUgraph graph, const node_spec *n,
                                const handles *deps, CUgraphNode *out) {
    CUgraph recording;
    pipec_status status = n->kind == NODE_GEMM ? gemm_record(p, n, &recording) : collective_record(p, n, &recording);
    if (status != PIPEC_OK) return status;
    CUresult result = p->driver.GraphAddChildGraphNode(out, graph, deps->items, deps->count, recording);
    p->driver.GraphDestroy(recording); /* the child graph node holds its own clone */
    if (result != CUDA_SUCCESS) return fail_cuda(&p->driver, "cuGraphAddChildGraphNode", result, n->name);
    leaf_handle *l = leaf(g, n->name);
    if (!l) return oom();
    l->node = *out;
    return PIPEC_OK;
}

static int is_kernel_node(const built_graph *g, CUgraphNode node) {
    for (size_t i = 0; i < g->leaf_count; i++)
        if (g->leaves[i].node == node && g->leaves[i].kernel) return 1;
    return 0;
}

static pipec_status add_node(pipec_pipeline *p, built_graph *g, CUgraph graph, const node_spec *n, const handles *deps,
                             const char *scope, CUgraphNode *node) {
    pipec_status status;
    if (n->kind == NODE_GRAPH) {
        CUgraph child;
        if ((status = build(p, g, n->graph, &child)) != PIPEC_OK) return status;
        CU(p, p->driver.GraphAddChildGraphNode(node, graph, deps->items, deps->count, child),
           "cuGraphAddChildGraphNode", n->name);
        return embed_leaves(p, g, n->graph, *node);
    }
    if (n->kind == NODE_CONDITIONAL) return add_conditional(p, g, graph, n, deps, node);
    if (n->kind == NODE_GEMM || n->kind == NODE_COLLECTIVE) return add_library(p, g, graph, n, deps, node);
    if ((status = add_leaf(p, g, graph, n, deps, scope, node)) != PIPEC_OK) return status;
    leaf_handle *l = leaf(g, n->name);
    if (!l) return oom();
    l->node = *node;
    l->kernel = n->kind == NODE_KERNEL;
    return PIPEC_OK;
}

/* One node after `deps`, and after `early` over programmatic edges: those join two kernel nodes,
 * added after the consumer with edge data; any other is added as an ordinary edge (a child graph
 * that is not opened). An opened child graph's nodes go into `graph` itself. */
static pipec_status add(pipec_pipeline *p, built_graph *g, CUgraph graph, const node_spec *n, const handles *deps,
                        const handles *early, const char *scope, handles *ends) {
    if (n->kind == NODE_GRAPH && g->open_children) return add_body(p, g, graph, n->graph, deps, early, ends);
    pipec_status status = PIPEC_OK;
    if (n->kind == NODE_KERNEL && (status = create_handles(p, g, graph, n)) != PIPEC_OK) return status;
    handles after = {0}, producers = {0};
    for (size_t h = 0; h < deps->count && status == PIPEC_OK; h++)
        if (!push(&after, deps->items[h])) status = oom();
    for (size_t h = 0; h < early->count && status == PIPEC_OK; h++) {
        int programmatic = n->kind == NODE_KERNEL && is_kernel_node(g, early->items[h]);
        if (!push(programmatic ? &producers : &after, early->items[h])) status = oom();
    }
    CUgraphNode node;
    if (status == PIPEC_OK) status = add_node(p, g, graph, n, &after, scope, &node);
    for (size_t h = 0; h < producers.count && status == PIPEC_OK; h++) {
        status = add_programmatic_dependency(p, graph, producers.items[h], node, n->name);
        g->programmatic_edges += status == PIPEC_OK;
    }
    free(after.items);
    free(producers.items);
    if (status != PIPEC_OK) return status;
    return push(ends, node) ? PIPEC_OK : oom();
}

/* Adds the graph spec's nodes to `graph`, its first nodes after `entry` (and, over programmatic
 * edges, `entry_early`); `out` gets the handles later nodes must follow (its last nodes, or
 * `entry` when it has none). */
static pipec_status add_body(pipec_pipeline *p, built_graph *g, CUgraph graph, int index, const handles *entry,
                             const handles *entry_early, handles *out) {
    const graph_spec *spec = &p->plan.graphs[index];
    handles *ends = calloc(spec->node_count ? spec->node_count : 1, sizeof *ends);
    int *followed = calloc(spec->node_count ? spec->node_count : 1, sizeof *followed);
    pipec_status status = ends && followed ? PIPEC_OK : oom();
    for (size_t e = 0; followed && e < spec->edge_count; e++) followed[spec->edges[e][0]] = 1;
    for (size_t i = 0; i < spec->node_count && status == PIPEC_OK; i++) {
        handles deps = {0}, early = {0};
        int has_predecessor = 0;
        for (size_t e = 0; e < spec->edge_count; e++) {
            if (spec->edges[e][1] != (int)i) continue;
            has_predecessor = 1;
            const handles *before = &ends[spec->edges[e][0]];
            handles *into = g->programmatic_launch && spec->programmatic[e] ? &early : &deps;
            for (size_t h = 0; h < before->count; h++)
                if (!push(into, before->items[h])) status = oom();
        }
        if (status == PIPEC_OK)
            status = add(p, g, graph, &spec->nodes[i], has_predecessor ? &deps : entry,
                         has_predecessor ? &early : entry_early, spec->scope, &ends[i]);
        free(deps.items);
        free(early.items);
    }
    for (size_t i = 0; i < spec->node_count && status == PIPEC_OK; i++)
        for (size_t h = 0; !followed[i] && h < ends[i].count; h++)
            if (!push(out, ends[i].items[h])) status = oom();
    for (size_t h = 0; status == PIPEC_OK && out->count == 0 && h < entry->count; h++)
        if (!push(out, entry->items[h])) status = oom();
    for (size_t i = 0; ends && i < spec->node_count; i++) free(ends[i].items);
    free(ends);
    free(followed);
    return status;
}

static pipec_status check_driver_for_conditionals(const pipec_pipeline *p, int index) {
    if (p->driver_version >= ELSE_AND_SWITCH_DRIVER) return PIPEC_OK;
    const graph_spec *g = &p->plan.graphs[index];
    for (size_t i = 0; i < g->node_count; i++) {
        const node_spec *n = &g->nodes[i];
        if (n->kind == NODE_CONDITIONAL && (n->cond_type == CU_GRAPH_COND_TYPE_SWITCH || n->body_count > 1))
            return fail(PIPEC_ERROR_UNSUPPORTED, "the CUDA driver supports API %d.%d; %s on the device (%s) needs 12.8 "
                        "or newer", p->driver_version / 1000, p->driver_version % 1000 / 10,
                        n->cond_type == CU_GRAPH_COND_TYPE_SWITCH ? "`switch`" : "`if` with `else`", n->location);
        pipec_status status = PIPEC_OK;
        if (n->kind == NODE_GRAPH) status = check_driver_for_conditionals(p, n->graph);
        for (size_t b = 0; b < n->body_count && status == PIPEC_OK; b++)
            status = check_driver_for_conditionals(p, n->bodies[b]);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}

static pipec_status prepare(const pipec_pipeline *p, int root, built_graph *g) {
    memset(g, 0, sizeof *g);
    g->programmatic_launch = supports_programmatic_launch(p->arch);
    /* An edge between child graph nodes is programmatic between the kernels at their ends, which
     * only an opened child graph lets the parent join. */
    g->open_children = g->programmatic_launch && programmatic_at_child_graphs(&p->plan, root);
    size_t count = 1;
    for (size_t i = 0; i < p->plan.graph_count; i++)
        for (size_t n = 0; n < p->plan.graphs[i].node_count; n++) {
            const node_spec *node = &p->plan.graphs[i].nodes[n];
            if (node->kind == NODE_CONDITIONAL && (size_t)node->handle >= count) count = (size_t)node->handle + 1;
            for (size_t a = 0; a < node->arg_count; a++)
                if (node->args[a].kind == ARG_HANDLE && (size_t)node->args[a].handle >= count)
                    count = (size_t)node->args[a].handle + 1;
        }
    g->handles = calloc(count, sizeof *g->handles);
    g->handle_made = calloc(count, sizeof *g->handle_made);
    g->handle_count = count;
    return g->handles && g->handle_made ? PIPEC_OK : oom();
}

pipec_status graph_build(pipec_pipeline *p, int root, built_graph *out) {
    pipec_status status = prepare(p, root, out);
    if (status == PIPEC_OK) status = check_driver_for_conditionals(p, root);
    if (status == PIPEC_OK) status = build(p, out, root, &out->root);
    if (status != PIPEC_OK) return status;
    CU(p, p->driver.GraphInstantiate(&out->exec, out->root, 0), "cuGraphInstantiate", p->plan.pipe);
    CU(p, p->driver.GraphUpload(out->exec, p->stream), "cuGraphUpload", p->plan.pipe);
    return PIPEC_OK;
}

pipec_status graph_embed(pipec_pipeline *p, CUgraph host, const CUgraphNode *deps, size_t ndeps, built_graph *out,
                         CUgraphNode *out_last) {
    pipec_status status = prepare(p, p->plan.step, out);
    if (status == PIPEC_OK) status = check_driver_for_conditionals(p, p->plan.step);
    handles entry = {0}, none = {0}, ends = {0};
    for (size_t i = 0; i < ndeps && status == PIPEC_OK; i++)
        if (!push(&entry, deps[i])) status = oom();
    if (status == PIPEC_OK) status = add_body(p, out, host, p->plan.step, &entry, &none, &ends);
    if (status == PIPEC_OK && out_last) {
        CUresult result = p->driver.GraphAddEmptyNode(out_last, host, ends.items, ends.count);
        if (result != CUDA_SUCCESS) status = fail_cuda(&p->driver, "cuGraphAddEmptyNode", result, p->plan.pipe);
    }
    free(entry.items);
    free(ends.items);
    return status;
}

pipec_status graph_update_kernel(pipec_pipeline *p, built_graph *g, const node_spec *n, const char *scope) {
    leaf_handle *l = find_leaf(g, n->name);
    if (!l) return fail(PIPEC_ERROR_UPDATE_REFUSED, "kernel node `%s` is not in the graph", n->name);
    CUgraphNode node = l->node;
    for (size_t i = 0; i < l->embedded_count; i++) { /* the node's clone in each embedding */
        CUgraph clone;
        CU(p, p->driver.GraphChildGraphNodeGetGraph(l->embedded_in[i], &clone), "cuGraphChildGraphNodeGetGraph", n->name);
        CU(p, p->driver.GraphNodeFindInClone(&node, node, clone), "cuGraphNodeFindInClone", n->name);
    }
    CUDA_KERNEL_NODE_PARAMS_v2 params;
    kernel_args args = {0};
    pipec_status status = kernel_params(p, g, n, scope, &params, &args);
    if (status != PIPEC_OK) return status;
    CUresult result = p->driver.GraphExecKernelNodeSetParams(g->exec, node, &params);
    kernel_args_free(&args);
    if (result != CUDA_SUCCESS) return fail_cuda(&p->driver, "cuGraphExecKernelNodeSetParams", result, n->name);
    return PIPEC_OK;
}

void graph_close(pipec_pipeline *p, built_graph *g) {
    if (g->exec) p->driver.GraphExecDestroy(g->exec);
    for (size_t i = 0; i < g->graph_count; i++) p->driver.GraphDestroy(g->graphs[i]);
    for (size_t i = 0; i < g->leaf_count; i++) free(g->leaves[i].embedded_in);
    free(g->leaves);
    free(g->graphs);
    free(g->handles);
    free(g->handle_made);
    memset(g, 0, sizeof *g);
}
