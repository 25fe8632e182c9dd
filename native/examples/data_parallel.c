/* A host program for data-parallel runs of a bundle: one process per GPU, each creating its
 * NCCL communicator itself and handing it to the C runtime (docs/native.md, "Collectives").
 *
 *   data_parallel BUNDLE --steps N [--id-file FILE] [--save-state DIR] [--sync-every K]
 *                 [--exit-after N]
 *
 * The rank, world size and local rank come from the launcher's variables (RANK, WORLD_SIZE,
 * LOCAL_RANK: torchrun --no-python; OMPI_COMM_WORLD_*: mpirun), else rank 0 of 1. BUNDLE is
 * this rank's bundle (`pipec build -D RANK=R -D WORLD_SIZE=W`). Rank 0 writes the NCCL unique id
 * into FILE (default nccl-id.bin; written aside and renamed, so no rank reads half of it), the
 * others wait for it up to 300 s. The program replays the step N times, waiting after every K
 * replays (default 16) so that no more than K are ever queued: a rank that stops is noticed by
 * the runtime's timeout ($PIPEC_NCCL_TIMEOUT) at the next wait. It then saves the state in the
 * Python runtime's format (DIR/state.safetensors, what `piperun --save-state` writes) and prints
 * one line. `--exit-after N` makes this rank die after N replays without a word (a failing rank,
 * for tests). Errors are one line, `data_parallel[rank R]: error: ...`, exit 1.
 *
 * Needs only the driver (libcuda.so.1, or $PIPEC_DRIVER_LIBRARY) and NCCL (libnccl.so.2, or
 * $PIPEC_NCCL_LIBRARY), both
 * loaded at run time: no CUDA or NCCL header is needed to build it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipec.h"

typedef struct { char internal[128]; } nccl_unique_id;
typedef int (*get_unique_id_fn)(nccl_unique_id *);
typedef int (*init_rank_fn)(void **, int, nccl_unique_id, int);
typedef int (*destroy_fn)(void *);
typedef const char *(*error_string_fn)(int);
typedef int CUresult;
typedef int CUdevice;

#define ID_WAIT_S 300

static int rank;

static int failed(const char *message) {
    fprintf(stderr, "data_parallel[rank %d]: error: %s\n", rank, message);
    return 1;
}

static int environment(const char *name, const char *fallback, int otherwise) {
    const char *v = getenv(name);
    if (!v) v = getenv(fallback);
    return v ? atoi(v) : otherwise;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rank 0 writes the id; the others wait for the file. */
static int exchange_id(const char *path, get_unique_id_fn get_id, nccl_unique_id *id) {
    char message[1024];
    if (rank == 0) {
        char aside[1024];
        snprintf(aside, sizeof aside, "%s.%d", path, (int)getpid());
        FILE *f = get_id(id) == 0 ? fopen(aside, "wb") : NULL;
        int written = f && fwrite(id, sizeof *id, 1, f) == 1;
        if (f && fclose(f) != 0) written = 0;
        if (!written || rename(aside, path) != 0) {
            snprintf(message, sizeof message, "cannot write the NCCL unique id to %s", path);
            return failed(message);
        }
        return 0;
    }
    for (double started = seconds(); seconds() - started < ID_WAIT_S;) {
        FILE *f = fopen(path, "rb");
        int read = f && fread(id, sizeof *id, 1, f) == 1;
        if (f) fclose(f);
        if (read) return 0;
        usleep(10000);
    }
    snprintf(message, sizeof message, "rank 0 wrote no NCCL unique id to %s within %d s", path, ID_WAIT_S);
    return failed(message);
}

typedef struct arguments {
    const char *bundle, *id_file, *state;
    unsigned long long steps, sync_every, exit_after;
} arguments;

static int parse(int argc, char **argv, arguments *a) {
    *a = (arguments){NULL, "nccl-id.bin", NULL, 0, 16, 0};
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--steps") == 0 && value) a->steps = strtoull(value, NULL, 10), i++;
        else if (strcmp(argv[i], "--id-file") == 0 && value) a->id_file = value, i++;
        else if (strcmp(argv[i], "--save-state") == 0 && value) a->state = value, i++;
        else if (strcmp(argv[i], "--sync-every") == 0 && value) a->sync_every = strtoull(value, NULL, 10), i++;
        else if (strcmp(argv[i], "--exit-after") == 0 && value) a->exit_after = strtoull(value, NULL, 10), i++;
        else if (argv[i][0] != '-' && !a->bundle) a->bundle = argv[i];
        else return 0;
    }
    return a->bundle && a->sync_every > 0;
}

/* The rank's device's primary context, current on this thread: NCCL creates the communicator on
 * the current device, and pipec takes the same context. */
static int device_context(int device, CUcontext *out) {
    const char *driver = getenv("PIPEC_DRIVER_LIBRARY"); /* the driver pipec loads too */
    void *cuda = dlopen(driver && *driver ? driver : "libcuda.so.1", RTLD_NOW);
    CUresult (*init)(unsigned) = cuda ? (CUresult (*)(unsigned))dlsym(cuda, "cuInit") : NULL;
    CUresult (*get)(CUdevice *, int) = cuda ? (CUresult (*)(CUdevice *, int))dlsym(cuda, "cuDeviceGet") : NULL;
    CUresult (*retain)(CUcontext *, CUdevice) =
        cuda ? (CUresult (*)(CUcontext *, CUdevice))dlsym(cuda, "cuDevicePrimaryCtxRetain") : NULL;
    CUresult (*set)(CUcontext) = cuda ? (CUresult (*)(CUcontext))dlsym(cuda, "cuCtxSetCurrent") : NULL;
    CUdevice handle;
    if (!init || !get || !retain || !set || init(0) != 0 || get(&handle, device) != 0 || retain(out, handle) != 0 ||
        set(*out) != 0) {
        char message[256];
        snprintf(message, sizeof message, "cannot make device %d's context current (libcuda.so.1)", device);
        return failed(message);
    }
    return 0; /* the primary context stays retained until the process exits */
}

static pipec_status run(pipec_pipeline *p, const arguments *a) {
    double started = seconds();
    pipec_status status = PIPEC_OK;
    for (unsigned long long done = 0; done < a->steps && status == PIPEC_OK;) {
        unsigned long long chunk = a->steps - done < a->sync_every ? a->steps - done : a->sync_every;
        if (a->exit_after && done + chunk > a->exit_after) chunk = a->exit_after - done;
        status = pipec_step(p, chunk);
        if (status == PIPEC_OK) status = pipec_synchronize(p);
        done += chunk;
        if (a->exit_after && done == a->exit_after) _exit(3); /* a rank that dies without a word */
    }
    double elapsed = seconds() - started;
    if (status == PIPEC_OK && a->state) status = pipec_save_state(p, a->state, a->steps);
    if (status == PIPEC_OK)
        printf("data_parallel[rank %d]: ran %llu steps in %.3f s (%.0f steps/s)\n", rank, a->steps, elapsed,
               elapsed > 0 ? (double)a->steps / elapsed : 0.0);
    return status;
}

int main(int argc, char **argv) {
    rank = environment("RANK", "OMPI_COMM_WORLD_RANK", 0);
    int world = environment("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1);
    int local = environment("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    arguments a;
    if (!parse(argc, argv, &a)) {
        fprintf(stderr, "usage: data_parallel BUNDLE --steps N [--id-file FILE] [--save-state DIR] [--sync-every K] "
                        "[--exit-after N]\n");
        return 2;
    }
    /* What pipec needs of NCCL, set before the communicator exists (docs/distributed.md). */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("NCCL_GRAPH_MIXING_SUPPORT", "0", 1);
    setenv("NCCL_RUNTIME_CONNECT", "0", 1);
    const char *path = getenv("PIPEC_NCCL_LIBRARY");
    void *nccl = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW);
    get_unique_id_fn get_id = nccl ? (get_unique_id_fn)dlsym(nccl, "ncclGetUniqueId") : NULL;
    init_rank_fn init_rank = nccl ? (init_rank_fn)dlsym(nccl, "ncclCommInitRank") : NULL;
    destroy_fn destroy = nccl ? (destroy_fn)dlsym(nccl, "ncclCommDestroy") : NULL;
    error_string_fn error_string = nccl ? (error_string_fn)dlsym(nccl, "ncclGetErrorString") : NULL;
    if (!get_id || !init_rank || !destroy || !error_string) return failed("NCCL (libnccl.so.2) cannot be loaded");
    CUcontext context;
    nccl_unique_id id;
    if (device_context(local, &context) || exchange_id(a.id_file, get_id, &id)) return 1;
    void *comm = NULL;
    int created = init_rank(&comm, world, id, rank);
    if (created != 0) return failed(error_string(created));

    pipec_options options;
    pipec_options_init(&options);
    options.context = context;
    options.nccl_comm = comm;
    pipec_pipeline *p = NULL;
    pipec_status status = pipec_open_dir(a.bundle, &options, &p);
    if (status == PIPEC_OK) status = run(p, &a);
    char message[1024];
    snprintf(message, sizeof message, "%s", pipec_last_error());
    int aborted = status == PIPEC_ERROR_COLLECTIVE; /* pipec aborted (and so freed) the communicator */
    pipec_status closed = pipec_close(p);
    if (status == PIPEC_OK && closed != PIPEC_OK) status = closed, snprintf(message, sizeof message, "%s", pipec_last_error());
    if (!aborted) destroy(comm);
    return status == PIPEC_OK ? 0 : failed(message);
}
