/* GEMM nodes through cuBLASLt (runtime/cublaslt.py, gemm_nodes.py, library.py), loaded with
 * dlopen when the first GEMM node is prepared. One cublasLtMatmul per node in cuBLASLt's
 * column-major terms: c^T = op(b)^T op(a)^T, so cuBLASLt's A is the program's b, its B the
 * program's a, every layout (rows = the program's cols, cols = the program's rows, ld). The
 * algorithm, chosen once per node when the eager program is prepared, is the one the bundle
 * stores for it where gemm_algorithms.c's rule and cublasLtMatmulAlgoCheck accept it, else the
 * heuristic's first answer within the node's workspace (gemm_nodes.py `_from_bundle`, in the
 * same words: pipec_gemm_at reports which and why). One call outside any recording follows (its
 * outputs saved and restored) so that the library's lazy set-up happens before the recording.
 * The graph records the call as library.c records every library node. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "text.h"

typedef int lt_status;
typedef void *lt_handle;
typedef struct lt_algo { uint64_t data[8]; } lt_algo;
typedef struct lt_heuristic {
    lt_algo algo;
    size_t workspace_size;
    int state;
    float waves_count;
    int reserved[4];
} lt_heuristic;

#define LT_ENTRY_POINTS(X) \
    X(Create, "cublasLtCreate", (lt_handle *handle)) \
    X(Destroy, "cublasLtDestroy", (lt_handle handle)) \
    X(DescCreate, "cublasLtMatmulDescCreate", (void **desc, int compute, int scale)) \
    X(DescSet, "cublasLtMatmulDescSetAttribute", (void *desc, int attribute, const void *value, size_t size)) \
    X(DescDestroy, "cublasLtMatmulDescDestroy", (void *desc)) \
    X(LayoutCreate, "cublasLtMatrixLayoutCreate", (void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld)) \
    X(LayoutSet, "cublasLtMatrixLayoutSetAttribute", (void *layout, int attribute, const void *value, size_t size)) \
    X(LayoutDestroy, "cublasLtMatrixLayoutDestroy", (void *layout)) \
    X(PreferenceCreate, "cublasLtMatmulPreferenceCreate", (void **preference)) \
    X(PreferenceSet, "cublasLtMatmulPreferenceSetAttribute", (void *preference, int attribute, const void *value, \
        size_t size)) \
    X(PreferenceDestroy, "cublasLtMatmulPreferenceDestroy", (void *preference)) \
    X(AlgoCheck, "cublasLtMatmulAlgoCheck", (lt_handle handle, void *desc, void *a, void *b, void *c, void *d, \
        const lt_algo *algo, lt_heuristic *result)) \
    X(Heuristic, "cublasLtMatmulAlgoGetHeuristic", (lt_handle handle, void *desc, void *a, void *b, void *c, void *d, \
        void *preference, int requested, lt_heuristic *results, int *returned)) \
    X(Matmul, "cublasLtMatmul", (lt_handle handle, void *desc, const void *alpha, CUdeviceptr a, void *adesc, \
        CUdeviceptr b, void *bdesc, const void *beta, CUdeviceptr c, void *cdesc, CUdeviceptr d, void *ddesc, \
        const lt_algo *algo, CUdeviceptr workspace, size_t workspace_bytes, CUstream stream))

enum { COMPUTE_32F = 68, COMPUTE_32F_FAST_TF32 = 77, CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum { DESC_COMPUTE_TYPE = 0, DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8,
       DESC_BIAS_BATCH_STRIDE = 10, DESC_AUX_POINTER = 11, DESC_AUX_LD = 12, DESC_AUX_BATCH_STRIDE = 13,
       DESC_BIAS_DATA_TYPE = 26 };
enum { LAYOUT_BATCH_COUNT = 5, LAYOUT_STRIDED_BATCH_OFFSET = 6 };
enum { PREF_MAX_WORKSPACE_BYTES = 1, PREF_MIN_ALIGNMENT_A = 5 };
#define MAX_ALIGNMENT 256

typedef struct gemm_op {
    const char *name;
    void *desc, *layouts[3];
    CUdeviceptr a, b, c, workspace;
    float alpha, beta;
    lt_algo algo;
    int stored; /* the bundle's algorithm runs */
    char *why;  /* how it was chosen, one line (pipec_gemm_at) */
} gemm_op;

struct gemms {
    void *library;
#define LT_FIELD(field, symbol, params) lt_status (*field) params;
    LT_ENTRY_POINTS(LT_FIELD)
#undef LT_FIELD
    size_t (*GetVersion)(void);
    lt_handle handle;
    gemm_op *ops;
    size_t count;
};

static pipec_status lt_failed(const node_spec *n, const char *call, lt_status status) {
    return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): %s failed: cuBLASLt status %d", n->name, n->location, call, status);
}
#define LT(n, call_expr, name) \
    do { lt_status lt_status_ = (call_expr); if (lt_status_ != 0) return lt_failed(n, name, lt_status_); } while (0)

static pipec_status open_library(pipec_pipeline *p, const node_spec *n) {
    gemms *g = p->gemms = calloc(1, sizeof *g);
    if (!g) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    const char *path = p->cublaslt_path[0] ? p->cublaslt_path : getenv("PIPEC_CUBLASLT_LIBRARY");
    const char *tried = path && *path ? path : "libcublasLt.so.13";
    g->library = dlopen(tried, RTLD_NOW | RTLD_LOCAL);
    if (!g->library && !(path && *path)) g->library = dlopen(tried = "libcublasLt.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!g->library)
        return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): GEMM nodes need cuBLASLt, and %s cannot be loaded (%s)",
                    n->name, n->location, tried, dlerror());
#define LT_LOAD(field, symbol, params) \
    if (!(*(void **)(&g->field) = dlsym(g->library, symbol))) \
        return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): %s has no %s", n->name, n->location, tried, symbol);
    LT_ENTRY_POINTS(LT_LOAD)
#undef LT_LOAD
    if (!(*(void **)(&g->GetVersion) = dlsym(g->library, "cublasLtGetVersion")))
        return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): %s has no cublasLtGetVersion", n->name, n->location, tried);
    LT(n, g->Create(&g->handle), "cublasLtCreate");
    return PIPEC_OK;
}

static int data_type(dtype t) { return t == DT_F16 ? CUDA_R_16F : t == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

static uint32_t alignment(CUdeviceptr pointer) {
    uint64_t lowest = pointer & (~pointer + 1);
    return pointer ? (uint32_t)(lowest < MAX_ALIGNMENT ? lowest : MAX_ALIGNMENT) : MAX_ALIGNMENT;
}

/* gemm.py epilogue_name, as cublasLtEpilogue_t values. */
static pipec_status epilogue(const node_spec *n, uint32_t *out) {
    const gemm_spec *g = n->gemm;
    static const struct { const char *name; uint32_t plain, with_aux; } FORWARD[] = {
        {"none", 1, 0}, {"relu", 2, 130}, {"gelu", 32, 160}, {"bias", 4, 0}, {"relu_bias", 6, 134},
        {"gelu_bias", 36, 164}};
    if (strcmp(g->epilogue, "drelu") == 0 || strcmp(g->epilogue, "dgelu") == 0) {
        if (!g->aux.present)
            return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): `%s` reads the forward pass's aux, and none is given",
                        n->name, n->location, g->epilogue);
        *out = (g->epilogue[1] == 'r' ? 136 : 192) | (g->bias_grad.present ? 16 : 0);
        return PIPEC_OK;
    }
    if (strcmp(g->epilogue, "bgrad_a") == 0) {
        *out = 512; /* BGRADB: the program's a is cuBLASLt's B */
        return PIPEC_OK;
    }
    for (size_t i = 0; i < sizeof FORWARD / sizeof *FORWARD; i++) {
        if (strcmp(g->epilogue, FORWARD[i].name) != 0) continue;
        if (g->aux.present && !FORWARD[i].with_aux)
            return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): the epilogue `%s` stores no aux", n->name, n->location,
                        g->epilogue);
        *out = g->aux.present ? FORWARD[i].with_aux : FORWARD[i].plain;
        return PIPEC_OK;
    }
    return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): unknown epilogue `%s`", n->name, n->location, g->epilogue);
}

static CUdeviceptr matrix_pointer(const pipec_pipeline *p, const matrix_spec *m) {
    return m->present ? buffer_pointer(p, m->buffer, m->byte_offset) : 0;
}

static pipec_status describe(pipec_pipeline *p, const node_spec *n, gemm_op *op) {
    gemms *lt = p->gemms;
    const gemm_spec *g = n->gemm;
    uint32_t epi;
    pipec_status status = epilogue(n, &epi);
    if (status != PIPEC_OK) return status;
    LT(n, lt->DescCreate(&op->desc, g->tf32 ? COMPUTE_32F_FAST_TF32 : COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    int32_t trans_a = g->trans_b, trans_b = g->trans_a;
    LT(n, lt->DescSet(op->desc, DESC_TRANSA, &trans_a, 4), "cublasLtMatmulDescSetAttribute");
    LT(n, lt->DescSet(op->desc, DESC_TRANSB, &trans_b, 4), "cublasLtMatmulDescSetAttribute");
    LT(n, lt->DescSet(op->desc, DESC_EPILOGUE, &epi, 4), "cublasLtMatmulDescSetAttribute");
    const matrix_spec *vector = g->bias.present ? &g->bias : g->bias_grad.present ? &g->bias_grad : NULL;
    if (vector) {
        uint64_t pointer = matrix_pointer(p, vector);
        int32_t type = data_type(vector->type);
        int64_t stride = vector->batch_stride;
        LT(n, lt->DescSet(op->desc, DESC_BIAS_POINTER, &pointer, 8), "cublasLtMatmulDescSetAttribute");
        LT(n, lt->DescSet(op->desc, DESC_BIAS_DATA_TYPE, &type, 4), "cublasLtMatmulDescSetAttribute");
        LT(n, lt->DescSet(op->desc, DESC_BIAS_BATCH_STRIDE, &stride, 8), "cublasLtMatmulDescSetAttribute");
    }
    if (g->aux.present) {
        uint64_t pointer = matrix_pointer(p, &g->aux);
        int64_t ld = g->aux.ld, stride = g->aux.batch_stride;
        LT(n, lt->DescSet(op->desc, DESC_AUX_POINTER, &pointer, 8), "cublasLtMatmulDescSetAttribute");
        LT(n, lt->DescSet(op->desc, DESC_AUX_LD, &ld, 8), "cublasLtMatmulDescSetAttribute");
        LT(n, lt->DescSet(op->desc, DESC_AUX_BATCH_STRIDE, &stride, 8), "cublasLtMatmulDescSetAttribute");
    }
    const matrix_spec *matrices[3] = {&g->b, &g->a, &g->c};
    for (int i = 0; i < 3; i++) {
        const matrix_spec *m = matrices[i];
        LT(n, lt->LayoutCreate(&op->layouts[i], data_type(m->type), (uint64_t)m->cols, (uint64_t)m->rows, m->ld),
           "cublasLtMatrixLayoutCreate");
        if (g->batch > 1) {
            int32_t batch = (int32_t)g->batch;
            int64_t stride = m->batch_stride;
            LT(n, lt->LayoutSet(op->layouts[i], LAYOUT_BATCH_COUNT, &batch, 4), "cublasLtMatrixLayoutSetAttribute");
            LT(n, lt->LayoutSet(op->layouts[i], LAYOUT_STRIDED_BATCH_OFFSET, &stride, 8),
               "cublasLtMatrixLayoutSetAttribute");
        }
    }
    return PIPEC_OK;
}

static pipec_status heuristic(pipec_pipeline *p, const node_spec *n, gemm_op *op, const uint32_t alignments[4]) {
    gemms *lt = p->gemms;
    void *preference = NULL;
    LT(n, lt->PreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    uint64_t workspace = n->gemm->workspace_bytes;
    lt_status status = lt->PreferenceSet(preference, PREF_MAX_WORKSPACE_BYTES, &workspace, 8);
    for (int i = 0; i < 4 && status == 0; i++)
        status = lt->PreferenceSet(preference, PREF_MIN_ALIGNMENT_A + i, &alignments[i], 4);
    lt_heuristic result;
    memset(&result, 0, sizeof result);
    int returned = 0;
    if (status == 0)
        status = lt->Heuristic(lt->handle, op->desc, op->layouts[0], op->layouts[1], op->layouts[2], op->layouts[2],
                               preference, 1, &result, &returned);
    lt->PreferenceDestroy(preference);
    if (status != 0)
        return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): cuBLASLt cannot serve this GEMM (m=%lld n=%lld k=%lld "
                    "batch=%lld): status %d", n->name, n->location, (long long)n->gemm->m, (long long)n->gemm->n,
                    (long long)n->gemm->k, (long long)n->gemm->batch, status);
    if (returned < 1 || result.state != 0)
        return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s): cuBLASLt has no algorithm for this GEMM (m=%lld n=%lld "
                    "k=%lld batch=%lld)", n->name, n->location, (long long)n->gemm->m, (long long)n->gemm->n,
                    (long long)n->gemm->k, (long long)n->gemm->batch);
    op->algo = result.algo;
    return PIPEC_OK;
}

/* Whether cuBLASLt runs `algo` for the node (cublasLtMatmulAlgoCheck against its descriptor and
 * layouts, within its workspace); why not appended to `why` (gemm_nodes.py `_refusal`). */
static int accepted(const gemms *lt, const node_spec *n, const gemm_op *op, const lt_algo *algo, text *why) {
    lt_heuristic result;
    memset(&result, 0, sizeof result);
    lt_status status = lt->AlgoCheck(lt->handle, op->desc, op->layouts[0], op->layouts[1], op->layouts[2],
                                     op->layouts[2], algo, &result);
    char line[160];
    if (status != 0 || result.state != 0)
        snprintf(line, sizeof line, "cublasLtMatmulAlgoCheck refuses the stored algorithm (cuBLAS status %d)",
                 status != 0 ? status : result.state);
    else if (result.workspace_size > n->gemm->workspace_bytes)
        snprintf(line, sizeof line, "the stored algorithm needs %zu bytes of workspace, and the node has %llu",
                 result.workspace_size, (unsigned long long)n->gemm->workspace_bytes);
    else
        return 1;
    text_puts(why, line);
    return 0;
}

static pipec_status choose(pipec_pipeline *p, const node_spec *n, gemm_op *op) {
    const gemms *lt = p->gemms;
    uint32_t alignments[4] = {alignment(op->a), alignment(op->b), alignment(op->c), alignment(op->c)};
    const char *chosen_by = NULL;
    text reason = {0}, why = {0};
    const unsigned char *stored = stored_gemm_for(p, n->name, lt->GetVersion(), alignments, &chosen_by, &reason);
    lt_algo algo;
    if (stored) memcpy(&algo, stored, sizeof algo);
    op->stored = stored && accepted(lt, n, op, &algo, &reason);
    pipec_status status = PIPEC_OK;
    if (op->stored) {
        op->algo = algo;
        text_puts(&why, "stored (");
        text_puts(&why, chosen_by);
        text_puts(&why, ")");
    } else {
        status = heuristic(p, n, op, alignments);
        text_puts(&why, "heuristic: ");
        text_puts(&why, reason.data ? reason.data : "");
    }
    free(reason.data);
    op->why = why.data;
    if (status == PIPEC_OK && (reason.failed || why.failed))
        status = fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    return status;
}

static gemm_op *find_op(const pipec_pipeline *p, const char *name) {
    for (size_t i = 0; p->gemms && i < p->gemms->count; i++)
        if (strcmp(p->gemms->ops[i].name, name) == 0) return &p->gemms->ops[i];
    return NULL;
}

static pipec_status enqueue(pipec_pipeline *p, const node_spec *n, const gemm_op *op, CUstream stream) {
    gemms *lt = p->gemms;
    LT(n, lt->Matmul(lt->handle, op->desc, &op->alpha, op->a, op->layouts[0], op->b, op->layouts[1], &op->beta, op->c,
                     op->layouts[2], op->c, op->layouts[2], &op->algo, op->workspace, n->gemm->workspace_bytes, stream),
       "cublasLtMatmul");
    return PIPEC_OK;
}

/* One call outside any recording, what the node writes (but its workspace) saved before and
 * restored after (gemms.py `_first_call`). */
static pipec_status first_call(pipec_pipeline *p, const node_spec *n, const gemm_op *op) {
    size_t count = 0;
    CUdeviceptr (*saved)[3] = calloc(n->access_count ? n->access_count : 1, sizeof *saved);
    if (!saved) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    pipec_status status = PIPEC_OK;
    for (size_t i = 0; i < n->access_count && status == PIPEC_OK; i++) {
        const access_spec *a = &n->accesses[i];
        if (!a->writes || a->buffer == n->gemm->workspace) continue;
        size_t size = dtype_size(p->plan.buffers[a->buffer].type);
        CUdeviceptr address = buffer_pointer(p, a->buffer, a->start * (int64_t)size), copy;
        size_t nbytes = (size_t)(a->stop - a->start) * size;
        CUresult r = p->driver.MemAlloc(&copy, nbytes);
        if (r != CUDA_SUCCESS) { status = fail_cuda(&p->driver, "cuMemAlloc", r, n->name); break; }
        saved[count][0] = address, saved[count][1] = copy, saved[count][2] = nbytes;
        count++;
        r = p->driver.MemcpyDtoDAsync(copy, address, nbytes, p->stream);
        if (r != CUDA_SUCCESS) status = fail_cuda(&p->driver, "cuMemcpyDtoDAsync", r, n->name);
    }
    int restore = status == PIPEC_OK;
    if (restore) status = enqueue(p, n, op, p->stream);
    for (size_t i = 0; i < count && restore; i++) {
        CUresult r = p->driver.MemcpyDtoDAsync(saved[i][0], saved[i][1], saved[i][2], p->stream);
        if (r != CUDA_SUCCESS && status == PIPEC_OK) status = fail_cuda(&p->driver, "cuMemcpyDtoDAsync", r, n->name);
    }
    pipec_status waited = stream_wait(p, n->name);
    if (status == PIPEC_OK) status = waited;
    for (size_t i = 0; i < count; i++) p->driver.MemFree(saved[i][1]);
    free(saved);
    return status;
}

static void release_op(gemms *lt, gemm_op *op) {
    for (int i = 0; i < 3; i++)
        if (op->layouts[i]) lt->LayoutDestroy(op->layouts[i]);
    if (op->desc) lt->DescDestroy(op->desc);
    free(op->why);
}

pipec_status gemm_prepare(pipec_pipeline *p, const node_spec *n) {
    if (find_op(p, n->name)) return PIPEC_OK;
    pipec_status status = p->gemms ? PIPEC_OK : open_library(p, n);
    if (status != PIPEC_OK) return status;
    gemms *lt = p->gemms;
    gemm_op *ops = realloc(lt->ops, (lt->count + 1) * sizeof *ops);
    if (!ops) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    lt->ops = ops;
    gemm_op *op = &ops[lt->count];
    memset(op, 0, sizeof *op);
    const gemm_spec *g = n->gemm;
    op->name = n->name;
    op->a = matrix_pointer(p, &g->b), op->b = matrix_pointer(p, &g->a), op->c = matrix_pointer(p, &g->c);
    op->workspace = buffer_pointer(p, g->workspace, 0);
    op->alpha = (float)g->alpha, op->beta = (float)g->beta;
    status = describe(p, n, op);
    if (status == PIPEC_OK) status = choose(p, n, op);
    if (status == PIPEC_OK) status = first_call(p, n, op);
    if (status != PIPEC_OK) {
        release_op(lt, op);
        return status;
    }
    lt->count++;
    return PIPEC_OK;
}

pipec_status gemm_enqueue(pipec_pipeline *p, const node_spec *n, CUstream stream) {
    const gemm_op *op = find_op(p, n->name);
    if (!op) return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s) was not prepared", n->name, n->location);
    return enqueue(p, n, op, stream);
}

pipec_status gemm_record(pipec_pipeline *p, const node_spec *n, CUgraph *out) {
    if (!find_op(p, n->name)) return fail(PIPEC_ERROR_LIBRARY, "gemm `%s` (%s) was not prepared", n->name, n->location);
    return library_record(p, n, "gemm", gemm_enqueue, 0, out);
}

void gemms_close(pipec_pipeline *p) {
    gemms *lt = p->gemms;
    if (!lt) return;
    for (size_t i = 0; i < lt->count; i++) release_op(lt, &lt->ops[i]);
    free(lt->ops);
    if (lt->handle) lt->Destroy(lt->handle);
    if (lt->library) dlclose(lt->library);
    free(lt);
    p->gemms = NULL;
}

size_t pipec_gemm_count(const pipec_pipeline *p) { return p && p->gemms ? p->gemms->count : 0; }

pipec_status pipec_gemm_at(const pipec_pipeline *p, size_t index, const char **node, int *stored, const char **why) {
    if (!p) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_gemm_at: the pipeline is NULL");
    if (index >= pipec_gemm_count(p))
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "GEMM node %zu does not exist (%zu GEMM nodes)", index,
                    pipec_gemm_count(p));
    const gemm_op *op = &p->gemms->ops[index];
    if (node) *node = op->name;
    if (stored) *stored = op->stored;
    if (why) *why = op->why;
    return PIPEC_OK;
}
