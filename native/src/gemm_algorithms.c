/* The bundle's stored GEMM algorithms (plan/gemm_algorithms.py): gemm_algorithms.json, written by
 * `pipec build --gemm-algorithms`, read and checked at open before the device is touched, and the
 * first steps of the rule by which a node runs its stored algorithm, in the words of
 * plan/gemm_algorithms.py `stored_for`: the algorithm must have been chosen on this GPU (name,
 * architecture, multiprocessors) and this cuBLASLt, for operands no more aligned than they are
 * here. gemm.c then asks cublasLtMatmulAlgoCheck, and falls back on the heuristic. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "text.h"

#define FILE_NAME "gemm_algorithms.json"
#define ALGORITHM_BYTES 64 /* sizeof(cublasLtMatmulAlgo_t) */

typedef struct stored_gemm {
    const char *node, *chosen_by; /* point into the document */
    unsigned char algorithm[ALGORITHM_BYTES];
    int64_t alignments[4]; /* bytes, of cuBLASLt's A, B, C and D when it was chosen */
} stored_gemm;

typedef struct gpu_choices { /* one GPU's algorithms */
    const char *name, *arch;
    int64_t multiprocessors, cublaslt;
    stored_gemm *gemms;
    size_t count;
} gpu_choices;

struct stored_gemms {
    json *document;
    gpu_choices *gpus;
    size_t count;
};

static void put(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *format, ...) {
    char line[512];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    text_puts(t, line);
}

static int positive(const json *v) { return v && v->kind == JSON_NUMBER && v->is_integer && v->integer > 0; }

/* Whether `name` is a GEMM node of the plan; else a one-line error listing the first four. */
static pipec_status gemm_node(const char *where, size_t gpu, const plan *pl, const char *name) {
    text listed = {0};
    size_t count = 0;
    for (size_t g = 0; g < pl->graph_count; g++)
        for (size_t i = 0; i < pl->graphs[g].node_count; i++) {
            const node_spec *n = &pl->graphs[g].nodes[i];
            if (n->kind != NODE_GEMM) continue;
            if (strcmp(n->name, name) == 0) {
                free(listed.data);
                return PIPEC_OK;
            }
            if (count < 4) put(&listed, "%s`%s`", count ? ", " : "its GEMM nodes: ", n->name);
            count++;
        }
    if (count > 4) text_puts(&listed, ", ...");
    pipec_status status = fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: `%s` is not a GEMM node of the plan (%s)", where,
                               gpu, name, count ? (listed.data ? listed.data : "") : "it has none");
    free(listed.data);
    return status;
}

static int hex_digit(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

static pipec_status read_entry(const char *where, size_t gpu, const char *node, const json *e, const plan *pl,
                               stored_gemm *out) {
    pipec_status status = gemm_node(where, gpu, pl, node);
    if (status != PIPEC_OK) return status;
    const json *algorithm = json_get(e, "algorithm"), *alignments = json_get(e, "alignments");
    const json *chosen_by = json_get(e, "chosen_by");
    const char *hex = algorithm && algorithm->kind == JSON_STRING ? algorithm->string : NULL;
    size_t digits = hex ? strlen(hex) : 0;
    int is_hex = hex && digits % 2 == 0;
    for (size_t i = 0; is_hex && i < digits; i++) is_hex = hex_digit(hex[i]) >= 0;
    if (!is_hex)
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: gemm `%s`: `algorithm` is not hex (the bytes of a "
                    "cublasLtMatmulAlgo_t)", where, gpu, node);
    if (digits != 2 * ALGORITHM_BYTES)
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: gemm `%s`: `algorithm` holds %zu bytes; a "
                    "cublasLtMatmulAlgo_t has %d (%d hex digits)", where, gpu, node, digits / 2, ALGORITHM_BYTES,
                    2 * ALGORITHM_BYTES);
    for (int i = 0; i < ALGORITHM_BYTES; i++)
        out->algorithm[i] = (unsigned char)(hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1]));
    int aligned = alignments && alignments->kind == JSON_ARRAY && alignments->count == 4;
    for (size_t i = 0; aligned && i < 4; i++) {
        const json *a = &alignments->items[i];
        aligned = positive(a) && a->integer <= 256 && (a->integer & (a->integer - 1)) == 0;
        if (aligned) out->alignments[i] = a->integer;
    }
    if (!aligned)
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: gemm `%s`: `alignments` is not four powers of two up to "
                    "256 (bytes of A, B, C and D)", where, gpu, node);
    if (!chosen_by || chosen_by->kind != JSON_STRING ||
        (strcmp(chosen_by->string, "heuristic") != 0 && strcmp(chosen_by->string, "tune") != 0))
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: gemm `%s`: `chosen_by` is not one of heuristic, tune", where,
                    gpu, node);
    out->node = node;
    out->chosen_by = chosen_by->string;
    return PIPEC_OK;
}

static int is_arch(const json *v) {
    if (!v || v->kind != JSON_STRING || strncmp(v->string, "sm_", 3) != 0) return 0;
    const char *c = v->string + 3;
    if (*c < '0' || *c > '9') return 0;
    while (*c >= '0' && *c <= '9') c++;
    return (*c == 'a' || *c == 'f') ? c[1] == 0 : *c == 0;
}

static pipec_status read_gpu(const char *where, size_t index, const json *c, const plan *pl, gpu_choices *out) {
    const json *device = json_get(c, "device"), *entries = json_get(c, "gemms");
    const json *name = json_get(device, "name");
    if (!name || name->kind != JSON_STRING || !*name->string || !is_arch(json_get(device, "arch")) ||
        !positive(json_get(device, "multiprocessors")))
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: `device` is not {\"name\": ..., \"arch\": \"sm_XY\", "
                    "\"multiprocessors\": N}", where, index);
    if (!positive(json_get(c, "cublaslt")))
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: `cublaslt` is not cuBLASLt's version (a positive integer)",
                    where, index);
    if (!entries || entries->kind != JSON_OBJECT)
        return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: `gemms` is not an object of GEMM nodes", where, index);
    out->name = name->string;
    out->arch = json_get(device, "arch")->string;
    out->multiprocessors = json_get(device, "multiprocessors")->integer;
    out->cublaslt = json_get(c, "cublaslt")->integer;
    out->gemms = calloc(entries->count ? entries->count : 1, sizeof *out->gemms);
    if (!out->gemms) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < entries->count; i++) {
        if (entries->items[i].kind != JSON_OBJECT)
            return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu]: gemm `%s` is not an object", where, index,
                        entries->keys[i]);
        pipec_status status = read_entry(where, index, entries->keys[i], &entries->items[i], pl, &out->gemms[i]);
        if (status != PIPEC_OK) return status;
        out->count++;
    }
    return PIPEC_OK;
}

static pipec_status read_all(const char *where, const bundle_file *f, const plan *pl, stored_gemms *s) {
    char error[256];
    s->document = json_parse((const char *)f->data, f->size, error, sizeof error);
    if (!s->document) return fail(PIPEC_ERROR_BUNDLE, "%s is not JSON: %s", where, error);
    const json *choices = json_get(s->document, "choices");
    if (!choices || choices->kind != JSON_ARRAY) return fail(PIPEC_ERROR_BUNDLE, "%s has no `choices` list", where);
    s->gpus = calloc(choices->count ? choices->count : 1, sizeof *s->gpus);
    if (!s->gpus) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < choices->count; i++) {
        if (choices->items[i].kind != JSON_OBJECT)
            return fail(PIPEC_ERROR_BUNDLE, "%s: choices[%zu] is not an object", where, i);
        s->count++; /* counted before it is filled: freed whole on failure */
        pipec_status status = read_gpu(where, i, &choices->items[i], pl, &s->gpus[i]);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}

void stored_gemms_free(pipec_pipeline *p) {
    stored_gemms *s = p->stored_gemms;
    if (!s) return;
    for (size_t i = 0; i < s->count; i++) free(s->gpus[i].gemms);
    free(s->gpus);
    json_free(s->document);
    free(s);
    p->stored_gemms = NULL;
}

pipec_status stored_gemms_read(pipec_pipeline *p) {
    const bundle_file *f = bundle_find(&p->bundle, FILE_NAME);
    if (!f) return PIPEC_OK;
    if (!(p->stored_gemms = calloc(1, sizeof *p->stored_gemms)))
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    size_t size = strlen(p->bundle.where) + sizeof FILE_NAME + 1;
    char *where = malloc(size);
    if (!where) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    snprintf(where, size, "%s/%s", p->bundle.where, FILE_NAME);
    pipec_status status = read_all(where, f, &p->plan, p->stored_gemms);
    free(where);
    return status; /* on failure the pipeline's close frees what was read */
}

static void describe(text *t, const char *name, const char *arch, int64_t multiprocessors, int64_t cublaslt) {
    put(t, "%s (%s, %lld SMs, cuBLASLt %lld)", name, arch, (long long)multiprocessors, (long long)cublaslt);
}

const unsigned char *stored_gemm_for(const pipec_pipeline *p, const char *node, uint64_t cublaslt,
                                     const uint32_t alignments[4], const char **chosen_by, text *why) {
    const stored_gemms *s = p->stored_gemms;
    if (!s || !s->count) {
        text_puts(why, "the bundle stores no GEMM algorithms");
        return NULL;
    }
    const gpu_choices *gpu = NULL;
    for (size_t i = 0; i < s->count && !gpu; i++) {
        const gpu_choices *c = &s->gpus[i];
        if (strcmp(c->name, p->device_name) == 0 && strcmp(c->arch, p->arch) == 0 &&
            c->multiprocessors == p->multiprocessors && (uint64_t)c->cublaslt == cublaslt)
            gpu = c;
    }
    if (!gpu) {
        text_puts(why, "the bundle's GEMM algorithms were chosen on ");
        for (size_t i = 0; i < s->count; i++) {
            if (i) text_puts(why, "; ");
            describe(why, s->gpus[i].name, s->gpus[i].arch, s->gpus[i].multiprocessors, s->gpus[i].cublaslt);
        }
        text_puts(why, ", and this is ");
        describe(why, p->device_name, p->arch, p->multiprocessors, (int64_t)cublaslt);
        return NULL;
    }
    const stored_gemm *entry = NULL;
    for (size_t i = 0; i < gpu->count && !entry; i++)
        if (strcmp(gpu->gemms[i].node, node) == 0) entry = &gpu->gemms[i];
    if (!entry) {
        text_puts(why, "the bundle stores none for this node on this GPU");
        return NULL;
    }
    for (int i = 0; i < 4; i++)
        if (alignments[i] < entry->alignments[i]) {
            put(why, "its operands (cuBLASLt's A, B, C, D) are aligned to %u/%u/%u/%u bytes here, and the stored "
                "algorithm was chosen for %lld/%lld/%lld/%lld", alignments[0], alignments[1], alignments[2],
                alignments[3], (long long)entry->alignments[0], (long long)entry->alignments[1],
                (long long)entry->alignments[2], (long long)entry->alignments[3]);
            return NULL;
        }
    *chosen_by = entry->chosen_by;
    return entry->algorithm;
}
