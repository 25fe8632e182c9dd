/* Tables of addresses (runtime/memory.py `fill_tables`): a u64 buffer whose initial value is
 * {"kind": "addresses", "addresses": [{"buffer": NAME, "byte_offset": N}, ...]}, one entry per
 * element. Once every buffer is allocated or bound, and again after a saved state is loaded,
 * each element is written with the device address of its buffer plus the offset: a table holds
 * this process's addresses, never saved ones. */
#include <stdlib.h>

#include "runtime.h"

static pipec_status fill(pipec_pipeline *p, int index) {
    const buffer_spec *spec = &p->plan.buffers[index];
    const json *entries = spec->addresses;
    size_t count = (size_t)(spec->nbytes / 8);
    if (!entries || entries->kind != JSON_ARRAY || entries->count != count || spec->nbytes % 8)
        return fail(PIPEC_ERROR_BUNDLE, "%s: `%s` is a table of %zu addresses, but its init.addresses does not list "
                    "that many", p->plan.pipe, spec->name, count);
    uint64_t *host = malloc(count ? count * 8 : 1);
    if (!host) return fail(PIPEC_ERROR_OUT_OF_MEMORY, "out of host memory filling `%s`", spec->name);
    for (size_t i = 0; i < count; i++) {
        const json *name = json_get(&entries->items[i], "buffer"), *offset = json_get(&entries->items[i], "byte_offset");
        int target = name && name->kind == JSON_STRING ? plan_buffer_index(&p->plan, name->string) : -1;
        if (target < 0 || !offset || !offset->is_integer || offset->integer < 0 ||
            (uint64_t)offset->integer > p->plan.buffers[target].nbytes) {
            free(host);
            return fail(PIPEC_ERROR_BUNDLE, "%s: element %zu of the table `%s` names no buffer of the plan at an "
                        "offset inside it", p->plan.pipe, i, spec->name);
        }
        host[i] = (uint64_t)buffer_pointer(p, target, offset->integer);
    }
    pipec_status status = buffer_write(p, index, host);
    free(host);
    return status;
}

pipec_status tables_fill(pipec_pipeline *p) {
    for (size_t i = 0; i < p->plan.buffer_count; i++) {
        if (p->plan.buffers[i].init != INIT_ADDRESSES) continue;
        pipec_status status = fill(p, (int)i);
        if (status != PIPEC_OK) return status;
    }
    return PIPEC_OK;
}
