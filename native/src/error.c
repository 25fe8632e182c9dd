/* The thread-local last error: one line, what went wrong and where. */
#include <stdarg.h>
#include <stdio.h>

#include "runtime.h"

static _Thread_local char last_error[1024];

pipec_status fail(pipec_status status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
    for (char *c = last_error; *c; c++)
        if (*c == '\n') *c = ' '; /* one line, whatever a library's message held */
    return status;
}

pipec_status fail_cuda(const driver *d, const char *call, CUresult result, const char *where) {
    const char *name = NULL;
    if (!d->GetErrorName || d->GetErrorName(result, &name) != CUDA_SUCCESS || !name) name = NULL;
    char number[32];
    snprintf(number, sizeof number, "CUDA error %d", result);
    pipec_status status = result == CUDA_ERROR_OUT_OF_MEMORY ? PIPEC_ERROR_OUT_OF_MEMORY : PIPEC_ERROR_CUDA;
    if (where && *where) return fail(status, "%s: %s failed: %s", where, call, name ? name : number);
    return fail(status, "%s failed: %s", call, name ? name : number);
}

const char *pipec_last_error(void) { return last_error; }

const char *pipec_version(void) { return PIPEC_RUNTIME_VERSION; }

int pipec_abi_version(void) { return PIPEC_ABI_VERSION; }
