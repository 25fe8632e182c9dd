/* Kernel modules (runtime/modules.py): each plan module's image for this device, loaded once per
 * scope (a child graph's instance, or "eager"), so no CUfunction is shared between scopes; and
 * the launch resources of every kernel node checked against the device (runtime/resources.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define SHARED_WITHOUT_OPT_IN (48 * 1024)
#define EAGER_SCOPE "eager"

static int grow(void **items, size_t *capacity, size_t count, size_t size) {
    if (count < *capacity) return 1;
    size_t next = *capacity ? *capacity * 2 : 16;
    void *bigger = realloc(*items, next * size);
    if (!bigger) return 0;
    *items = bigger;
    *capacity = next;
    return 1;
}

static pipec_status load_module(pipec_pipeline *p, const char *scope, int module, CUmodule *out) {
    for (size_t i = 0; i < p->module_count; i++)
        if (p->modules[i].module == module && strcmp(p->modules[i].scope, scope) == 0) {
            *out = p->modules[i].handle;
            return PIPEC_OK;
        }
    if (!grow((void **)&p->modules, &p->module_capacity, p->module_count, sizeof *p->modules))
        return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
    char where[512];
    snprintf(where, sizeof where, "module %d (%s)", module, p->plan.module_names[module]);
    CU(p, p->driver.ModuleLoadData(out, p->images[module]), "cuModuleLoadData", where);
    p->modules[p->module_count++] = (module_entry){module, scope, *out};
    return PIPEC_OK;
}

pipec_status module_function(pipec_pipeline *p, const char *scope, int module, const char *name,
                             unsigned shared_bytes, CUfunction *out) {
    function_entry *entry = NULL;
    for (size_t i = 0; i < p->function_count && !entry; i++) {
        function_entry *f = &p->functions[i];
        if (f->module == module && strcmp(f->scope, scope) == 0 && strcmp(f->name, name) == 0) entry = f;
    }
    if (!entry) {
        CUmodule handle;
        pipec_status status = load_module(p, scope, module, &handle);
        if (status != PIPEC_OK) return status;
        if (!grow((void **)&p->functions, &p->function_capacity, p->function_count, sizeof *p->functions))
            return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
        entry = &p->functions[p->function_count];
        *entry = (function_entry){module, scope, name, NULL, -1};
        CU(p, p->driver.ModuleGetFunction(&entry->function, handle, name), "cuModuleGetFunction", name);
        p->function_count++;
    }
    if (shared_bytes) {
        if (entry->static_shared < 0)
            CU(p, p->driver.FuncGetAttribute(&entry->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, entry->function),
               "cuFuncGetAttribute", name);
        if ((unsigned)entry->static_shared + shared_bytes > SHARED_WITHOUT_OPT_IN)
            CU(p, p->driver.FuncSetAttribute(entry->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             (int)shared_bytes), "cuFuncSetAttribute", name);
    }
    *out = entry->function;
    return PIPEC_OK;
}

void modules_close(pipec_pipeline *p) {
    for (size_t i = 0; i < p->module_count; i++) p->driver.ModuleUnload(p->modules[i].handle);
    free(p->modules);
    free(p->functions);
    p->modules = NULL;
    p->functions = NULL;
    p->module_count = p->function_count = p->module_capacity = p->function_capacity = 0;
}

/* One kernel node's resources against the device's limits (resources.py `_launch_findings`):
 * the first finding, as "location: message". */
pipec_status check_node_resources(pipec_pipeline *p, const node_spec *n) {
    CUfunction f;
    pipec_status status = module_function(p, EAGER_SCOPE, n->module, n->function, 0, &f);
    if (status != PIPEC_OK) return status;
    int registers, static_shared, max_threads;
    CU(p, p->driver.FuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f), "cuFuncGetAttribute", n->name);
    CU(p, p->driver.FuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "cuFuncGetAttribute", n->name);
    CU(p, p->driver.FuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f), "cuFuncGetAttribute", n->name);
    long long threads = (long long)n->block[0] * n->block[1] * n->block[2];
    if (threads > p->max_threads)
        return fail(PIPEC_ERROR_LAUNCH_LIMITS, "%s: `%s` is launched with %lld threads per block; %s (%s) allows %d",
                    n->location, n->function, threads, p->device_name, p->arch, p->max_threads);
    if (threads > max_threads || registers * threads > p->max_registers)
        return fail(PIPEC_ERROR_LAUNCH_LIMITS, "%s: `%s` uses %d registers per thread: %lld threads need %lld, %s (%s) "
                    "has %d per block (at most %d threads of this kernel)", n->location, n->function, registers,
                    threads, registers * threads, p->device_name, p->arch, p->max_registers, max_threads);
    if ((long long)static_shared + n->shared_bytes > p->max_shared)
        return fail(PIPEC_ERROR_LAUNCH_LIMITS, "%s: `%s` needs %d bytes of static and %u of dynamic shared memory; a "
                    "block on %s (%s) has at most %d", n->location, n->function, static_shared, n->shared_bytes,
                    p->device_name, p->arch, p->max_shared);
    return PIPEC_OK;
}

pipec_status check_launch_resources(pipec_pipeline *p) {
    int roots[2] = {p->plan.init, p->plan.step};
    for (int r = 0; r < 2; r++) {
        if (roots[r] < 0) continue;
        size_t count = plan_leaves(&p->plan, roots[r], NULL, 0);
        const node_spec **leaves = calloc(count ? count : 1, sizeof *leaves);
        if (!leaves) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory");
        plan_leaves(&p->plan, roots[r], leaves, count);
        pipec_status status = PIPEC_OK;
        for (size_t i = 0; i < count && status == PIPEC_OK; i++)
            if (leaves[i]->kind == NODE_KERNEL) status = check_node_resources(p, leaves[i]);
        free(leaves);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}
