/* A fake NCCL for the C runtime's CPU tests: the C counterpart of tests/fake_nccl.py. A
 * communicator is rank `rank` of `size` (ncclCommInitRank's arguments), and its calls act on the
 * fake device memory as if every other rank held the same data as this one: a sum over W ranks
 * is W times this rank's values, a gather W copies, a reduce-scatter this rank's slice times W
 * (sum) or once (avg, max, min). Each call is logged in $FAKE_CUDA_LOG ("nccl" events: the
 * call, count, type, reduction or root, both addresses, whether its stream was capturing and
 * whether it was in a group) and enqueues one kernel on its stream, ncclDevKernel_<call>, which
 * does the call's work when it runs; between ncclGroupStart and ncclGroupEnd the calls wait,
 * and the group end enqueues them as one kernel, ncclDevKernel_group, as NCCL runs a group. A
 * communicator of one rank takes NCCL's one-rank path instead (ncclLaunchOneRank, NCCL 2.28), at
 * once, in a group or not: an out-of-place call is one copy (cudaMemcpyAsync with
 * cudaMemcpyDefault, whose node gives both ends as unified addresses), an in-place one does
 * nothing, and a float average is NCCL's one-rank kernel, oneRankReduce.
 *
 * Failures, by environment: FAKE_NCCL_STALL_AT=N makes the N-th collective kernel that runs
 * never finish (a rank that stopped: fake_cuda.c's device is stuck until an abort);
 * FAKE_NCCL_ERROR_AT=N does the same and makes ncclCommGetAsyncError report ncclRemoteError (a
 * peer that died); FAKE_NCCL_PEER_DIFFERS=1 makes a u32 max see a peer whose every word differs
 * in its lowest bit (another rank's plan, at the collective-sequence check). ncclCommAbort
 * unsticks the device and then waits, as NCCL does, until no executable graph is left (a
 * recording holds a reference to the communicator). f16 sums over several ranks are not
 * computed (no fixture has one): the call is refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/cuda_abi.h"

#define EXPORT __attribute__((visibility("default")))

enum { SUCCESS = 0, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, REMOTE_ERROR = 6 };
enum { I8, U8, I32, U32, I64, U64, F16, F32, F64, BF16 };
enum { SUM = 0, PROD = 1, MAX = 2, MIN = 3, AVG = 4 };
enum { ALLREDUCE, BROADCAST, ALLGATHER, REDUCESCATTER };
static const char *const CALLS[] = {"allreduce", "broadcast", "allgather", "reducescatter"};
static const char *const KERNELS[] = {"ncclDevKernel_allreduce", "ncclDevKernel_broadcast", "ncclDevKernel_allgather",
                                      "ncclDevKernel_reducescatter"};
static const char *const TYPES[] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16"};
static const char *const OPS[] = {"sum", "prod", "max", "min", "avg"};
static const size_t SIZES[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

CUresult fake_cuda_enqueue_effect(CUstream stream, const char *function,
                                  void (*effect)(const unsigned char *, size_t), const void *data, size_t size);
CUresult fake_cuda_enqueue_copy(CUstream stream, uint64_t dst, uint64_t src, size_t bytes);
int fake_cuda_capturing(CUstream stream);
void fake_cuda_set_stuck(int stuck);
void fake_cuda_live(int counts[6]);

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct comm { int rank, size; } comm;

/* One call's work, as the kernel that runs it carries it. */
typedef struct operation {
    int call, type, op, root, rank, size;
    uint64_t src, dst, count;
} operation;

static operation group[64];
static int group_depth, group_count;
static CUstream group_stream;
static int kernels_run, async_error, comms;

static int environment(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : 0;
}

/* Element i of `type` at `base` times `factor`, wrapping as NumPy's arrays do (bf16 travels as
 * its raw bits, so its bits are multiplied, as tests/fake_nccl.py's uint16 arrays are). */
static void scaled(int type, unsigned char *dst, const unsigned char *src, uint64_t factor) {
    if (type == F32) { float v; memcpy(&v, src, 4); v *= (float)factor; memcpy(dst, &v, 4); return; }
    if (type == F64) { double v; memcpy(&v, src, 8); v *= (double)factor; memcpy(dst, &v, 8); return; }
    uint64_t v = 0;
    memcpy(&v, src, SIZES[type]);
    v *= factor;
    memcpy(dst, &v, SIZES[type]);
}

static void apply(const operation *o) {
    size_t size = SIZES[o->type];
    unsigned char *src = (unsigned char *)(uintptr_t)o->src, *dst = (unsigned char *)(uintptr_t)o->dst;
    uint64_t factor = o->op == SUM ? (uint64_t)o->size : 1;
    if (o->call == BROADCAST) {
        memmove(dst, src, o->count * size);
    } else if (o->call == ALLGATHER) {
        for (int r = 0; r < o->size; r++) memmove(dst + (size_t)r * o->count * size, src, o->count * size);
    } else if (o->call == REDUCESCATTER) {
        unsigned char *mine = src + (size_t)o->rank * o->count * size;
        for (uint64_t i = 0; i < o->count; i++) scaled(o->type, dst + i * size, mine + i * size, factor);
    } else if (o->type == U32 && o->op == MAX && environment("FAKE_NCCL_PEER_DIFFERS")) {
        for (uint64_t i = 0; i < o->count; i++) {
            uint32_t v;
            memcpy(&v, src + i * 4, 4);
            v = v > (v ^ 1u) ? v : v ^ 1u;
            memcpy(dst + i * 4, &v, 4);
        }
    } else {
        for (uint64_t i = 0; i < o->count; i++) scaled(o->type, dst + i * size, src + i * size, factor);
    }
}

/* A collective kernel running: its operations, unless this is the kernel that stalls or fails. */
static void run_kernel(const unsigned char *data, size_t size) {
    int at = ++kernels_run;
    if (at == environment("FAKE_NCCL_STALL_AT") || at == environment("FAKE_NCCL_ERROR_AT")) {
        if (at == environment("FAKE_NCCL_ERROR_AT")) async_error = REMOTE_ERROR;
        fake_cuda_set_stuck(1);
        return;
    }
    for (size_t i = 0; i < size / sizeof(operation); i++) apply((const operation *)data + i);
}

static void log_call(const operation *o, CUstream stream) {
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "{\"event\":\"nccl\",\"call\":\"%s\",\"count\":%llu,\"dtype\":\"%s\",\"detail\":", CALLS[o->call],
            (unsigned long long)o->count, TYPES[o->type]);
    if (o->call == BROADCAST) fprintf(f, "%d", o->root);
    else if (o->call == ALLGATHER) fprintf(f, "null");
    else fprintf(f, "\"%s\"", OPS[o->op]);
    fprintf(f, ",\"src\":%llu,\"dst\":%llu,\"captured\":%s,\"grouped\":%s}\n", (unsigned long long)o->src,
            (unsigned long long)o->dst, fake_cuda_capturing(stream) ? "true" : "false", group_depth ? "true" : "false");
    fclose(f);
}

/* NCCL's one-rank path (see the top). */
static int one_rank(const operation *o, CUstream stream) {
    CUresult r = CUDA_SUCCESS;
    if (o->op == AVG && o->type >= F16) /* a float (F16 to BF16) average is PreMulSum: a kernel, even in place */
        r = fake_cuda_enqueue_effect(stream, "oneRankReduce", run_kernel, o, sizeof *o);
    else if (o->src != o->dst)
        r = fake_cuda_enqueue_copy(stream, o->dst, o->src, o->count * SIZES[o->type]);
    return r == CUDA_SUCCESS ? SUCCESS : INVALID_USAGE;
}

static int issue(int call, const void *src, void *dst, size_t count, int type, int op, int root, void *c,
                 CUstream stream) {
    const comm *k = c;
    if (!k || type < 0 || type > BF16 || (call != BROADCAST && call != ALLGATHER && (op < 0 || op > AVG)))
        return INVALID_ARGUMENT;
    if (type == F16 && op == SUM && k->size > 1) return INVALID_ARGUMENT;
    operation o = {call, type, op, root, k->rank, k->size, (uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst, count};
    log_call(&o, stream);
    if (k->size == 1) return one_rank(&o, stream);
    if (!group_depth)
        return fake_cuda_enqueue_effect(stream, KERNELS[call], run_kernel, &o, sizeof o) == 0 ? SUCCESS : INVALID_USAGE;
    if (group_count == 64 || (group_count && stream != group_stream)) return INVALID_USAGE;
    group_stream = stream;
    group[group_count++] = o;
    return SUCCESS;
}

EXPORT int ncclGetVersion(int *version) { *version = 22800; return SUCCESS; }
EXPORT const char *ncclGetErrorString(int result) {
    return result == REMOTE_ERROR ? "remote process exited or there was a network error"
           : result == INVALID_ARGUMENT ? "invalid argument" : result == INVALID_USAGE ? "invalid usage" : "error";
}
EXPORT int ncclGetUniqueId(ncclUniqueId *id) { memset(id, 7, sizeof *id); return SUCCESS; }

EXPORT int ncclCommInitRank(void **out, int size, ncclUniqueId id, int rank) {
    (void)id;
    if (size < 1 || rank < 0 || rank >= size) return INVALID_ARGUMENT;
    comm *k = malloc(sizeof *k);
    k->rank = rank, k->size = size;
    async_error = 0;
    comms++;
    *out = k;
    return SUCCESS;
}
EXPORT int ncclCommDestroy(void *c) { free(c); comms--; return SUCCESS; }
EXPORT int ncclCommCount(const void *c, int *count) { *count = ((const comm *)c)->size; return SUCCESS; }
EXPORT int ncclCommUserRank(const void *c, int *rank) { *rank = ((const comm *)c)->rank; return SUCCESS; }
EXPORT int ncclCommGetAsyncError(void *c, int *error) { (void)c; *error = async_error; return SUCCESS; }

EXPORT int ncclCommAbort(void *c) {
    fake_cuda_set_stuck(0); /* the abort flag ends the kernels waiting for other ranks */
    for (int i = 0;; i++) { /* ... and the abort waits until no recording's graph is left */
        int live[6];
        fake_cuda_live(live);
        if (!live[2]) break;
        if (i == 5000) {
            fprintf(stderr, "fake_nccl: ncclCommAbort waited 5 s for graphs nobody destroys\n");
            abort();
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return ncclCommDestroy(c);
}

EXPORT int ncclGroupStart(void) { group_depth++; return SUCCESS; }
EXPORT int ncclGroupEnd(void) {
    if (!group_depth) return INVALID_USAGE;
    if (--group_depth || !group_count) return SUCCESS;
    int n = group_count;
    group_count = 0;
    return fake_cuda_enqueue_effect(group_stream, "ncclDevKernel_group", run_kernel, group, n * sizeof *group) == 0
           ? SUCCESS : INVALID_USAGE;
}

EXPORT int ncclAllReduce(const void *s, void *d, size_t n, int type, int op, void *c, CUstream stream) {
    return issue(ALLREDUCE, s, d, n, type, op, 0, c, stream);
}
EXPORT int ncclBroadcast(const void *s, void *d, size_t n, int type, int root, void *c, CUstream stream) {
    return issue(BROADCAST, s, d, n, type, 0, root, c, stream);
}
EXPORT int ncclAllGather(const void *s, void *d, size_t n, int type, void *c, CUstream stream) {
    return issue(ALLGATHER, s, d, n, type, 0, 0, c, stream);
}
EXPORT int ncclReduceScatter(const void *s, void *d, size_t n, int type, int op, void *c, CUstream stream) {
    return issue(REDUCESCATTER, s, d, n, type, op, 0, c, stream);
}

/* Collective kernels run so far (FAKE_NCCL_STALL_AT and _ERROR_AT count them). */
EXPORT int fake_nccl_kernels(void) { return kernels_run; }

/* Communicators not destroyed (a test's host must destroy what it created, unless pipec aborted it). */
EXPORT int fake_nccl_live(void) { return comms; }
