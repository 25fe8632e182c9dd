/* The bundle's stored GEMM algorithms in the C runtime (ctest; CI runs it under AddressSanitizer,
 * whose leak checker fails the run on any leak): a tiny plan with one GEMM node opens with each
 * gemm_algorithms.json a bundle can hold, and pipec_gemm_at says which algorithm runs and why, in
 * the words tests/test_gemm_algorithms.py expects of the Python runtime (tests/test_native_runtime.py
 * compares the two runtimes whole); each malformed file is one PIPEC_ERROR_BUNDLE line. Afterwards
 * neither the fake driver nor the fake cuBLASLt holds anything. */
#include <dlfcn.h>
#include <stdint.h>
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

#define LOCATION "\"location\": {\"file\": \"gemm.pipe\", \"line\": 1, \"column\": 1}"
#define BUFFER(name, dtype, shape, nbytes, init, first) \
    "{\"name\": \"" name "\", \"dtype\": \"" dtype "\", \"shape\": [" shape "], \"memory\": \"device\", \"init\": " init \
    ", \"labels\": [], \"nbytes\": " nbytes ", " LOCATION ", \"step_first_access\": \"" first "\", \"replicated\": false}"
#define MATRIX(buffer, offset, rows, cols) \
    "{\"buffer\": \"" buffer "\", \"byte_offset\": " offset ", \"dtype\": \"f32\", \"rows\": " rows ", \"cols\": " cols \
    ", \"ld\": " cols ", \"batch_stride\": 0}"

/* y = x @ w, x 2 x 4 starting 16 bytes into its buffer (so cuBLASLt's B is 16-byte aligned), with
 * a workspace of 256 bytes. */
static const char PLAN[] =
    "{\"pipe\": \"gemm.pipe\", \"pipe_sha256\": \"00\", \"pipec_version\": \"test\", \"arch\": \"sm_90\", "
    "\"compiler\": \"nvrtc\", \"lanes\": 1, \"modules\": [], \"step\": 0, \"init\": null, \"gemm_groups\": [], "
    "\"buffers\": ["
    BUFFER("x", "f32", "12", "48", "{\"kind\": \"fill\", \"args\": [1.5], \"seed\": null, \"path\": null}", "read") ", "
    BUFFER("w", "f32", "4, 2", "32", "{\"kind\": \"fill\", \"args\": [0.5], \"seed\": null, \"path\": null}", "read") ", "
    BUFFER("y", "f32", "2, 2", "16", "{\"kind\": \"zeros\", \"args\": [], \"seed\": null, \"path\": null}", "write") ", "
    BUFFER("ws", "u8", "256", "256", "{\"kind\": \"uninit\", \"args\": [], \"seed\": null, \"path\": null}", "write")
    "], \"graphs\": [{\"index\": 0, \"name\": \"step\", \"scope\": \"step\", \"edges\": [], \"hazards\": [], "
    "\"edge_kinds\": [], \"nodes\": [{\"kind\": \"gemm\", \"id\": 0, \"name\": \"gemm:y\", " LOCATION ", "
    "\"accesses\": [{\"buffer\": \"x\", \"start\": 4, \"stop\": 12, \"mode\": \"r\"}, "
    "{\"buffer\": \"w\", \"start\": 0, \"stop\": 8, \"mode\": \"r\"}, {\"buffer\": \"y\", \"start\": 0, \"stop\": 4, "
    "\"mode\": \"w\"}, {\"buffer\": \"ws\", \"start\": 0, \"stop\": 256, \"mode\": \"w\"}], "
    "\"m\": 2, \"n\": 2, \"k\": 4, \"batch\": 1, \"a\": " MATRIX("x", "16", "2", "4") ", \"b\": " MATRIX("w", "0", "4", "2")
    ", \"c\": " MATRIX("y", "0", "2", "2") ", \"trans_a\": false, \"trans_b\": false, \"alpha\": 1.0, \"beta\": 0.0, "
    "\"compute\": \"f32\", \"epilogue\": \"none\", \"bias\": null, \"aux\": null, \"bias_grad\": null, "
    "\"workspace\": \"ws\", \"workspace_bytes\": 256}]}], \"world_size\": 1, \"rank\": 0, \"live\": {\"values\": [], \"sites\": []}}";

#define HERE "Fake H200 (sm_90, 132 SMs, cuBLASLt 130100)"
#define ALIGNED "[256, 16, 256, 256]" /* cuBLASLt's A (w), B (x), C and D (y) here */

static void (*fake_live)(int counts[6]);
static void (*cublaslt_live)(int counts[4]);

static void check_nothing_live(const char *after) {
    int counts[6];
    fake_live(counts);
    for (int i = 0; i < 6; i++) CHECK(counts[i] == 0, "after %s: the fake driver still holds %d of kind %d", after, counts[i], i);
    cublaslt_live(counts);
    for (int i = 0; i < 4; i++) CHECK(counts[i] == 0, "after %s: the fake cuBLASLt still holds %d of kind %d", after, counts[i], i);
}

/* The fake cuBLASLt's algorithm `number` (each 64-bit word), needing `workspace` bytes, as hex. */
static const char *algorithm(uint64_t number, uint64_t workspace) {
    static char hex[129];
    for (int word = 0; word < 8; word++) {
        uint64_t value = word == 1 ? workspace : number;
        for (int byte = 0; byte < 8; byte++)
            snprintf(hex + 16 * word + 2 * byte, 3, "%02x", (unsigned)(value >> 8 * byte) & 0xff);
    }
    return hex;
}

/* One GPU's choices: a gemm_algorithms.json entry. */
static const char *gpu(const char *name, const char *node, const char *algo, const char *alignments,
                       const char *chosen_by) {
    static char out[2][1024];
    static int turn;
    char *entry = out[turn ^= 1];
    snprintf(entry, sizeof out[0], "{\"device\": {\"name\": \"%s\", \"arch\": \"sm_90\", \"multiprocessors\": 132}, "
             "\"cublaslt\": 130100, \"gemms\": {\"%s\": {\"algorithm\": \"%s\", \"alignments\": %s, \"chosen_by\": "
             "\"%s\"}}}", name, node, algo, alignments, chosen_by);
    return entry;
}

/* Opens the tiny GEMM bundle from memory, with `algorithms` as its gemm_algorithms.json (NULL: none). */
static pipec_status open_with(const char *algorithms, pipec_pipeline **p) {
    char plan_hex[65], algorithms_hex[65], manifest[1024];
    sha256_hex(PLAN, strlen(PLAN), plan_hex);
    if (algorithms) sha256_hex(algorithms, strlen(algorithms), algorithms_hex);
    snprintf(manifest, sizeof manifest, TEST_MANIFEST_START "\"readers\": " TEST_READERS ", "
             "\"pipec_version\": \"test\", \"source\": \"gemm.pipe\", \"archs\": [\"sm_90\"], \"files\": "
             "{\"plan.json\": \"sha256:%s\"%s%s%s}}\n", plan_hex, algorithms ? ", \"gemm_algorithms.json\": \"sha256:" : "",
             algorithms ? algorithms_hex : "", algorithms ? "\"" : "");
    pipec_file files[3] = {{"plan.json", PLAN, strlen(PLAN)}, {"manifest.json", manifest, strlen(manifest)},
                           {"gemm_algorithms.json", algorithms, algorithms ? strlen(algorithms) : 0}};
    return pipec_open_memory(files, algorithms ? 3 : 2, NULL, p);
}

static void expect_choice(const char *algorithms, int stored, const char *why, const char *what) {
    pipec_pipeline *p = NULL;
    CHECK(open_with(algorithms, &p) == PIPEC_OK, "%s: the bundle does not open: %s", what, pipec_last_error());
    const char *node = NULL, *said = NULL;
    int was_stored = -1;
    CHECK(pipec_gemm_count(p) == 1, "%s: %zu GEMM nodes", what, pipec_gemm_count(p));
    CHECK(pipec_gemm_at(p, 0, &node, &was_stored, &said) == PIPEC_OK, "%s: %s", what, pipec_last_error());
    CHECK(node && strcmp(node, "gemm:y") == 0, "%s: the node is %s", what, node ? node : "NULL");
    CHECK(was_stored == stored, "%s: stored is %d", what, was_stored);
    CHECK(said && strcmp(said, why) == 0, "%s: why is\n  %s\nnot\n  %s", what, said ? said : "NULL", why);
    CHECK(pipec_step(p, 1) == PIPEC_OK && pipec_synchronize(p) == PIPEC_OK, "%s: a step: %s", what, pipec_last_error());
    CHECK(pipec_close(p) == PIPEC_OK, "%s: close", what);
    check_nothing_live(what);
}

static void test_choices(void) {
    char file[4096];
    expect_choice(NULL, 0, "heuristic: the bundle stores no GEMM algorithms", "no file");
    expect_choice("{\"choices\": []}", 0, "heuristic: the bundle stores no GEMM algorithms", "no GPU's choices");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", algorithm(2, 2), ALIGNED, "tune"));
    expect_choice(file, 1, "stored (tune)", "stored");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", algorithm(9, 9), ALIGNED, "tune"));
    expect_choice(file, 0, "heuristic: cublasLtMatmulAlgoCheck refuses the stored algorithm (cuBLAS status 7)",
                  "refused by cuBLASLt");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", algorithm(3, 257), ALIGNED, "tune"));
    expect_choice(file, 0, "heuristic: the stored algorithm needs 257 bytes of workspace, and the node has 256",
                  "too much workspace");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", algorithm(3, 256), ALIGNED, "heuristic"));
    expect_choice(file, 1, "stored (heuristic)", "all the workspace");
    snprintf(file, sizeof file, "{\"choices\": [%s]}",
             gpu("Fake H200", "gemm:y", algorithm(2, 2), "[256, 256, 256, 256]", "heuristic"));
    expect_choice(file, 0, "heuristic: its operands (cuBLASLt's A, B, C, D) are aligned to 256/16/256/256 bytes here, "
                  "and the stored algorithm was chosen for 256/256/256/256", "less aligned");
    snprintf(file, sizeof file, "{\"choices\": [%s, ", gpu("NVIDIA H200", "gemm:y", algorithm(2, 2), ALIGNED, "tune"));
    snprintf(file + strlen(file), sizeof file - strlen(file), "%s]}",
             gpu("NVIDIA H100 80GB HBM3", "gemm:y", algorithm(2, 2), ALIGNED, "tune"));
    expect_choice(file, 0, "heuristic: the bundle's GEMM algorithms were chosen on NVIDIA H200 (sm_90, 132 SMs, "
                  "cuBLASLt 130100); NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, cuBLASLt 130100), and this is " HERE,
                  "other GPUs");
    expect_choice("{\"choices\": [{\"device\": {\"name\": \"Fake H200\", \"arch\": \"sm_90\", \"multiprocessors\": 132}, "
                  "\"cublaslt\": 130100, \"gemms\": {}}]}", 0,
                  "heuristic: the bundle stores none for this node on this GPU", "none for the node");
}

static void expect_refused(const char *algorithms, const char *text, const char *what) {
    pipec_pipeline *p = (pipec_pipeline *)&p;
    pipec_status status = open_with(algorithms, &p);
    CHECK(status == PIPEC_ERROR_BUNDLE, "%s: status %d (%s)", what, status, pipec_last_error());
    CHECK(strstr(pipec_last_error(), text) != NULL, "%s: the error does not say `%s`: %s", what, text, pipec_last_error());
    CHECK(strncmp(pipec_last_error(), "<memory>/gemm_algorithms.json", 29) == 0, "%s: names no file: %s", what,
          pipec_last_error());
    CHECK(strchr(pipec_last_error(), '\n') == NULL, "%s: the error is more than one line", what);
    CHECK(p == NULL, "%s: a failed open returns a pipeline", what);
    check_nothing_live(what);
}

static void test_malformed(void) {
    char file[4096];
    expect_refused("{\"choices\": [", "gemm_algorithms.json is not JSON", "not JSON");
    expect_refused("[]", "has no `choices` list", "no choices");
    expect_refused("{\"choices\": [1]}", "choices[0] is not an object", "a choice");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "nope", algorithm(2, 2), ALIGNED, "tune"));
    expect_refused(file, "choices[0]: `nope` is not a GEMM node of the plan (its GEMM nodes: `gemm:y`)", "a node");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", "abcd", ALIGNED, "tune"));
    expect_refused(file, "gemm `gemm:y`: `algorithm` holds 2 bytes; a cublasLtMatmulAlgo_t has 64 (128 hex digits)",
                   "a short algorithm");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", "abc", ALIGNED, "tune"));
    expect_refused(file, "`algorithm` is not hex", "an odd algorithm");
    snprintf(file, sizeof file, "{\"choices\": [%s]}",
             gpu("Fake H200", "gemm:y", algorithm(2, 2), "[256, 256, 256, 300]", "tune"));
    expect_refused(file, "`alignments` is not four powers of two up to 256", "an alignment");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("Fake H200", "gemm:y", algorithm(2, 2), ALIGNED, "fast"));
    expect_refused(file, "`chosen_by` is not one of heuristic, tune", "chosen_by");
    snprintf(file, sizeof file, "{\"choices\": [%s]}", gpu("", "gemm:y", algorithm(2, 2), ALIGNED, "tune"));
    expect_refused(file, "choices[0]: `device` is not {\"name\": ..., \"arch\": \"sm_XY\", \"multiprocessors\": N}",
                   "a device");
    expect_refused("{\"choices\": [{\"device\": {\"name\": \"Fake H200\", \"arch\": \"sm_90\", \"multiprocessors\": 132}, "
                   "\"cublaslt\": -1, \"gemms\": {}}]}", "`cublaslt` is not cuBLASLt's version", "a version");
    expect_refused("{\"choices\": [{\"device\": {\"name\": \"Fake H200\", \"arch\": \"sm_90\", \"multiprocessors\": 132}, "
                   "\"cublaslt\": 130100, \"gemms\": {\"gemm:y\": 1}}]}", "gemm `gemm:y` is not an object", "an entry");
}

static void test_report_arguments(void) {
    pipec_pipeline *p = NULL;
    CHECK(pipec_gemm_count(NULL) == 0, "no pipeline, no GEMM nodes");
    CHECK(pipec_gemm_at(NULL, 0, NULL, NULL, NULL) == PIPEC_ERROR_INVALID_ARGUMENT, "a NULL pipeline");
    CHECK(open_with(NULL, &p) == PIPEC_OK, "open: %s", pipec_last_error());
    CHECK(pipec_gemm_at(p, 0, NULL, NULL, NULL) == PIPEC_OK, "NULL out-parameters are allowed");
    CHECK(pipec_gemm_at(p, 1, NULL, NULL, NULL) == PIPEC_ERROR_INVALID_ARGUMENT &&
          strcmp(pipec_last_error(), "GEMM node 1 does not exist (1 GEMM nodes)") == 0, "%s", pipec_last_error());
    pipec_close(p);
    check_nothing_live("the report's arguments");
}

int main(void) {
    const char *driver = getenv("PIPEC_DRIVER_LIBRARY"), *cublaslt = getenv("PIPEC_CUBLASLT_LIBRARY");
    void *fake = driver ? dlopen(driver, RTLD_NOW) : NULL; /* held, so the counters outlive each pipeline */
    void *lt = cublaslt ? dlopen(cublaslt, RTLD_NOW) : NULL;
    if (!fake || !lt || !(*(void **)&fake_live = dlsym(fake, "fake_cuda_live")) ||
        !(*(void **)&cublaslt_live = dlsym(lt, "fake_cublaslt_live"))) {
        fprintf(stderr, "PIPEC_DRIVER_LIBRARY and PIPEC_CUBLASLT_LIBRARY must name the fakes\n");
        return 1;
    }
    test_choices();
    test_malformed();
    test_report_arguments();
    dlclose(lt);
    dlclose(fake);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("all checks passed\n");
    return failures != 0;
}
