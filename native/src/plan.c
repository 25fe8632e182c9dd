/* plan.json (compiler/plan_schema.py `to_json`) as C structs. Strict: a missing or mistyped
 * field is a one-line PIPEC_ERROR_BUNDLE naming it; strings point into copies, the node and
 * buffer specs keep a pointer to their JSON (update.c compares plans through it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

typedef struct reader {
    const char *what;
    int failed;
} reader;

static void bad(reader *r, const char *context, const char *field, const char *expected) {
    if (!r->failed)
        fail(PIPEC_ERROR_BUNDLE, "%s: %s: `%s` is missing or not %s", r->what, context, field, expected);
    r->failed = 1;
}

static const json *field(reader *r, const json *o, const char *context, const char *key, json_kind kind,
                         const char *expected) {
    const json *v = json_get(o, key);
    if (!v || v->kind != kind) {
        bad(r, context, key, expected);
        return NULL;
    }
    return v;
}

static int64_t integer(reader *r, const json *o, const char *context, const char *key) {
    const json *v = field(r, o, context, key, JSON_NUMBER, "an integer");
    if (v && !v->is_integer) bad(r, context, key, "an integer");
    return v && v->is_integer ? v->integer : 0;
}

static int64_t optional_integer(reader *r, const json *o, const char *context, const char *key) {
    const json *v = json_get(o, key);
    if (v && v->kind == JSON_NULL) return -1;
    return integer(r, o, context, key);
}

static char *text(reader *r, const json *o, const char *context, const char *key) {
    const json *v = field(r, o, context, key, JSON_STRING, "a string");
    return strdup(v ? v->string : "");
}

static const char *optional_text(const json *o, const char *key) {
    const json *v = json_get(o, key);
    return v && v->kind == JSON_STRING ? v->string : NULL;
}

static char *location(reader *r, const json *o, const char *context) {
    const json *at = field(r, o, context, "location", JSON_OBJECT, "an object");
    const char *file = optional_text(at, "file");
    const json *line = json_get(at, "line"), *column = json_get(at, "column");
    char buffer[1024];
    snprintf(buffer, sizeof buffer, "%s:%lld:%lld", file ? file : "?", line ? (long long)line->integer : 0,
             column ? (long long)column->integer : 0);
    return strdup(buffer);
}

static int buffer_ref(reader *r, const plan *p, const json *o, const char *context, const char *key) {
    const char *name = optional_text(o, key);
    int index = name ? plan_buffer_index(p, name) : -1;
    if (index < 0 && !r->failed) {
        fail(PIPEC_ERROR_BUNDLE, "%s: %s: `%s` names no buffer of the plan (%s)", r->what, context, key,
             name ? name : "none");
        r->failed = 1;
    }
    return index;
}

static void triple(reader *r, const json *o, const char *context, const char *key, unsigned out[3]) {
    const json *v = field(r, o, context, key, JSON_ARRAY, "a list of three integers");
    for (int i = 0; i < 3; i++) out[i] = v && v->count == 3 ? (unsigned)v->items[i].integer : 0;
    if (v && v->count != 3) bad(r, context, key, "a list of three integers");
}

static void parse_args(reader *r, const plan *p, const json *list, node_spec *n) {
    n->arg_count = list ? list->count : 0;
    n->args = calloc(n->arg_count ? n->arg_count : 1, sizeof *n->args);
    for (size_t i = 0; i < n->arg_count && !r->failed; i++) {
        const json *a = &list->items[i];
        arg_spec *arg = &n->args[i];
        const char *kind = optional_text(a, "kind"), *ctype = optional_text(a, "ctype");
        const json *value = json_get(a, "value");
        if (!kind || !ctype) { bad(r, n->name, "args", "a list of arguments"); return; }
        if (strcmp(kind, "pointer") == 0) {
            arg->kind = ARG_POINTER;
            arg->buffer = buffer_ref(r, p, a, n->name, "buffer");
            arg->byte_offset = integer(r, a, n->name, "byte_offset");
        } else if (strcmp(kind, "handle") == 0) {
            arg->kind = ARG_HANDLE;
            arg->handle = integer(r, a, n->name, "value");
            if (arg->handle < 0) bad(r, n->name, "args", "a handle index");
        } else if (strcmp(kind, "in_graph") == 0) {
            arg->kind = ARG_IN_GRAPH;
        } else if (strcmp(kind, "scalar") == 0 && dtype_from_name(ctype) >= 0 && value &&
                   (value->kind == JSON_NUMBER || value->kind == JSON_BOOL)) {
            arg->kind = ARG_SCALAR;
            arg->ctype = (dtype)dtype_from_name(ctype);
            scalar_bytes(arg->ctype, value, arg->value);
        } else {
            bad(r, n->name, "args", "arguments of a known kind and type");
        }
    }
}

static void parse_matrix(reader *r, const plan *p, const json *o, const char *context, const char *key,
                         matrix_spec *m) {
    const json *v = json_get(o, key);
    if (!v || v->kind == JSON_NULL) return;
    m->present = 1;
    m->buffer = buffer_ref(r, p, v, context, "buffer");
    m->byte_offset = integer(r, v, context, "byte_offset");
    const char *type = optional_text(v, "dtype");
    int t = type ? dtype_from_name(type) : -1;
    if (t < 0) bad(r, context, "dtype", "a known type");
    m->type = t < 0 ? DT_F32 : (dtype)t;
    m->rows = integer(r, v, context, "rows");
    m->cols = integer(r, v, context, "cols");
    m->ld = integer(r, v, context, "ld");
    m->batch_stride = integer(r, v, context, "batch_stride");
}

static void parse_collective(reader *r, const plan *p, const json *o, node_spec *n) {
    collective_spec *c = n->collective = calloc(1, sizeof *c);
    if (!c) { bad(r, n->name, "collective", "memory"); return; }
    const char *kind = optional_text(o, "collective"), *op = optional_text(o, "op");
    static const char *const KINDS[] = {"allreduce", "broadcast", "allgather", "reducescatter"};
    int known = 0;
    for (size_t i = 0; kind && i < sizeof KINDS / sizeof *KINDS; i++) known |= strcmp(kind, KINDS[i]) == 0;
    if (!known) bad(r, n->name, "collective", "allreduce, broadcast, allgather or reducescatter");
    snprintf(c->collective, sizeof c->collective, "%s", kind && known ? kind : "");
    snprintf(c->op, sizeof c->op, "%s", op && strlen(op) < sizeof c->op ? op : "");
    c->root = optional_integer(r, o, n->name, "root");
    const json *operands = field(r, o, n->name, "operands", JSON_ARRAY, "a list");
    c->operand_count = operands ? operands->count : 0;
    c->operands = calloc(c->operand_count ? c->operand_count : 1, sizeof *c->operands);
    if (!c->operands) { bad(r, n->name, "operands", "memory"); return; }
    if (operands && !operands->count) bad(r, n->name, "operands", "a list of at least one operand");
    for (size_t i = 0; i < c->operand_count && !r->failed; i++) {
        const json *v = &operands->items[i];
        operand_spec *x = &c->operands[i];
        const char *type = optional_text(v, "dtype");
        int t = type ? dtype_from_name(type) : -1;
        if (t < 0) bad(r, n->name, "dtype", "a known type");
        x->type = t < 0 ? DT_U8 : (dtype)t;
        x->count = (uint64_t)integer(r, v, n->name, "count");
        x->src = buffer_ref(r, p, v, n->name, "src");
        x->dst = buffer_ref(r, p, v, n->name, "dst");
        x->src_offset = integer(r, v, n->name, "src_offset");
        x->dst_offset = integer(r, v, n->name, "dst_offset");
    }
}

static void parse_gemm(reader *r, const plan *p, const json *o, node_spec *n) {
    gemm_spec *g = n->gemm = calloc(1, sizeof *g);
    if (!g) { bad(r, n->name, "gemm", "memory"); return; }
    g->m = integer(r, o, n->name, "m");
    g->n = integer(r, o, n->name, "n");
    g->k = integer(r, o, n->name, "k");
    g->batch = integer(r, o, n->name, "batch");
    parse_matrix(r, p, o, n->name, "a", &g->a);
    parse_matrix(r, p, o, n->name, "b", &g->b);
    parse_matrix(r, p, o, n->name, "c", &g->c);
    parse_matrix(r, p, o, n->name, "bias", &g->bias);
    parse_matrix(r, p, o, n->name, "aux", &g->aux);
    parse_matrix(r, p, o, n->name, "bias_grad", &g->bias_grad);
    const json *ta = field(r, o, n->name, "trans_a", JSON_BOOL, "a boolean");
    const json *tb = field(r, o, n->name, "trans_b", JSON_BOOL, "a boolean");
    g->trans_a = ta && ta->boolean;
    g->trans_b = tb && tb->boolean;
    const json *alpha = field(r, o, n->name, "alpha", JSON_NUMBER, "a number");
    const json *beta = field(r, o, n->name, "beta", JSON_NUMBER, "a number");
    g->alpha = alpha ? alpha->number : 0;
    g->beta = beta ? beta->number : 0;
    const char *compute = optional_text(o, "compute"), *epilogue = optional_text(o, "epilogue");
    g->tf32 = compute && strcmp(compute, "tf32") == 0;
    snprintf(g->epilogue, sizeof g->epilogue, "%s", epilogue ? epilogue : "");
    g->workspace = buffer_ref(r, p, o, n->name, "workspace");
    g->workspace_bytes = (uint64_t)integer(r, o, n->name, "workspace_bytes");
}

static void parse_accesses(reader *r, const plan *p, const json *o, node_spec *n) {
    const json *list = field(r, o, n->name, "accesses", JSON_ARRAY, "a list");
    n->access_count = list ? list->count : 0;
    n->accesses = calloc(n->access_count ? n->access_count : 1, sizeof *n->accesses);
    for (size_t i = 0; i < n->access_count && !r->failed; i++) {
        const json *a = &list->items[i];
        n->accesses[i].buffer = buffer_ref(r, p, a, n->name, "buffer");
        n->accesses[i].start = integer(r, a, n->name, "start");
        n->accesses[i].stop = integer(r, a, n->name, "stop");
        const char *mode = optional_text(a, "mode");
        n->accesses[i].writes = mode && strchr(mode, 'w') != NULL;
    }
}

static void parse_node(reader *r, const plan *p, const json *o, node_spec *n) {
    n->source = o;
    n->name = text(r, o, "a node", "name");
    n->location = location(r, o, n->name);
    n->id = (int)integer(r, o, n->name, "id");
    parse_accesses(r, p, o, n);
    const char *kind = optional_text(o, "kind");
    kind = kind ? kind : "";
    if (strcmp(kind, "kernel") == 0) {
        n->kind = NODE_KERNEL;
        n->module = (int)integer(r, o, n->name, "module");
        n->function = text(r, o, n->name, "function");
        triple(r, o, n->name, "grid", n->grid);
        triple(r, o, n->name, "block", n->block);
        n->shared_bytes = (unsigned)integer(r, o, n->name, "shared_bytes");
        parse_args(r, p, field(r, o, n->name, "args", JSON_ARRAY, "a list"), n);
        if (!r->failed && (n->module < 0 || (size_t)n->module >= p->module_count)) bad(r, n->name, "module", "a module index");
    } else if (strcmp(kind, "memset") == 0) {
        n->kind = NODE_MEMSET;
        n->buffer = buffer_ref(r, p, o, n->name, "buffer");
        n->byte_offset = integer(r, o, n->name, "byte_offset");
        n->element_size = (unsigned)integer(r, o, n->name, "element_size");
        n->value = (uint32_t)integer(r, o, n->name, "value");
        n->count = (uint64_t)integer(r, o, n->name, "count");
        if (n->element_size != 1 && n->element_size != 2 && n->element_size != 4) bad(r, n->name, "element_size", "1, 2 or 4");
    } else if (strcmp(kind, "memcpy") == 0) {
        n->kind = NODE_MEMCPY;
        n->src = buffer_ref(r, p, o, n->name, "src");
        n->dst = buffer_ref(r, p, o, n->name, "dst");
        n->src_offset = integer(r, o, n->name, "src_offset");
        n->dst_offset = integer(r, o, n->name, "dst_offset");
        n->nbytes = (uint64_t)integer(r, o, n->name, "nbytes");
    } else if (strcmp(kind, "graph") == 0) {
        n->kind = NODE_GRAPH;
        n->graph = (int)integer(r, o, n->name, "graph");
    } else if (strcmp(kind, "conditional") == 0) {
        n->kind = NODE_CONDITIONAL;
        const char *type = optional_text(o, "type");
        type = type ? type : "";
        n->cond_type = strcmp(type, "if") == 0 ? CU_GRAPH_COND_TYPE_IF : strcmp(type, "while") == 0
                       ? CU_GRAPH_COND_TYPE_WHILE : strcmp(type, "switch") == 0 ? CU_GRAPH_COND_TYPE_SWITCH : -1;
        if (n->cond_type < 0) bad(r, n->name, "type", "if, while or switch");
        n->handle = integer(r, o, n->name, "handle");
        if (n->handle < 0) bad(r, n->name, "handle", "a handle index");
        n->control = buffer_ref(r, p, o, n->name, "control");
        const json *bodies = field(r, o, n->name, "bodies", JSON_ARRAY, "a list");
        n->body_count = bodies ? bodies->count : 0;
        n->bodies = calloc(n->body_count ? n->body_count : 1, sizeof *n->bodies);
        for (size_t i = 0; i < n->body_count; i++) n->bodies[i] = (int)bodies->items[i].integer;
    } else if (strcmp(kind, "gemm") == 0) {
        n->kind = NODE_GEMM;
        parse_gemm(r, p, o, n);
    } else if (strcmp(kind, "collective") == 0) {
        n->kind = NODE_COLLECTIVE;
        parse_collective(r, p, o, n);
    } else {
        bad(r, n->name, "kind", "a known node kind");
    }
}

/* Which edges are programmatic: `edge_kinds`, one per edge in its order (a plan without it has
 * ordinary edges only). */
static void parse_edge_kinds(reader *r, const json *o, graph_spec *g) {
    const json *kinds = json_get(o, "edge_kinds");
    g->programmatic = calloc(g->edge_count ? g->edge_count : 1, 1);
    if (!kinds || r->failed) return;
    if (kinds->kind != JSON_ARRAY || kinds->count != g->edge_count) {
        bad(r, g->name, "edge_kinds", "one per edge");
        return;
    }
    for (size_t i = 0; i < g->edge_count && !r->failed; i++) {
        const json *k = &kinds->items[i];
        const json *programmatic = field(r, k, g->name, "programmatic", JSON_BOOL, "a boolean");
        if (integer(r, k, g->name, "src") != g->edges[i][0] || integer(r, k, g->name, "dst") != g->edges[i][1])
            bad(r, g->name, "edge_kinds", "in the order of `edges`");
        g->programmatic[i] = programmatic && programmatic->boolean;
    }
}

static void parse_graph(reader *r, const plan *p, const json *o, graph_spec *g) {
    g->name = text(r, o, "a graph", "name");
    g->scope = text(r, o, g->name, "scope");
    const json *nodes = field(r, o, g->name, "nodes", JSON_ARRAY, "a list");
    const json *edges = field(r, o, g->name, "edges", JSON_ARRAY, "a list");
    g->node_count = nodes ? nodes->count : 0;
    g->nodes = calloc(g->node_count ? g->node_count : 1, sizeof *g->nodes);
    for (size_t i = 0; i < g->node_count && !r->failed; i++) {
        parse_node(r, p, &nodes->items[i], &g->nodes[i]);
        if (!r->failed && g->nodes[i].id != (int)i) bad(r, g->nodes[i].name, "id", "its position in the graph");
    }
    g->edge_count = edges ? edges->count : 0;
    g->edges = calloc(g->edge_count ? g->edge_count : 1, sizeof *g->edges);
    for (size_t i = 0; i < g->edge_count && !r->failed; i++) {
        const json *e = &edges->items[i];
        if (e->kind != JSON_ARRAY || e->count != 2 || e->items[0].integer < 0 || e->items[1].integer < 0 ||
            (size_t)e->items[0].integer >= g->node_count || (size_t)e->items[1].integer >= g->node_count) {
            bad(r, g->name, "edges", "pairs of node ids");
            return;
        }
        g->edges[i][0] = (int)e->items[0].integer;
        g->edges[i][1] = (int)e->items[1].integer;
    }
    parse_edge_kinds(r, o, g);
}

static void parse_buffer(reader *r, const json *o, buffer_spec *b) {
    b->name = text(r, o, "a buffer", "name");
    b->location = location(r, o, b->name);
    const char *type = optional_text(o, "dtype"), *memory = optional_text(o, "memory");
    int t = type ? dtype_from_name(type) : -1;
    if (t < 0) bad(r, b->name, "dtype", "a known type");
    b->type = t < 0 ? DT_U8 : (dtype)t;
    b->mapped = memory && strcmp(memory, "mapped") == 0;
    b->nbytes = (uint64_t)integer(r, o, b->name, "nbytes");
    const json *shape = field(r, o, b->name, "shape", JSON_ARRAY, "a list");
    b->rank = shape ? shape->count : 0;
    b->shape = calloc(b->rank ? b->rank : 1, sizeof *b->shape);
    for (size_t i = 0; i < b->rank; i++) b->shape[i] = shape->items[i].integer;
    const json *init = field(r, o, b->name, "init", JSON_OBJECT, "an object");
    const char *kind = optional_text(init, "kind");
    kind = kind ? kind : "";
    b->init = strcmp(kind, "zeros") == 0 ? INIT_ZEROS : strcmp(kind, "uninit") == 0 ? INIT_UNINIT
              : strcmp(kind, "fill") == 0 ? INIT_FILL : strcmp(kind, "addresses") == 0 ? INIT_ADDRESSES : INIT_DATA;
    b->addresses = json_get(init, "addresses");
    if (b->init == INIT_FILL) {
        const json *args = json_get(init, "args");
        if (!args || args->kind != JSON_ARRAY || args->count < 1) bad(r, b->name, "init.args", "a fill value");
        else b->fill = &args->items[0];
    }
    const json *labels = field(r, o, b->name, "labels", JSON_ARRAY, "a list");
    b->label_count = labels ? labels->count : 0;
    b->labels = calloc(b->label_count ? b->label_count : 1, sizeof *b->labels);
    for (size_t i = 0; i < b->label_count; i++)
        b->labels[i] = strdup(labels->items[i].kind == JSON_STRING ? labels->items[i].string : "");
    const char *first = optional_text(o, "step_first_access");
    b->first_write = first && strcmp(first, "write") == 0;
}

pipec_status plan_parse(const char *source, size_t length, const char *what, plan *out) {
    char error[256];
    memset(out, 0, sizeof *out);
    out->step = out->init = -1;
    out->document = json_parse(source, length, error, sizeof error);
    if (!out->document) return fail(PIPEC_ERROR_BUNDLE, "%s is not valid JSON: %s", what, error);
    reader r = {what, 0};
    const json *d = out->document;
    if (d->kind != JSON_OBJECT) return plan_free(out), fail(PIPEC_ERROR_BUNDLE, "%s: not a JSON object", what);
    out->pipe = text(&r, d, "the plan", "pipe");
    out->pipe_sha256 = text(&r, d, "the plan", "pipe_sha256");
    out->pipec_version = text(&r, d, "the plan", "pipec_version");
    const json *buffers = field(&r, d, "the plan", "buffers", JSON_ARRAY, "a list");
    const json *modules = field(&r, d, "the plan", "modules", JSON_ARRAY, "a list");
    const json *graphs = field(&r, d, "the plan", "graphs", JSON_ARRAY, "a list");
    out->buffer_count = buffers ? buffers->count : 0;
    out->buffers = calloc(out->buffer_count ? out->buffer_count : 1, sizeof *out->buffers);
    for (size_t i = 0; i < out->buffer_count && !r.failed; i++) parse_buffer(&r, &buffers->items[i], &out->buffers[i]);
    out->module_count = modules ? modules->count : 0;
    out->module_names = calloc(out->module_count ? out->module_count : 1, sizeof *out->module_names);
    for (size_t i = 0; i < out->module_count && !r.failed; i++)
        out->module_names[i] = text(&r, &modules->items[i], "a module", "name");
    out->graph_count = graphs ? graphs->count : 0;
    out->graphs = calloc(out->graph_count ? out->graph_count : 1, sizeof *out->graphs);
    for (size_t i = 0; i < out->graph_count && !r.failed; i++) parse_graph(&r, out, &graphs->items[i], &out->graphs[i]);
    out->step = (int)optional_integer(&r, d, "the plan", "step");
    out->init = (int)optional_integer(&r, d, "the plan", "init");
    /* absent from plans written before they were recorded: one process */
    out->world_size = json_get(d, "world_size") ? integer(&r, d, "the plan", "world_size") : 1;
    out->rank = json_get(d, "rank") ? integer(&r, d, "the plan", "rank") : 0;
    if (!r.failed && (out->world_size < 1 || out->rank < 0 || out->rank >= out->world_size))
        bad(&r, "the plan", "rank", "a rank of its world_size");
    for (size_t g = 0; g < out->graph_count && !r.failed; g++)
        for (size_t i = 0; i < out->graphs[g].node_count; i++) {
            const node_spec *n = &out->graphs[g].nodes[i];
            int bad_child = n->kind == NODE_GRAPH && (n->graph < 0 || (size_t)n->graph >= out->graph_count);
            for (size_t b = 0; b < n->body_count; b++)
                bad_child |= n->bodies[b] < 0 || (size_t)n->bodies[b] >= out->graph_count;
            if (bad_child) bad(&r, n->name, "graph", "a graph index");
        }
    if (!r.failed && out->step < 0) {
        fail(PIPEC_ERROR_BUNDLE, "%s: there is no `step` block to run", what);
        r.failed = 1;
    }
    if (!r.failed && ((size_t)out->step >= out->graph_count || (out->init >= 0 && (size_t)out->init >= out->graph_count)))
        bad(&r, "the plan", "step", "a graph index");
    if (r.failed) {
        plan_free(out);
        return PIPEC_ERROR_BUNDLE;
    }
    return PIPEC_OK;
}

static void free_node(node_spec *n) {
    free(n->name);
    free(n->location);
    free(n->accesses);
    free(n->function);
    free(n->args);
    free(n->bodies);
    free(n->gemm);
    if (n->collective) free(n->collective->operands);
    free(n->collective);
}

void plan_free(plan *p) {
    for (size_t i = 0; i < p->buffer_count; i++) {
        buffer_spec *b = &p->buffers[i];
        free(b->name);
        free(b->location);
        free(b->shape);
        for (size_t l = 0; l < b->label_count; l++) free(b->labels[l]);
        free(b->labels);
    }
    free(p->buffers);
    for (size_t i = 0; i < p->module_count; i++) free(p->module_names[i]);
    free(p->module_names);
    for (size_t g = 0; g < p->graph_count; g++) {
        for (size_t i = 0; i < p->graphs[g].node_count; i++) free_node(&p->graphs[g].nodes[i]);
        free(p->graphs[g].nodes);
        free(p->graphs[g].edges);
        free(p->graphs[g].programmatic);
        free(p->graphs[g].name);
        free(p->graphs[g].scope);
    }
    free(p->graphs);
    free(p->pipe);
    free(p->pipe_sha256);
    free(p->pipec_version);
    json_free(p->document);
    memset(p, 0, sizeof *p);
    p->step = p->init = -1;
}

int plan_buffer_index(const plan *p, const char *name) {
    for (size_t i = 0; i < p->buffer_count; i++)
        if (p->buffers[i].name && strcmp(p->buffers[i].name, name) == 0) return (int)i;
    return -1;
}

size_t plan_leaves(const plan *p, int graph, const node_spec **out, size_t capacity) {
    size_t count = 0;
    const graph_spec *g = &p->graphs[graph];
    for (size_t i = 0; i < g->node_count; i++) {
        const node_spec *n = &g->nodes[i];
        if (n->kind == NODE_GRAPH) {
            count += plan_leaves(p, n->graph, out ? out + count : NULL, capacity > count ? capacity - count : 0);
        } else if (n->kind == NODE_CONDITIONAL) {
            for (size_t b = 0; b < n->body_count; b++)
                count += plan_leaves(p, n->bodies[b], out ? out + count : NULL, capacity > count ? capacity - count : 0);
        } else {
            if (out && count < capacity) out[count] = n;
            count++;
        }
    }
    return count;
}
