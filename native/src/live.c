/* Live updates without the compiler (runtime/live.py): new values for constants applied from the
 * plan's live-update record (docs/plan.md, "Live updates"). The record is read and checked when
 * the pipeline opens (a malformed one is PIPEC_ERROR_BUNDLE), and read again from a plan
 * pipec_update_plan applied. An update gives the named constants their values, computes every
 * value of the record in order (a constant derived from another follows it; one given a value
 * keeps it), then every site the named constants reach, checks each as the compiler does and
 * each changed kernel node against the device, and only then sets the nodes of the executable
 * graph (cuGraphExecKernelNodeSetParams) and of the eager program: a refusal changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

enum { FIELD_ARG, FIELD_GRID, FIELD_BLOCK, FIELD_SHARED };
static const char *const FIELDS[] = {"arg", "grid", "block", "shared_bytes"};

typedef struct live_entry {
    const char *name, *structural; /* structural: NULL when the value can change in place */
    int updatable, given;          /* given: an update set it, and it no longer follows `expr` */
    const json *expr;              /* NULL: no number (a string) */
    live_value value;
    size_t *sites;
    size_t site_count;
} live_entry;

typedef struct live_site {
    int graph, field;
    size_t node, index;
    const json *expr;
    int ranged; /* an argument with a range besides its type (the operand of `every`, `repeat`) */
    long long low, high, multiple, threads;
} live_site;

struct live_record {
    const json *document; /* the plan it was read from */
    live_entry *entries;
    size_t count;
    live_site *sites;
    size_t site_count;
};

void live_free(pipec_pipeline *p) {
    if (!p->live) return;
    for (size_t i = 0; i < p->live->count; i++) free(p->live->entries[i].sites);
    free(p->live->entries);
    free(p->live->sites);
    free(p->live);
    p->live = NULL;
}

static pipec_status malformed(const char *what, size_t index) {
    return fail(PIPEC_ERROR_BUNDLE, "plan.json: live.%s[%zu] is not a value the live-update record holds", what, index);
}

static int integer_member(const json *o, const char *key, long long *out) {
    const json *v = json_get(o, key);
    if (!v || v->kind != JSON_NUMBER || !v->is_integer || v->is_unsigned) return 0;
    *out = v->integer;
    return 1;
}

static pipec_status read_site(const plan *pl, const json *o, size_t i, live_site *s) {
    const json *field = json_get(o, "field"), *low = json_get(o, "low"), *high = json_get(o, "high");
    long long graph, node, index;
    if (!integer_member(o, "graph", &graph) || !integer_member(o, "node", &node) || !integer_member(o, "index", &index) ||
        !integer_member(o, "multiple", &s->multiple) || !integer_member(o, "threads", &s->threads) ||
        !field || field->kind != JSON_STRING || !(s->expr = json_get(o, "expr")) || !low || !high || s->multiple < 1 ||
        graph < 0 || (size_t)graph >= pl->graph_count || node < 0 || (size_t)node >= pl->graphs[graph].node_count)
        return malformed("sites", i);
    s->graph = (int)graph, s->node = (size_t)node, s->index = (size_t)index, s->field = -1;
    for (int f = 0; f < 4; f++)
        if (strcmp(field->string, FIELDS[f]) == 0) s->field = f;
    s->ranged = low->kind != JSON_NULL;
    if (s->ranged && (!integer_member(o, "low", &s->low) || !integer_member(o, "high", &s->high)))
        return malformed("sites", i);
    const node_spec *n = &pl->graphs[graph].nodes[node];
    int fits = n->kind == NODE_KERNEL && (s->field == FIELD_ARG ? index >= 0 && (size_t)index < n->arg_count &&
                                          n->args[index].kind == ARG_SCALAR
                                          : s->field == FIELD_SHARED ? index == 0 && s->ranged
                                          : s->field >= 0 && index >= 0 && index < 3 && s->ranged);
    return fits ? PIPEC_OK : malformed("sites", i);
}

static pipec_status read_entry(const json *o, size_t i, size_t site_count, live_entry *e) {
    const json *name = json_get(o, "name"), *updatable = json_get(o, "updatable"), *expr = json_get(o, "expr");
    const json *value = json_get(o, "value"), *structural = json_get(o, "structural"), *sites = json_get(o, "sites");
    if (!name || name->kind != JSON_STRING || !updatable || updatable->kind != JSON_BOOL || !expr || !value ||
        !structural || (structural->kind != JSON_NULL && structural->kind != JSON_STRING) || !sites ||
        sites->kind != JSON_ARRAY)
        return malformed("values", i);
    e->name = name->string;
    e->updatable = updatable->boolean;
    e->structural = structural->kind == JSON_STRING ? structural->string : NULL;
    e->expr = expr->kind == JSON_NULL ? NULL : expr;
    char why[LIVE_WHY];
    if (value->kind != JSON_NULL && !live_evaluate(value, NULL, 0, &e->value, why)) return malformed("values", i);
    e->sites = calloc(sites->count ? sites->count : 1, sizeof *e->sites);
    if (!e->sites) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    e->site_count = sites->count;
    for (size_t s = 0; s < sites->count; s++) {
        const json *at = &sites->items[s];
        if (at->kind != JSON_NUMBER || !at->is_integer || at->integer < 0 || (size_t)at->integer >= site_count)
            return malformed("values", i);
        e->sites[s] = (size_t)at->integer;
    }
    return PIPEC_OK;
}

static pipec_status read_record(const plan *pl, live_record **out) {
    const json *live = json_get(pl->document, "live");
    const json *values = json_get(live, "values"), *sites = json_get(live, "sites");
    if (!values || values->kind != JSON_ARRAY || !sites || sites->kind != JSON_ARRAY)
        return fail(PIPEC_ERROR_BUNDLE, "plan.json has no live-update record (`live`): rebuild the bundle with this "
                    "pipec's `pipec build`");
    live_record *r = calloc(1, sizeof *r);
    if (r) r->entries = calloc(values->count ? values->count : 1, sizeof *r->entries);
    if (r && r->entries) r->sites = calloc(sites->count ? sites->count : 1, sizeof *r->sites);
    *out = r;
    if (!r || !r->entries || !r->sites) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    r->document = pl->document;
    r->site_count = sites->count;
    pipec_status status = PIPEC_OK;
    for (size_t i = 0; status == PIPEC_OK && i < sites->count; i++) status = read_site(pl, &sites->items[i], i, &r->sites[i]);
    for (size_t i = 0; status == PIPEC_OK && i < values->count; i++, r->count++)
        status = read_entry(&values->items[i], i, sites->count, &r->entries[i]);
    return status;
}

/* The record of the plan the pipeline runs now: read again after pipec_update_plan. */
static pipec_status current(pipec_pipeline *p, live_record **out) {
    if (p->live && p->live->document != p->plan.document) live_free(p);
    if (!p->live) {
        pipec_status status = read_record(&p->plan, &p->live);
        if (status != PIPEC_OK) {
            live_free(p);
            return status;
        }
    }
    *out = p->live;
    return PIPEC_OK;
}

pipec_status live_open(pipec_pipeline *p) {
    live_record *r;
    return current(p, &r);
}

static live_entry *named(live_record *r, const char *name) {
    for (size_t i = 0; i < r->count; i++)
        if (r->entries[i].updatable && strcmp(r->entries[i].name, name) == 0) return &r->entries[i];
    return NULL;
}

static int value_of(const pipec_value *v, live_value *out) {
    switch (v->kind) {
    case PIPEC_VALUE_INT: *out = (live_value){LIVE_INT, v->as.i, 0}; return 1;
    case PIPEC_VALUE_UINT: *out = (live_value){LIVE_INT, v->as.u, 0}; return 1;
    case PIPEC_VALUE_FLOAT: *out = (live_value){LIVE_FLOAT, 0, v->as.f}; return 1;
    case PIPEC_VALUE_BOOL: *out = (live_value){LIVE_BOOL, v->as.b != 0, 0}; return 1;
    }
    return 0;
}

/* A kernel node's new fields, set aside until every site and every check has passed, and its
 * old ones, to put back should the driver fail half way. */
typedef struct staged {
    node_spec *target;          /* the plan's node */
    const char *scope;          /* its graph's */
    node_spec fresh, old;       /* the fields, each with its own copy of the arguments: */
    arg_spec *fresh_args, *old_args;
    json *fresh_values, *old_values; /* each argument's JSON value; kind JSON_NULL where unchanged */
    long long threads;          /* the most threads its block may have; 0 when no block site reaches it */
} staged;

static void free_staged(staged *s, size_t count) {
    for (size_t i = 0; i < count; i++) {
        free(s[i].fresh_args);
        free(s[i].old_args);
        free(s[i].fresh_values);
        free(s[i].old_values);
    }
    free(s);
}

static staged *stage(staged *all, size_t *count, node_spec *target, const char *scope) {
    for (size_t i = 0; i < *count; i++)
        if (all[i].target == target) return &all[i];
    staged *s = &all[(*count)++];
    size_t n = target->arg_count ? target->arg_count : 1;
    s->target = target;
    s->scope = scope;
    s->fresh = s->old = *target;
    s->fresh.args = s->fresh_args = calloc(n, sizeof *s->fresh_args);
    s->old.args = s->old_args = calloc(n, sizeof *s->old_args);
    s->fresh_values = calloc(n, sizeof *s->fresh_values);
    s->old_values = calloc(n, sizeof *s->old_values);
    if (!s->fresh_args || !s->old_args || !s->fresh_values || !s->old_values) return NULL;
    memcpy(s->fresh_args, target->args, target->arg_count * sizeof *s->fresh_args);
    memcpy(s->old_args, target->args, target->arg_count * sizeof *s->old_args);
    return s;
}

static const char *field_name(const live_site *s, char *out, size_t size) {
    if (s->field == FIELD_ARG) snprintf(out, size, "argument %zu", s->index + 1);
    else if (s->field == FIELD_SHARED) snprintf(out, size, "the dynamic shared memory");
    else snprintf(out, size, "%s.%c", FIELDS[s->field], "xyz"[s->index]);
    return out;
}

/* One site's new value into its node's staged fields. */
static pipec_status apply_site(const live_site *s, const live_value *values, size_t count, staged *st, const char *named_text) {
    char why[LIVE_WHY], what[64];
    node_spec *n = &st->fresh;
    field_name(s, what, sizeof what);
    live_value v;
    long long d = 0;
    int ok = live_evaluate(s->expr, values, count, &v, why);
    if (ok && s->field == FIELD_ARG) {
        if (s->ranged) ok = live_dimension(v, what, s->low, s->high, 1, &d, why), v = (live_value){LIVE_INT, d, 0};
        ok = ok && live_argument(v, n->args[s->index].ctype, &st->fresh_values[s->index], why);
        if (ok) scalar_bytes(n->args[s->index].ctype, &st->fresh_values[s->index], n->args[s->index].value);
    } else if (ok) {
        ok = live_dimension(v, what, s->low, s->high, s->multiple, &d, why);
        if (s->field == FIELD_SHARED) n->shared_bytes = (unsigned)d;
        else (s->field == FIELD_GRID ? n->grid : n->block)[s->index] = (unsigned)d;
        if (s->field == FIELD_BLOCK && (!st->threads || s->threads < st->threads)) st->threads = s->threads;
    }
    if (ok) return PIPEC_OK;
    return fail(PIPEC_ERROR_UPDATE_REFUSED, "%s: %s of `%s` (%s): %s", named_text, what, n->name, n->location, why);
}

static json *member(const json *o, const char *key) { return (json *)json_get(o, key); }

static void unsigned_json(unsigned v, json *out) {
    out->kind = JSON_NUMBER;
    out->is_integer = 1;
    out->is_unsigned = 0;
    out->integer = v;
    out->uinteger = v;
    out->number = v;
}

/* The node's fields, and its JSON (which pipec_update_plan compares), set to `from`'s; an
 * argument's JSON value only where `values` has one. */
static void write_node(node_spec *to, const node_spec *from, const json *values) {
    memcpy(to->grid, from->grid, sizeof to->grid);
    memcpy(to->block, from->block, sizeof to->block);
    to->shared_bytes = from->shared_bytes;
    for (size_t i = 0; i < to->arg_count; i++) {
        memcpy(to->args[i].value, from->args[i].value, sizeof to->args[i].value);
        if (values[i].kind == JSON_NUMBER) *member(&member(to->source, "args")->items[i], "value") = values[i];
    }
    for (int i = 0; i < 3; i++) {
        unsigned_json(to->grid[i], &member(to->source, "grid")->items[i]);
        unsigned_json(to->block[i], &member(to->source, "block")->items[i]);
    }
    unsigned_json(to->shared_bytes, member(to->source, "shared_bytes"));
}

static int differs(const staged *s) {
    const node_spec *a = &s->old, *b = &s->fresh;
    if (memcmp(a->grid, b->grid, sizeof a->grid) || memcmp(a->block, b->block, sizeof a->block) ||
        a->shared_bytes != b->shared_bytes)
        return 1;
    for (size_t i = 0; i < a->arg_count; i++)
        if (memcmp(a->args[i].value, b->args[i].value, sizeof a->args[i].value)) return 1;
    return 0;
}

static pipec_status set_node(pipec_pipeline *p, staged *s, const node_spec *fields, const json *values) {
    write_node(s->target, fields, values);
    pipec_status status = graph_update_kernel(p, &p->graph, s->target, s->scope);
    return status == PIPEC_OK ? eager_update_kernel(p, &p->eager, s->target) : status;
}

/* The staged nodes into the plan, the executable graph and the eager program; on a driver
 * failure every node set so far gets its old fields back (best effort), and the error stands. */
static pipec_status commit_nodes(pipec_pipeline *p, staged *nodes, size_t count, size_t *changed) {
    pipec_status status = PIPEC_OK;
    size_t tried = 0;
    for (; status == PIPEC_OK && tried < count; tried++) {
        staged *s = &nodes[tried];
        if (!differs(s)) continue;
        for (size_t i = 0; i < s->target->arg_count; i++)
            if (s->fresh_values[i].kind == JSON_NUMBER)
                s->old_values[i] = *json_get(&json_get(s->target->source, "args")->items[i], "value");
        status = set_node(p, s, &s->fresh, s->fresh_values);
        if (status == PIPEC_OK) (*changed)++;
    }
    if (status != PIPEC_OK) {
        char message[1024];
        snprintf(message, sizeof message, "%s", pipec_last_error());
        for (size_t i = 0; i < tried; i++)
            if (differs(&nodes[i])) set_node(p, &nodes[i], &nodes[i].old, nodes[i].old_values);
        fail(status, "%s", message);
    }
    return status;
}

pipec_status pipec_update_constants(pipec_pipeline *p, const char *const *names, const pipec_value *values, size_t count,
                                    size_t *changed) {
    if (!p || (count && (!names || !values)))
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_update_constants: the pipeline, names or values is NULL");
    live_record *r;
    pipec_status status = current(p, &r);
    if (status != PIPEC_OK) return status;
    live_value *fresh = calloc(r->count ? r->count : 1, sizeof *fresh);
    int *given = calloc(r->count ? r->count : 1, sizeof *given);
    unsigned char *reached = calloc(r->site_count ? r->site_count : 1, 1);
    staged *nodes = calloc(r->site_count ? r->site_count : 1, sizeof *nodes);
    size_t staged_count = 0, changes = 0;
    char named_text[512] = "";
    if (!fresh || !given || !reached || !nodes) status = fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < r->count; i++) given[i] = r->entries[i].given, fresh[i] = r->entries[i].value;
    for (size_t i = 0; status == PIPEC_OK && i < count; i++) {
        live_entry *e = names[i] ? named(r, names[i]) : NULL;
        live_value v;
        if (!e)
            status = fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_update_constants: %s has no constant `%s`", p->plan.pipe,
                          names[i] ? names[i] : "(NULL)");
        else if (e->structural)
            status = fail(PIPEC_ERROR_UPDATE_REFUSED, "`%s` cannot change in place: it %s; only constants that reach "
                          "kernel scalar arguments and launch shapes can (rebuild with `-D %s=...`)", e->name,
                          e->structural, e->name);
        else if (!value_of(&values[i], &v))
            status = fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_update_constants: the value of `%s` has no kind %d",
                          e->name, (int)values[i].kind);
        if (status != PIPEC_OK) break;
        size_t at = (size_t)(e - r->entries), used = strlen(named_text);
        char text[64];
        live_describe(v, text, sizeof text);
        snprintf(named_text + used, sizeof named_text - used, "%s%s = %s", used ? ", " : "", e->name, text);
        fresh[at] = v, given[at] = 1;
        for (size_t s = 0; s < e->site_count; s++) reached[e->sites[s]] = 1;
    }
    char why[LIVE_WHY];
    for (size_t i = 0; status == PIPEC_OK && i < r->count; i++) {
        const live_entry *e = &r->entries[i];
        if (given[i]) continue;
        if (!e->expr) fresh[i].kind = LIVE_NONE;
        else if (!live_evaluate(e->expr, fresh, i, &fresh[i], why))
            status = fail(PIPEC_ERROR_UPDATE_REFUSED, "%s: `%s` cannot be computed: %s", named_text, e->name, why);
    }
    for (size_t i = 0; status == PIPEC_OK && i < r->site_count; i++) {
        if (!reached[i]) continue;
        const live_site *s = &r->sites[i];
        staged *st = stage(nodes, &staged_count, &p->plan.graphs[s->graph].nodes[s->node], p->plan.graphs[s->graph].scope);
        status = st ? apply_site(s, fresh, r->count, st, named_text) : fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    for (size_t i = 0; status == PIPEC_OK && i < staged_count; i++) {
        const node_spec *n = &nodes[i].fresh;
        long long threads = (long long)n->block[0] * n->block[1] * n->block[2];
        if (nodes[i].threads && threads > nodes[i].threads)
            status = fail(PIPEC_ERROR_UPDATE_REFUSED, "%s: the block (%u, %u, %u) of `%s` (%s) holds more than the %lld "
                          "threads the kernel allows", named_text, n->block[0], n->block[1], n->block[2], n->name,
                          n->location, nodes[i].threads);
    }
    if (status == PIPEC_OK && staged_count && (status = enter(p)) == PIPEC_OK) {
        for (size_t i = 0; status == PIPEC_OK && i < staged_count; i++)
            if (differs(&nodes[i]) && (status = check_node_resources(p, &nodes[i].fresh)) == PIPEC_ERROR_LAUNCH_LIMITS)
                status = fail(PIPEC_ERROR_UPDATE_REFUSED, "%s", pipec_last_error());
        if (status == PIPEC_OK) status = commit_nodes(p, nodes, staged_count, &changes);
        leave(p);
    }
    if (status == PIPEC_OK) {
        for (size_t i = 0; i < r->count; i++) r->entries[i].value = fresh[i], r->entries[i].given = given[i];
        if (changed) *changed = changes;
    }
    free(fresh);
    free(given);
    free(reached);
    if (nodes) free_staged(nodes, staged_count);
    return status;
}

pipec_status pipec_constant(pipec_pipeline *p, const char *name, pipec_value *value, const char **structural) {
    if (!p || !name) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_constant: the pipeline or name is NULL");
    live_record *r;
    pipec_status status = current(p, &r);
    if (status != PIPEC_OK) return status;
    const live_entry *e = named(r, name);
    if (!e) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_constant: %s has no constant `%s`", p->plan.pipe, name);
    if (value) {
        memset(value, 0, sizeof *value);
        const live_value *v = &e->value;
        if (v->kind == LIVE_FLOAT) value->kind = PIPEC_VALUE_FLOAT, value->as.f = v->number;
        else if (v->kind == LIVE_BOOL) value->kind = PIPEC_VALUE_BOOL, value->as.b = (int)v->integer;
        else if (v->kind == LIVE_INT && v->integer > INT64_MAX) value->kind = PIPEC_VALUE_UINT, value->as.u = (uint64_t)v->integer;
        else if (v->kind == LIVE_INT && v->integer >= INT64_MIN) value->kind = PIPEC_VALUE_INT, value->as.i = (int64_t)v->integer;
        else return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_constant: `%s` holds no value a pipec_value can hold", name);
    }
    if (structural) *structural = e->structural;
    return PIPEC_OK;
}
