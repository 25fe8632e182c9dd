/* Collective nodes over a communicator the host created (runtime/collectives.py and the start-up
 * checks of runtime/distributed.py). NCCL is loaded at open, only for a plan with collective
 * nodes; the communicator must be rank `rank` of `world_size`, as the plan was compiled. Each
 * node's one NCCL call (several operands: one group, which NCCL runs as one kernel) is issued
 * on the pipeline's stream in eager runs, and recorded by library.c into the child graph node the
 * graph holds, as the Python runtime records it.
 *
 * The ranks must issue the same collectives in the same order. The Python runtime compares the
 * plans' collective-sequence hashes over its host channel; the C runtime has none, so at open it
 * compares them over the communicator itself: one allreduce (max) of the 32-byte hash and of its
 * complement, as 16 u32 words. Every rank gets max(h) and max(~h) = ~min(h), so each rank sees
 * its own hash in both halves exactly when every rank has the same hash. It is the first
 * collective the pipeline issues, so every rank must open its pipeline at the same point of its
 * own use of the communicator.
 *
 * A wait is where a failed rank would hang the others (NCCL's kernels spin until every rank has
 * joined). So with collectives every wait polls the stream and ncclCommGetAsyncError, and past
 * the timeout (options, $PIPEC_NCCL_TIMEOUT, 120 s) or on an NCCL error it begins
 * ncclCommAbort on a thread of its own and returns a one-line error naming what it waited for.
 * The abort raises NCCL's abort flag at once, which ends the kernels still waiting, and then
 * waits until every graph holding a recorded collective is destroyed; destroying an executable
 * graph waits for its launches in flight. So the abort runs beside the caller, pipec_close
 * destroys the graphs, and then joins it (at most ABORT_JOIN_S). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "sha256.h"
#include "text.h"

#define DEFAULT_TIMEOUT_S 120.0
#define ABORT_JOIN_S 60
#define HASH_WORDS 8

struct collectives {
    nccl_library nccl;
    nccl_comm comm;
    double timeout_s;
    const node_spec **sequence; /* the collectives of the init, then of one step, in program order */
    size_t count, init_count; /* the init's come first */
    const node_spec *last_issued; /* by an eager run since the last finished wait */
    int graph_launched;           /* the step graph, since the last finished wait */
    int checking;                 /* the collective-sequence check at open is in flight */
    int failed;                   /* the communicator is being aborted: nothing may reach it */
    /* the abort, begun on failure */
    int abort_started, abort_done;
    pthread_t abort_thread;
    pthread_mutex_t lock;
    pthread_cond_t finished;
};

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static pipec_status timeout_from(const pipec_options *o, double *out) {
    *out = o->nccl_timeout_s;
    if (o->nccl_timeout_s < 0 || isnan(o->nccl_timeout_s) || isinf(o->nccl_timeout_s))
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_options.nccl_timeout_s is %g: give a positive number of "
                    "seconds, or 0 for $PIPEC_NCCL_TIMEOUT", o->nccl_timeout_s);
    if (*out > 0) return PIPEC_OK;
    const char *given = getenv("PIPEC_NCCL_TIMEOUT");
    *out = DEFAULT_TIMEOUT_S;
    if (!given || !*given) return PIPEC_OK;
    char *end;
    *out = strtod(given, &end);
    while (*end == ' ') end++;
    if (end == given || *end || !(*out > 0) || isinf(*out))
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "PIPEC_NCCL_TIMEOUT='%s' is not a timeout: give a positive number "
                    "of seconds", given);
    return PIPEC_OK;
}

/* plan_schema.py CollectiveNodeSpec.describe: what every rank must agree on, one line. */
static void describe(const node_spec *n, text *t) {
    const collective_spec *c = n->collective;
    char part[96];
    text_puts(t, c->collective);
    if (c->op[0]) text_puts(t, " "), text_puts(t, c->op);
    for (size_t i = 0; i < c->operand_count; i++) {
        snprintf(part, sizeof part, "%s%llu x %s", i ? ", " : " ", (unsigned long long)c->operands[i].count,
                 dtype_name(c->operands[i].type));
        text_puts(t, part);
    }
    if (c->root >= 0) snprintf(part, sizeof part, " from %lld", (long long)c->root), text_puts(t, part);
    text_puts(t, " ("), text_puts(t, n->name), text_puts(t, ")");
}

/* plan_schema.py collective_sequence_hash: the SHA-256 of the descriptions, one a line. */
static pipec_status sequence_hash(const collectives *c, unsigned char digest[32]) {
    text t = {0};
    for (size_t i = 0; i < c->count; i++) {
        if (i) text_puts(&t, "\n");
        describe(c->sequence[i], &t);
    }
    if (t.failed) {
        free(t.data);
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    sha256 s;
    sha256_init(&s);
    sha256_update(&s, t.data ? t.data : "", t.length);
    sha256_final(&s, digest);
    free(t.data);
    return PIPEC_OK;
}

static pipec_status gather_sequence(pipec_pipeline *p, collectives *c) {
    const plan *pl = &p->plan;
    size_t total = 0;
    int roots[2] = {pl->init, pl->step};
    for (int r = 0; r < 2; r++) total += roots[r] >= 0 ? plan_leaves(pl, roots[r], NULL, 0) : 0;
    const node_spec **leaves = calloc(total ? total : 1, sizeof *leaves);
    c->sequence = calloc(total ? total : 1, sizeof *c->sequence);
    if (!leaves || !c->sequence) {
        free(leaves);
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    size_t at = 0;
    for (int r = 0; r < 2; r++) {
        size_t start = at;
        if (roots[r] >= 0) at += plan_leaves(pl, roots[r], leaves + at, total - at);
        for (size_t i = start; i < at; i++)
            if (leaves[i]->kind == NODE_COLLECTIVE) c->sequence[c->count++] = leaves[i];
        if (r == 0) c->init_count = c->count;
    }
    free(leaves);
    return PIPEC_OK;
}

/* --- failure and the abort ---------------------------------------------------------------- */

static void *abort_main(void *argument) {
    collectives *c = argument;
    c->nccl.CommAbort(c->comm);
    pthread_mutex_lock(&c->lock);
    c->abort_done = 1;
    pthread_cond_broadcast(&c->finished);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Marks the communicator failed and begins ncclCommAbort beside the caller (see the top). */
static void begin_abort(collectives *c) {
    c->failed = 1;
    if (c->abort_started) return;
    if (pthread_create(&c->abort_thread, NULL, abort_main, c) == 0) c->abort_started = 1;
    else abort_main(c); /* no thread to be had: abort here, ending the spinning kernels all the same */
}

static pipec_status failed(pipec_pipeline *p, const char *message) {
    collectives *c = p->collectives;
    begin_abort(c);
    return fail(PIPEC_ERROR_COLLECTIVE, "rank %lld: %s; the NCCL communicator is aborted", (long long)p->plan.rank,
                message);
}

pipec_status collectives_usable(pipec_pipeline *p) {
    if (!p->collectives || !p->collectives->failed) return PIPEC_OK;
    return fail(PIPEC_ERROR_COLLECTIVE, "rank %lld: the NCCL communicator is aborted (an earlier collective failed): "
                "close the pipeline", (long long)p->plan.rank);
}

void collectives_launched(pipec_pipeline *p) {
    if (p->collectives) p->collectives->graph_launched = 1;
}

/* What a wait waited for, for its message. */
static void pending(const pipec_pipeline *p, char *out, size_t size) {
    const collectives *c = p->collectives;
    const node_spec *n = c->last_issued;
    if (c->checking) snprintf(out, size, "the ranks' collective-sequence check (one allreduce at open)");
    else if (n) snprintf(out, size, "%s `%s` (%s)", n->collective->collective, n->name, n->location);
    else if (c->graph_launched && c->count > c->init_count) {
        const node_spec *first = c->sequence[c->init_count];
        snprintf(out, size, "the step graph (its collectives: %s `%s` (%s)%s)", first->collective->collective,
                 first->name, first->location, c->count - c->init_count > 1 ? " and more" : "");
    }
    else snprintf(out, size, "the pipeline's stream");
}

pipec_status stream_wait(pipec_pipeline *p, const char *where) {
    collectives *c = p->collectives;
    if (!c) {
        CU(p, p->driver.StreamSynchronize(p->stream), "cuStreamSynchronize", where);
        return PIPEC_OK;
    }
    pipec_status status = collectives_usable(p);
    if (status != PIPEC_OK) return status;
    double started = seconds();
    long pause_ns = 20000;
    for (;;) {
        CUresult r = p->driver.StreamQuery(p->stream);
        if (r == CUDA_SUCCESS) {
            c->last_issued = NULL, c->graph_launched = 0;
            return PIPEC_OK;
        }
        char what[768], message[1024];
        pending(p, what, sizeof what);
        if (r != CUDA_ERROR_NOT_READY) {
            fail_cuda(&p->driver, "cuStreamQuery", r, what);
            snprintf(message, sizeof message, "%s", pipec_last_error());
            return failed(p, message);
        }
        nccl_result state = NCCL_SUCCESS;
        nccl_result asked = c->nccl.CommGetAsyncError(c->comm, &state);
        if (asked != NCCL_SUCCESS) state = asked;
        if (state != NCCL_SUCCESS && state != NCCL_IN_PROGRESS) {
            snprintf(message, sizeof message, "NCCL reported error %d (%s) while %s ran", state,
                     nccl_error(&c->nccl, state), what);
            return failed(p, message);
        }
        if (seconds() - started > c->timeout_s) {
            snprintf(message, sizeof message, "%s did not finish within %g s (PIPEC_NCCL_TIMEOUT): a rank stopped "
                     "issuing its collectives", what, c->timeout_s);
            return failed(p, message);
        }
        struct timespec nap = {0, pause_ns};
        nanosleep(&nap, NULL);
        pause_ns = pause_ns * 2 < 1000000 ? pause_ns * 2 : 1000000;
    }
}

/* --- issuing and recording ---------------------------------------------------------------- */

static pipec_status refused(const node_spec *n, const collectives *c, const char *call, nccl_result result) {
    return fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): NCCL refused the call: %s: %s", n->collective->collective, n->name,
                n->location, call, nccl_error(&c->nccl, result));
}

static pipec_status call_one(pipec_pipeline *p, const node_spec *n, const operand_spec *x, CUstream stream) {
    collectives *c = p->collectives;
    const collective_spec *k = n->collective;
    void *src = (void *)(uintptr_t)buffer_pointer(p, x->src, x->src_offset);
    void *dst = (void *)(uintptr_t)buffer_pointer(p, x->dst, x->dst_offset);
    int type = nccl_type(x->type), op = nccl_op(k->op);
    if (type < 0)
        return fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): NCCL has no %s elements", k->collective, n->name, n->location,
                    dtype_name(x->type));
    nccl_result r;
    const char *call;
    if (strcmp(k->collective, "broadcast") == 0) {
        call = "ncclBroadcast", r = c->nccl.Broadcast(src, dst, x->count, type, (int)k->root, c->comm, stream);
    } else if (strcmp(k->collective, "allgather") == 0) {
        call = "ncclAllGather", r = c->nccl.AllGather(src, dst, x->count, type, c->comm, stream);
    } else if (op < 0) {
        return fail(PIPEC_ERROR_LIBRARY, "%s `%s` (%s): NCCL has no reduction `%s`", k->collective, n->name,
                    n->location, k->op);
    } else if (strcmp(k->collective, "allreduce") == 0) {
        call = "ncclAllReduce", r = c->nccl.AllReduce(src, dst, x->count, type, op, c->comm, stream);
    } else {
        call = "ncclReduceScatter", r = c->nccl.ReduceScatter(src, dst, x->count, type, op, c->comm, stream);
    }
    return r == NCCL_SUCCESS ? PIPEC_OK : refused(n, c, call, r);
}

/* The node's call, or its group of calls, enqueued on `stream` (only enqueues). */
static pipec_status enqueue(pipec_pipeline *p, const node_spec *n, CUstream stream) {
    collectives *c = p->collectives;
    if (!c)
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "%s `%s` (%s) is a collective, and the pipeline has no communicator",
                    n->collective->collective, n->name, n->location);
    pipec_status status = collectives_usable(p);
    if (status != PIPEC_OK) return status;
    int grouped = n->collective->operand_count > 1;
    nccl_result r = grouped ? c->nccl.GroupStart() : NCCL_SUCCESS;
    if (r != NCCL_SUCCESS) return refused(n, c, "ncclGroupStart", r);
    for (size_t i = 0; i < n->collective->operand_count && status == PIPEC_OK; i++)
        status = call_one(p, n, &n->collective->operands[i], stream);
    r = grouped ? c->nccl.GroupEnd() : NCCL_SUCCESS; /* the group depth stays balanced even after a refusal */
    if (status == PIPEC_OK && r != NCCL_SUCCESS) status = refused(n, c, "ncclGroupEnd", r);
    return status;
}

pipec_status collective_issue(pipec_pipeline *p, const node_spec *n, CUstream stream) {
    pipec_status status = enqueue(p, n, stream);
    if (status == PIPEC_OK) p->collectives->last_issued = n;
    return status;
}

pipec_status collective_record(pipec_pipeline *p, const node_spec *n, CUgraph *out) {
    return library_record(p, n, n->collective->collective, enqueue, 1, out);
}

/* --- open and close ------------------------------------------------------------------------ */

static pipec_status check_communicator(pipec_pipeline *p, const node_spec *first) {
    collectives *c = p->collectives;
    int rank = -1, size = -1;
    nccl_result r = c->nccl.CommCount(c->comm, &size);
    if (r == NCCL_SUCCESS) r = c->nccl.CommUserRank(c->comm, &rank);
    if (r != NCCL_SUCCESS)
        return fail(PIPEC_ERROR_LIBRARY, "%s: the host's communicator cannot be asked its rank and size: %s",
                    p->plan.pipe, nccl_error(&c->nccl, r));
    if (rank != p->plan.rank || size != p->plan.world_size)
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "%s was built for rank %lld of %lld, and the host's communicator is "
                    "rank %d of %d (%s `%s` (%s) is its first collective): build one bundle per rank with "
                    "`pipec build -D RANK=%d -D WORLD_SIZE=%d`", p->bundle.where, (long long)p->plan.rank,
                    (long long)p->plan.world_size, rank, size, first->collective->collective, first->name,
                    first->location, rank, size);
    return PIPEC_OK;
}

/* One allreduce (max) of the sequence hash and its complement (see the top). */
static pipec_status check_sequence(pipec_pipeline *p) {
    collectives *c = p->collectives;
    unsigned char digest[32];
    pipec_status status = sequence_hash(c, digest);
    if (status != PIPEC_OK) return status;
    uint32_t words[2 * HASH_WORDS], agreed[2 * HASH_WORDS];
    memcpy(words, digest, sizeof digest);
    for (int i = 0; i < HASH_WORDS; i++) words[HASH_WORDS + i] = ~words[i];
    CUdeviceptr scratch;
    CU(p, p->driver.MemAlloc(&scratch, sizeof words), "cuMemAlloc", "the collective-sequence check");
    CUresult cr = p->driver.MemcpyHtoD(scratch, words, sizeof words);
    if (cr != CUDA_SUCCESS) status = fail_cuda(&p->driver, "cuMemcpyHtoD", cr, "the collective-sequence check");
    if (status == PIPEC_OK) {
        void *at = (void *)(uintptr_t)scratch;
        nccl_result r = c->nccl.AllReduce(at, at, 2 * HASH_WORDS, NCCL_UINT32, NCCL_MAX, c->comm, p->stream);
        if (r != NCCL_SUCCESS)
            status = fail(PIPEC_ERROR_LIBRARY, "%s: the collective-sequence check: NCCL refused ncclAllReduce: %s",
                          p->plan.pipe, nccl_error(&c->nccl, r));
    }
    c->checking = 1;
    if (status == PIPEC_OK) status = stream_wait(p, "the collective-sequence check");
    c->checking = 0;
    if (status == PIPEC_OK && (cr = p->driver.MemcpyDtoH(agreed, scratch, sizeof agreed)) != CUDA_SUCCESS)
        status = fail_cuda(&p->driver, "cuMemcpyDtoH", cr, "the collective-sequence check");
    p->driver.MemFree(scratch);
    if (status == PIPEC_OK && memcmp(words, agreed, sizeof words) != 0) {
        char hex[17];
        for (int i = 0; i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        status = fail(PIPEC_ERROR_INVALID_ARGUMENT, "rank %lld: %s issues %zu collective(s) (sequence %s...), and "
                      "another rank's plan issues different ones: every rank must open a bundle of the same program, "
                      "built for its rank, and open it at the same point of its own use of the communicator",
                      (long long)p->plan.rank, p->plan.pipe, c->count, hex);
    }
    return status;
}

pipec_status collectives_open(pipec_pipeline *p, const pipec_options *o) {
    collectives probe = {0};
    pipec_status status = gather_sequence(p, &probe);
    if (status != PIPEC_OK || probe.count == 0) {
        free(probe.sequence);
        return status; /* a plan without collectives never loads NCCL */
    }
    const node_spec *first = probe.sequence[0];
    if (!o->nccl_comm) {
        free(probe.sequence);
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "%s `%s` (%s) is a collective: pass the host's NCCL communicator "
                    "(pipec_options.nccl_comm), rank %lld of %lld", first->collective->collective, first->name,
                    first->location, (long long)p->plan.rank, (long long)p->plan.world_size);
    }
    collectives *c = p->collectives = malloc(sizeof *c);
    if (!c) {
        free(probe.sequence);
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *c = probe;
    c->comm = o->nccl_comm;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->finished, NULL);
    if ((status = timeout_from(o, &c->timeout_s)) != PIPEC_OK) return status;
    if ((status = nccl_open(o->nccl_library, first, &c->nccl)) != PIPEC_OK) return status;
    if ((status = check_communicator(p, first)) != PIPEC_OK) return status;
    return check_sequence(p);
}

pipec_status collectives_close(pipec_pipeline *p) {
    collectives *c = p->collectives;
    if (!c) return PIPEC_OK;
    if (c->abort_started) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += ABORT_JOIN_S;
        pthread_mutex_lock(&c->lock);
        int waited = 0;
        while (!c->abort_done && waited != ETIMEDOUT) waited = pthread_cond_timedwait(&c->finished, &c->lock, &deadline);
        int done = c->abort_done;
        pthread_mutex_unlock(&c->lock);
        if (!done) { /* the thread still uses the library and the communicator: both stay */
            pthread_detach(c->abort_thread);
            p->collectives = NULL;
            return fail(PIPEC_ERROR_LIBRARY, "ncclCommAbort did not return within %d s of the step graph's "
                        "destruction; the process should exit", ABORT_JOIN_S);
        }
        pthread_join(c->abort_thread, NULL);
    }
    nccl_close(&c->nccl);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->finished);
    free(c->sequence);
    free(c);
    p->collectives = NULL;
    return PIPEC_OK;
}
