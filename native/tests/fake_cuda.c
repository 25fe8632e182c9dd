/* A fake CUDA driver library for the C runtime's CPU tests: the C counterpart of
 * tests/fake_cuda.py. It exports the cu* entry points the runtime loads; device memory is host
 * memory (an allocation's address is its "device" pointer), so memsets, copies, mapped buffers,
 * state and verification really move bytes; cuPointerGetAttribute still tells cuMemHostAlloc's
 * (host) from cuMemAlloc's (device), and a copy node keeps the memory types it was made with (NCCL's
 * one-rank copies, fake_cuda_enqueue_copy, unified ones). Kernels do not run, except the generated kernels
 * that decide conditional nodes (compiler/templates/conditions.cu.j2), which store their
 * decision and, in a graph, set their handle, as tests/fake_cuda.py's do.
 *
 * It records, as JSON lines in $FAKE_CUDA_LOG: each instantiated graph as a tree (every node's
 * kind, dependencies by index, and its work: kernel name, grid, block, shared bytes and the
 * argument bytes as the driver copied them, memset value/width/size, memcpy size), each
 * conditional handle created, each kernel that runs (eagerly or in a graph), each executable
 * kernel node given new parameters, and at exit what is still allocated. Kernel arguments are
 * decoded with the parameter sizes in $FAKE_CUDA_PARAM_SIZES (a JSON object: kernel name ->
 * sizes); $FAKE_CUDA_CAPABILITY ("90") and $FAKE_CUDA_DRIVER_VERSION ("12090") describe the
 * device. Child graph nodes hold a deep copy of their graph, as the real driver does. This file
 * holds the entry points and the memory; fake_graph.c the graphs, their runs and the log. */
#include <time.h>

#include "fake.h"

fake_state fake;

/* --- memory ------------------------------------------------------------------------------- */

int inside(uint64_t address, size_t bytes) {
    for (size_t i = 0; i < fake.allocation_count; i++) {
        uint64_t start = (uint64_t)(uintptr_t)fake.allocations[i];
        if (start <= address && address + bytes <= start + fake.sizes[i]) return 1;
    }
    return 0;
}

static CUresult allocate(void **out, size_t bytes, int host) {
    size_t padded = (bytes ? bytes : 1) + 255;
    void *memory = aligned_alloc(256, padded - padded % 256);
    if (!memory) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(memory, 0, padded - padded % 256);
    fake.allocations = realloc(fake.allocations, (fake.allocation_count + 1) * sizeof *fake.allocations);
    fake.sizes = realloc(fake.sizes, (fake.allocation_count + 1) * sizeof *fake.sizes);
    fake.host = realloc(fake.host, (fake.allocation_count + 1) * sizeof *fake.host);
    fake.allocations[fake.allocation_count] = memory;
    fake.host[fake.allocation_count] = host;
    fake.sizes[fake.allocation_count++] = bytes ? bytes : 1;
    *out = memory;
    return OK;
}

static CUresult release(void *memory) {
    for (size_t i = 0; i < fake.allocation_count; i++)
        if (fake.allocations[i] == memory) {
            free(memory);
            fake.allocations[i] = fake.allocations[fake.allocation_count - 1];
            fake.host[i] = fake.host[fake.allocation_count - 1];
            fake.sizes[i] = fake.sizes[--fake.allocation_count];
            return OK;
        }
    return INVALID;
}

CUresult do_memset(uint64_t dst, unsigned size, uint32_t value, size_t count) {
    if (!inside(dst, count * size)) return INVALID;
    unsigned char *p = (unsigned char *)(uintptr_t)dst;
    for (size_t i = 0; i < count; i++) memcpy(p + i * size, &value, size);
    return OK;
}

CUresult do_memcpy(uint64_t dst, uint64_t src, size_t bytes) {
    if (!inside(dst, bytes) || !inside(src, bytes)) return INVALID;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return OK;
}

/* --- streams and capture ------------------------------------------------------------------- */

/* Work on a stream: a node of its capture's graph (after the work captured before it), or done now. */
static CUresult enqueue(CUstream stream, fnode *work) {
    fstream *s = (fstream *)stream;
    if (s && s->capture) {
        fgraph *g = s->capture;
        CUgraphNode last = g->count ? (CUgraphNode)g->nodes[g->count - 1] : NULL;
        append(g, work, &last, last ? 1 : 0);
        return OK;
    }
    CUresult r = OK;
    if (work->kind == K_KERNEL) execute(work);
    else if (work->kind == K_MEMSET) r = do_memset(work->dst, work->element_size, work->value, work->count);
    else if (work->kind == K_MEMCPY) r = do_memcpy(work->dst, work->src, work->count);
    free_node(work);
    return r;
}

/* What a fake library (fake_cublaslt.c) launches: a kernel without parameters. */
EXPORT CUresult fake_cuda_enqueue_kernel(CUstream stream, const char *function, unsigned gx, unsigned bx) {
    fnode *n = new_node(K_KERNEL);
    unsigned grid[3] = {gx, 1, 1}, block[3] = {bx, 1, 1};
    set_kernel(n, function, grid, block, 0, NULL);
    n->args_known = 1;
    return enqueue(stream, n);
}

/* A copy as cudaMemcpyAsync with cudaMemcpyDefault records it: both ends unified addresses (fake_nccl.c's
 * one-rank path). */
EXPORT CUresult fake_cuda_enqueue_copy(CUstream stream, uint64_t dst, uint64_t src, size_t bytes) {
    fnode *n = new_node(K_MEMCPY);
    n->dst = dst, n->src = src, n->count = bytes;
    n->dst_memory = n->src_memory = CU_MEMORYTYPE_UNIFIED;
    return enqueue(stream, n);
}

/* The same with what it does when it runs: `effect` of a copy of `size` bytes (fake_nccl.c). */
EXPORT CUresult fake_cuda_enqueue_effect(CUstream stream, const char *function,
                                         void (*effect)(const unsigned char *, size_t), const void *data, size_t size) {
    fnode *n = new_node(K_KERNEL);
    unsigned one[3] = {1, 1, 1};
    set_kernel(n, function, one, one, 0, NULL);
    n->args_known = 1;
    n->effect = effect;
    n->effect_data = malloc(size ? size : 1);
    memcpy(n->effect_data, data, size);
    n->effect_size = size;
    return enqueue(stream, n);
}

EXPORT int fake_cuda_capturing(CUstream stream) { return stream && ((fstream *)stream)->capture != NULL; }

/* Stuck: the device's work never finishes until an abort (fake_nccl.c) unsticks it. */
EXPORT void fake_cuda_set_stuck(int stuck) { fake.stuck = stuck; }

/* What the real driver does while the device is stuck: it waits. Here the wait is bounded, and a
 * runtime that would wait for ever (nothing unsticks it) crashes the test instead of hanging it. */
static void wait_until_unstuck(const char *call) {
    for (int i = 0; fake.stuck; i++) {
        if (i == 5000) {
            fprintf(stderr, "fake_cuda: %s waited 5 s for work that never finishes\n", call);
            abort();
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* --- the exported driver ------------------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags) { (void)flags; return OK; }

EXPORT CUresult cuDriverGetVersion(int *version) {
    const char *v = getenv("FAKE_CUDA_DRIVER_VERSION");
    *version = v ? atoi(v) : 12090;
    return OK;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **name) {
    *name = error == OK ? "CUDA_SUCCESS" : error == INVALID ? "CUDA_ERROR_INVALID_VALUE"
            : error == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN";
    return OK;
}

EXPORT CUresult cuDeviceGetCount(int *count) { *count = 1; return OK; }
EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) { *device = ordinal; return ordinal == 0 ? OK : INVALID; }

EXPORT CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    (void)device;
    const char *c = getenv("FAKE_CUDA_CAPABILITY");
    int capability = c ? atoi(c) : 90;
    switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = capability / 10; return OK;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = capability % 10; return OK;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; return OK;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; return OK;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = 65536; return OK;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; return OK;
    default: return INVALID;
    }
}

EXPORT CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    (void)device;
    snprintf(name, (size_t)length, "Fake H200");
    return OK;
}

static int primary_context;
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    (void)device;
    *context = (CUcontext)&primary_context;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) { (void)device; return OK; }
EXPORT CUresult cuCtxPushCurrent_v2(CUcontext context) { return context ? OK : INVALID; }
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *context) { *context = (CUcontext)&primary_context; return OK; }
EXPORT CUresult cuCtxGetDevice(CUdevice *device) { *device = 0; return OK; }
EXPORT CUresult cuCtxSetCurrent(CUcontext context) { return context ? OK : INVALID; }

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    (void)flags;
    fstream *s = calloc(1, sizeof *s);
    fake.streams++;
    *stream = (CUstream)s;
    return OK;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
    fstream *s = (fstream *)stream;
    if (!s || s->capture) return INVALID;
    fake.streams--;
    free(s);
    return OK;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream) {
    (void)stream;
    wait_until_unstuck("cuStreamSynchronize");
    return OK;
}
EXPORT CUresult cuStreamQuery(CUstream stream) { return stream && fake.stuck ? CUDA_ERROR_NOT_READY : OK; }
EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
    (void)stream, (void)flags;
    return event ? OK : INVALID;
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, int mode) {
    (void)mode;
    fstream *s = (fstream *)stream;
    if (!s || s->capture) return INVALID;
    s->capture = new_graph(0);
    return OK;
}

EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
    fstream *s = (fstream *)stream;
    if (!s || !s->capture) return INVALID;
    fake.graphs = realloc(fake.graphs, (fake.graph_count + 1) * sizeof *fake.graphs);
    fake.graphs[fake.graph_count++] = s->capture;
    *graph = (CUgraph)s->capture;
    s->capture = NULL;
    return OK;
}

static int an_event;
EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    (void)flags;
    fake.events++;
    *event = (CUevent)&an_event;
    return OK;
}
EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) { (void)stream; return event ? OK : INVALID; }
EXPORT CUresult cuEventDestroy_v2(CUevent event) { fake.events--; return event ? OK : INVALID; }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
    void *memory;
    CUresult r = allocate(&memory, bytes, 0);
    *pointer = (CUdeviceptr)(uintptr_t)memory;
    return r;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) { return release((void *)(uintptr_t)pointer); }
EXPORT CUresult cuMemHostAlloc(void **host, size_t bytes, unsigned int flags) { (void)flags; return allocate(host, bytes, 1); }
EXPORT CUresult cuMemFreeHost(void *host) { return release(host); }
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pointer, void *host, unsigned int flags) {
    (void)flags;
    *pointer = (CUdeviceptr)(uintptr_t)host; /* unified addressing: the same address */
    return OK;
}
/* The memory type of an allocation's address; an address outside every allocation is one the driver does not
 * know (pageable host memory), as the real driver answers. */
EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr pointer) {
    if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return INVALID;
    for (size_t i = 0; i < fake.allocation_count; i++) {
        uint64_t start = (uint64_t)(uintptr_t)fake.allocations[i];
        if (start <= pointer && pointer < start + fake.sizes[i]) {
            *(unsigned int *)data = fake.host[i] ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            return OK;
        }
    }
    return INVALID;
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    if (!inside(dst, bytes)) return INVALID;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return OK;
}
EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    if (!inside(src, bytes)) return INVALID;
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return OK;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    fnode *n = new_node(K_MEMCPY);
    n->dst = dst, n->src = src, n->count = bytes;
    n->dst_memory = n->src_memory = CU_MEMORYTYPE_DEVICE;
    return enqueue(stream, n);
}

static CUresult memset_async(CUdeviceptr dst, unsigned size, uint32_t value, size_t count, CUstream stream) {
    fnode *n = new_node(K_MEMSET);
    n->dst = dst, n->element_size = size, n->value = value, n->count = count;
    return enqueue(stream, n);
}
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) { return do_memset(dst, 1, v, n); }
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) { return do_memset(dst, 2, v, n); }
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) { return do_memset(dst, 4, v, n); }
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return memset_async(d, 1, v, n, s); }
EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return memset_async(d, 2, v, n, s); }
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return memset_async(d, 4, v, n, s); }

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    if (!image) return INVALID;
    fmodule *m = calloc(1, sizeof *m);
    fake.modules++;
    *module = (CUmodule)m;
    return OK;
}

EXPORT CUresult cuModuleUnload(CUmodule module) {
    fmodule *m = (fmodule *)module;
    for (size_t i = 0; i < m->count; i++) {
        free(m->functions[i]->name);
        free(m->functions[i]);
    }
    free(m->functions);
    free(m);
    fake.modules--;
    return OK;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    fmodule *m = (fmodule *)module;
    ffunction *f = calloc(1, sizeof *f);
    f->name = strdup(name);
    f->module = m;
    m->functions = realloc(m->functions, (m->count + 1) * sizeof *m->functions);
    m->functions[m->count++] = f;
    *function = (CUfunction)f;
    return OK;
}

EXPORT CUresult cuFuncGetAttribute(int *value, int attribute, CUfunction function) {
    (void)function;
    switch (attribute) {
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 32; return OK;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = 0; return OK;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; return OK;
    default: return INVALID;
    }
}
EXPORT CUresult cuFuncSetAttribute(CUfunction f, int attribute, int value) { (void)attribute, (void)value; return f ? OK : INVALID; }

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream stream,
                       void **params, int serialized) {
    fnode *n = new_node(K_KERNEL);
    set_kernel(n, ((ffunction *)f)->name, grid, block, shared, params);
    n->serialized = serialized;
    return enqueue(stream, n);
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream stream, void **params, void **extra) {
    (void)extra;
    unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return launch(f, grid, block, shared, stream, params, 0);
}

/* A launch with attributes: programmatic stream serialization only, which runs like any launch
 * here and is logged as such. */
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
    (void)extra;
    if (config->numAttrs != 1 || config->attrs[0].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
        config->attrs[0].value.programmaticStreamSerializationAllowed != 1)
        return INVALID;
    unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    return launch(f, grid, block, config->sharedMemBytes, config->hStream, params, 1);
}

EXPORT CUresult cuGraphCreate(CUgraph *graph, unsigned int flags) {
    (void)flags;
    *graph = (CUgraph)new_graph(1);
    return OK;
}

EXPORT CUresult cuGraphDestroy(CUgraph graph) {
    fgraph *g = (fgraph *)graph;
    for (size_t i = 0; i < fake.graph_count; i++)
        if (fake.graphs[i] == g) {
            fake.graphs[i] = fake.graphs[--fake.graph_count];
            free_graph(g);
            return OK;
        }
    return INVALID;
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count,
                                        const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    if (!p->func) return INVALID;
    fnode *n = new_node(K_KERNEL);
    unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ}, block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    set_kernel(n, ((ffunction *)p->func)->name, grid, block, p->sharedMemBytes, p->kernelParams);
    *node = (CUgraphNode)append((fgraph *)graph, n, deps, count);
    return OK;
}

EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count,
                                     const CUDA_MEMSET_NODE_PARAMS *p, CUcontext context) {
    if (!context || p->height != 1 || p->pitch != p->width * p->elementSize || !inside(p->dst, p->width * p->elementSize))
        return INVALID;
    fnode *n = new_node(K_MEMSET);
    n->dst = p->dst, n->element_size = p->elementSize, n->value = p->value, n->count = p->width;
    *node = (CUgraphNode)append((fgraph *)graph, n, deps, count);
    return OK;
}

EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count,
                                     const CUDA_MEMCPY3D *p, CUcontext context) {
    if (!context || p->srcMemoryType != CU_MEMORYTYPE_DEVICE || p->dstMemoryType != CU_MEMORYTYPE_DEVICE ||
        p->Height != 1 || p->Depth != 1 || !inside(p->srcDevice, p->WidthInBytes) || !inside(p->dstDevice, p->WidthInBytes))
        return INVALID;
    fnode *n = new_node(K_MEMCPY);
    n->dst = p->dstDevice, n->src = p->srcDevice, n->count = p->WidthInBytes;
    n->dst_memory = n->src_memory = CU_MEMORYTYPE_DEVICE;
    *node = (CUgraphNode)append((fgraph *)graph, n, deps, count);
    return OK;
}

EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count,
                                         CUgraph child) {
    fnode *n = new_node(K_GRAPH);
    n->child = clone_graph((const fgraph *)child);
    *node = (CUgraphNode)append((fgraph *)graph, n, deps, count);
    return OK;
}

static int holds(const fgraph *g, const fnode *n) {
    for (size_t i = 0; i < g->count; i++)
        if (g->nodes[i] == n) return 1;
    return 0;
}

/* CUDA 12.3+: edges with edge data. pipec adds ordinary edges with their nodes, so only
 * programmatic ones come here, each from a kernel node's programmatic port to a kernel node of
 * the same graph. */
EXPORT CUresult cuGraphAddDependencies_v2(CUgraph graph, const CUgraphNode *from, const CUgraphNode *to,
                                          const CUgraphEdgeData *edges, size_t count) {
    fgraph *g = (fgraph *)graph;
    for (size_t i = 0; i < count; i++) {
        fnode *producer = (fnode *)from[i], *consumer = (fnode *)to[i];
        if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC ||
            edges[i].from_port != CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC || edges[i].to_port != 0 ||
            !holds(g, producer) || !holds(g, consumer) || producer->kind != K_KERNEL || consumer->kind != K_KERNEL)
            return INVALID;
        add_programmatic(producer, consumer);
    }
    return OK;
}

EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count) {
    *node = (CUgraphNode)append((fgraph *)graph, new_node(K_EMPTY), deps, count);
    return OK;
}

EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *handle, CUgraph graph, CUcontext context,
                                               unsigned int default_value, unsigned int flags) {
    if (!context) return INVALID;
    fake.handles = realloc(fake.handles, (fake.handle_count + 1) * sizeof *fake.handles);
    fhandle *h = &fake.handles[fake.handle_count++];
    *h = (fhandle){(uint64_t)++fake.next_id + 0x1000, ((fgraph *)graph)->id, (int)default_value, (int)flags, 0};
    *handle = h->value;
    text t = {0};
    put(&t, "{\"event\":\"handle\",\"value\":%llu,\"graph\":%d,\"default\":%u,\"flags\":%u}", (unsigned long long)h->value,
        h->graph, default_value, flags);
    emit(&t);
    return OK;
}

EXPORT CUresult cuGraphAddNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count,
                               CUgraphNodeParams *params) {
    if (params->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return INVALID;
    CUDA_CONDITIONAL_NODE_PARAMS *c = &params->u.conditional;
    if (!find_handle(c->handle) || !c->ctx || !c->size) return INVALID;
    fnode *n = new_node(K_CONDITIONAL);
    n->cond_type = c->type, n->handle = c->handle, n->nbodies = c->size;
    n->bodies = calloc(c->size, sizeof *n->bodies);
    for (unsigned b = 0; b < c->size; b++) n->bodies[b] = new_graph(0);
    c->phGraph_out = (CUgraph *)n->bodies; /* the driver returns the bodies it made */
    *node = (CUgraphNode)append((fgraph *)graph, n, deps, count);
    return OK;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    (void)flags;
    if (!live_graph((fgraph *)graph)) return INVALID;
    fexec *e = calloc(1, sizeof *e);
    e->graph = (fgraph *)graph; /* no copy: SetParams reaches the nodes that later launches run */
    fake.execs++;
    *exec = (CUgraphExec)e;
    text t = {0};
    put(&t, "{\"event\":\"instantiate\",\"graph\":");
    put_graph(&t, e->graph);
    put(&t, "}");
    emit(&t);
    return OK;
}

EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) { (void)stream; return exec ? OK : INVALID; }

EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    (void)stream;
    fexec *e = (fexec *)exec;
    if (!e || !live_graph(e->graph)) return INVALID;
    for (size_t i = 0; i < fake.handle_count; i++)
        if (fake.handles[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT) fake.handles[i].current = fake.handles[i].default_value;
    run(e->graph);
    return OK;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
    wait_until_unstuck("cuGraphExecDestroy"); /* the driver waits for the executable's launches in flight */
    free(exec);
    fake.execs--;
    return OK;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    fexec *e = (fexec *)exec;
    fnode *n = (fnode *)find_in(e->graph, (const fnode *)node);
    const char *failing = getenv("FAKE_CUDA_FAIL_EXEC_SET"); /* a function whose node cannot be set: a driver failure */
    if (!n || n->kind != K_KERNEL || (failing && strcmp(failing, ((ffunction *)p->func)->name) == 0)) return INVALID;
    unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ}, block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    set_kernel(n, ((ffunction *)p->func)->name, grid, block, p->sharedMemBytes, p->kernelParams);
    text t = {0};
    put(&t, "{\"event\":\"exec_set\",");
    put_kernel(&t, n);
    put(&t, "}");
    emit(&t);
    return OK;
}

EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *graph) {
    const fnode *n = (const fnode *)node;
    if (n->kind != K_GRAPH) return INVALID;
    *graph = (CUgraph)n->child;
    return OK;
}

EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *clone, CUgraphNode original, CUgraph cloned) {
    const fnode *found = find_clone((const fgraph *)cloned, (const fnode *)original);
    if (!found) return INVALID;
    *clone = (CUgraphNode)found;
    return OK;
}

EXPORT CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count) {
    const fgraph *g = (const fgraph *)graph;
    if (nodes && *count == 0) return INVALID; /* as the driver answers (seen on 580) */
    if (nodes)
        for (size_t i = 0; i < *count && i < g->count; i++) nodes[i] = (CUgraphNode)g->nodes[i];
    *count = g->count;
    return OK;
}

EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, int *type) {
    static const int TYPES[] = {[K_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL, [K_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
                                [K_MEMCPY] = CU_GRAPH_NODE_TYPE_MEMCPY, [K_GRAPH] = CU_GRAPH_NODE_TYPE_GRAPH,
                                [K_EMPTY] = CU_GRAPH_NODE_TYPE_EMPTY, [K_CONDITIONAL] = CU_GRAPH_NODE_TYPE_CONDITIONAL};
    *type = TYPES[((const fnode *)node)->kind];
    return OK;
}

/* A copy's parameters: a host end's address in srcHost/dstHost, any other's in srcDevice/dstDevice, as cuda.h's
 * CUDA_MEMCPY3D has them. */
EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D *p) {
    const fnode *n = (const fnode *)node;
    if (n->kind != K_MEMCPY) return INVALID;
    memset(p, 0, sizeof *p);
    p->srcMemoryType = n->src_memory, p->dstMemoryType = n->dst_memory;
    if (n->src_memory == CU_MEMORYTYPE_HOST) p->srcHost = (const void *)(uintptr_t)n->src;
    else p->srcDevice = n->src;
    if (n->dst_memory == CU_MEMORYTYPE_HOST) p->dstHost = (void *)(uintptr_t)n->dst;
    else p->dstDevice = n->dst;
    p->WidthInBytes = n->count, p->Height = 1, p->Depth = 1;
    return OK;
}

/* What is still allocated or loaded: all zeros once every pipeline is closed. */
EXPORT void fake_cuda_live(int counts[6]) {
    counts[0] = (int)fake.allocation_count, counts[1] = (int)fake.graph_count, counts[2] = fake.execs;
    counts[3] = fake.modules, counts[4] = fake.streams, counts[5] = fake.events;
}

__attribute__((destructor)) static void report_live(void) {
    text t = {0};
    put(&t, "{\"event\":\"live\",\"allocations\":%zu,\"graphs\":%zu,\"executables\":%d,\"modules\":%d,\"streams\":%d,"
        "\"events\":%d}", fake.allocation_count, fake.graph_count, fake.execs, fake.modules, fake.streams, fake.events);
    emit(&t);
    json_free(fake.param_sizes);
    free(fake.handles);
    free(fake.graphs);
    free(fake.allocations);
    free(fake.sizes);
    free(fake.host);
    memset(&fake, 0, sizeof fake);
}
