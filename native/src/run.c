/* Running a pipeline: graph replays, eager runs, the host's streams, buffers and the mapped
 * diagnostics (runtime/pipeline.py's step, run_eager, readback, read and write). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define UNLABELLED_SHOWN 8 /* a mapped buffer without labels shows its first elements */

#define CHECK_OPEN(p) \
    if (!(p)) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "%s: the pipeline is NULL", __func__)

pipec_status pipec_step(pipec_pipeline *p, uint64_t n) {
    CHECK_OPEN(p);
    pipec_status usable = collectives_usable(p);
    if (usable != PIPEC_OK) return usable;
    if (n) collectives_launched(p);
    for (uint64_t i = 0; i < n; i++) CU(p, p->driver.GraphLaunch(p->graph.exec, p->stream), "cuGraphLaunch", p->plan.pipe);
    return PIPEC_OK;
}

/* `waiter` waits, on the device, for the work enqueued on `producer` so far (driver.py wait_for). */
static pipec_status wait_for(pipec_pipeline *p, CUstream waiter, CUstream producer) {
    CUevent event;
    CU(p, p->driver.EventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", NULL);
    CUresult r = p->driver.EventRecord(event, producer);
    const char *call = "cuEventRecord";
    if (r == CUDA_SUCCESS) r = p->driver.StreamWaitEvent(waiter, event, 0), call = "cuStreamWaitEvent";
    p->driver.EventDestroy(event);
    return r == CUDA_SUCCESS ? PIPEC_OK : fail_cuda(&p->driver, call, r, NULL);
}

pipec_status pipec_launch(pipec_pipeline *p, CUstream stream, uint64_t n) {
    CHECK_OPEN(p);
    if (stream == p->stream) return pipec_step(p, n);
    pipec_status status = enter(p);
    if (status != PIPEC_OK) return status;
    status = wait_for(p, p->stream, stream);
    if (status == PIPEC_OK) status = pipec_step(p, n);
    if (status == PIPEC_OK) status = wait_for(p, stream, p->stream);
    leave(p);
    return status;
}

pipec_status pipec_synchronize(pipec_pipeline *p) {
    CHECK_OPEN(p);
    return stream_wait(p, p->plan.pipe);
}

pipec_status pipec_run_eager(pipec_pipeline *p, uint64_t n) {
    CHECK_OPEN(p);
    pipec_status status = enter(p);
    if (status != PIPEC_OK) return status;
    for (uint64_t i = 0; i < n && status == PIPEC_OK; i++) status = eager_run(p, &p->eager);
    leave(p);
    return status;
}

pipec_status diags_build(pipec_pipeline *p) {
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !(p->diags = calloc(count ? count : 1, sizeof *p->diags)))
            return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
        count = 0;
        for (size_t b = 0; b < p->plan.buffer_count; b++) {
            const buffer_spec *spec = &p->plan.buffers[b];
            if (!spec->mapped) continue;
            size_t elements = spec->nbytes / dtype_size(spec->type);
            size_t shown = spec->label_count ? spec->label_count : elements < UNLABELLED_SHOWN ? elements : UNLABELLED_SHOWN;
            for (size_t i = 0; i < shown && i < elements; i++, count++) {
                if (pass == 0) continue;
                char label[512];
                if (spec->label_count) snprintf(label, sizeof label, "%s", spec->labels[i]);
                else snprintf(label, sizeof label, "%s[%zu]", spec->name, i);
                p->diags[count] = (struct diag_entry){strdup(label), (int)b, i};
                p->diag_count = count + 1;
                if (!p->diags[count].label) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
            }
        }
    }
    return PIPEC_OK;
}

void diags_free(pipec_pipeline *p) {
    for (size_t i = 0; i < p->diag_count; i++) free(p->diags[i].label);
    free(p->diags);
    p->diags = NULL;
    p->diag_count = 0;
}

size_t pipec_diag_count(const pipec_pipeline *p) { return p ? p->diag_count : 0; }

static double diag_value(const pipec_pipeline *p, const struct diag_entry *d) {
    const buffer_spec *spec = &p->plan.buffers[d->buffer];
    size_t size = dtype_size(spec->type);
    const volatile unsigned char *host = p->buffers[d->buffer].host; /* the device writes it */
    unsigned char element[8];
    for (size_t i = 0; i < size; i++) element[i] = host[d->element * size + i];
    return element_as_double(spec->type, element);
}

pipec_status pipec_diag_at(const pipec_pipeline *p, size_t index, const char **label, double *value) {
    CHECK_OPEN(p);
    if (index >= p->diag_count)
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "diagnostic %zu does not exist (%zu labelled elements)", index,
                    p->diag_count);
    if (label) *label = p->diags[index].label;
    if (value) *value = diag_value(p, &p->diags[index]);
    return PIPEC_OK;
}

pipec_status pipec_read_diag(const pipec_pipeline *p, const char *label, double *out) {
    CHECK_OPEN(p);
    if (!label || !out) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_read_diag: label or out is NULL");
    for (size_t i = 0; i < p->diag_count; i++)
        if (strcmp(p->diags[i].label, label) == 0) {
            *out = diag_value(p, &p->diags[i]);
            return PIPEC_OK;
        }
    return fail(PIPEC_ERROR_INVALID_ARGUMENT, "%s has no diagnostic labelled `%s`", p->plan.pipe, label);
}

static pipec_status named(const pipec_pipeline *p, const char *name, int *index) {
    *index = name ? plan_buffer_index(&p->plan, name) : -1;
    if (*index < 0) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "no buffer named %s in %s", name ? name : "(NULL)", p->plan.pipe);
    return PIPEC_OK;
}

pipec_status pipec_buffer(const pipec_pipeline *p, const char *name, CUdeviceptr *pointer, size_t *bytes,
                          pipec_dtype *type) {
    CHECK_OPEN(p);
    int i;
    pipec_status status = named(p, name, &i);
    if (status != PIPEC_OK) return status;
    if (pointer) *pointer = p->buffers[i].pointer;
    if (bytes) *bytes = p->plan.buffers[i].nbytes;
    if (type) *type = (pipec_dtype)p->plan.buffers[i].type;
    return PIPEC_OK;
}

size_t pipec_buffer_count(const pipec_pipeline *p) { return p ? p->plan.buffer_count : 0; }

const char *pipec_buffer_name(const pipec_pipeline *p, size_t index) {
    return p && index < p->plan.buffer_count ? p->plan.buffers[index].name : NULL;
}

static pipec_status host_copy(pipec_pipeline *p, const char *name, size_t bytes, int *index) {
    CHECK_OPEN(p);
    pipec_status status = named(p, name, index);
    if (status != PIPEC_OK) return status;
    if (bytes != p->plan.buffers[*index].nbytes)
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "`%s` has %llu bytes, not %zu", name,
                    (unsigned long long)p->plan.buffers[*index].nbytes, bytes);
    return pipec_synchronize(p);
}

pipec_status pipec_read_buffer(pipec_pipeline *p, const char *name, void *host, size_t bytes) {
    int i;
    pipec_status status = host_copy(p, name, bytes, &i);
    if (status != PIPEC_OK || (status = enter(p)) != PIPEC_OK) return status;
    status = buffer_read(p, i, host);
    leave(p);
    return status;
}

pipec_status pipec_write_buffer(pipec_pipeline *p, const char *name, const void *host, size_t bytes) {
    int i;
    pipec_status status = host_copy(p, name, bytes, &i);
    if (status != PIPEC_OK || (status = enter(p)) != PIPEC_OK) return status;
    status = buffer_write(p, i, host);
    leave(p);
    return status;
}

pipec_status pipec_add_to_graph(pipec_pipeline *p, CUgraph host_graph, const CUgraphNode *deps, size_t ndeps,
                                CUgraphNode *out_last) {
    CHECK_OPEN(p);
    if (!host_graph || (ndeps && !deps))
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_add_to_graph: the host graph or its dependencies are NULL");
    built_graph *bigger = realloc(p->embeddings, (p->embedding_count + 1) * sizeof *bigger);
    if (!bigger) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    p->embeddings = bigger;
    pipec_status status = enter(p);
    if (status != PIPEC_OK) return status;
    built_graph *g = &p->embeddings[p->embedding_count++];
    status = graph_embed(p, host_graph, deps, ndeps, g, out_last);
    leave(p);
    return status;
}
