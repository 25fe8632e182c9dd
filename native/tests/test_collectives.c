/* The C runtime's collectives on the fake NCCL (ctest; CI runs it under AddressSanitizer, whose
 * leak checker fails the run on any leak): a tiny plan with a broadcast in `init` and an
 * allreduce in the step runs over a communicator the test creates, and each way a collective
 * run can fail gives its one line: no communicator, the wrong rank or size, NCCL missing, another
 * rank's plan, an NCCL error while the step runs, a rank that stopped (the timeout), a bad
 * timeout. On one rank an allgather is NCCL's copy, recorded when it stays in device memory and
 * refused when it writes host memory (a mapped buffer). Afterwards the fake driver holds nothing, and the fake NCCL holds no communicator
 * the test did not destroy (pipec aborted, and so freed, the one of a failed collective). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_version.h"
#include "pipec.h"
#include "sha256.h"

static int failures;

#define CHECK(condition, ...) \
    do { if (!(condition)) { failures++; fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
         fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

#define LOCATION(line) "\"location\": {\"file\": \"ring.pipe\", \"line\": " #line ", \"column\": 5}"
#define OPERAND "[{\"dtype\": \"f32\", \"count\": 4, \"src\": \"x\", \"src_offset\": 0, \"dst\": \"x\", \"dst_offset\": 0}]"
#define ACCESSES "[{\"buffer\": \"x\", \"start\": 0, \"stop\": 4, \"mode\": \"rw\"}]"

/* rank RANK of WORLD: x = 1.5, broadcast from 0 in init, allreduce sum each step. */
static const char PLAN[] =
    "{\"pipe\": \"ring.pipe\", \"pipe_sha256\": \"00\", \"pipec_version\": \"0.1.0\", \"arch\": \"sm_90\", "
    "\"compiler\": \"nvrtc\", \"lanes\": 1, \"gemm_groups\": [], \"init\": 1, \"step\": 0, \"modules\": [], "
    "\"world_size\": 2, \"rank\": 0, \"live\": {\"values\": [], \"sites\": []}, \"buffers\": ["
    " {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4], \"memory\": \"device\", \"init\": {\"kind\": \"fill\","
    "  \"args\": [1.5], \"seed\": null, \"path\": null}, \"labels\": [], \"nbytes\": 16, " LOCATION(1) ","
    "  \"step_first_access\": \"read\", \"replicated\": true}],"
    "\"graphs\": ["
    " {\"index\": 0, \"name\": \"step\", \"scope\": \"step\", \"hazards\": [], \"edges\": [], \"nodes\": ["
    "  {\"kind\": \"collective\", \"id\": 0, \"name\": \"step/allreduce:x\", " LOCATION(4) ", \"accesses\": "
    ACCESSES ", \"collective\": \"allreduce\", \"op\": \"sum\", \"root\": null, \"operands\": " OPERAND "}]},"
    " {\"index\": 1, \"name\": \"init\", \"scope\": \"eager\", \"hazards\": [], \"edges\": [], \"nodes\": ["
    "  {\"kind\": \"collective\", \"id\": 0, \"name\": \"init/broadcast:x\", " LOCATION(2) ", \"accesses\": "
    ACCESSES ", \"collective\": \"broadcast\", \"op\": null, \"root\": 0, \"operands\": " OPERAND "}]}]}";

/* rank 0 of 1: x = 1.5, gathered each step into `parts`, in the memory the format's %s names. */
static const char GATHER_PLAN[] =
    "{\"pipe\": \"ring.pipe\", \"pipe_sha256\": \"00\", \"pipec_version\": \"0.1.0\", \"arch\": \"sm_90\", "
    "\"compiler\": \"nvrtc\", \"lanes\": 1, \"gemm_groups\": [], \"init\": null, \"step\": 0, \"modules\": [], "
    "\"world_size\": 1, \"rank\": 0, \"live\": {\"values\": [], \"sites\": []}, \"buffers\": ["
    " {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4], \"memory\": \"device\", \"init\": {\"kind\": \"fill\","
    "  \"args\": [1.5], \"seed\": null, \"path\": null}, \"labels\": [], \"nbytes\": 16, " LOCATION(1) ","
    "  \"step_first_access\": \"read\", \"replicated\": true},"
    " {\"name\": \"parts\", \"dtype\": \"f32\", \"shape\": [4], \"memory\": \"%s\", \"init\": {\"kind\": \"zeros\","
    "  \"args\": [], \"seed\": null, \"path\": null}, \"labels\": [], \"nbytes\": 16, " LOCATION(2) ","
    "  \"step_first_access\": \"write\", \"replicated\": false}],"
    "\"graphs\": ["
    " {\"index\": 0, \"name\": \"step\", \"scope\": \"step\", \"hazards\": [], \"edges\": [], \"nodes\": ["
    "  {\"kind\": \"collective\", \"id\": 0, \"name\": \"step/allgather:parts\", " LOCATION(4) ", \"accesses\": "
    "[{\"buffer\": \"x\", \"start\": 0, \"stop\": 4, \"mode\": \"r\"}, {\"buffer\": \"parts\", \"start\": 0, "
    "\"stop\": 4, \"mode\": \"w\"}], \"collective\": \"allgather\", \"op\": null, \"root\": null, \"operands\": "
    "[{\"dtype\": \"f32\", \"count\": 4, \"src\": \"x\", \"src_offset\": 0, \"dst\": \"parts\", \"dst_offset\": 0}]}]}]}";

typedef struct { char internal[128]; } unique_id;

static void *nccl;
static int (*get_id)(unique_id *);
static int (*init_rank)(void **, int, unique_id, int);
static int (*destroy_comm)(void *);
static int (*nccl_live)(void);
static int (*kernels_run)(void);
static void (*fake_live)(int counts[6]);
static char manifest[1024];

static pipec_status open_plan(const char *plan, void *comm, const pipec_options *given, pipec_pipeline **p) {
    char hex[65];
    sha256_hex(plan, strlen(plan), hex);
    snprintf(manifest, sizeof manifest, TEST_MANIFEST_START "\"readers\": " TEST_READERS ", "
             "\"pipec_version\": \"0.1.0\", \"source\": \"ring.pipe\", \"archs\": [\"sm_90\"], \"files\": "
             "{\"plan.json\": \"sha256:%s\"}}\n", hex);
    pipec_file files[2] = {{"plan.json", plan, strlen(plan)}, {"manifest.json", manifest, strlen(manifest)}};
    pipec_options options;
    if (given) options = *given;
    else pipec_options_init(&options);
    options.nccl_comm = comm;
    return pipec_open_memory(files, 2, &options, p);
}

static pipec_status open_ring(void *comm, const pipec_options *given, pipec_pipeline **p) {
    return open_plan(PLAN, comm, given, p);
}

static void *communicator(int rank, int size) {
    unique_id id;
    void *comm = NULL;
    CHECK(get_id(&id) == 0 && init_rank(&comm, size, id, rank) == 0, "the fake NCCL makes no communicator");
    return comm;
}

static void expect(pipec_status status, pipec_status expected, const char *text, const char *what) {
    CHECK(status == expected, "%s: status %d, expected %d (%s)", what, status, expected, pipec_last_error());
    CHECK(strstr(pipec_last_error(), text) != NULL, "%s: the error does not say `%s`: %s", what, text, pipec_last_error());
    CHECK(strchr(pipec_last_error(), '\n') == NULL, "%s: the error is more than one line", what);
}

static void check_nothing_live(const char *after) {
    int counts[6];
    fake_live(counts);
    for (int i = 0; i < 6; i++) CHECK(counts[i] == 0, "after %s: the fake driver still holds %d of kind %d", after, counts[i], i);
    CHECK(nccl_live() == 0, "after %s: %d communicator(s) left", after, nccl_live());
}

/* FAKE_NCCL_<what>_AT: the n-th collective kernel from now on. */
static void at_kernel(const char *variable, int n) {
    char value[32];
    snprintf(value, sizeof value, "%d", kernels_run() + n);
    setenv(variable, value, 1);
}

static void test_runs(void) {
    void *comm = communicator(0, 2);
    pipec_pipeline *p = NULL;
    CHECK(open_ring(comm, NULL, &p) == PIPEC_OK, "the ring does not open: %s", pipec_last_error());
    float x[4];
    CHECK(pipec_step(p, 2) == PIPEC_OK && pipec_synchronize(p) == PIPEC_OK, "steps: %s", pipec_last_error());
    CHECK(pipec_read_buffer(p, "x", x, sizeof x) == PIPEC_OK && x[0] == 6.0f && x[3] == 6.0f, "two sums over two ranks: %g",
          x[0]);
    CHECK(pipec_run_eager(p, 1) == PIPEC_OK && pipec_read_buffer(p, "x", x, sizeof x) == PIPEC_OK && x[1] == 12.0f,
          "an eager sum: %g", x[1]);
    pipec_verify_report report;
    memset(&report, 0, sizeof report);
    report.version = PIPEC_OPTIONS_VERSION;
    CHECK(pipec_verify(p, 2, &report) == PIPEC_OK && report.ok, "verify: %s %s", pipec_last_error(), report.first);
    CHECK(pipec_close(p) == PIPEC_OK, "close: %s", pipec_last_error());
    destroy_comm(comm);
    check_nothing_live("a collective run");
}

static void test_refused_at_open(void) {
    pipec_pipeline *p = NULL;
    expect(open_ring(NULL, NULL, &p), PIPEC_ERROR_INVALID_ARGUMENT,
           "broadcast `init/broadcast:x` (ring.pipe:2:5) is a collective: pass the host's NCCL communicator "
           "(pipec_options.nccl_comm), rank 0 of 2", "no communicator");
    void *comm = communicator(1, 2);
    expect(open_ring(comm, NULL, &p), PIPEC_ERROR_INVALID_ARGUMENT,
           "<memory> was built for rank 0 of 2, and the host's communicator is rank 1 of 2", "the wrong rank");
    destroy_comm(comm);
    comm = communicator(0, 4);
    expect(open_ring(comm, NULL, &p), PIPEC_ERROR_INVALID_ARGUMENT, "the host's communicator is rank 0 of 4",
           "the wrong size");
    destroy_comm(comm);
    comm = communicator(0, 2);
    pipec_options options;
    pipec_options_init(&options);
    options.nccl_library = "/nonexistent/libnccl.so.2";
    expect(open_ring(comm, &options, &p), PIPEC_ERROR_LIBRARY,
           "broadcast `init/broadcast:x` (ring.pipe:2:5): collective nodes need NCCL, and /nonexistent/libnccl.so.2 "
           "cannot be loaded", "NCCL missing");
    setenv("FAKE_NCCL_PEER_DIFFERS", "1", 1);
    expect(open_ring(comm, NULL, &p), PIPEC_ERROR_INVALID_ARGUMENT,
           "rank 0: ring.pipe issues 2 collective(s) (sequence ", "another rank's plan");
    unsetenv("FAKE_NCCL_PEER_DIFFERS");
    setenv("PIPEC_NCCL_TIMEOUT", "soon", 1);
    expect(open_ring(comm, NULL, &p), PIPEC_ERROR_INVALID_ARGUMENT, "PIPEC_NCCL_TIMEOUT='soon' is not a timeout",
           "a bad timeout");
    unsetenv("PIPEC_NCCL_TIMEOUT");
    destroy_comm(comm);
    CHECK(p == NULL, "a failed open returns a pipeline");
    check_nothing_live("opens refused");
}

static void test_one_ranks_copies(void) {
    char plan[sizeof GATHER_PLAN + 8];
    void *comm = communicator(0, 1);
    pipec_pipeline *p = NULL;
    snprintf(plan, sizeof plan, GATHER_PLAN, "device");
    CHECK(open_plan(plan, comm, NULL, &p) == PIPEC_OK, "a gather within device memory does not open: %s",
          pipec_last_error());
    float parts[4] = {0};
    CHECK(pipec_step(p, 1) == PIPEC_OK && pipec_read_buffer(p, "parts", parts, sizeof parts) == PIPEC_OK &&
          parts[0] == 1.5f && parts[3] == 1.5f, "one rank's gather is a copy: %g (%s)", parts[0], pipec_last_error());
    CHECK(pipec_close(p) == PIPEC_OK, "close: %s", pipec_last_error());
    snprintf(plan, sizeof plan, GATHER_PLAN, "mapped");
    expect(open_plan(plan, comm, NULL, &p), PIPEC_ERROR_LIBRARY, "allgather `step/allgather:parts` (ring.pipe:4:5): "
           "the library call recorded 1 node of another kind (a copy from device to host memory); a library node may "
           "hold kernel, memset, host nodes and device-to-device copies only", "a copy to host memory");
    destroy_comm(comm);
    check_nothing_live("one rank's copies");
}

static void test_failures_while_running(void) {
    pipec_pipeline *p = NULL;
    pipec_options options;
    pipec_options_init(&options);
    options.nccl_timeout_s = 0.2;
    CHECK(open_ring(communicator(0, 2), &options, &p) == PIPEC_OK, "open: %s", pipec_last_error());
    at_kernel("FAKE_NCCL_ERROR_AT", 1); /* the first replay's allreduce: a peer died */
    CHECK(pipec_step(p, 1) == PIPEC_OK, "a launch only enqueues");
    expect(pipec_synchronize(p), PIPEC_ERROR_COLLECTIVE, "rank 0: NCCL reported error 6 (remote process exited or there "
           "was a network error) while the step graph (its collectives: allreduce `step/allreduce:x` (ring.pipe:4:5)) ran; "
           "the NCCL communicator is aborted", "an NCCL error");
    expect(pipec_step(p, 1), PIPEC_ERROR_COLLECTIVE, "the NCCL communicator is aborted (an earlier collective failed)",
           "a step after the abort");
    CHECK(pipec_close(p) == PIPEC_OK, "close after an abort: %s", pipec_last_error());
    unsetenv("FAKE_NCCL_ERROR_AT");
    check_nothing_live("an NCCL error (pipec aborted the communicator)");

    CHECK(open_ring(communicator(0, 2), &options, &p) == PIPEC_OK, "open: %s", pipec_last_error());
    at_kernel("FAKE_NCCL_STALL_AT", 1); /* the eager allreduce waits for a rank that stopped */
    CHECK(pipec_run_eager(p, 1) == PIPEC_OK, "an eager step only enqueues");
    float x[4];
    expect(pipec_read_buffer(p, "x", x, sizeof x), PIPEC_ERROR_COLLECTIVE, "rank 0: allreduce `step/allreduce:x` "
           "(ring.pipe:4:5) did not finish within 0.2 s (PIPEC_NCCL_TIMEOUT): a rank stopped issuing its collectives; "
           "the NCCL communicator is aborted", "a rank that stopped");
    CHECK(pipec_close(p) == PIPEC_OK, "close after a timeout: %s", pipec_last_error());
    check_nothing_live("a timeout");

    at_kernel("FAKE_NCCL_STALL_AT", 1); /* the check at open */
    expect(open_ring(communicator(0, 2), &options, &p), PIPEC_ERROR_COLLECTIVE,
           "the ranks' collective-sequence check (one allreduce at open) did not finish within 0.2 s", "a stall at open");
    unsetenv("FAKE_NCCL_STALL_AT");
    check_nothing_live("a stall at open");
}

int main(void) {
    const char *driver = getenv("PIPEC_DRIVER_LIBRARY"), *library = getenv("PIPEC_NCCL_LIBRARY");
    void *fake = driver ? dlopen(driver, RTLD_NOW) : NULL; /* held, so its counters outlive each pipeline */
    nccl = library ? dlopen(library, RTLD_NOW) : NULL;
    if (!fake || !nccl || !(*(void **)&fake_live = dlsym(fake, "fake_cuda_live")) ||
        !(*(void **)&get_id = dlsym(nccl, "ncclGetUniqueId")) || !(*(void **)&init_rank = dlsym(nccl, "ncclCommInitRank")) ||
        !(*(void **)&destroy_comm = dlsym(nccl, "ncclCommDestroy")) || !(*(void **)&nccl_live = dlsym(nccl, "fake_nccl_live")) ||
        !(*(void **)&kernels_run = dlsym(nccl, "fake_nccl_kernels"))) {
        fprintf(stderr, "PIPEC_DRIVER_LIBRARY and PIPEC_NCCL_LIBRARY must name the fakes (fake_cuda, fake_nccl)\n");
        return 1;
    }
    test_runs();
    test_refused_at_open();
    test_one_ranks_copies();
    test_failures_while_running();
    dlclose(nccl);
    dlclose(fake);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("all checks passed\n");
    return failures != 0;
}
