/* Graph replay against eager execution, bit for bit (runtime/verify.py): both sides start from
 * the same state, every buffer the step writes before reading is poisoned first (so an output
 * that a side never writes cannot match by accident), the graph side runs twice (so
 * non-deterministic kernels show too), and the state is restored afterwards. The first
 * difference is reported with its element and the step's nodes that write it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

typedef unsigned char **snapshot;

static void snapshot_free(const pipec_pipeline *p, snapshot s) {
    for (size_t i = 0; s && i < p->plan.buffer_count; i++) free(s[i]);
    free(s);
}

static pipec_status take(pipec_pipeline *p, snapshot *out) {
    pipec_status waited = stream_wait(p, p->plan.pipe);
    if (waited != PIPEC_OK) return waited;
    snapshot s = calloc(p->plan.buffer_count ? p->plan.buffer_count : 1, sizeof *s);
    pipec_status status = s ? PIPEC_OK : fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; status == PIPEC_OK && i < p->plan.buffer_count; i++) {
        s[i] = malloc(p->plan.buffers[i].nbytes ? p->plan.buffers[i].nbytes : 1);
        status = s[i] ? buffer_read(p, (int)i, s[i]) : fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    if (status != PIPEC_OK) snapshot_free(p, s);
    else *out = s;
    return status;
}

static pipec_status put_back(pipec_pipeline *p, snapshot s) {
    pipec_status waited = stream_wait(p, p->plan.pipe);
    if (waited != PIPEC_OK) return waited;
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        pipec_status status = buffer_write(p, (int)i, s[i]);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}

/* One side: from `start`, the written-first buffers poisoned, `steps` steps, then a snapshot. */
static pipec_status side(pipec_pipeline *p, snapshot start, uint64_t steps, int graph, snapshot *out) {
    pipec_status status = put_back(p, start);
    for (size_t i = 0; status == PIPEC_OK && i < p->plan.buffer_count; i++)
        if (p->plan.buffers[i].first_write) status = buffer_poison(p, (int)i, p->stream);
    for (uint64_t s = 0; status == PIPEC_OK && s < steps; s++)
        status = graph ? pipec_step(p, 1) : eager_run(p, &p->eager);
    return status == PIPEC_OK ? take(p, out) : status;
}

static void describe_value(dtype t, const unsigned char *e, char *out, size_t size) {
    double v = element_as_double(t, e);
    if (dtype_kind(t) == 'f') snprintf(out, size, t == DT_F64 ? "%.17g" : "%.9g", v);
    else snprintf(out, size, "%.0f", v);
}

static void writers(const pipec_pipeline *p, int buffer, int64_t element, char *out, size_t size) {
    size_t count = plan_leaves(&p->plan, p->plan.step, NULL, 0), used = 0;
    const node_spec **leaves = calloc(count ? count : 1, sizeof *leaves);
    out[0] = 0;
    if (!leaves) return;
    plan_leaves(&p->plan, p->plan.step, leaves, count);
    for (size_t i = 0; i < count; i++)
        for (size_t a = 0; a < leaves[i]->access_count; a++) {
            const access_spec *x = &leaves[i]->accesses[a];
            if (x->writes && x->buffer == buffer && x->start <= element && element < x->stop && used + 1 < size) {
                used += (size_t)snprintf(out + used, size - used, "%s`%s` (%s)", used ? ", " : "", leaves[i]->name,
                                         leaves[i]->location);
                break;
            }
        }
    free(leaves);
    if (!out[0]) snprintf(out, size, "no node of the step");
}

static void compare(const pipec_pipeline *p, snapshot a, snapshot b, const char *sa, const char *sb,
                    pipec_verify_report *r) {
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        const buffer_spec *spec = &p->plan.buffers[i];
        size_t size = dtype_size(spec->type), count = spec->nbytes / size, differ = 0, first = 0;
        for (size_t e = 0; e < count; e++)
            if (memcmp(a[i] + e * size, b[i] + e * size, size) != 0 && differ++ == 0) first = e;
        if (!differ) continue;
        r->ok = 0;
        if (r->mismatches++) continue;
        char index[128] = "", left[64], right[64], by[640];
        size_t rest = first, used = 0;
        for (size_t d = 0; d < spec->rank; d++) {
            size_t stride = 1;
            for (size_t k = d + 1; k < spec->rank; k++) stride *= (size_t)spec->shape[k];
            used += (size_t)snprintf(index + used, sizeof index - used, "%s%zu", d ? ", " : "", rest / stride);
            rest %= stride;
        }
        describe_value(spec->type, a[i] + first * size, left, sizeof left);
        describe_value(spec->type, b[i] + first * size, right, sizeof right);
        writers(p, (int)i, (int64_t)first, by, sizeof by);
        snprintf(r->first, sizeof r->first, "`%s`[%s]: %s %s, %s %s (%zu element%s differ); written by %s", spec->name,
                 index, sa, left, sb, right, differ, differ == 1 ? "" : "s", by);
    }
}

pipec_status pipec_verify(pipec_pipeline *p, uint64_t steps, pipec_verify_report *report) {
    if (!p || !report) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_verify: the pipeline or report is NULL");
    uint32_t version = report->version;
    memset(report, 0, sizeof *report);
    report->version = version;
    report->ok = 1;
    report->buffers = p->plan.buffer_count;
    pipec_status status = enter(p);
    if (status != PIPEC_OK) return status;
    snapshot start = NULL, eager = NULL, graph = NULL, again = NULL;
    status = take(p, &start);
    if (status == PIPEC_OK) status = side(p, start, steps, 0, &eager);
    if (status == PIPEC_OK) status = side(p, start, steps, 1, &graph);
    if (status == PIPEC_OK) status = side(p, start, steps, 1, &again);
    if (start) {
        pipec_status restored = put_back(p, start);
        if (status == PIPEC_OK) status = restored;
    }
    if (status == PIPEC_OK) {
        compare(p, eager, graph, "eager", "graph", report);
        compare(p, graph, again, "graph", "graph again", report);
    }
    snapshot_free(p, start);
    snapshot_free(p, eager);
    snapshot_free(p, graph);
    snapshot_free(p, again);
    leave(p);
    return status;
}
