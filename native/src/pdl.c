/* Programmatic dependent launch, as runtime/graph.py and runtime/eager.py use it: which devices
 * have it, when a graph opens its child graphs for it, the programmatic edge itself, and the
 * kernels eager execution launches with programmatic stream serialization. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Compute capability 9.0 and later (`sm_90`, `sm_90a`, `sm_100`); below it every edge is
 * ordinary (the kernels' waits compile to nothing there, kernels/pdl.cuh). */
int supports_programmatic_launch(const char *arch) {
    return strncmp(arch, "sm_", 3) == 0 && atoi(arch + 3) >= 90;
}

/* Whether a programmatic edge of the graph tree starts or ends at a child graph node. */
int programmatic_at_child_graphs(const plan *pl, int index) {
    const graph_spec *g = &pl->graphs[index];
    for (size_t e = 0; e < g->edge_count; e++)
        if (g->programmatic[e] && (g->nodes[g->edges[e][0]].kind == NODE_GRAPH ||
                                   g->nodes[g->edges[e][1]].kind == NODE_GRAPH))
            return 1;
    for (size_t i = 0; i < g->node_count; i++) {
        const node_spec *n = &g->nodes[i];
        if (n->kind == NODE_GRAPH && programmatic_at_child_graphs(pl, n->graph)) return 1;
        for (size_t b = 0; b < n->body_count; b++)
            if (programmatic_at_child_graphs(pl, n->bodies[b])) return 1;
    }
    return 0;
}

/* One programmatic edge (CUDA 12.3+): from the producer's programmatic port, so the consumer may
 * start once every block of the producer has triggered (griddepcontrol.launch_dependents) or
 * exited, and sees the producer's writes after its griddepcontrol.wait. */
pipec_status add_programmatic_dependency(pipec_pipeline *p, CUgraph graph, CUgraphNode producer, CUgraphNode consumer,
                                         const char *name) {
    CUgraphEdgeData edge;
    memset(&edge, 0, sizeof edge);
    edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    CU(p, p->driver.GraphAddDependencies(graph, &producer, &consumer, &edge, 1), "cuGraphAddDependencies", name);
    return PIPEC_OK;
}

/* Whether `target` is among the nodes a programmatic edge leads into when it ends at `n`: `n`
 * itself or, for a child graph node, its child graph's first nodes (theirs, for child graphs). */
static int entered_at(const plan *pl, const node_spec *n, const node_spec *target) {
    if (n->kind != NODE_GRAPH) return n == target;
    const graph_spec *child = &pl->graphs[n->graph];
    for (size_t i = 0; i < child->node_count; i++) {
        int joined = 0;
        for (size_t e = 0; e < child->edge_count && !joined; e++) joined = child->edges[e][1] == (int)i;
        if (!joined && entered_at(pl, &child->nodes[i], target)) return 1;
    }
    return 0;
}

/* Whether a programmatic edge of the graph tree under `index` leads into the kernel `target`:
 * eager execution launches those kernels with programmatic stream serialization. */
int early_starter(const plan *pl, int index, const node_spec *target) {
    const graph_spec *g = &pl->graphs[index];
    for (size_t e = 0; e < g->edge_count; e++)
        if (g->programmatic[e] && entered_at(pl, &g->nodes[g->edges[e][1]], target)) return 1;
    for (size_t i = 0; i < g->node_count; i++) {
        const node_spec *n = &g->nodes[i];
        if (n->kind == NODE_GRAPH && early_starter(pl, n->graph, target)) return 1;
        for (size_t b = 0; b < n->body_count; b++)
            if (early_starter(pl, n->bodies[b], target)) return 1;
    }
    return 0;
}
