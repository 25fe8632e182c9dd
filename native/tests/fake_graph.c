/* The fake driver's graphs (see fake_cuda.c): nodes and their work, deep copies for child graph
 * nodes, running a graph in the order its nodes were added, the generated deciding kernels, and
 * the JSON log every graph and run is written to. */
#include <stdarg.h>

#include "fake.h"

static const char *KIND_NAMES[] = {"kernel", "memset", "memcpy", "graph", "empty", "conditional"};

/* --- the log ------------------------------------------------------------------------------ */

void put(text *t, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (t->length + (size_t)n + 1 > t->capacity) {
        t->capacity = (t->length + (size_t)n + 1) * 2;
        t->data = realloc(t->data, t->capacity);
    }
    va_start(args, format);
    vsnprintf(t->data + t->length, (size_t)n + 1, format, args);
    va_end(args);
    t->length += (size_t)n;
}

void emit(text *t) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (path && *path) {
        FILE *f = fopen(path, "a");
        if (f) {
            fprintf(f, "%s\n", t->data ? t->data : "{}");
            fclose(f);
        }
    }
    free(t->data);
}

void put_kernel(text *t, const fnode *n) {
    put(t, "\"function\":\"%s\",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shared\":%u,\"args\":", n->function,
        n->grid[0], n->grid[1], n->grid[2], n->block[0], n->block[1], n->block[2], n->shared);
    if (!n->args_known) {
        put(t, "null");
        return;
    }
    put(t, "[");
    size_t at = 0;
    for (size_t i = 0; i < n->nargs; i++) {
        put(t, "%s\"", i ? "," : "");
        for (size_t b = 0; b < n->arg_sizes[i]; b++) put(t, "%02x", n->args[at + b]);
        put(t, "\"");
        at += n->arg_sizes[i];
    }
    put(t, "]");
}

/* Nodes of `g` by their index in it. */
static void put_indices(text *t, const fgraph *g, fnode *const *nodes, size_t count) {
    put(t, "[");
    for (size_t d = 0; d < count; d++)
        for (size_t i = 0; i < g->count; i++)
            if (g->nodes[i] == nodes[d]) put(t, "%s%zu", d ? "," : "", i);
    put(t, "]");
}

static void put_node(text *t, const fgraph *g, const fnode *n) {
    put(t, "{\"kind\":\"%s\",\"deps\":", KIND_NAMES[n->kind]);
    put_indices(t, g, n->deps, n->ndeps);
    put(t, ",\"programmatic\":");
    put_indices(t, g, n->programmatic, n->nprogrammatic);
    switch (n->kind) {
    case K_KERNEL: put(t, ","); put_kernel(t, n); break;
    case K_MEMSET:
        put(t, ",\"dst\":%llu,\"element_size\":%u,\"value\":%u,\"count\":%zu", (unsigned long long)n->dst,
            n->element_size, n->value, n->count);
        break;
    case K_MEMCPY:
        put(t, ",\"dst\":%llu,\"src\":%llu,\"nbytes\":%zu", (unsigned long long)n->dst, (unsigned long long)n->src, n->count);
        break;
    case K_GRAPH: put(t, ",\"child\":"); put_graph(t, n->child); break;
    case K_CONDITIONAL:
        put(t, ",\"type\":%d,\"handle\":%llu,\"bodies\":[", n->cond_type, (unsigned long long)n->handle);
        for (unsigned b = 0; b < n->nbodies; b++) {
            if (b) put(t, ",");
            put_graph(t, n->bodies[b]);
        }
        put(t, "]");
        break;
    default: break;
    }
    put(t, "}");
}

void put_graph(text *t, const fgraph *g) {
    put(t, "{\"id\":%d,\"nodes\":[", g->id);
    for (size_t i = 0; i < g->count; i++) {
        if (i) put(t, ",");
        put_node(t, g, g->nodes[i]);
    }
    put(t, "]}");
}

/* --- kernels ------------------------------------------------------------------------------ */

static const json *sizes_of(const char *function) {
    if (!fake.param_sizes_read) {
        fake.param_sizes_read = 1;
        const char *path = getenv("FAKE_CUDA_PARAM_SIZES");
        FILE *f = path ? fopen(path, "rb") : NULL;
        if (f) {
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            char *data = malloc((size_t)n + 1);
            if (data && fread(data, 1, (size_t)n, f) == (size_t)n) {
                char error[128];
                fake.param_sizes = json_parse(data, (size_t)n, error, sizeof error);
            }
            free(data);
            fclose(f);
        }
    }
    return json_get(fake.param_sizes, function);
}

fnode *new_node(int kind) {
    fnode *n = calloc(1, sizeof *n);
    n->kind = kind;
    return n;
}

void set_kernel(fnode *n, const char *function, const unsigned grid[3], const unsigned block[3], unsigned shared,
                       void **params) {
    free(n->function);
    free(n->args);
    free(n->arg_sizes);
    n->function = strdup(function);
    memcpy(n->grid, grid, sizeof n->grid);
    memcpy(n->block, block, sizeof n->block);
    n->shared = shared;
    n->args = NULL;
    n->arg_sizes = NULL;
    n->nargs = 0;
    const json *sizes = sizes_of(function);
    n->args_known = sizes != NULL;
    if (!sizes) return;
    n->nargs = sizes->count;
    n->arg_sizes = calloc(n->nargs + 1, sizeof *n->arg_sizes);
    size_t total = 0;
    for (size_t i = 0; i < n->nargs; i++) total += n->arg_sizes[i] = (size_t)sizes->items[i].integer;
    n->args = calloc(total + 1, 1);
    size_t at = 0;
    for (size_t i = 0; i < n->nargs; i++) { /* copied now, as the driver copies them */
        memcpy(n->args + at, params[i], n->arg_sizes[i]);
        at += n->arg_sizes[i];
    }
}

static uint64_t arg_u64(const fnode *n, size_t index, size_t size) {
    size_t at = 0;
    for (size_t i = 0; i < index; i++) at += n->arg_sizes[i];
    uint64_t v = 0;
    memcpy(&v, n->args + at, size);
    return v;
}

fhandle *find_handle(uint64_t value) {
    for (size_t i = 0; i < fake.handle_count; i++)
        if (fake.handles[i].value == value) return &fake.handles[i];
    return NULL;
}

/* A generated deciding kernel (conditions.cu.j2): its decision in control[0] and, in a graph,
 * its handle's value. */
static void decide(const fnode *n) {
    const char *kind = n->function + strlen("pipec_condition_");
    uint64_t handle = arg_u64(n, 0, 8);
    uint32_t in_graph = (uint32_t)arg_u64(n, 1, 4), value;
    uint32_t *control;
    if (strcmp(kind, "every") == 0 || strcmp(kind, "repeat") == 0) {
        control = (uint32_t *)(uintptr_t)arg_u64(n, 2, 8);
        uint32_t operand = (uint32_t)arg_u64(n, 3, 4);
        if (kind[0] == 'e') {
            uint32_t count = control[1] + 1;
            value = count >= operand;
            control[1] = value ? 0 : count;
        } else {
            control[1] = arg_u64(n, 4, 4) ? operand : control[1] - 1;
            value = control[1] > 0;
        }
    } else {
        const void *flag = (const void *)(uintptr_t)arg_u64(n, 2, 8);
        control = (uint32_t *)(uintptr_t)arg_u64(n, 3, 8);
        long double f = 0;
        if (strcmp(kind, "i32") == 0) f = *(const int32_t *)flag;
        else if (strcmp(kind, "u32") == 0) f = *(const uint32_t *)flag;
        else if (strcmp(kind, "i64") == 0) f = *(const int64_t *)flag;
        else if (strcmp(kind, "u64") == 0) f = *(const uint64_t *)flag;
        else f = *(const uint8_t *)flag;
        if (!arg_u64(n, 4, 4)) value = f != 0;
        else value = f < 0 || f > 0xFFFFFFFEL ? 0xFFFFFFFFu : (uint32_t)f;
    }
    control[0] = value;
    fhandle *h = in_graph ? find_handle(handle) : NULL;
    if (h) h->current = (int)value;
}

void execute(const fnode *n) {
    text t = {0};
    put(&t, "{\"event\":\"run\",");
    put_kernel(&t, n);
    put(&t, ",\"serialized\":%s}", n->serialized ? "true" : "false");
    emit(&t);
    if (n->args_known && strncmp(n->function, "pipec_condition_", 16) == 0) decide(n);
    if (n->effect) n->effect(n->effect_data, n->effect_size);
}

static void run_node(const fnode *n) {
    switch (n->kind) {
    case K_KERNEL: execute(n); break;
    case K_MEMSET: do_memset(n->dst, n->element_size, n->value, n->count); break;
    case K_MEMCPY: do_memcpy(n->dst, n->src, n->count); break;
    case K_GRAPH: run(n->child); break;
    case K_CONDITIONAL: {
        fhandle *h = find_handle(n->handle);
        if (n->cond_type == CU_GRAPH_COND_TYPE_WHILE) {
            /* a loop the runtime set up wrongly must fail the test, not hang it */
            for (long turns = 0; h && h->current; turns++) {
                if (turns == 1L << 24) abort();
                run(n->bodies[0]);
            }
            break;
        }
        unsigned value = h ? (unsigned)h->current : 0;
        unsigned chosen = n->cond_type == CU_GRAPH_COND_TYPE_IF ? (value ? 0 : 1) : value;
        if (chosen < n->nbodies) run(n->bodies[chosen]);
        break;
    }
    default: break;
    }
}

void run(const fgraph *g) {
    for (size_t i = 0; i < g->count; i++) run_node(g->nodes[i]); /* added in a topological order */
}

/* --- graphs ------------------------------------------------------------------------------- */

fgraph *new_graph(int top) {
    fgraph *g = calloc(1, sizeof *g);
    g->id = ++fake.next_id;
    if (top) {
        fake.graphs = realloc(fake.graphs, (fake.graph_count + 1) * sizeof *fake.graphs);
        fake.graphs[fake.graph_count++] = g;
    }
    return g;
}

void free_node(fnode *n) {
    free(n->deps);
    free(n->programmatic);
    free(n->function);
    free(n->args);
    free(n->arg_sizes);
    free(n->effect_data);
    if (n->child) free_graph(n->child);
    for (unsigned b = 0; b < n->nbodies; b++) free_graph(n->bodies[b]);
    free(n->bodies);
    free(n);
}

void free_graph(fgraph *g) {
    for (size_t i = 0; i < g->count; i++) free_node(g->nodes[i]);
    free(g->nodes);
    free(g);
}

int live_graph(const fgraph *g) {
    for (size_t i = 0; i < fake.graph_count; i++)
        if (fake.graphs[i] == g) return 1;
    return 0;
}

fnode *append(fgraph *g, fnode *n, const CUgraphNode *deps, size_t count) {
    n->deps = calloc(count + 1, sizeof *n->deps);
    n->ndeps = count;
    for (size_t i = 0; i < count; i++) n->deps[i] = (fnode *)deps[i];
    if (g->count == g->capacity) {
        g->capacity = g->capacity ? g->capacity * 2 : 8;
        g->nodes = realloc(g->nodes, g->capacity * sizeof *g->nodes);
    }
    g->nodes[g->count++] = n;
    return n;
}

void add_programmatic(fnode *producer, fnode *consumer) {
    consumer->programmatic = realloc(consumer->programmatic, (consumer->nprogrammatic + 1) * sizeof *consumer->programmatic);
    consumer->programmatic[consumer->nprogrammatic++] = producer;
}

static fnode *clone_node(const fnode *n) {
    fnode *c = new_node(n->kind);
    *c = *n;
    c->origin = n;
    c->deps = NULL;
    c->programmatic = NULL, c->nprogrammatic = 0;
    c->function = n->function ? strdup(n->function) : NULL;
    size_t total = 0;
    for (size_t i = 0; i < n->nargs; i++) total += n->arg_sizes[i];
    c->arg_sizes = n->arg_sizes ? calloc(n->nargs + 1, sizeof *c->arg_sizes) : NULL;
    if (c->arg_sizes) memcpy(c->arg_sizes, n->arg_sizes, n->nargs * sizeof *c->arg_sizes);
    c->args = n->args ? calloc(total + 1, 1) : NULL;
    if (c->args) memcpy(c->args, n->args, total);
    c->effect_data = n->effect_data ? malloc(n->effect_size) : NULL;
    if (c->effect_data) memcpy(c->effect_data, n->effect_data, n->effect_size);
    c->child = n->child ? clone_graph(n->child) : NULL;
    c->bodies = n->nbodies ? calloc(n->nbodies, sizeof *c->bodies) : NULL;
    for (unsigned b = 0; b < n->nbodies; b++) c->bodies[b] = clone_graph(n->bodies[b]);
    return c;
}

fgraph *clone_graph(const fgraph *g) {
    fgraph *c = new_graph(0);
    for (size_t i = 0; i < g->count; i++) {
        fnode *n = clone_node(g->nodes[i]);
        CUgraphNode deps[64];
        size_t count = 0;
        for (size_t d = 0; d < g->nodes[i]->ndeps && count < 64; d++)
            for (size_t j = 0; j < i; j++)
                if (g->nodes[j] == g->nodes[i]->deps[d]) deps[count++] = (CUgraphNode)c->nodes[j];
        append(c, n, deps, count);
        for (size_t d = 0; d < g->nodes[i]->nprogrammatic; d++)
            for (size_t j = 0; j < i; j++)
                if (g->nodes[j] == g->nodes[i]->programmatic[d]) add_programmatic(c->nodes[j], n);
    }
    return c;
}

const fnode *find_in(const fgraph *g, const fnode *target) {
    for (size_t i = 0; i < g->count; i++) {
        const fnode *n = g->nodes[i], *found = NULL;
        if (n == target) return n;
        if (n->child) found = find_in(n->child, target);
        for (unsigned b = 0; !found && b < n->nbodies; b++) found = find_in(n->bodies[b], target);
        if (found) return found;
    }
    return NULL;
}

const fnode *find_clone(const fgraph *g, const fnode *original) {
    for (size_t i = 0; i < g->count; i++) {
        const fnode *n = g->nodes[i], *found = NULL;
        if (n->origin == original) return n;
        if (n->child) found = find_clone(n->child, original);
        for (unsigned b = 0; !found && b < n->nbodies; b++) found = find_clone(n->bodies[b], original);
        if (found) return found;
    }
    return NULL;
}

