/* The CUDA driver, loaded at run time: every entry point pipec calls goes through one table
 * (cuda_abi.h), so a fake driver library (the tests' fake_cuda.c) replaces all of them. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define DEFAULT_DRIVER "libcuda.so.1"

pipec_status driver_open(const char *path, driver *out) {
    memset(out, 0, sizeof *out);
    if (!path || !*path) path = getenv("PIPEC_DRIVER_LIBRARY");
    if (!path || !*path) path = DEFAULT_DRIVER;
    snprintf(out->path, sizeof out->path, "%s", path);
    out->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!out->library) {
        const char *why = dlerror();
        return fail(PIPEC_ERROR_UNSUPPORTED, "no CUDA driver: cannot load %s (%s)", path, why ? why : "not found");
    }
#define PIPEC_DRIVER_LOAD(name, symbol, params) \
    *(void **)(&out->name) = dlsym(out->library, symbol); \
    if (!out->name) { \
        pipec_status status = fail(PIPEC_ERROR_UNSUPPORTED, "the CUDA driver %s has no %s: pipec needs a driver " \
                                   "for CUDA 12.4 or newer", path, symbol); \
        driver_close(out); \
        return status; \
    }
    PIPEC_DRIVER_ENTRY_POINTS(PIPEC_DRIVER_LOAD)
#undef PIPEC_DRIVER_LOAD
    return PIPEC_OK;
}

void driver_close(driver *d) {
    if (d->library) dlclose(d->library);
    memset(d, 0, sizeof *d);
}

pipec_status enter(pipec_pipeline *p) {
    CU(p, p->driver.CtxPushCurrent(p->context), "cuCtxPushCurrent", NULL);
    return PIPEC_OK;
}

void leave(pipec_pipeline *p) {
    CUcontext popped;
    p->driver.CtxPopCurrent(&popped);
}
