/* The C runtime's unit tests (ctest; CI runs them under AddressSanitizer, whose leak checker
 * fails the run on any leak): the JSON parser, SHA-256, and bundles that must not open, each
 * with its one-line error, through the fake driver ($PIPEC_DRIVER_LIBRARY), which must hold
 * nothing afterwards. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "bundle_version.h"
#include "pipec.h"
#include "sha256.h"

static int failures;

#define CHECK(condition, ...) \
    do { if (!(condition)) { failures++; fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
         fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

static void (*fake_live)(int counts[6]);

static void check_nothing_live(const char *after) {
    int counts[6];
    fake_live(counts);
    for (int i = 0; i < 6; i++) CHECK(counts[i] == 0, "after %s: the fake driver still holds %d of kind %d", after, counts[i], i);
}

/* --- JSON and SHA-256 ---------------------------------------------------------------------- */

static void test_json(void) {
    char error[128];
    json *v = json_parse("{\"a\": [1, -2, 3.5, 1e3, 18446744073709551615], \"b\": \"x\\u00e9\\ud83d\\ude00\", "
                         "\"c\": true, \"d\": null}", 96, error, sizeof error);
    CHECK(v != NULL, "a valid document fails: %s", error);
    if (v) {
        const json *a = json_get(v, "a");
        CHECK(a && a->count == 5 && a->items[0].integer == 1 && a->items[1].integer == -2, "integers");
        CHECK(a && !a->items[2].is_integer && a->items[2].number == 3.5 && a->items[3].number == 1000, "numbers");
        CHECK(a && a->items[4].is_unsigned && a->items[4].uinteger == 18446744073709551615ull, "a u64");
        CHECK(strcmp(json_get(v, "b")->string, "x\xc3\xa9\xf0\x9f\x98\x80") == 0, "escapes decode to UTF-8");
        CHECK(json_get(v, "c")->boolean == 1 && json_get(v, "d")->kind == JSON_NULL, "literals");
        json_free(v);
    }
    const char *invalid[] = {"", "[1,]", "{\"a\":1,}", "[1 2]", "01", "1.", "\"\\x\"", "\"a", "[", "{\"a\"}", "tru",
                             "\"\\ud800\"", "1 2", "[\"\x01\"]", "-", "{1:2}"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        json *bad = json_parse(invalid[i], strlen(invalid[i]), error, sizeof error);
        CHECK(bad == NULL, "`%s` parses", invalid[i]);
        CHECK(bad || strstr(error, "at byte") != NULL, "`%s`: the error names no position: %s", invalid[i], error);
        json_free(bad);
    }
    char deep[1000];
    memset(deep, '[', sizeof deep);
    CHECK(json_parse(deep, sizeof deep, error, sizeof error) == NULL && strstr(error, "deeply"), "depth: %s", error);
}

static void test_sha256(void) {
    char hex[65];
    sha256_hex("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "empty: %s", hex);
    sha256_hex("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "abc: %s", hex);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(two, strlen(two), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "two blocks: %s", hex);
    sha256 s;
    unsigned char digest[32], a[1000];
    memset(a, 'a', sizeof a);
    sha256_init(&s);
    for (int i = 0; i < 1000; i++) sha256_update(&s, a, sizeof a);
    sha256_final(&s, digest);
    CHECK(digest[0] == 0xcd && digest[1] == 0xc7 && digest[31] == 0xd0, "a million a's");
}

/* --- bundles ------------------------------------------------------------------------------- */

/* The tiny plan without its live-update record, which tiny_bundle puts first. */
static const char PLAN[] =
    "\"pipe\": \"tiny.pipe\", \"pipe_sha256\": \"00\", \"pipec_version\": \"0.1.0\", \"arch\": \"sm_90\", "
    "\"compiler\": \"nvrtc\", \"lanes\": 1, \"gemm_groups\": [], \"init\": null, \"step\": 0,"
    "\"modules\": [{\"index\": 0, \"name\": \"tiny.cu\", \"path\": \"tiny.cu\", \"source\": null, \"include_dirs\": []}],"
    "\"buffers\": ["
    " {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4], \"memory\": \"device\", \"init\": {\"kind\": \"fill\","
    "  \"args\": [1.5], \"seed\": null, \"path\": null}, \"labels\": [], \"nbytes\": 16, \"location\": {\"file\": "
    "  \"tiny.pipe\", \"line\": 1, \"column\": 1}, \"step_first_access\": \"read\", \"replicated\": false},"
    " {\"name\": \"diag\", \"dtype\": \"f32\", \"shape\": [2], \"memory\": \"mapped\", \"init\": {\"kind\": \"zeros\","
    "  \"args\": [], \"seed\": null, \"path\": null}, \"labels\": [\"loss\", \"step\"], \"nbytes\": 8, \"location\": "
    "  {\"file\": \"tiny.pipe\", \"line\": 2, \"column\": 1}, \"step_first_access\": \"write\", \"replicated\": false}],"
    "\"graphs\": [{\"index\": 0, \"name\": \"step\", \"scope\": \"step\", \"hazards\": [], \"edges\": [[0, 1]],"
    " \"nodes\": ["
    "  {\"kind\": \"kernel\", \"id\": 0, \"name\": \"step/k\", \"location\": {\"file\": \"tiny.pipe\", \"line\": 4, "
    "   \"column\": 5}, \"accesses\": [{\"buffer\": \"x\", \"start\": 0, \"stop\": 4, \"mode\": \"rw\"}], \"module\": 0,"
    "   \"function\": \"k\", \"grid\": [1, 1, 1], \"block\": [4, 1, 1], \"shared_bytes\": 0, \"args\": ["
    "   {\"kind\": \"pointer\", \"ctype\": \"ptr\", \"buffer\": \"x\", \"byte_offset\": 0, \"value\": null},"
    "   {\"kind\": \"scalar\", \"ctype\": \"f32\", \"buffer\": null, \"byte_offset\": 0, \"value\": 2.5}]},"
    "  {\"kind\": \"memcpy\", \"id\": 1, \"name\": \"step/copy\", \"location\": {\"file\": \"tiny.pipe\", \"line\": 5, "
    "   \"column\": 5}, \"accesses\": [], \"src\": \"x\", \"src_offset\": 0, \"dst\": \"diag\", \"dst_offset\": 0, "
    "   \"nbytes\": 8}]}]}";

typedef struct file { const char *path; char *data; size_t size; } file;

static char *manifest(const file *files, size_t count, const char *readers) {
    char *out = malloc(4096);
    size_t used = (size_t)snprintf(out, 4096, TEST_MANIFEST_START "\"readers\": %s, "
                                   "\"pipec_version\": \"0.1.0\", \"source\": \"tiny.pipe\", \"archs\": [\"sm_90\"], "
                                   "\"files\": {", readers);
    for (size_t i = 0; i < count; i++) {
        char hex[65];
        sha256_hex(files[i].data, files[i].size, hex);
        used += (size_t)snprintf(out + used, 4096 - used, "%s\"%s\": \"sha256:%s\"", i ? ", " : "", files[i].path, hex);
    }
    snprintf(out + used, 4096 - used, "}}\n");
    return out;
}

/* A bundle of the tiny plan with the live-update record `live`: its files, and the manifest last. */
static size_t tiny_bundle_with(file out[4], const char *readers, int with_ptx, const char *live) {
    size_t n = 0, size = strlen(PLAN) + strlen(live) + 16;
    char *plan = malloc(size);
    snprintf(plan, size, "{\"live\": %s, %s", live, PLAN);
    out[n++] = (file){"plan.json", plan, strlen(plan)};
    out[n++] = (file){"modules/0.sm_90.cubin", strdup("\x7f" "ELF fake cubin"), 15};
    if (with_ptx) out[n++] = (file){"modules/0.ptx", strdup(".version 8.0\n.target sm_90\n"), 27};
    char *m = manifest(out, n, readers);
    out[n++] = (file){"manifest.json", m, strlen(m)};
    return n;
}

static size_t tiny_bundle(file out[4], const char *readers, int with_ptx) {
    return tiny_bundle_with(out, readers, with_ptx, "{\"values\": [], \"sites\": []}");
}

static void free_files(file *files, size_t n) {
    for (size_t i = 0; i < n; i++) free(files[i].data);
}

static pipec_status open_files(const file *files, size_t n, const pipec_options *options, pipec_pipeline **p) {
    pipec_file table[8];
    for (size_t i = 0; i < n; i++) table[i] = (pipec_file){files[i].path, files[i].data, files[i].size};
    return pipec_open_memory(table, n, options, p);
}

static void write_dir(const char *dir, const file *files, size_t n) {
    char path[512];
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/modules", dir);
    mkdir(path, 0777);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].path);
        FILE *f = fopen(path, "wb");
        fwrite(files[i].data, 1, files[i].size, f);
        fclose(f);
    }
}

static void expect_failure(pipec_status status, pipec_pipeline *const *out, pipec_status expected, const char *text,
                           const char *what) {
    const pipec_pipeline *p = *out;
    CHECK(status == expected, "%s: status %d, expected %d (%s)", what, status, expected, pipec_last_error());
    CHECK(strstr(pipec_last_error(), text) != NULL, "%s: the error does not say `%s`: %s", what, text, pipec_last_error());
    CHECK(strchr(pipec_last_error(), '\n') == NULL, "%s: the error is more than one line", what);
    CHECK(p == NULL, "%s: a failed open returns a pipeline", what);
    check_nothing_live(what);
}

static void test_tiny_bundle_runs(void) {
    file files[4];
    size_t n = tiny_bundle(files, "[1, 2]", 0);
    pipec_pipeline *p = NULL;
    CHECK(open_files(files, n, NULL, &p) == PIPEC_OK, "the tiny bundle does not open: %s", pipec_last_error());
    float x[4];
    CHECK(pipec_read_buffer(p, "x", x, sizeof x) == PIPEC_OK && x[0] == 1.5f && x[3] == 1.5f, "fill(1.5)");
    double loss = -1;
    CHECK(pipec_read_diag(p, "loss", &loss) == PIPEC_OK && loss == 0, "diag before a step: %g", loss);
    CHECK(pipec_step(p, 2) == PIPEC_OK && pipec_synchronize(p) == PIPEC_OK, "steps: %s", pipec_last_error());
    CHECK(pipec_read_diag(p, "step", &loss) == PIPEC_OK && loss == 1.5, "the memcpy node ran: %g", loss);
    CHECK(pipec_read_diag(p, "nothing", &loss) == PIPEC_ERROR_INVALID_ARGUMENT, "an unknown label");
    pipec_verify_report report;
    memset(&report, 0, sizeof report);
    report.version = PIPEC_OPTIONS_VERSION;
    CHECK(pipec_verify(p, 2, &report) == PIPEC_OK && report.ok && report.buffers == 2, "verify: %s", report.first);
    CHECK(pipec_save_state(p, "tiny-state", 2) == PIPEC_OK, "save: %s", pipec_last_error());
    float zero[4] = {0};
    CHECK(pipec_write_buffer(p, "x", zero, sizeof zero) == PIPEC_OK, "write");
    CHECK(pipec_load_state(p, "tiny-state") == PIPEC_OK, "load: %s", pipec_last_error());
    CHECK(pipec_read_buffer(p, "x", x, sizeof x) == PIPEC_OK && x[2] == 1.5f, "state restored: %g", x[2]);
    CHECK(pipec_load_state(p, "no-such-state") == PIPEC_ERROR_STATE, "a missing state");
    CHECK(pipec_close(p) == PIPEC_OK, "close");
    check_nothing_live("a pipeline closed");
    write_dir("tiny-bundle", files, n);
    CHECK(pipec_open_dir("tiny-bundle", NULL, &p) == PIPEC_OK, "the folder does not open: %s", pipec_last_error());
    pipec_close(p);
    free_files(files, n);
}

static void test_bad_bundles(void) {
    file files[4];
    pipec_pipeline *p = (pipec_pipeline *)&p;
    size_t n = tiny_bundle(files, "[1, 2]", 0);
    files[1].size -= 3; /* a truncated cubin */
    write_dir("truncated-cubin", files, n);
    expect_failure(pipec_open_dir("truncated-cubin", NULL, &p), &p, PIPEC_ERROR_BUNDLE,
                   "modules/0.sm_90.cubin does not match the manifest", "a truncated cubin");
    files[1].size += 3;
    files[n - 1].size /= 2; /* a truncated manifest */
    write_dir("truncated-manifest", files, n);
    expect_failure(pipec_open_dir("truncated-manifest", NULL, &p), &p, PIPEC_ERROR_BUNDLE,
                   "manifest.json is not valid JSON", "a truncated manifest");
    free_files(files, n);
    n = tiny_bundle(files, "[3, 3]", 0);
    expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_UNSUPPORTED, "needs a runtime reading versions 3 to 3",
                   "a newer format version");
    free_files(files, n);
    n = tiny_bundle(files, "[1, 1]", 0);
    expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_UNSUPPORTED, "needs a runtime reading versions 1 to 1",
                   "an older format version");
    free_files(files, n);
    n = tiny_bundle(files, "[1, 2]", 0);
    files[0].data[10] ^= 1; /* plan.json changed after the manifest was written */
    expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_BUNDLE, "plan.json does not match the manifest",
                   "a hash mismatch");
    files[0].data[10] ^= 1;
    expect_failure(open_files(files, n - 1, NULL, &p), &p, PIPEC_ERROR_BUNDLE, "the bundle has no manifest.json",
                   "no manifest");
    setenv("FAKE_CUDA_CAPABILITY", "80", 1);
    expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_UNSUPPORTED,
                   "no module for sm_80 (Fake H200): the bundle has cubins for sm_90 and no PTX", "a missing arch");
    free_files(files, n);
    n = tiny_bundle(files, "[1, 2]", 1);
    expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_UNSUPPORTED, "and PTX for a newer device",
                   "PTX for a newer arch");
    setenv("FAKE_CUDA_CAPABILITY", "100", 1);
    CHECK(open_files(files, n, NULL, &p) == PIPEC_OK, "a newer device takes the PTX: %s", pipec_last_error());
    pipec_close(p);
    unsetenv("FAKE_CUDA_CAPABILITY");
    free_files(files, n);
}

static void test_bindings(void) {
    file files[4];
    size_t n = tiny_bundle(files, "[1, 2]", 0);
    pipec_pipeline *p = NULL;
    pipec_options options;
    pipec_options_init(&options);
    float device[8];
    pipec_binding binding = {"x", (CUdeviceptr)(uintptr_t)device, 8, PIPEC_F32};
    options.bindings = &binding;
    options.binding_count = 1;
    expect_failure(open_files(files, n, &options, &p), &p, PIPEC_ERROR_BIND,
                   "cannot bind `x`: the allocation has 8 bytes, the buffer 16 (declared at tiny.pipe:1:1)", "a wrong size");
    binding.bytes = 16;
    binding.dtype = PIPEC_I32;
    expect_failure(open_files(files, n, &options, &p), &p, PIPEC_ERROR_BIND,
                   "cannot bind `x`: the allocation holds i32, the buffer f32", "a wrong type");
    binding.buffer = "y";
    expect_failure(open_files(files, n, &options, &p), &p, PIPEC_ERROR_BIND, "no buffer named y in tiny.pipe",
                   "an unknown buffer");
    binding.buffer = "diag";
    binding.bytes = 8;
    binding.dtype = PIPEC_F32;
    expect_failure(open_files(files, n, &options, &p), &p, PIPEC_ERROR_BIND, "`diag` is mapped host memory",
                   "a mapped buffer");
    options.version = 99;
    expect_failure(open_files(files, n, &options, &p), &p, PIPEC_ERROR_INVALID_ARGUMENT, "pipec_options.version is 99",
                   "an options version");
    free_files(files, n);
}

/* A plan of a buffer and a table of two addresses into it, the second naming `second`. */
static size_t table_bundle(file out[2], const char *second) {
    char *plan = malloc(2048);
    snprintf(plan, 2048,
             "{\"live\": {\"values\": [], \"sites\": []}, \"pipe\": \"table.pipe\", \"pipe_sha256\": \"00\", \"pipec_version\": \"0.1.0\", \"arch\": \"sm_90\", "
             "\"compiler\": \"nvrtc\", \"lanes\": 1, \"gemm_groups\": [], \"init\": null, \"step\": 0, \"modules\": [],"
             "\"buffers\": ["
             " {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4], \"memory\": \"device\", \"init\": {\"kind\": "
             "  \"zeros\", \"args\": [], \"seed\": null, \"path\": null, \"addresses\": []}, \"labels\": [], \"nbytes\": 16,"
             "  \"location\": {\"file\": \"table.pipe\", \"line\": 1, \"column\": 1}, \"step_first_access\": null,"
             "  \"replicated\": false},"
             " {\"name\": \"t\", \"dtype\": \"u64\", \"shape\": [2], \"memory\": \"device\", \"init\": {\"kind\": "
             "  \"addresses\", \"args\": [], \"seed\": null, \"path\": null, \"addresses\": [{\"buffer\": \"x\", "
             "  \"byte_offset\": 8}, {\"buffer\": \"%s\", \"byte_offset\": 0}]}, \"labels\": [], \"nbytes\": 16,"
             "  \"location\": {\"file\": \"table.pipe\", \"line\": 2, \"column\": 1}, \"step_first_access\": null,"
             "  \"replicated\": false}],"
             "\"graphs\": [{\"index\": 0, \"name\": \"step\", \"scope\": \"step\", \"hazards\": [], \"edges\": [],"
             " \"nodes\": []}]}", second);
    out[0] = (file){"plan.json", plan, strlen(plan)};
    char *m = manifest(out, 1, TEST_READERS);
    out[1] = (file){"manifest.json", m, strlen(m)};
    return 2;
}

/* A table of addresses holds this process's addresses: at open, and after a state is loaded;
 * it cannot be bound, and one naming no buffer of the plan is refused. */
static void test_tables(void) {
    file files[2];
    size_t n = table_bundle(files, "x");
    pipec_pipeline *p = NULL;
    CHECK(open_files(files, n, NULL, &p) == PIPEC_OK, "the table bundle does not open: %s", pipec_last_error());
    CUdeviceptr x = 0;
    uint64_t t[2] = {0, 0}, zero[2] = {0, 0};
    CHECK(pipec_buffer(p, "x", &x, NULL, NULL) == PIPEC_OK, "x: %s", pipec_last_error());
    CHECK(pipec_read_buffer(p, "t", t, sizeof t) == PIPEC_OK && t[0] == x + 8 && t[1] == x, "the table at open");
    CHECK(pipec_save_state(p, "table-state", 0) == PIPEC_OK, "save: %s", pipec_last_error());
    CHECK(pipec_write_buffer(p, "t", zero, sizeof zero) == PIPEC_OK, "write");
    CHECK(pipec_load_state(p, "table-state") == PIPEC_OK, "load: %s", pipec_last_error());
    CHECK(pipec_read_buffer(p, "t", t, sizeof t) == PIPEC_OK && t[0] == x + 8 && t[1] == x, "the table after a load");
    CHECK(pipec_close(p) == PIPEC_OK, "close");
    pipec_options options;
    pipec_options_init(&options);
    pipec_binding binding = {"t", (CUdeviceptr)(uintptr_t)t, 16, PIPEC_U64};
    options.bindings = &binding;
    options.binding_count = 1;
    expect_failure(open_files(files, n, &options, &p), &p, PIPEC_ERROR_BIND, "`t` is a table of addresses",
                   "a bound table");
    free_files(files, n);
    n = table_bundle(files, "nope");
    expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_BUNDLE,
                   "element 1 of the table `t` names no buffer of the plan", "a table naming no buffer");
    free_files(files, n);
}

/* pipec_add_to_graph: the step's nodes go into a graph the host builds, after its node. */
static void test_add_to_graph(void *fake) {
    typedef int (*graph_create)(CUgraph *, unsigned);
    typedef int (*add_empty)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
    typedef int (*get_nodes)(CUgraph, CUgraphNode *, size_t *);
    typedef int (*instantiate)(void **, CUgraph, unsigned long long);
    typedef int (*launch)(void *, CUstream);
    typedef int (*destroy)(void *);
    graph_create create = (graph_create)dlsym(fake, "cuGraphCreate");
    add_empty empty = (add_empty)dlsym(fake, "cuGraphAddEmptyNode");
    get_nodes nodes = (get_nodes)dlsym(fake, "cuGraphGetNodes");
    instantiate make = (instantiate)dlsym(fake, "cuGraphInstantiateWithFlags");
    launch run = (launch)dlsym(fake, "cuGraphLaunch");
    destroy exec_destroy = (destroy)dlsym(fake, "cuGraphExecDestroy"), graph_destroy = (destroy)dlsym(fake, "cuGraphDestroy");
    file files[4];
    size_t n = tiny_bundle(files, "[1, 2]", 0);
    pipec_pipeline *p = NULL;
    CHECK(open_files(files, n, NULL, &p) == PIPEC_OK, "open: %s", pipec_last_error());
    CUgraph host;
    CUgraphNode first, last;
    create(&host, 0);
    empty(&first, host, NULL, 0);
    CHECK(pipec_add_to_graph(p, host, &first, 1, &last) == PIPEC_OK, "add_to_graph: %s", pipec_last_error());
    size_t count = 0;
    nodes(host, NULL, &count);
    CHECK(count == 4, "the host's node, the kernel, the copy and the join: %zu nodes", count);
    CHECK(pipec_add_to_graph(p, NULL, NULL, 0, NULL) == PIPEC_ERROR_INVALID_ARGUMENT, "a NULL host graph");
    double copied = -1;
    void *exec;
    make(&exec, host, 0);
    CHECK(pipec_read_diag(p, "loss", &copied) == PIPEC_OK && copied == 0, "before the host's launch: %g", copied);
    run(exec, NULL);
    CHECK(pipec_read_diag(p, "loss", &copied) == PIPEC_OK && copied == 1.5, "the host's graph ran the copy: %g", copied);
    exec_destroy(exec);
    graph_destroy(host);
    pipec_close(p);
    check_nothing_live("a host graph");
    free_files(files, n);
}

/* The host's own stream: the pipeline enqueues on it, and pipec_launch orders replays after
 * another stream's work. */
static void test_host_stream(void *fake) {
    typedef int (*stream_create)(CUstream *, unsigned);
    typedef int (*stream_destroy)(CUstream);
    stream_create create = (stream_create)dlsym(fake, "cuStreamCreate");
    stream_destroy destroy = (stream_destroy)dlsym(fake, "cuStreamDestroy_v2");
    CUstream mine, other;
    create(&mine, 1);
    create(&other, 1);
    file files[4];
    size_t n = tiny_bundle(files, "[1, 2]", 0);
    pipec_options options;
    pipec_options_init(&options);
    options.stream = mine;
    pipec_pipeline *p = NULL;
    CHECK(open_files(files, n, &options, &p) == PIPEC_OK, "open on the host's stream: %s", pipec_last_error());
    CHECK(pipec_stream(p) == mine, "the pipeline enqueues on the host's stream");
    CHECK(pipec_launch(p, other, 1) == PIPEC_OK, "a launch after another stream: %s", pipec_last_error());
    double copied = -1;
    CHECK(pipec_read_diag(p, "loss", &copied) == PIPEC_OK && copied == 1.5, "the replay ran: %g", copied);
    pipec_close(p);
    destroy(mine);
    destroy(other);
    check_nothing_live("the host's stream");
    free_files(files, n);
}

/* --- live updates (src/live.c) -------------------------------------------------------------- */

/* SCALE reaches the kernel's f32 argument (times 1.0), THREADS its block (a kernel of at most 256
 * threads), N only a buffer's dimension. */
static const char LIVE[] =
    "{\"values\": ["
    " {\"name\": \"SCALE\", \"location\": {}, \"updatable\": true, \"expr\": 2.5, \"value\": 2.5, \"structural\": null,"
    "  \"sites\": [0]},"
    " {\"name\": \"THREADS\", \"location\": {}, \"updatable\": true, \"expr\": 4, \"value\": 4, \"structural\": null,"
    "  \"sites\": [1]},"
    " {\"name\": \"N\", \"location\": {}, \"updatable\": true, \"expr\": 4, \"value\": 4,"
    "  \"structural\": \"reaches a buffer's dimension at tiny.pipe:1:11\", \"sites\": []}],"
    " \"sites\": ["
    " {\"graph\": 0, \"node\": 0, \"field\": \"arg\", \"index\": 1, \"expr\": [\"*\", [\"ref\", 0], 1.0], \"low\": null,"
    "  \"high\": null, \"multiple\": 1, \"threads\": 0},"
    " {\"graph\": 0, \"node\": 0, \"field\": \"block\", \"index\": 0, \"expr\": [\"ref\", 1], \"low\": 1, \"high\": 1024,"
    "  \"multiple\": 1, \"threads\": 256}]}";

static pipec_status set_one(pipec_pipeline *p, const char *name, pipec_value value, size_t *changed) {
    *changed = 99;
    return pipec_update_constants(p, &name, &value, 1, changed);
}

static void expect_refusal(pipec_status status, pipec_status expected, const char *text, const char *what) {
    CHECK(status == expected, "%s: status %d, expected %d (%s)", what, status, expected, pipec_last_error());
    CHECK(strstr(pipec_last_error(), text) != NULL, "%s: the error does not say `%s`: %s", what, text, pipec_last_error());
    CHECK(strchr(pipec_last_error(), '\n') == NULL, "%s: the error is more than one line", what);
}

static void test_live_updates(void) {
    file files[4];
    size_t n = tiny_bundle_with(files, "[1, 2]", 0, LIVE), changed;
    pipec_pipeline *p = NULL;
    CHECK(open_files(files, n, NULL, &p) == PIPEC_OK, "open: %s", pipec_last_error());
    pipec_value value;
    const char *structural = "unset";
    CHECK(pipec_constant(p, "SCALE", &value, &structural) == PIPEC_OK && value.kind == PIPEC_VALUE_FLOAT &&
          value.as.f == 2.5 && structural == NULL, "SCALE as compiled");
    CHECK(pipec_constant(p, "N", NULL, &structural) == PIPEC_OK && structural &&
          strcmp(structural, "reaches a buffer's dimension at tiny.pipe:1:11") == 0, "N is structural");
    expect_refusal(pipec_constant(p, "M", &value, NULL), PIPEC_ERROR_INVALID_ARGUMENT, "tiny.pipe has no constant `M`",
                   "an unknown constant's value");

    pipec_value scale = {PIPEC_VALUE_FLOAT, {.f = 3.5}}, threads = {PIPEC_VALUE_INT, {.i = 8}};
    CHECK(set_one(p, "SCALE", scale, &changed) == PIPEC_OK && changed == 1, "SCALE = 3.5: %s", pipec_last_error());
    CHECK(pipec_constant(p, "SCALE", &value, NULL) == PIPEC_OK && value.as.f == 3.5, "SCALE is 3.5 now");
    CHECK(set_one(p, "SCALE", scale, &changed) == PIPEC_OK && changed == 0, "the same value changes no node");
    CHECK(set_one(p, "THREADS", threads, &changed) == PIPEC_OK && changed == 1, "THREADS = 8: %s", pipec_last_error());
    pipec_verify_report report;
    memset(&report, 0, sizeof report);
    report.version = PIPEC_OPTIONS_VERSION;
    CHECK(pipec_verify(p, 1, &report) == PIPEC_OK && report.ok, "the graph and the eager program agree: %s", report.first);

    expect_refusal(set_one(p, "N", threads, &changed), PIPEC_ERROR_UPDATE_REFUSED,
                   "`N` cannot change in place: it reaches a buffer's dimension at tiny.pipe:1:11", "a structural constant");
    expect_refusal(set_one(p, "M", threads, &changed), PIPEC_ERROR_INVALID_ARGUMENT, "tiny.pipe has no constant `M`",
                   "an unknown constant");
    threads.as.i = 2048;
    expect_refusal(set_one(p, "THREADS", threads, &changed), PIPEC_ERROR_UPDATE_REFUSED,
                   "THREADS = 2048: block.x of `step/k` (tiny.pipe:4:5): block.x = 2048 lies outside 1 to 1024", "out of range");
    threads.as.i = 512;
    expect_refusal(set_one(p, "THREADS", threads, &changed), PIPEC_ERROR_UPDATE_REFUSED,
                   "holds more than the 256 threads the kernel allows", "more threads than the kernel allows");
    threads = (pipec_value){PIPEC_VALUE_FLOAT, {.f = 8.0}};
    expect_refusal(set_one(p, "THREADS", threads, &changed), PIPEC_ERROR_UPDATE_REFUSED,
                   "block.x must be an integer, not a float", "a float for a block");
    scale = (pipec_value){PIPEC_VALUE_BOOL, {.b = 1}};
    expect_refusal(set_one(p, "SCALE", scale, &changed), PIPEC_ERROR_UPDATE_REFUSED,
                   "expected a number, found the boolean `true`", "a boolean where a number is multiplied");
    expect_refusal(set_one(p, "SCALE", (pipec_value){(pipec_value_kind)7, {.i = 0}}, &changed),
                   PIPEC_ERROR_INVALID_ARGUMENT, "the value of `SCALE` has no kind 7", "an unknown kind");
    expect_refusal(pipec_update_constants(p, NULL, &scale, 1, &changed), PIPEC_ERROR_INVALID_ARGUMENT, "is NULL",
                   "no names");

    const char *both[] = {"SCALE", "THREADS"};
    pipec_value values[] = {{PIPEC_VALUE_FLOAT, {.f = 9.0}}, {PIPEC_VALUE_INT, {.i = 2048}}};
    expect_refusal(pipec_update_constants(p, both, values, 2, &changed), PIPEC_ERROR_UPDATE_REFUSED,
                   "SCALE = 9.0, THREADS = 2048: block.x", "all or nothing");
    CHECK(pipec_constant(p, "SCALE", &value, NULL) == PIPEC_OK && value.as.f == 3.5, "a refusal changes nothing");

    values[1].as.i = 16;
    setenv("FAKE_CUDA_FAIL_EXEC_SET", "k", 1);
    expect_refusal(pipec_update_constants(p, both, values, 2, &changed), PIPEC_ERROR_CUDA,
                   "cuGraphExecKernelNodeSetParams failed", "a driver failure");
    unsetenv("FAKE_CUDA_FAIL_EXEC_SET");
    CHECK(pipec_constant(p, "SCALE", &value, NULL) == PIPEC_OK && value.as.f == 3.5, "a driver failure keeps the values");
    CHECK(pipec_update_constants(p, both, values, 2, &changed) == PIPEC_OK && changed == 1,
          "after the driver failure the node has its old fields: %s", pipec_last_error());
    pipec_close(p);
    check_nothing_live("live updates");
    free_files(files, n);

    static const char *const malformed[] = {
        "{\"values\": [], \"sites\": [{\"graph\": 5, \"node\": 0, \"field\": \"arg\", \"index\": 1, \"expr\": 1, "
        "\"low\": null, \"high\": null, \"multiple\": 1, \"threads\": 0}]}",
        "{\"values\": [], \"sites\": [{\"graph\": 0, \"node\": 0, \"field\": \"arg\", \"index\": 0, \"expr\": 1, "
        "\"low\": null, \"high\": null, \"multiple\": 1, \"threads\": 0}]}",
        "{\"values\": [{\"name\": \"X\", \"updatable\": true, \"expr\": 1, \"value\": 1, \"structural\": null, "
        "\"sites\": [3]}], \"sites\": []}",
        "{\"values\": []}",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        n = tiny_bundle_with(files, "[1, 2]", 0, malformed[i]);
        p = (pipec_pipeline *)&p;
        expect_failure(open_files(files, n, NULL, &p), &p, PIPEC_ERROR_BUNDLE, "plan.json", "a malformed record");
        free_files(files, n);
    }
}

int main(void) {
    const char *driver = getenv("PIPEC_DRIVER_LIBRARY");
    void *fake = driver ? dlopen(driver, RTLD_NOW) : NULL; /* held, so its counters outlive each pipeline */
    if (!fake || !(*(void **)&fake_live = dlsym(fake, "fake_cuda_live"))) {
        fprintf(stderr, "PIPEC_DRIVER_LIBRARY must name the fake driver (fake_cuda)\n");
        return 1;
    }
    char dir[] = "/tmp/pipec-native-XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0) return 1;
    test_json();
    test_sha256();
    test_tiny_bundle_runs();
    test_bad_bundles();
    test_bindings();
    test_tables();
    test_add_to_graph(fake);
    test_host_stream(fake);
    test_live_updates();
    dlclose(fake);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("all checks passed\n");
    return failures != 0;
}
