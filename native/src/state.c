/* Saving and restoring every buffer in the Python runtime's format (runtime/state.py):
 * DIR/state.safetensors, an 8-byte little-endian header length, a JSON header (each tensor's
 * dtype, shape and data offsets, and string metadata: pipe, pipe_sha256, pipec_version, steps,
 * dtypes), then the tensors' bytes. Written to a temporary file and renamed into place. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime.h"
#include "text.h"

#define STATE_FILE "state.safetensors"

static const char *SAFETENSORS[DT_COUNT] = {
    [DT_F32] = "F32", [DT_F16] = "F16", [DT_BF16] = "BF16", [DT_F64] = "F64", [DT_I32] = "I32", [DT_U32] = "U32",
    [DT_I64] = "I64", [DT_U64] = "U64", [DT_U8] = "U8", [DT_U16] = "U16", [DT_I8] = "I8", [DT_I16] = "I16",
    [DT_BOOL] = "BOOL",
};

/* A JSON string literal of `s`. */
static void quoted(text *t, const char *s) {
    text_put(t, "\"", 1);
    for (; *s; s++) {
        char escape[8];
        if (*s == '"' || *s == '\\') { escape[0] = '\\'; escape[1] = *s; text_put(t, escape, 2); }
        else if ((unsigned char)*s < 0x20) { snprintf(escape, sizeof escape, "\\u%04x", *s); text_puts(t, escape); }
        else text_put(t, s, 1);
    }
    text_put(t, "\"", 1);
}

static pipec_status make_dirs(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *c = path + 1; ; c++) {
        if (*c == '/' || *c == 0) {
            char end = *c;
            *c = 0;
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return fail(PIPEC_ERROR_IO, "cannot create %s: %s", path, strerror(errno));
            *c = end;
            if (!end) return PIPEC_OK;
        }
    }
}

static void header(const pipec_pipeline *p, uint64_t steps, text *t) {
    text dtypes = {0};
    char number[32];
    text_puts(&dtypes, "{");
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        if (i) text_puts(&dtypes, ", ");
        quoted(&dtypes, p->plan.buffers[i].name);
        text_puts(&dtypes, ": ");
        quoted(&dtypes, dtype_name(p->plan.buffers[i].type));
    }
    text_puts(&dtypes, "}");
    text_puts(t, "{\"__metadata__\":{\"dtypes\":");
    quoted(t, dtypes.failed ? "" : dtypes.data);
    t->failed |= dtypes.failed;
    free(dtypes.data);
    text_puts(t, ",\"pipe\":");
    quoted(t, p->plan.pipe);
    text_puts(t, ",\"pipe_sha256\":");
    quoted(t, p->plan.pipe_sha256);
    text_puts(t, ",\"pipec_version\":");
    quoted(t, p->plan.pipec_version);
    snprintf(number, sizeof number, "%llu", (unsigned long long)steps);
    text_puts(t, ",\"steps\":");
    quoted(t, number);
    text_puts(t, "}");
    uint64_t offset = 0;
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        const buffer_spec *b = &p->plan.buffers[i];
        text_puts(t, ",");
        quoted(t, b->name);
        text_puts(t, ":{\"dtype\":");
        quoted(t, SAFETENSORS[b->type]);
        text_puts(t, ",\"shape\":[");
        for (size_t d = 0; d < b->rank; d++) {
            snprintf(number, sizeof number, "%s%lld", d ? "," : "", (long long)b->shape[d]);
            text_puts(t, number);
        }
        snprintf(number, sizeof number, "],\"data_offsets\":[%llu,", (unsigned long long)offset);
        text_puts(t, number);
        offset += b->nbytes;
        snprintf(number, sizeof number, "%llu]}", (unsigned long long)offset);
        text_puts(t, number);
    }
    text_puts(t, "}");
    while (!t->failed && t->length % 8) text_puts(t, " "); /* the tensors start 8-byte aligned */
}

static pipec_status write_all(pipec_pipeline *p, FILE *f, const text *h) {
    unsigned char length[8];
    for (int i = 0; i < 8; i++) length[i] = (unsigned char)((uint64_t)h->length >> (8 * i));
    if (fwrite(length, 1, 8, f) != 8 || fwrite(h->data, 1, h->length, f) != h->length)
        return fail(PIPEC_ERROR_IO, "cannot write the state: %s", strerror(errno));
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        size_t n = p->plan.buffers[i].nbytes;
        void *host = malloc(n ? n : 1);
        if (!host) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory saving `%s`", p->plan.buffers[i].name);
        pipec_status status = buffer_read(p, (int)i, host);
        if (status == PIPEC_OK && fwrite(host, 1, n, f) != n)
            status = fail(PIPEC_ERROR_IO, "cannot write the state: %s", strerror(errno));
        free(host);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}

pipec_status pipec_save_state(pipec_pipeline *p, const char *dir, uint64_t steps) {
    if (!p || !dir) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_save_state: the pipeline or dir is NULL");
    pipec_status status = make_dirs(dir);
    if (status == PIPEC_OK) status = pipec_synchronize(p);
    if (status != PIPEC_OK) return status;
    text h = {0};
    header(p, steps, &h);
    if (h.failed) {
        free(h.data);
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    char path[4096], tmp[4104];
    snprintf(path, sizeof path, "%s/%s", dir, STATE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) status = fail(PIPEC_ERROR_IO, "cannot write %s: %s", tmp, strerror(errno));
    if (status == PIPEC_OK && (status = enter(p)) == PIPEC_OK) {
        status = write_all(p, f, &h);
        leave(p);
    }
    if (f && fclose(f) != 0 && status == PIPEC_OK) status = fail(PIPEC_ERROR_IO, "cannot write %s", tmp);
    if (status == PIPEC_OK && rename(tmp, path) != 0)
        status = fail(PIPEC_ERROR_IO, "cannot write %s: %s", path, strerror(errno));
    if (status != PIPEC_OK && f) remove(tmp);
    free(h.data);
    return status;
}

/* The tensor of buffer `b` in the file, checked against the plan: its bytes' offset. */
static pipec_status check_tensor(const pipec_pipeline *p, const char *path, const json *head, const json *dtypes,
                                 const buffer_spec *b, size_t data_size, uint64_t *start) {
    const json *entry = json_get(head, b->name);
    const json *declared = json_get(dtypes, b->name), *shape = json_get(entry, "shape");
    const json *offsets = json_get(entry, "data_offsets"), *type = json_get(entry, "dtype");
    const char *saved_type = declared && declared->kind == JSON_STRING ? declared->string : dtype_name(b->type);
    int shape_ok = shape && shape->kind == JSON_ARRAY && shape->count == b->rank;
    for (size_t d = 0; shape_ok && d < b->rank; d++) shape_ok = shape->items[d].integer == b->shape[d];
    if (!shape_ok || strcmp(saved_type, dtype_name(b->type)) != 0 || !type || type->kind != JSON_STRING)
        return fail(PIPEC_ERROR_STATE, "%s: `%s` is saved as %s with another shape or type; the pipeline declares %s of "
                    "%llu bytes", path, b->name, saved_type, dtype_name(b->type), (unsigned long long)b->nbytes);
    if (!offsets || offsets->kind != JSON_ARRAY || offsets->count != 2 ||
        offsets->items[1].uinteger - offsets->items[0].uinteger != b->nbytes || offsets->items[1].uinteger > data_size)
        return fail(PIPEC_ERROR_STATE, "%s is not a safetensors file pipec can read (the offsets of `%s`)", path, b->name);
    *start = offsets->items[0].uinteger;
    (void)p;
    return PIPEC_OK;
}

static pipec_status check_names(const pipec_pipeline *p, const char *path, const json *head) {
    for (size_t i = 0; i < p->plan.buffer_count; i++)
        if (!json_get(head, p->plan.buffers[i].name))
            return fail(PIPEC_ERROR_STATE, "%s does not match %s: missing %s", path, p->plan.pipe, p->plan.buffers[i].name);
    for (size_t i = 0; i < head->count; i++)
        if (strcmp(head->keys[i], "__metadata__") != 0 && plan_buffer_index(&p->plan, head->keys[i]) < 0)
            return fail(PIPEC_ERROR_STATE, "%s does not match %s: unknown %s", path, p->plan.pipe, head->keys[i]);
    return PIPEC_OK;
}

static pipec_status restore(pipec_pipeline *p, const char *path, const unsigned char *data, size_t size) {
    uint64_t length = 0;
    for (int i = 0; size >= 8 && i < 8; i++) length |= (uint64_t)data[i] << (8 * i);
    if (size < 8 || length > size - 8)
        return fail(PIPEC_ERROR_STATE, "%s is not a safetensors file pipec can read (truncated header)", path);
    char error[256];
    json *head = json_parse((const char *)data + 8, (size_t)length, error, sizeof error);
    if (!head || head->kind != JSON_OBJECT) {
        json_free(head);
        return fail(PIPEC_ERROR_STATE, "%s is not a safetensors file pipec can read (%s)", path, head ? "header" : error);
    }
    const json *metadata = json_get(head, "__metadata__"), *saved = json_get(metadata, "dtypes");
    json *dtypes = saved && saved->kind == JSON_STRING ? json_parse(saved->string, strlen(saved->string), error, sizeof error) : NULL;
    pipec_status status = check_names(p, path, head);
    uint64_t *starts = calloc(p->plan.buffer_count ? p->plan.buffer_count : 1, sizeof *starts);
    if (!starts) status = fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; status == PIPEC_OK && i < p->plan.buffer_count; i++)
        status = check_tensor(p, path, head, dtypes, &p->plan.buffers[i], size - 8 - (size_t)length, &starts[i]);
    if (status == PIPEC_OK && (status = enter(p)) == PIPEC_OK) {
        for (size_t i = 0; status == PIPEC_OK && i < p->plan.buffer_count; i++)
            status = buffer_write(p, (int)i, data + 8 + length + starts[i]);
        if (status == PIPEC_OK) status = tables_fill(p); /* this process's addresses, not the saved ones */
        leave(p);
    }
    free(starts);
    json_free(dtypes);
    json_free(head);
    return status;
}

pipec_status pipec_load_state(pipec_pipeline *p, const char *dir) {
    if (!p || !dir) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_load_state: the pipeline or dir is NULL");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, STATE_FILE);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(PIPEC_ERROR_STATE, "no saved state at %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t got = data ? fread(data, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!data || got != (size_t)size) {
        free(data);
        return fail(PIPEC_ERROR_IO, "cannot read %s", path);
    }
    pipec_status status = pipec_synchronize(p);
    if (status == PIPEC_OK) status = restore(p, path, data, (size_t)size);
    free(data);
    return status;
}
