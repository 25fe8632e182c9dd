/* Opening and closing a pipeline (runtime/pipeline.py, driver.py): the bundle read and checked,
 * the device and its context, each module's image for the device's architecture, the stream,
 * the launch resources, the buffers, the `init` block run eagerly, the eager program and the
 * step's graph built, instantiated and uploaded. A failed open frees everything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define MIN_DRIVER 12040 /* CUDA 12.4: conditional nodes and the graph API pipec uses */

void pipec_options_init(pipec_options *options) {
    if (!options) return;
    memset(options, 0, sizeof *options);
    options->version = PIPEC_OPTIONS_VERSION;
}

static pipec_status attribute(pipec_pipeline *p, int which, int *out) {
    CU(p, p->driver.DeviceGetAttribute(out, which, p->device), "cuDeviceGetAttribute", NULL);
    return PIPEC_OK;
}

static pipec_status open_device(pipec_pipeline *p, const pipec_options *o) {
    driver *d = &p->driver;
    CUresult r = d->Init(0);
    if (r != CUDA_SUCCESS) return fail_cuda(d, "cuInit", r, "no CUDA device");
    CU(p, d->DriverGetVersion(&p->driver_version), "cuDriverGetVersion", NULL);
    if (p->driver_version < MIN_DRIVER)
        return fail(PIPEC_ERROR_UNSUPPORTED, "the CUDA driver supports API %d.%d; pipec needs 12.4 or newer",
                    p->driver_version / 1000, p->driver_version % 1000 / 10);
    if (o->context) {
        p->context = o->context;
        CU(p, d->CtxPushCurrent(p->context), "cuCtxPushCurrent", NULL);
        CUcontext popped;
        r = d->CtxGetDevice(&p->device);
        d->CtxPopCurrent(&popped);
        if (r != CUDA_SUCCESS) return fail_cuda(d, "cuCtxGetDevice", r, "the host's context");
    } else {
        int count;
        CU(p, d->DeviceGetCount(&count), "cuDeviceGetCount", NULL);
        if (o->device < 0 || o->device >= count)
            return fail(PIPEC_ERROR_INVALID_ARGUMENT, "device %d does not exist (%d CUDA device%s found)", o->device,
                        count, count == 1 ? "" : "s");
        CU(p, d->DeviceGet(&p->device, o->device), "cuDeviceGet", NULL);
        CU(p, d->DevicePrimaryCtxRetain(&p->context, p->device), "cuDevicePrimaryCtxRetain", NULL);
        p->primary = 1;
    }
    int major, minor;
    pipec_status s = attribute(p, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major);
    if (s == PIPEC_OK) s = attribute(p, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor);
    if (s == PIPEC_OK) s = attribute(p, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &p->multiprocessors);
    if (s == PIPEC_OK) s = attribute(p, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &p->max_threads);
    if (s == PIPEC_OK) s = attribute(p, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &p->max_registers);
    if (s == PIPEC_OK) s = attribute(p, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &p->max_shared);
    if (s != PIPEC_OK) return s;
    snprintf(p->arch, sizeof p->arch, "sm_%d%d", major, minor);
    CU(p, d->DeviceGetName(p->device_name, (int)sizeof p->device_name, p->device), "cuDeviceGetName", NULL);
    p->device_name[sizeof p->device_name - 1] = 0;
    return PIPEC_OK;
}

/* The architectures the bundle has cubins for, "sm_90, sm_100", for a message. */
static void built_archs(const pipec_pipeline *p, char *out, size_t size) {
    out[0] = 0;
    for (size_t i = 0; i < p->bundle.file_count; i++) {
        const char *path = p->bundle.files[i].path, *dot;
        if (strncmp(path, "modules/0.", 10) != 0 || !(dot = strstr(path + 10, ".cubin"))) continue;
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%.*s", used ? ", " : "", (int)(dot - path - 10), path + 10);
    }
}

static int ptx_target(const bundle_file *f) {
    const char *target = strstr((const char *)f->data, ".target sm_");
    return target ? atoi(target + 11) : -1;
}

/* Each module's image: the cubin for this architecture, else the PTX when the device is at least
 * its target (the driver compiles it), else a one-line error naming what the bundle has. */
static pipec_status choose_images(pipec_pipeline *p) {
    size_t n = p->plan.module_count;
    p->images = calloc(n ? n : 1, sizeof *p->images);
    if (!p->images) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    int capability = atoi(p->arch + 3);
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "modules/%zu.%s.cubin", i, p->arch);
        const bundle_file *cubin = bundle_find(&p->bundle, path);
        if (cubin) {
            p->images[i] = cubin->data;
            continue;
        }
        snprintf(path, sizeof path, "modules/%zu.ptx", i);
        const bundle_file *ptx = bundle_find(&p->bundle, path);
        int target = ptx ? ptx_target(ptx) : -1;
        if (ptx && target >= 0 && capability >= target) {
            p->images[i] = ptx->data; /* bundle.c keeps a NUL after every file's bytes */
            continue;
        }
        char archs[256];
        built_archs(p, archs, sizeof archs);
        return fail(PIPEC_ERROR_UNSUPPORTED, "%s: no module for %s (%s): the bundle has cubins for %s%s; rebuild it with "
                    "`pipec build --arch %s`", p->bundle.where, p->arch, p->device_name, archs[0] ? archs : "no arch",
                    ptx ? " and PTX for a newer device" : " and no PTX", p->arch);
    }
    return PIPEC_OK;
}

static pipec_status run_init(pipec_pipeline *p) {
    if (p->plan.init < 0) return PIPEC_OK;
    eager_program init = {0};
    pipec_status status = eager_prepare(p, p->plan.init, &init);
    if (status == PIPEC_OK) status = eager_run(p, &init);
    eager_free(&init);
    return status;
}

static pipec_status build(pipec_pipeline *p, const pipec_options *o) {
    pipec_status status = driver_open(o->driver_library, &p->driver);
    if (status != PIPEC_OK) return status;
    if ((status = plan_parse(p->bundle.plan_text, p->bundle.plan_length, "plan.json", &p->plan)) != PIPEC_OK)
        return status;
    if ((status = live_open(p)) != PIPEC_OK) return status;
    if ((status = stored_gemms_read(p)) != PIPEC_OK) return status;
    if ((status = open_device(p, o)) != PIPEC_OK) return status;
    if ((status = choose_images(p)) != PIPEC_OK) return status;
    if ((status = enter(p)) != PIPEC_OK) return status;
    if (o->stream) {
        p->stream = o->stream;
    } else {
        CUresult r = p->driver.StreamCreate(&p->stream, CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS) status = fail_cuda(&p->driver, "cuStreamCreate", r, NULL);
        else p->own_stream = 1;
    }
    if (status == PIPEC_OK) status = check_launch_resources(p);
    if (status == PIPEC_OK) status = buffers_open(p, o->bindings, o->bindings ? o->binding_count : 0);
    if (status == PIPEC_OK) status = diags_build(p);
    if (status == PIPEC_OK) status = collectives_open(p, o);
    if (status == PIPEC_OK) status = run_init(p);
    if (status == PIPEC_OK) status = eager_prepare(p, p->plan.step, &p->eager);
    if (status == PIPEC_OK) status = graph_build(p, p->plan.step, &p->graph);
    if (status == PIPEC_OK) status = stream_wait(p, p->plan.pipe);
    leave(p);
    return status;
}

/* Frees everything; PIPEC_OK, or the one failure that leaves something behind (an NCCL abort
 * that never returned). The last error of a failed open is kept. */
static pipec_status destroy(pipec_pipeline *p) {
    char reason[1024];
    snprintf(reason, sizeof reason, "%s", pipec_last_error());
    pipec_status status = PIPEC_OK;
    if (p->driver.library && p->context && p->driver.CtxPushCurrent(p->context) == CUDA_SUCCESS) {
        /* A faulted context, or a failed collective (the abort it began ends NCCL's kernels): wait
         * as far as possible, and free the rest all the same. */
        if (p->stream && stream_wait(p, NULL) != PIPEC_OK) p->driver.StreamSynchronize(p->stream);
        for (size_t i = 0; i < p->embedding_count; i++) graph_close(p, &p->embeddings[i]);
        graph_close(p, &p->graph);
        eager_free(&p->eager);
        status = collectives_close(p); /* after the graphs holding recorded collectives are gone */
        if (status != PIPEC_OK) snprintf(reason, sizeof reason, "%s", pipec_last_error());
        gemms_close(p);
        buffers_close(p);
        modules_close(p);
        if (p->own_stream) p->driver.StreamDestroy(p->stream);
        leave(p);
    }
    if (p->collectives && (status = collectives_close(p)) != PIPEC_OK) /* no context to free the rest in */
        snprintf(reason, sizeof reason, "%s", pipec_last_error());
    if (p->primary) p->driver.DevicePrimaryCtxRelease(p->device);
    free(p->embeddings);
    free(p->images);
    stored_gemms_free(p);
    diags_free(p);
    driver_close(&p->driver);
    live_free(p);
    plan_free(&p->plan);
    for (size_t i = 0; i < p->retired_count; i++) plan_free(&p->retired[i]);
    free(p->retired);
    bundle_free(&p->bundle);
    free(p);
    fail(status, "%s", reason);
    return status;
}

static pipec_status open_bundle(bundle *b, const pipec_options *options, pipec_pipeline **out) {
    pipec_options defaults;
    pipec_options_init(&defaults);
    const pipec_options *o = options ? options : &defaults;
    if (o->version != PIPEC_OPTIONS_VERSION) {
        bundle_free(b);
        return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_options.version is %u; this runtime reads version %d "
                    "(call pipec_options_init)", o->version, PIPEC_OPTIONS_VERSION);
    }
    pipec_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        bundle_free(b);
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    p->bundle = *b;
    p->plan.step = p->plan.init = -1;
    if (o->cublaslt_library) snprintf(p->cublaslt_path, sizeof p->cublaslt_path, "%s", o->cublaslt_library);
    pipec_status status = build(p, o);
    if (status != PIPEC_OK) {
        destroy(p);
        return status;
    }
    *out = p;
    return PIPEC_OK;
}

pipec_status pipec_open_dir(const char *dir, const pipec_options *options, pipec_pipeline **out) {
    if (!out) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_open_dir: out is NULL");
    *out = NULL;
    if (!dir) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_open_dir: dir is NULL");
    bundle b;
    pipec_status status = bundle_from_dir(dir, &b);
    return status == PIPEC_OK ? open_bundle(&b, options, out) : status;
}

pipec_status pipec_open_memory(const pipec_file *files, size_t count, const pipec_options *options,
                               pipec_pipeline **out) {
    if (!out) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_open_memory: out is NULL");
    *out = NULL;
    if (!files && count) return fail(PIPEC_ERROR_INVALID_ARGUMENT, "pipec_open_memory: files is NULL");
    bundle b;
    pipec_status status = bundle_from_memory(files, count, &b);
    return status == PIPEC_OK ? open_bundle(&b, options, out) : status;
}

pipec_status pipec_close(pipec_pipeline *p) {
    return p ? destroy(p) : PIPEC_OK;
}

CUstream pipec_stream(const pipec_pipeline *p) { return p ? p->stream : NULL; }
