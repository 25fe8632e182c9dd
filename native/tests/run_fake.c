/* The C runtime driven from tests/test_native_runtime.py: opens a bundle (through the driver
 * $PIPEC_DRIVER_LIBRARY names, the fake in the CPU tests), and writes what the test compares
 * with the Python runtime as JSON: every buffer's address and size, the SHA-256 of every
 * buffer after the open, after the graph steps and after the eager steps, how each GEMM node's
 * algorithm was chosen (pipec_gemm_at), and the labelled diagnostics. Options, in order of use:
 * --load DIR (a saved state), --update PLAN (a new plan applied live), --set NAME=VALUE,...
 * (constants changed live), --steps N, --eager N, --verify N, --save DIR. With `--nccl RANK/SIZE`
 * first, the pipeline runs over a communicator this host creates through $PIPEC_NCCL_LIBRARY (the
 * fake NCCL in the CPU tests), destroyed after the pipeline is closed.
 *   run_fake BUNDLE OUT.json [--nccl RANK/SIZE] [options] */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/sha256.h"
#include "pipec.h"

static int failed(const char *what) {
    fprintf(stderr, "%s: %s\n", what, pipec_last_error());
    return 1;
}

static int hashes(pipec_pipeline *p, FILE *out, const char *key) {
    fprintf(out, ",\"%s\":{", key);
    for (size_t i = 0; i < pipec_buffer_count(p); i++) {
        const char *name = pipec_buffer_name(p, i);
        size_t bytes;
        if (pipec_buffer(p, name, NULL, &bytes, NULL) != PIPEC_OK) return failed("pipec_buffer");
        unsigned char *data = malloc(bytes ? bytes : 1);
        if (!data || pipec_read_buffer(p, name, data, bytes) != PIPEC_OK) {
            free(data);
            return failed("pipec_read_buffer");
        }
        char hex[65];
        sha256_hex(data, bytes, hex);
        free(data);
        fprintf(out, "%s\"%s\":\"%s\"", i ? "," : "", name, hex);
    }
    fprintf(out, "}");
    return 0;
}

static char *slurp(const char *path, size_t *length) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n + 1);
    *length = data ? fread(data, 1, (size_t)n, f) : 0;
    fclose(f);
    return data;
}

/* --set NAME=VALUE[,NAME=VALUE...]: one pipec_update_constants call; a value is `true`, `false`,
 * a float when Python's repr would write one (a `.`, an exponent, inf, nan), else an integer. */
static int set_constants(pipec_pipeline *p, FILE *out, const char *assignments) {
    char *text = strdup(assignments), *names[16], *save = NULL;
    pipec_value values[16];
    size_t count = 0;
    for (char *item = strtok_r(text, ",", &save); item && count < 16; item = strtok_r(NULL, ",", &save), count++) {
        char *equals = strchr(item, '=');
        if (!equals) break;
        *equals = 0;
        const char *v = equals + 1;
        names[count] = item;
        if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
            values[count] = (pipec_value){PIPEC_VALUE_BOOL, {.b = v[0] == 't'}};
        else if (strpbrk(v, ".eEn"))
            values[count] = (pipec_value){PIPEC_VALUE_FLOAT, {.f = strtod(v, NULL)}};
        else if (v[0] != '-' && strtoull(v, NULL, 10) > INT64_MAX)
            values[count] = (pipec_value){PIPEC_VALUE_UINT, {.u = strtoull(v, NULL, 10)}};
        else
            values[count] = (pipec_value){PIPEC_VALUE_INT, {.i = strtoll(v, NULL, 10)}};
    }
    size_t changed = 0;
    pipec_status status = pipec_update_constants(p, (const char *const *)names, values, count, &changed);
    free(text);
    fprintf(out, ",\"set\":{\"status\":%d,\"changed\":%zu}", (int)status, changed);
    if (status != PIPEC_OK) fprintf(stderr, "set: %s\n", pipec_last_error());
    return 0;
}

static int option(pipec_pipeline *p, FILE *out, const char *name, const char *value) {
    unsigned long long n = strtoull(value, NULL, 10);
    if (strcmp(name, "--load") == 0 && pipec_load_state(p, value) != PIPEC_OK) return failed("pipec_load_state");
    if (strcmp(name, "--save") == 0 && pipec_save_state(p, value, 0) != PIPEC_OK) return failed("pipec_save_state");
    if (strcmp(name, "--steps") == 0) {
        if (pipec_step(p, n) != PIPEC_OK || pipec_synchronize(p) != PIPEC_OK) return failed("pipec_step");
        return hashes(p, out, "steps");
    }
    if (strcmp(name, "--eager") == 0) {
        if (pipec_run_eager(p, n) != PIPEC_OK || pipec_synchronize(p) != PIPEC_OK) return failed("pipec_run_eager");
        return hashes(p, out, "eager");
    }
    if (strcmp(name, "--verify") == 0) {
        pipec_verify_report report;
        memset(&report, 0, sizeof report);
        report.version = PIPEC_OPTIONS_VERSION;
        if (pipec_verify(p, n, &report) != PIPEC_OK) return failed("pipec_verify");
        fprintf(out, ",\"verify\":{\"ok\":%d,\"buffers\":%zu,\"mismatches\":%zu}", report.ok, report.buffers,
                report.mismatches);
    }
    if (strcmp(name, "--set") == 0) return set_constants(p, out, value);
    if (strcmp(name, "--update") == 0) {
        size_t length, changed = 0;
        char *plan = slurp(value, &length);
        pipec_status status = plan ? pipec_update_plan(p, plan, length, &changed) : PIPEC_ERROR_IO;
        free(plan);
        fprintf(out, ",\"update\":{\"status\":%d,\"changed\":%zu}", (int)status, changed);
        if (status != PIPEC_OK) fprintf(stderr, "update: %s\n", pipec_last_error());
    }
    return 0;
}

static void put_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* "gemms": [[node, stored, why], ...] */
static void gemm_choices(pipec_pipeline *p, FILE *out) {
    fprintf(out, ",\"gemms\":[");
    for (size_t i = 0; i < pipec_gemm_count(p); i++) {
        const char *node, *why;
        int stored;
        pipec_gemm_at(p, i, &node, &stored, &why);
        fprintf(out, "%s[", i ? "," : "");
        put_string(out, node);
        fprintf(out, ",%s,", stored ? "true" : "false");
        put_string(out, why);
        fprintf(out, "]");
    }
    fprintf(out, "]");
}

typedef struct { char internal[128]; } unique_id;

/* A communicator of rank `rank` of `size` (one process: every rank's part is this one's). */
static void *communicator(const char *ranks, void **library) {
    int rank, size;
    const char *path = getenv("PIPEC_NCCL_LIBRARY");
    *library = path && sscanf(ranks, "%d/%d", &rank, &size) == 2 ? dlopen(path, RTLD_NOW) : NULL;
    int (*get_id)(unique_id *) = *library ? (int (*)(unique_id *))dlsym(*library, "ncclGetUniqueId") : NULL;
    int (*init)(void **, int, unique_id, int) =
        *library ? (int (*)(void **, int, unique_id, int))dlsym(*library, "ncclCommInitRank") : NULL;
    unique_id id;
    void *comm = NULL;
    if (!get_id || !init || get_id(&id) != 0 || init(&comm, size, id, rank) != 0) return NULL;
    return comm;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: run_fake BUNDLE OUT.json [--nccl RANK/SIZE] [--option VALUE]...\n");
        return 2;
    }
    pipec_options options;
    pipec_options_init(&options);
    void *nccl = NULL;
    int first = 3;
    if (argc > 4 && strcmp(argv[3], "--nccl") == 0) {
        if (!(options.nccl_comm = communicator(argv[4], &nccl))) {
            fprintf(stderr, "run_fake: cannot create the communicator %s through $PIPEC_NCCL_LIBRARY\n", argv[4]);
            return 2;
        }
        first = 5;
    }
    int (*destroy)(void *) = nccl ? (int (*)(void *))dlsym(nccl, "ncclCommDestroy") : NULL;
    pipec_pipeline *p;
    pipec_status opened = pipec_open_dir(argv[1], &options, &p);
    if (opened != PIPEC_OK) {
        int code = failed("pipec_open_dir");
        if (destroy && opened != PIPEC_ERROR_COLLECTIVE) destroy(options.nccl_comm); /* else pipec aborted it */
        if (nccl) dlclose(nccl);
        return code;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) return failed("fopen");
    fprintf(out, "{\"buffers\":{");
    for (size_t i = 0; i < pipec_buffer_count(p); i++) {
        CUdeviceptr pointer;
        size_t bytes;
        pipec_buffer(p, pipec_buffer_name(p, i), &pointer, &bytes, NULL);
        fprintf(out, "%s\"%s\":[%llu,%zu]", i ? "," : "", pipec_buffer_name(p, i), (unsigned long long)pointer, bytes);
    }
    fprintf(out, "}");
    gemm_choices(p, out);
    int status = hashes(p, out, "open");
    for (int i = first; status == 0 && i + 1 < argc; i += 2) status = option(p, out, argv[i], argv[i + 1]);
    fprintf(out, ",\"diags\":{");
    for (size_t i = 0; i < pipec_diag_count(p); i++) {
        const char *label;
        double value;
        pipec_diag_at(p, i, &label, &value);
        if (value != value) fprintf(out, "%s\"%s\":NaN", i ? "," : "", label); /* Python's json reads NaN */
        else fprintf(out, "%s\"%s\":%.17g", i ? "," : "", label, value);
    }
    fprintf(out, "}}\n");
    fclose(out);
    pipec_close(p);
    if (nccl) {
        destroy(options.nccl_comm);
        dlclose(nccl);
    }
    return status;
}
