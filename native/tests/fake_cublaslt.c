/* A fake cuBLASLt for the C runtime's CPU tests: the C counterpart of tests/fake_cublaslt.py.
 * It keeps every descriptor and layout with the attributes set on it, answers the heuristic
 * with algorithm 1 (every 64-bit word of the algorithm holds 1, as the Python fake's first),
 * accepts in cublasLtMatmulAlgoCheck the algorithms whose first word is 1, 2 or 3 (the Python
 * fake's three), saying they need their second word's bytes of workspace, and records each
 * cublasLtMatmul in $FAKE_CUDA_LOG with the attributes it was called with; a
 * matmul enqueues one kernel, cublasLt_fake_gemm, on its stream (fake_cuda.c), so a recording
 * holds one kernel node. It computes nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cuda_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_ATTRIBUTES 32

CUresult fake_cuda_enqueue_kernel(CUstream stream, const char *function, unsigned gx, unsigned bx);

typedef struct attributes {
    int set[MAX_ATTRIBUTES];
    long long value[MAX_ATTRIBUTES];
} attributes;

static int handles, descs, layouts, preferences;

/* Signed attributes, as tests/fake_cublaslt.py's SIGNED reads them. */
static long long read_value(const void *buffer, size_t size, int is_signed) {
    long long v = 0;
    if (is_signed && size == 4) { int32_t x; memcpy(&x, buffer, 4); return x; }
    if (is_signed && size == 8) { int64_t x; memcpy(&x, buffer, 8); return x; }
    memcpy(&v, buffer, size < 8 ? size : 8);
    return v;
}

static int set(attributes *a, int attribute, const void *buffer, size_t size, int is_signed) {
    if (attribute < 0 || attribute >= MAX_ATTRIBUTES) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    a->set[attribute] = 1;
    a->value[attribute] = read_value(buffer, size, is_signed);
    return 0;
}

EXPORT int cublasLtCreate(void **handle) { *handle = malloc(1); handles++; return 0; }
EXPORT int cublasLtDestroy(void *handle) { free(handle); handles--; return 0; }
EXPORT size_t cublasLtGetVersion(void) { return 130100; }

EXPORT int cublasLtMatmulDescCreate(void **desc, int compute, int scale) {
    attributes *a = calloc(1, sizeof *a);
    a->set[0] = a->set[1] = 1;
    a->value[0] = compute, a->value[1] = scale;
    descs++;
    *desc = a;
    return 0;
}
EXPORT int cublasLtMatmulDescSetAttribute(void *desc, int attribute, const void *buffer, size_t size) {
    static const int SIGNED[] = {0, 1, 3, 4, 10, 12, 13, 26};
    int is_signed = 0;
    for (size_t i = 0; i < sizeof SIGNED / sizeof *SIGNED; i++) is_signed |= SIGNED[i] == attribute;
    return set(desc, attribute, buffer, size, is_signed);
}
EXPORT int cublasLtMatmulDescDestroy(void *desc) { free(desc); descs--; return 0; }

EXPORT int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    attributes *a = calloc(1, sizeof *a);
    a->set[0] = a->set[2] = a->set[3] = a->set[4] = 1;
    a->value[0] = type, a->value[2] = (long long)rows, a->value[3] = (long long)cols, a->value[4] = ld;
    layouts++;
    *layout = a;
    return 0;
}
EXPORT int cublasLtMatrixLayoutSetAttribute(void *layout, int attribute, const void *buffer, size_t size) {
    return set(layout, attribute, buffer, size, attribute == 4 || attribute == 5 || attribute == 6);
}
EXPORT int cublasLtMatrixLayoutDestroy(void *layout) { free(layout); layouts--; return 0; }

EXPORT int cublasLtMatmulPreferenceCreate(void **preference) { *preference = calloc(1, sizeof(attributes)); preferences++; return 0; }
EXPORT int cublasLtMatmulPreferenceSetAttribute(void *preference, int attribute, const void *buffer, size_t size) {
    return set(preference, attribute, buffer, size, 0);
}
EXPORT int cublasLtMatmulPreferenceDestroy(void *preference) { free(preference); preferences--; return 0; }

typedef struct heuristic { uint64_t algo[8]; size_t workspace; int state; float waves; int reserved[4]; } heuristic;

EXPORT int cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *a, void *b, void *c, void *d, void *preference,
                                          int requested, heuristic *results, int *returned) {
    if (!handle || !desc || !a || !b || !c || !d || !preference || requested < 1) return 7;
    memset(results, 0, sizeof *results);
    for (int i = 0; i < 8; i++) results[0].algo[i] = 1;
    *returned = 1;
    return 0;
}

EXPORT int cublasLtMatmulAlgoCheck(void *handle, void *desc, void *a, void *b, void *c, void *d, const uint64_t *algo,
                                   heuristic *result) {
    if (!handle || !desc || !a || !b || !c || !d || !algo || !result) return 7;
    if (algo[0] < 1 || algo[0] > 3) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    memset(result, 0, sizeof *result);
    memcpy(result->algo, algo, sizeof result->algo);
    result->workspace = (size_t)algo[1];
    return 0;
}

static void put_attributes(FILE *f, const attributes *a) {
    fprintf(f, "{");
    for (int i = 0, first = 1; i < MAX_ATTRIBUTES; i++)
        if (a->set[i]) {
            fprintf(f, "%s\"%d\":%lld", first ? "" : ",", i, a->value[i]);
            first = 0;
        }
    fprintf(f, "}");
}

EXPORT int cublasLtMatmul(void *handle, void *desc, const float *alpha, CUdeviceptr a, void *adesc, CUdeviceptr b,
                          void *bdesc, const float *beta, CUdeviceptr c, void *cdesc, CUdeviceptr d, void *ddesc,
                          const uint64_t *algo, CUdeviceptr workspace, size_t workspace_bytes, CUstream stream) {
    if (!handle) return 7;
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "{\"event\":\"matmul\",\"desc\":");
        put_attributes(f, desc);
        fprintf(f, ",\"layouts\":[");
        void *all[4] = {adesc, bdesc, cdesc, ddesc};
        for (int i = 0; i < 4; i++) {
            if (i) fprintf(f, ",");
            put_attributes(f, all[i]);
        }
        fprintf(f, "],\"alpha\":%.9g,\"beta\":%.9g,\"pointers\":[%llu,%llu,%llu,%llu],\"algorithm\":\"", *alpha, *beta,
                (unsigned long long)a, (unsigned long long)b, (unsigned long long)c, (unsigned long long)d);
        const unsigned char *bytes = (const unsigned char *)algo;
        for (int i = 0; i < 64; i++) fprintf(f, "%02x", bytes[i]);
        fprintf(f, "\",\"workspace\":%llu,\"workspace_bytes\":%zu}\n", (unsigned long long)workspace, workspace_bytes);
        fclose(f);
    }
    return fake_cuda_enqueue_kernel(stream, "cublasLt_fake_gemm", 1, 128) == 0 ? 0 : 13;
}

EXPORT void fake_cublaslt_live(int counts[4]) {
    counts[0] = handles, counts[1] = descs, counts[2] = layouts, counts[3] = preferences;
}
