/* Library nodes (runtime/library.py): one vendor-library call (a cuBLASLt matmul, an NCCL
 * collective or group) recorded into a graph pipec owns, then added to the step as a child graph
 * node. This is the only stream capture in pipec, scoped to the one call: a private stream,
 * capture mode THREAD_LOCAL (another thread's work is not affected), begun right before the call
 * and ended right after it, whatever the call returned. A recording holding anything but kernel
 * and memset nodes is refused, naming what was found; a collective's may also hold NCCL's host
 * node (its proxy hand-off between machines, runtime/collectives.py says why) and copies within
 * device memory (on a communicator of one rank NCCL copies instead of communicating). What makes a
 * copy a pitfall is host memory: one to or from it inside a replay is the host back in the loop
 * (PC304), while a device-to-device copy the library recorded is an explicit node of the graph,
 * replayed as pipec's own memcpy nodes are. So a copy is judged by its ends, which the node's
 * parameters give (a unified address, as cudaMemcpyDefault records, is asked of the driver), and
 * a refused one is named by them, in runtime/library.py's words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "text.h"

/* CUgraphNodeType's names, as runtime/library.py reads them from the bindings' enum. */
static const char *const NODE_TYPES[] = {"kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
                                         "event_record", "ext_semas_signal", "ext_semas_wait", "mem_alloc",
                                         "mem_free", "batch_mem_op", "conditional"};
/* CUmemorytype's, from CU_MEMORYTYPE_HOST (1) to CU_MEMORYTYPE_UNIFIED (4). */
static const char *const MEMORY_TYPES[] = {"host", "device", "array", "unified"};

#define NAME_SIZE 48 /* room for the longest name, "a copy from unknown to unknown memory" */

/* A copy's end: a unified address is asked of the driver, and one it does not know is pageable
 * host memory. */
static const char *memory(const pipec_pipeline *p, int type, CUdeviceptr address) {
    unsigned int found;
    if (type == CU_MEMORYTYPE_UNIFIED)
        type = p->driver.PointerGetAttribute(&found, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) == CUDA_SUCCESS
               ? (int)found : CU_MEMORYTYPE_HOST;
    return type >= CU_MEMORYTYPE_HOST && type <= CU_MEMORYTYPE_UNIFIED ? MEMORY_TYPES[type - 1] : "unknown";
}

/* In `name`, the node's name when a recording may not hold it, else "". */
static pipec_status name_refused(pipec_pipeline *p, const node_spec *n, CUgraphNode node, int collective,
                                 char name[NAME_SIZE]) {
    int type;
    name[0] = 0;
    CU(p, p->driver.GraphNodeGetType(node, &type), "cuGraphNodeGetType", n->name);
    if (type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMSET ||
        (collective && type == CU_GRAPH_NODE_TYPE_HOST))
        return PIPEC_OK;
    if (collective && type == CU_GRAPH_NODE_TYPE_MEMCPY) {
        CUDA_MEMCPY3D copy;
        memset(&copy, 0, sizeof copy);
        CU(p, p->driver.GraphMemcpyNodeGetParams(node, &copy), "cuGraphMemcpyNodeGetParams", n->name);
        const char *src = memory(p, copy.srcMemoryType, copy.srcDevice);
        const char *dst = memory(p, copy.dstMemoryType, copy.dstDevice);
        if (strcmp(src, "device") != 0 || strcmp(dst, "device") != 0)
            snprintf(name, NAME_SIZE, "a copy from %s to %s memory", src, dst);
    } else if (type >= 0 && type < (int)(sizeof NODE_TYPES / sizeof *NODE_TYPES)) {
        snprintf(name, NAME_SIZE, "%s", NODE_TYPES[type]);
    } else {
        snprintf(name, NAME_SIZE, "type %d", type);
    }
    return PIPEC_OK;
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

/* One line naming the refused nodes' kinds, each once, in order (`names` is sorted here). */
static pipec_status refuse(const node_spec *n, const char *what, int collective, char (*names)[NAME_SIZE],
                           size_t count) {
    qsort(names, count, NAME_SIZE, by_name);
    text kinds = {0};
    for (size_t i = 0; i < count; i++)
        if (i == 0 || strcmp(names[i], names[i - 1]) != 0) {
            if (i) text_puts(&kinds, ", ");
            text_puts(&kinds, names[i]);
        }
    pipec_status status = kinds.failed ? fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory")
        : fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): the library call recorded %zu node%s of another kind (%s); a library "
               "node may hold kernel, memset%s only", what, n->name, n->location, count, count == 1 ? "" : "s",
               kinds.data, collective ? ", host nodes and device-to-device copies" : " nodes");
    free(kinds.data);
    return status;
}

static pipec_status inspect(pipec_pipeline *p, const node_spec *n, const char *what, int collective, CUgraph graph) {
    size_t count = 0;
    CU(p, p->driver.GraphGetNodes(graph, NULL, &count), "cuGraphGetNodes", n->name);
    CUgraphNode *nodes = calloc(count ? count : 1, sizeof *nodes);
    char (*names)[NAME_SIZE] = calloc(count ? count : 1, sizeof *names);
    pipec_status status = PIPEC_OK;
    CUresult r;
    if (!nodes || !names) status = fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    /* an empty recording (NCCL on one rank, in place) has nothing to list: the driver refuses
     * an array for zero nodes */
    else if (count && (r = p->driver.GraphGetNodes(graph, nodes, &count)) != CUDA_SUCCESS)
        status = fail_cuda(&p->driver, "cuGraphGetNodes", r, n->name);
    size_t refused = 0;
    for (size_t i = 0; i < count && status == PIPEC_OK; i++)
        if ((status = name_refused(p, n, nodes[i], collective, names[refused])) == PIPEC_OK && names[refused][0])
            refused++;
    if (status == PIPEC_OK && refused) status = refuse(n, what, collective, names, refused);
    free(nodes);
    free(names);
    return status;
}

pipec_status library_record(pipec_pipeline *p, const node_spec *n, const char *what, library_call call,
                            int collective, CUgraph *out) {
    CUstream stream;
    CU(p, p->driver.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", n->name);
    CUgraph graph = NULL;
    pipec_status status = PIPEC_OK;
    CUresult r = p->driver.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) status = fail_cuda(&p->driver, "cuStreamBeginCapture", r, n->name);
    if (status == PIPEC_OK) {
        pipec_status called = call(p, n, stream);
        r = p->driver.StreamEndCapture(stream, &graph); /* ended whatever happened, or the stream stays unusable */
        if (called != PIPEC_OK) status = called;
        else if (r != CUDA_SUCCESS || !graph)
            status = fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): the library call could not be recorded: "
                          "cuStreamEndCapture failed with %d (the call did something stream capture forbids)",
                          what, n->name, n->location, r);
    }
    if (status == PIPEC_OK) status = inspect(p, n, what, collective, graph);
    if (status != PIPEC_OK && graph) p->driver.GraphDestroy(graph);
    p->driver.StreamDestroy(stream);
    if (status == PIPEC_OK) *out = graph;
    return status;
}
