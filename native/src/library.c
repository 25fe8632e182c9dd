/* Library nodes (runtime/library.py): one vendor-library call (a cuBLASLt matmul, an NCCL
 * collective or group) recorded into a graph pipec owns, then added to the step as a child graph
 * node. This is the only stream capture in pipec, scoped to the one call: a private stream,
 * capture mode THREAD_LOCAL (another thread's work is not affected), begun right before the call
 * and ended right after it, whatever the call returned. A recording holding anything but kernel
 * and memset nodes is refused, naming what was found; collectives may also hold NCCL's host node
 * (its proxy hand-off between machines, runtime/collectives.py says why). */
#include <stdlib.h>

#include "runtime.h"

static pipec_status inspect(pipec_pipeline *p, const node_spec *n, const char *what, int allow_host, CUgraph graph) {
    size_t count = 0;
    CU(p, p->driver.GraphGetNodes(graph, NULL, &count), "cuGraphGetNodes", n->name);
    CUgraphNode *nodes = calloc(count ? count : 1, sizeof *nodes);
    if (!nodes) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUresult r = p->driver.GraphGetNodes(graph, nodes, &count);
    pipec_status status = r == CUDA_SUCCESS ? PIPEC_OK : fail_cuda(&p->driver, "cuGraphGetNodes", r, n->name);
    for (size_t i = 0; i < count && status == PIPEC_OK; i++) {
        int type;
        r = p->driver.GraphNodeGetType(nodes[i], &type);
        if (r != CUDA_SUCCESS) status = fail_cuda(&p->driver, "cuGraphNodeGetType", r, n->name);
        else if (type != CU_GRAPH_NODE_TYPE_KERNEL && type != CU_GRAPH_NODE_TYPE_MEMSET &&
                 !(allow_host && type == CU_GRAPH_NODE_TYPE_HOST))
            status = fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): the library call recorded a node of type %d; a library "
                          "node may hold kernel, memset%s nodes only", what, n->name, n->location, type,
                          allow_host ? ", host" : "");
    }
    free(nodes);
    return status;
}

pipec_status library_record(pipec_pipeline *p, const node_spec *n, const char *what, library_call call,
                            int allow_host, CUgraph *out) {
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
    if (status == PIPEC_OK) status = inspect(p, n, what, allow_host, graph);
    if (status != PIPEC_OK && graph) p->driver.GraphDestroy(graph);
    p->driver.StreamDestroy(stream);
    if (status == PIPEC_OK) *out = graph;
    return status;
}
