/* pipec.h: the C runtime of pipec bundles (the one public header; C ABI, C11 and C++).
 *
 * A bundle is what `pipec build FILE -o DIR` writes: manifest.json (format, versions, content
 * hashes), plan.json (`pipec --emit plan`), modules/<i>.<arch>.cubin and modules/<i>.ptx, and
 * buffers/<name>.bin (initial contents the host cannot recompute cheaply). This library opens a
 * bundle and builds, instantiates and replays the graph the Python runtime builds for the same
 * plan: the same kernel, memset, memcpy, child graph and conditional nodes, the same edges, in
 * the same order, explicitly (stream capture only for the one library call of a GEMM or
 * collective node, as runtime/library.py records it).
 *
 * It depends on the CUDA driver API only, loaded at run time (dlopen of libcuda.so.1, or of
 * `pipec_options.driver_library`, or of $PIPEC_DRIVER_LIBRARY). cuBLASLt is loaded only when the
 * plan has GEMM nodes (libcublasLt.so.13, then .12; or `cublaslt_library` / $PIPEC_CUBLASLT_LIBRARY),
 * NCCL only when it has collective nodes (libnccl.so.2; or `nccl_library` / $PIPEC_NCCL_LIBRARY),
 * which run over the communicator the host created (`nccl_comm`; docs/native.md, "Collectives").
 *
 * Errors: every function returns a pipec_status; on failure `pipec_last_error()` gives one line
 * saying what went wrong and where (the buffer, the node, its .pipe location). Nothing prints,
 * exits or aborts. A failed open frees everything it allocated and leaves *out NULL.
 *
 * Thread safety: the last error is thread-local. One pipeline is not safe for concurrent use:
 * the caller serialises calls on it (any thread may make them). Different pipelines may be used
 * from different threads at once. Calls that touch memory or build graphs make the pipeline's
 * context current for their duration (cuCtxPushCurrent / cuCtxPopCurrent), so the caller's
 * current context is left as it was; pipec_step and pipec_launch do not touch the current
 * context (cuGraphLaunch needs none).
 */
#ifndef PIPEC_H
#define PIPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The driver's handle types, declared as cuda.h declares them (identical typedefs may repeat). */
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef unsigned long long CUdeviceptr;

#if defined(__GNUC__)
#define PIPEC_API __attribute__((visibility("default")))
#else
#define PIPEC_API
#endif

#define PIPEC_ABI_VERSION 1
#define PIPEC_BUNDLE_FORMAT_VERSION 2 /* the bundle format version this library reads */

typedef enum pipec_status {
    PIPEC_OK = 0,
    PIPEC_ERROR_INVALID_ARGUMENT = 1, /* a NULL where a value is needed, an unknown name */
    PIPEC_ERROR_IO = 2,               /* a file cannot be read or written */
    PIPEC_ERROR_BUNDLE = 3,           /* malformed, truncated, a hash mismatch, a wrong format */
    PIPEC_ERROR_UNSUPPORTED = 4,      /* a format version, an architecture, a driver too old */
    PIPEC_ERROR_BIND = 5,             /* a binding whose size or type does not match its buffer */
    PIPEC_ERROR_CUDA = 6,             /* a driver call failed (named in the message) */
    PIPEC_ERROR_LIBRARY = 7,          /* cuBLASLt or NCCL is missing or failed */
    PIPEC_ERROR_OUT_OF_MEMORY = 8,
    PIPEC_ERROR_UPDATE_REFUSED = 9,   /* an update that would need a new graph */
    PIPEC_ERROR_STATE = 10,           /* a saved state that does not match the pipeline */
    PIPEC_ERROR_LAUNCH_LIMITS = 11,   /* a kernel asks for more than the device has */
    PIPEC_ERROR_COLLECTIVE = 12       /* NCCL failed, or a wait outlasted the timeout (a rank stopped): pipec
                                         has aborted the host's communicator (ncclCommAbort), which the host
                                         must neither use nor destroy again */
} pipec_status;

/* Element types of buffers (the plan's dtype names). */
typedef enum pipec_dtype {
    PIPEC_F32 = 0, PIPEC_F16 = 1, PIPEC_BF16 = 2, PIPEC_F64 = 3, PIPEC_I32 = 4, PIPEC_U32 = 5,
    PIPEC_I64 = 6, PIPEC_U64 = 7, PIPEC_U8 = 8,
    PIPEC_U16 = 9 /* only as a binding's type: a bf16 buffer takes u16 bit patterns too */
} pipec_dtype;

/* A host device allocation used as a named buffer's memory instead of one pipec allocates:
 * `bytes` and `dtype` must match the plan's buffer (a one-line PIPEC_ERROR_BIND otherwise). The
 * host keeps it alive until pipec_close; pipec never frees it. Mapped buffers cannot be bound. */
typedef struct pipec_binding {
    const char *buffer;
    CUdeviceptr pointer;
    size_t bytes;
    pipec_dtype dtype;
} pipec_binding;

#define PIPEC_OPTIONS_VERSION 2

typedef struct pipec_options {
    uint32_t version;              /* PIPEC_OPTIONS_VERSION; pipec_options_init sets it */
    int device;                    /* the ordinal whose primary context is used when context is NULL */
    CUcontext context;             /* NULL: the device's primary context (retained, then released) */
    CUstream stream;               /* NULL: a non-blocking stream of the pipeline's own */
    const pipec_binding *bindings; /* binding_count entries, each a distinct buffer */
    size_t binding_count;
    void *nccl_comm;               /* the host's ncclComm_t, needed by a plan with collective nodes: rank
                                      RANK of WORLD_SIZE as the bundle was built (checked at open). The
                                      host destroys it after pipec_close; after a failed collective pipec
                                      has aborted it (ncclCommAbort), and the host must not use it again */
    const char *driver_library;    /* NULL: $PIPEC_DRIVER_LIBRARY, else libcuda.so.1 */
    const char *cublaslt_library;  /* NULL: $PIPEC_CUBLASLT_LIBRARY, else libcublasLt.so.13/.12 */
    const char *nccl_library;      /* NULL: $PIPEC_NCCL_LIBRARY, else libnccl.so.2 */
    double nccl_timeout_s;         /* 0: $PIPEC_NCCL_TIMEOUT, else 120: the longest a wait for work with
                                      collectives may take before pipec aborts the communicator */
} pipec_options;

/* One file of an in-memory bundle: its path relative to the bundle folder ("plan.json",
 * "modules/0.sm_90.cubin"). pipec_open_memory copies what it keeps: the table and the bytes may
 * be freed once it returns. */
typedef struct pipec_file {
    const char *path;
    const void *data;
    size_t size;
} pipec_file;

typedef struct pipec_pipeline pipec_pipeline;

/* Runtime and ABI. */
PIPEC_API const char *pipec_version(void);
PIPEC_API int pipec_abi_version(void);

/* The last failure on this thread, one line (never NULL; "" before any failure). */
PIPEC_API const char *pipec_last_error(void);

PIPEC_API void pipec_options_init(pipec_options *options);

/* Opens a bundle folder (or a table of its files), checks the manifest (format, the reader
 * version range, every file's SHA-256), picks each module's cubin for the device's
 * architecture (or its PTX, JIT-compiled by the driver), allocates and initialises every buffer,
 * runs the `init` block eagerly, and builds, instantiates and uploads the step's graph.
 * `options` may be NULL (all defaults). */
PIPEC_API pipec_status pipec_open_dir(const char *dir, const pipec_options *options, pipec_pipeline **out);
PIPEC_API pipec_status pipec_open_memory(const pipec_file *files, size_t count, const pipec_options *options,
                               pipec_pipeline **out);

/* Enqueues n replays of the step graph on the pipeline's stream (cuGraphLaunch each;
 * asynchronous). */
PIPEC_API pipec_status pipec_step(pipec_pipeline *p, uint64_t n);
/* n replays ordered after the work enqueued on `stream` so far; work enqueued on `stream` later
 * comes after them (events; the host never waits). */
PIPEC_API pipec_status pipec_launch(pipec_pipeline *p, CUstream stream, uint64_t n);
PIPEC_API pipec_status pipec_synchronize(pipec_pipeline *p);
/* The stream the pipeline enqueues on (its own, or options.stream). */
PIPEC_API CUstream pipec_stream(const pipec_pipeline *p);

/* A labelled element of a mapped buffer (labels as piperun prints them: the buffer's labels, or
 * "name[i]" for the first 8 elements of a mapped buffer without labels), read from host memory
 * without a synchronise: the value the device has written so far. */
PIPEC_API pipec_status pipec_read_diag(const pipec_pipeline *p, const char *label, double *out);
PIPEC_API size_t pipec_diag_count(const pipec_pipeline *p);
PIPEC_API pipec_status pipec_diag_at(const pipec_pipeline *p, size_t index, const char **label, double *value);

/* Buffers: the device address, bytes and type of a buffer by name; enumerate with count/name. */
PIPEC_API pipec_status pipec_buffer(const pipec_pipeline *p, const char *name, CUdeviceptr *pointer, size_t *bytes,
                          pipec_dtype *dtype);
PIPEC_API size_t pipec_buffer_count(const pipec_pipeline *p);
PIPEC_API const char *pipec_buffer_name(const pipec_pipeline *p, size_t index);
/* Host copies after everything enqueued so far has finished (synchronises). */
PIPEC_API pipec_status pipec_read_buffer(pipec_pipeline *p, const char *name, void *host, size_t bytes);
PIPEC_API pipec_status pipec_write_buffer(pipec_pipeline *p, const char *name, const void *host, size_t bytes);

/* Live update, runtime/update.py's contract: `plan_json` is the plan of the same file compiled
 * with new constant values (`pipec --emit plan -D NAME=VALUE`; this library has no compiler).
 * When the plans differ only in kernel nodes' scalar arguments and launch shapes (grid, block,
 * dynamic shared memory), each changed kernel node of the executable graph gets its new
 * parameters (cuGraphExecKernelNodeSetParams) and the eager program its new launch, for the
 * launches enqueued from now on; *changed (if not NULL) is the count of kernel nodes changed.
 * Anything else is refused (PIPEC_ERROR_UPDATE_REFUSED) naming the first difference. Graphs the host
 * built with pipec_add_to_graph keep the values they were built with. */
PIPEC_API pipec_status pipec_update_plan(pipec_pipeline *p, const char *plan_json, size_t length, size_t *changed);

/* A constant's value, as `-D NAME=VALUE` writes one: the kind matters (3 / 2 is 1, 3.0 / 2 is 1.5). */
typedef enum pipec_value_kind { PIPEC_VALUE_INT = 0, PIPEC_VALUE_UINT = 1, PIPEC_VALUE_FLOAT = 2, PIPEC_VALUE_BOOL = 3 } pipec_value_kind;
typedef struct pipec_value {
    pipec_value_kind kind;
    union { int64_t i; uint64_t u; double f; int b; } as; /* PIPEC_VALUE_UINT: integers past INT64_MAX */
} pipec_value;

/* Live update without the compiler (runtime/live.py, docs/plan.md "Live updates"): new values for
 * `count` constants of the main file, computed through the plan's live-update record into the
 * kernel nodes' scalar arguments and launch shapes they reach (a constant derived from one follows
 * it), checked as the compiler checks them and against the device, then set as pipec_update_plan
 * sets them; *changed (if not NULL) is the count of kernel nodes changed. All or nothing: an unknown
 * name or kind is PIPEC_ERROR_INVALID_ARGUMENT; a constant that cannot change in place (one line
 * naming its structural use), or a value the program cannot take, PIPEC_ERROR_UPDATE_REFUSED. */
PIPEC_API pipec_status pipec_update_constants(pipec_pipeline *p, const char *const *names, const pipec_value *values,
                                              size_t count, size_t *changed);
/* A constant of the main file: its value now, and in *structural (if not NULL) NULL when it can
 * change in place, else why not ("reaches a buffer's dimension at rl_step.pipe:134:20"). */
PIPEC_API pipec_status pipec_constant(pipec_pipeline *p, const char *name, pipec_value *value, const char **structural);

/* The same nodes launched one by one in program order, n times (runtime/eager.py). */
PIPEC_API pipec_status pipec_run_eager(pipec_pipeline *p, uint64_t n);

/* --verify (runtime/verify.py): from the same state, `steps` eager steps against `steps` graph
 * replays, and the graph again, bit for bit, every buffer the step writes before reading it
 * poisoned first; the state is restored afterwards. PIPEC_OK when the comparison ran; the
 * report says whether the sides agree. */
typedef struct pipec_verify_report {
    uint32_t version;     /* PIPEC_OPTIONS_VERSION */
    int ok;               /* 1: every buffer equal on every side */
    size_t buffers;       /* buffers compared */
    size_t mismatches;    /* buffers that differ, over both comparisons */
    char first[1024];     /* the first mismatch, as piperun --verify describes it ("" when ok) */
} pipec_verify_report;
PIPEC_API pipec_status pipec_verify(pipec_pipeline *p, uint64_t steps, pipec_verify_report *report);

/* State in the Python runtime's format: DIR/state.safetensors, every buffer, with the metadata
 * runtime/state.py writes (pipe, pipe_sha256, pipec_version, steps, dtypes). */
PIPEC_API pipec_status pipec_save_state(pipec_pipeline *p, const char *dir, uint64_t steps);
PIPEC_API pipec_status pipec_load_state(pipec_pipeline *p, const char *dir);

/* Adds the step's nodes into a graph the host builds, after `deps` (ndeps of them): the nodes go
 * in directly (a child graph node cannot hold conditional nodes), child graphs and library
 * recordings as child graph nodes, conditional handles created on `host_graph`. With `out_last`
 * not NULL, an empty node after every last node of the step is added and returned, for the
 * host's next node to depend on. The host graph may be instantiated and launched any number of
 * times while the pipeline is open; it uses the pipeline's buffers. */
PIPEC_API pipec_status pipec_add_to_graph(pipec_pipeline *p, CUgraph host_graph, const CUgraphNode *deps, size_t ndeps,
                                CUgraphNode *out_last);

/* How each GEMM node's cuBLASLt algorithm was chosen at open, in the order the nodes were prepared
 * (program order, `init` first): the algorithm the bundle stores for the node (`pipec build
 * --gemm-algorithms`) when it was chosen on this GPU (name, architecture, multiprocessors) and
 * this cuBLASLt version, for operands no more aligned than they are here, and
 * cublasLtMatmulAlgoCheck accepts it for the node's descriptor and layouts within its workspace;
 * else the heuristic's first. *stored is 1 for the stored one; *why is one line, "stored (tune)"
 * or "heuristic: " and why not the stored one, the words the Python runtime's
 * `Pipeline.gemm_choices` uses. Any out-parameter may be NULL; the strings live as long as the
 * pipeline. docs/native.md, "GEMM algorithms". */
PIPEC_API size_t pipec_gemm_count(const pipec_pipeline *p);
PIPEC_API pipec_status pipec_gemm_at(const pipec_pipeline *p, size_t index, const char **node, int *stored,
                                     const char **why);

/* Waits for the pipeline's work and frees everything it owns (never the bindings, the host's
 * context or stream). NULL is accepted. */
PIPEC_API pipec_status pipec_close(pipec_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif /* PIPEC_H */
