/* Live updates (runtime/update.py): the plan of the same file compiled with new constant values,
 * compared with the plan the graph was built from. When the only differences are kernel nodes'
 * scalar arguments and launch shapes (grid, block, dynamic shared memory), with the same nodes,
 * edges, buffers and modules, each changed kernel node gets its new parameters in the executable
 * graph (cuGraphExecKernelNodeSetParams) and in the eager program; anything else is refused,
 * naming the first difference. The comparison runs on the plans' JSON, field by field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define REFUSED "; only kernel scalar arguments and launch shapes can be updated in place: load the pipeline again"

static int launch_field(const char *key) {
    return strcmp(key, "grid") == 0 || strcmp(key, "block") == 0 || strcmp(key, "shared_bytes") == 0 ||
           strcmp(key, "args") == 0;
}

static pipec_status refuse_field(const node_spec *old, const char *key, const json *a, const json *b, const char *why) {
    char *from = json_render(a), *to = json_render(b);
    pipec_status status = fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes `%s` of the %s `%s` (%s) from %s to %s%s"
                               REFUSED, key, old->kind == NODE_GEMM ? "gemm node" : old->kind == NODE_KERNEL
                               ? "kernel node" : "node", old->name, old->location, from ? from : "?", to ? to : "?", why);
    free(from);
    free(to);
    return status;
}

static int scalar(const json *arg) {
    const json *kind = json_get(arg, "kind");
    return kind && kind->kind == JSON_STRING && strcmp(kind->string, "scalar") == 0;
}

/* Why `b` cannot replace `a` in place (a refusal), or PIPEC_OK; *changed when it differs. */
static pipec_status node_difference(const node_spec *x, const node_spec *y, int *changed) {
    const json *a = x->source, *b = y->source;
    *changed = !json_equal(a, b);
    if (x->kind != y->kind || strcmp(x->name, y->name) != 0)
        return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan replaces the node `%s` with `%s`" REFUSED, x->name, y->name);
    if (a->count != b->count)
        return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the node `%s` (%s)" REFUSED, x->name, x->location);
    for (size_t i = 0; i < a->count; i++) {
        const char *key = a->keys[i];
        const json *other = json_get(b, key);
        if (!other) return refuse_field(x, key, &a->items[i], &a->items[i], "");
        if ((x->kind == NODE_KERNEL && launch_field(key)) || json_equal(&a->items[i], other)) continue;
        return refuse_field(x, key, &a->items[i], other,
                            x->kind == NODE_GEMM ? ": a GEMM's recorded call cannot change in place" : "");
    }
    if (x->kind != NODE_KERNEL || !*changed) return PIPEC_OK;
    const json *old_args = json_get(a, "args"), *new_args = json_get(b, "args");
    if (old_args->count != new_args->count)
        return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the arguments of `%s` (%s)" REFUSED, x->name,
                    x->location);
    for (size_t i = 0; i < old_args->count; i++) {
        const json *p = &old_args->items[i], *q = &new_args->items[i];
        int same_kind = json_equal(json_get(p, "kind"), json_get(q, "kind")) &&
                        json_equal(json_get(p, "ctype"), json_get(q, "ctype"));
        if ((!scalar(p) && !json_equal(p, q)) || !same_kind)
            return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes argument %zu of `%s` (%s): only scalar "
                        "arguments can change" REFUSED, i + 1, x->name, x->location);
    }
    return PIPEC_OK;
}

/* plan.graph_tree: a graph and every graph nested in it, preorder. */
static size_t tree(const plan *p, int graph, int *out, size_t capacity) {
    size_t count = 0;
    if (out && count < capacity) out[count] = graph;
    count++;
    const graph_spec *g = &p->graphs[graph];
    for (size_t i = 0; i < g->node_count; i++) {
        const node_spec *n = &g->nodes[i];
        if (n->kind == NODE_GRAPH)
            count += tree(p, n->graph, out ? out + count : NULL, capacity > count ? capacity - count : 0);
        for (size_t b = 0; b < n->body_count; b++)
            count += tree(p, n->bodies[b], out ? out + count : NULL, capacity > count ? capacity - count : 0);
    }
    return count;
}

static int same_graph(const plan *a, int x, const plan *b, int y) {
    return json_equal(&json_get(a->document, "graphs")->items[x], &json_get(b->document, "graphs")->items[y]);
}

static pipec_status compare_plans(const plan *old, const plan *new_plan) {
    const json *ob = json_get(old->document, "buffers"), *nb = json_get(new_plan->document, "buffers");
    if (old->buffer_count != new_plan->buffer_count)
        return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the set of buffers" REFUSED);
    for (size_t i = 0; i < old->buffer_count; i++) {
        if (strcmp(old->buffers[i].name, new_plan->buffers[i].name) != 0)
            return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the set of buffers (%s, %s)" REFUSED,
                        old->buffers[i].name, new_plan->buffers[i].name);
        if (!json_equal(&ob->items[i], &nb->items[i]))
            return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the buffer `%s` (declared at %s)" REFUSED,
                        old->buffers[i].name, old->buffers[i].location);
    }
    if (!json_equal(json_get(old->document, "modules"), json_get(new_plan->document, "modules")))
        return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the kernel modules" REFUSED);
    if (old->step != new_plan->step || old->init != new_plan->init || old->graph_count != new_plan->graph_count)
        return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the graphs" REFUSED);
    if (old->init >= 0) {
        size_t n = tree(old, old->init, NULL, 0), m = tree(new_plan, new_plan->init, NULL, 0);
        int *a = calloc(n, sizeof *a), *b = calloc(m, sizeof *b);
        int same = a && b && n == m;
        if (same) tree(old, old->init, a, n), tree(new_plan, new_plan->init, b, m);
        for (size_t i = 0; same && i < n; i++) same = same_graph(old, a[i], new_plan, b[i]);
        free(a);
        free(b);
        if (!same) return fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the `init` block, which already ran" REFUSED);
    }
    return PIPEC_OK;
}

/* The kernel nodes of the step that change, in the new plan, with their graph's scope. */
static pipec_status changed_kernels(const plan *old, const plan *new_plan, const node_spec ***nodes,
                                    const char ***scopes, size_t *count) {
    pipec_status status = compare_plans(old, new_plan);
    if (status != PIPEC_OK) return status;
    size_t n = tree(old, old->step, NULL, 0);
    int *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    size_t leaves = plan_leaves(new_plan, new_plan->step, NULL, 0) + 1;
    *nodes = calloc(leaves, sizeof **nodes);
    *scopes = calloc(leaves, sizeof **scopes);
    *count = 0;
    if (!a || !b || !*nodes || !*scopes) status = fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (status == PIPEC_OK && tree(new_plan, new_plan->step, NULL, 0) != n)
        status = fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the graphs" REFUSED);
    if (status == PIPEC_OK) tree(old, old->step, a, n), tree(new_plan, new_plan->step, b, n);
    for (size_t g = 0; status == PIPEC_OK && g < n; g++) {
        const graph_spec *x = &old->graphs[a[g]], *y = &new_plan->graphs[b[g]];
        const json *xe = json_get(&json_get(old->document, "graphs")->items[a[g]], "edges");
        const json *ye = json_get(&json_get(new_plan->document, "graphs")->items[b[g]], "edges");
        if (strcmp(x->name, y->name) != 0 || x->node_count != y->node_count || !json_equal(xe, ye)) {
            status = fail(PIPEC_ERROR_UPDATE_REFUSED, "the new plan changes the nodes or edges of the graph `%s`" REFUSED,
                          x->name);
            break;
        }
        for (size_t i = 0; status == PIPEC_OK && i < x->node_count; i++) {
            int changed;
            status = node_difference(&x->nodes[i], &y->nodes[i], &changed);
            if (status == PIPEC_OK && changed && *count < leaves) {
                (*nodes)[*count] = &y->nodes[i];
                (*scopes)[(*count)++] = y->scope;
            }
        }
    }
    free(a);
    free(b);
    return status;
}

pipec_status pipec_update_plan(pipec_pipeline *p, const char *plan_json, size_t length, size_t *changed) {
    if (!p || !plan_json) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_update_plan: the pipeline or plan is NULL");
    plan *retired = realloc(p->retired, (p->retired_count + 1) * sizeof *retired);
    if (!retired) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    p->retired = retired;
    plan next;
    pipec_status status = plan_parse(plan_json, length, "the new plan", &next);
    if (status != PIPEC_OK) return status;
    const node_spec **nodes = NULL;
    const char **scopes = NULL;
    size_t count = 0;
    status = changed_kernels(&p->plan, &next, &nodes, &scopes, &count);
    plan current = p->plan;
    int touched = 0; /* a node of the graph got new parameters */
    if (status == PIPEC_OK && (status = enter(p)) == PIPEC_OK) {
        p->plan = next; /* the launch resources, then the nodes, as the new plan has them */
        status = check_launch_resources(p);
        if (status != PIPEC_OK) status = fail(PIPEC_ERROR_UPDATE_REFUSED, "%s", pipec_last_error());
        for (size_t i = 0; status == PIPEC_OK && i < count; i++) {
            touched = 1;
            status = graph_update_kernel(p, &p->graph, nodes[i], scopes[i]);
            if (status == PIPEC_OK) status = eager_update_kernel(p, &p->eager, nodes[i]);
        }
        leave(p);
    }
    free(nodes);
    free(scopes);
    if (status != PIPEC_OK) {
        p->plan = current;
        if (touched) p->retired[p->retired_count++] = next; /* nodes may point into it now */
        else plan_free(&next);
        return status;
    }
    p->retired[p->retired_count++] = current;
    if (changed) *changed = count;
    return PIPEC_OK;
}
