/* The C runtime's shared types: the plan as C structs (plan.c reads plan.json into them), the
 * bundle's files, and the pipeline. Each .c file mirrors one Python runtime module; the
 * comments name it. */
#ifndef PIPEC_RUNTIME_H
#define PIPEC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"
#include "json.h"
#include "pipec.h"

/* --- errors (error.c) --------------------------------------------------------------------- */

/* Sets this thread's last error (printf-style, one line) and returns `status`. */
pipec_status fail(pipec_status status, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* A failed driver call: "<call> failed: CUDA_ERROR_X" plus `where` (may be NULL). */
pipec_status fail_cuda(const driver *d, const char *call, CUresult result, const char *where);
#define CU(p, call_expr, name, where) \
    do { CUresult cu_result_ = (call_expr); \
         if (cu_result_ != CUDA_SUCCESS) return fail_cuda(&(p)->driver, name, cu_result_, where); } while (0)

/* --- dtypes ------------------------------------------------------------------------------- */

typedef enum dtype { DT_F32, DT_F16, DT_BF16, DT_F64, DT_I32, DT_U32, DT_I64, DT_U64, DT_U8, DT_U16, DT_I8,
                     DT_I16, DT_BOOL, DT_COUNT } dtype;
int dtype_from_name(const char *name); /* -1 when unknown */
const char *dtype_name(dtype t);
size_t dtype_size(dtype t);
char dtype_kind(dtype t); /* f, i, u, b */
uint16_t half_bits(double value);      /* IEEE binary16, round to nearest even (NumPy's astype) */
uint16_t bfloat16_bits(double value);  /* through f32, then rounded to nearest even (compiler/dtypes.py) */
/* One element of `t` holding `value` (an integer or a float as JSON gave it), little-endian. */
void scalar_bytes(dtype t, const json *value, unsigned char out[8]);
double element_as_double(dtype t, const unsigned char *element);

/* --- the plan (plan.c; compiler/plan_schema.py) -------------------------------------------- */

enum { ARG_POINTER, ARG_SCALAR, ARG_HANDLE, ARG_IN_GRAPH };
enum { NODE_KERNEL, NODE_MEMSET, NODE_MEMCPY, NODE_GRAPH, NODE_CONDITIONAL, NODE_GEMM, NODE_COLLECTIVE };

typedef struct arg_spec {
    int kind;
    dtype ctype;     /* scalars */
    int buffer;      /* pointers: the buffer's index */
    int64_t byte_offset;
    int64_t handle;  /* handles: the handle's index in the plan */
    unsigned char value[8]; /* scalars: the bytes the kernel receives */
} arg_spec;

typedef struct access_spec {
    int buffer;
    int64_t start, stop; /* elements */
    int writes;
} access_spec;

typedef struct matrix_spec {
    int present;
    int buffer;
    int64_t byte_offset;
    dtype type;
    int64_t rows, cols, ld, batch_stride;
} matrix_spec;

typedef struct gemm_spec {
    int64_t m, n, k, batch;
    matrix_spec a, b, c, bias, aux, bias_grad;
    int trans_a, trans_b;
    double alpha, beta;
    int tf32;
    char epilogue[16];
    int workspace;
    uint64_t workspace_bytes;
} gemm_spec;

/* One NCCL call of a collective node (plan_schema.py CollectiveOperandSpec). */
typedef struct operand_spec {
    dtype type;
    uint64_t count; /* elements each rank sends (allgather, broadcast, allreduce) or receives (reducescatter) */
    int src, dst;
    int64_t src_offset, dst_offset; /* bytes */
} operand_spec;

typedef struct collective_spec {
    char collective[16]; /* allreduce | broadcast | allgather | reducescatter */
    char op[8];          /* sum | avg | max | min, "" for none */
    int64_t root;        /* broadcast; -1 for none */
    operand_spec *operands;
    size_t operand_count;
} collective_spec;

typedef struct node_spec {
    int kind, id;
    char *name, *location;
    const json *source;  /* the node's JSON (update compares plans through it) */
    access_spec *accesses;
    size_t access_count;
    /* kernel */
    int module;
    char *function;
    unsigned grid[3], block[3], shared_bytes;
    arg_spec *args;
    size_t arg_count;
    /* memset */
    int buffer;
    int64_t byte_offset;
    unsigned element_size;
    uint32_t value;
    uint64_t count;
    /* memcpy */
    int src, dst;
    int64_t src_offset, dst_offset;
    uint64_t nbytes;
    /* child graph; conditional */
    int graph;
    int cond_type; /* CU_GRAPH_COND_TYPE_* */
    int64_t handle;
    int *bodies;
    size_t body_count;
    int control;
    gemm_spec *gemm;
    collective_spec *collective;
} node_spec;

typedef struct graph_spec {
    char *name, *scope;
    node_spec *nodes;
    size_t node_count;
    int (*edges)[2];
    unsigned char *programmatic; /* per edge: 1 for a programmatic edge (`edge_kinds`) */
    size_t edge_count;
} graph_spec;

enum { INIT_ZEROS, INIT_UNINIT, INIT_FILL, INIT_DATA, INIT_ADDRESSES };

typedef struct buffer_spec {
    char *name, *location;
    dtype type;
    int mapped;
    int init;
    const json *fill;  /* INIT_FILL: the value */
    const json *addresses; /* INIT_ADDRESSES: the table's entries (addresses.c) */
    char **labels;
    size_t label_count;
    int64_t *shape;
    size_t rank;
    uint64_t nbytes;
    int first_write;   /* step_first_access == "write" */
} buffer_spec;

typedef struct plan {
    json *document;    /* the parsed plan.json, which node and buffer specs point into */
    char *pipe, *pipe_sha256, *pipec_version;
    buffer_spec *buffers;
    size_t buffer_count;
    size_t module_count;
    char **module_names;
    graph_spec *graphs;
    size_t graph_count;
    int step, init;    /* graph indices, -1 for none */
    int64_t world_size, rank; /* the launcher constants it was compiled with */
} plan;

pipec_status plan_parse(const char *text, size_t length, const char *what, plan *out);
void plan_free(plan *p);
int plan_buffer_index(const plan *p, const char *name);
/* Every kernel, memset, memcpy and library node of a graph and its children, program order. */
size_t plan_leaves(const plan *p, int graph, const node_spec **out, size_t capacity);

/* --- the bundle (bundle.c) ---------------------------------------------------------------- */

typedef struct bundle_file {
    char *path;
    unsigned char *data;
    size_t size;
} bundle_file;

typedef struct bundle {
    char *where; /* the folder, or "<memory>" */
    bundle_file *files;
    size_t file_count;
    char *plan_text;
    size_t plan_length;
} bundle;

pipec_status bundle_from_dir(const char *dir, bundle *out);
pipec_status bundle_from_memory(const pipec_file *files, size_t count, bundle *out);
const bundle_file *bundle_find(const bundle *b, const char *path);
void bundle_free(bundle *b);

/* --- the pipeline ------------------------------------------------------------------------- */

typedef struct device_buffer {
    CUdeviceptr pointer;
    void *host;  /* mapped buffers */
    int bound;   /* the host's allocation */
} device_buffer;

typedef struct kernel_args {  /* runtime/launch.py: the kernelParams array, built once */
    unsigned char *storage;
    void **pointers;
} kernel_args;

typedef struct function_entry {
    int module;
    const char *scope, *name;
    CUfunction function;
    int static_shared; /* -1 until asked */
} function_entry;

typedef struct module_entry {
    int module;
    const char *scope;
    CUmodule handle;
} module_entry;

typedef struct eager_item eager_item;
struct eager_item {
    const node_spec *node;
    int branch;          /* a conditional node: `bodies` run on the decision */
    CUfunction function; /* kernels */
    int programmatic;    /* a kernel a programmatic edge leads into: launched with cuLaunchKernelEx */
    kernel_args args;
    eager_item **bodies;  /* branch: body_count lists, each `lengths[i]` items */
    size_t *lengths;
};

typedef struct eager_program {
    eager_item *items;
    size_t count;
    int branching;
} eager_program;

typedef struct leaf_handle {
    const char *name;
    CUgraphNode node;
    int kernel; /* a kernel node: one end of a programmatic edge */
    CUgraphNode *embedded_in; /* child graph nodes embedding it, innermost first */
    size_t embedded_count;
} leaf_handle;

typedef struct built_graph {
    CUgraph root;
    CUgraphExec exec;
    CUgraph *graphs; /* created, destroyed on close */
    size_t graph_count, graph_capacity;
    CUgraphConditionalHandle *handles; /* by the plan's handle index */
    int *handle_made;
    size_t handle_count;
    leaf_handle *leaves;
    size_t leaf_count, leaf_capacity;
    kernel_args *args; /* kept alive with the graph */
    size_t args_count, args_capacity;
    int programmatic_launch; /* the device has programmatic dependent launch: sm_90 and later */
    int open_children;       /* pipec's child graphs added to their parent (programmatic edges at them) */
    size_t programmatic_edges;
} built_graph;

typedef struct gemms gemms; /* gemm.c */
typedef struct stored_gemms stored_gemms; /* gemm_algorithms.c */
typedef struct collectives collectives; /* collectives.c */
typedef struct live_record live_record; /* live.c */

struct pipec_pipeline {
    driver driver;
    bundle bundle;
    plan plan;
    CUdevice device;
    CUcontext context;
    int primary; /* the primary context was retained (released on close) */
    char arch[16], device_name[128];
    int max_threads, max_registers, max_shared, multiprocessors, driver_version;
    CUstream stream;
    int own_stream;
    const void **images; /* each module's image for this device (cubin, or NUL-terminated PTX) */
    struct diag_entry { char *label; int buffer; size_t element; } *diags; /* the mapped buffers' labels */
    size_t diag_count;
    module_entry *modules;
    size_t module_count, module_capacity;
    function_entry *functions;
    size_t function_count, function_capacity;
    device_buffer *buffers;
    size_t buffers_made;
    gemms *gemms;
    stored_gemms *stored_gemms; /* the bundle's gemm_algorithms.json; NULL without one */
    collectives *collectives; /* NULL for a plan without collective nodes */
    char cublaslt_path[512]; /* options.cublaslt_library, kept for the first GEMM node */
    eager_program eager;
    built_graph graph;
    built_graph *embeddings; /* pipec_add_to_graph's builds, freed on close */
    size_t embedding_count;
    plan *retired; /* plans replaced by updates: names and scopes above point into them */
    size_t retired_count;
    live_record *live; /* the plan's live-update record, as pipec_update_constants has changed it */
};

/* context.c: push the pipeline's context for a call, pop it after. */
pipec_status enter(pipec_pipeline *p);
void leave(pipec_pipeline *p);

/* run.c */
pipec_status diags_build(pipec_pipeline *p);
void diags_free(pipec_pipeline *p);

/* driver.c */
pipec_status driver_open(const char *path, driver *out);
void driver_close(driver *d);

/* modules.c (runtime/modules.py, resources.py) */
pipec_status module_function(pipec_pipeline *p, const char *scope, int module, const char *name,
                             unsigned shared_bytes, CUfunction *out);
pipec_status check_launch_resources(pipec_pipeline *p);
pipec_status check_node_resources(pipec_pipeline *p, const node_spec *n);
void modules_close(pipec_pipeline *p);

/* memory.c (runtime/memory.py) */
pipec_status buffers_open(pipec_pipeline *p, const pipec_binding *bindings, size_t count);
void buffers_close(pipec_pipeline *p);
CUdeviceptr buffer_pointer(const pipec_pipeline *p, int buffer, int64_t offset);
/* Every table of addresses written with this process's addresses (addresses.c). */
pipec_status tables_fill(pipec_pipeline *p);
pipec_status buffer_poison(pipec_pipeline *p, int buffer, CUstream stream);
pipec_status buffer_read(pipec_pipeline *p, int buffer, void *host);
pipec_status buffer_write(pipec_pipeline *p, int buffer, const void *host);

/* args.c (runtime/launch.py): `handles` NULL for eager launches */
pipec_status kernel_args_make(const pipec_pipeline *p, const node_spec *node, const CUgraphConditionalHandle *handles,
                              kernel_args *out);
void kernel_args_free(kernel_args *a);

/* eager.c (runtime/eager.py) */
pipec_status eager_prepare(pipec_pipeline *p, int graph, eager_program *out);
pipec_status eager_run(pipec_pipeline *p, eager_program *program);
pipec_status eager_update_kernel(pipec_pipeline *p, eager_program *program, const node_spec *node);
void eager_free(eager_program *program);

/* pdl.c (runtime/graph.py's and eager.py's programmatic dependent launch) */
int supports_programmatic_launch(const char *arch);
int programmatic_at_child_graphs(const plan *pl, int index);
pipec_status add_programmatic_dependency(pipec_pipeline *p, CUgraph graph, CUgraphNode producer, CUgraphNode consumer,
                                         const char *name);
int early_starter(const plan *pl, int index, const node_spec *target);

/* graph.c (runtime/graph.py) */
pipec_status graph_build(pipec_pipeline *p, int root, built_graph *out);
pipec_status graph_embed(pipec_pipeline *p, CUgraph host, const CUgraphNode *deps, size_t ndeps, built_graph *out,
                         CUgraphNode *out_last);
pipec_status graph_update_kernel(pipec_pipeline *p, built_graph *g, const node_spec *node, const char *scope);
void graph_close(pipec_pipeline *p, built_graph *g);

/* live.c (runtime/live.py): the record read and checked at open, freed on close */
pipec_status live_open(pipec_pipeline *p);
void live_free(pipec_pipeline *p);

/* gemm.c (runtime/gemm.py, gemms.py, library.py) */
pipec_status gemm_prepare(pipec_pipeline *p, const node_spec *node);
pipec_status gemm_enqueue(pipec_pipeline *p, const node_spec *node, CUstream stream);
pipec_status gemm_record(pipec_pipeline *p, const node_spec *node, CUgraph *out);
void gemms_close(pipec_pipeline *p);

/* gemm_algorithms.c (plan/gemm_algorithms.py): the bundle's stored GEMM algorithms, read at open
 * and checked against the plan; the rule's first steps for a node: the 64 bytes stored for it on
 * this GPU and cuBLASLt, for operands aligned as `alignments` (and how they were chosen), or NULL
 * with why not appended to `why`. */
struct text;
pipec_status stored_gemms_read(pipec_pipeline *p);
const unsigned char *stored_gemm_for(const pipec_pipeline *p, const char *node, uint64_t cublaslt,
                                     const uint32_t alignments[4], const char **chosen_by, struct text *why);
void stored_gemms_free(pipec_pipeline *p);

/* library.c (runtime/library.py): one library call recorded on a private stream into a graph
 * of its own and inspected: kernel and memset nodes and, where `collective`, NCCL's host nodes
 * and device-to-device copies. */
typedef pipec_status (*library_call)(pipec_pipeline *p, const node_spec *node, CUstream stream);
pipec_status library_record(pipec_pipeline *p, const node_spec *node, const char *what, library_call call,
                            int collective, CUgraph *out);

/* collectives.c (runtime/collectives.py, distributed.py): NCCL over the host's communicator */
pipec_status collectives_open(pipec_pipeline *p, const pipec_options *options);
pipec_status collective_issue(pipec_pipeline *p, const node_spec *node, CUstream stream);
pipec_status collective_record(pipec_pipeline *p, const node_spec *node, CUgraph *out);
pipec_status collectives_usable(pipec_pipeline *p); /* PIPEC_OK unless the communicator was aborted */
void collectives_launched(pipec_pipeline *p);      /* the step graph was launched: what a wait names */
/* Waits for the pipeline's stream: cuStreamSynchronize, or with collectives a poll that never
 * hangs on a failed rank (the stream, ncclCommGetAsyncError, the timeout; it aborts the
 * communicator on failure). `where` names the wait in a driver error. */
pipec_status stream_wait(pipec_pipeline *p, const char *where);
/* Frees the collectives; after a failure, joins the abort begun then (the graphs must be gone). */
pipec_status collectives_close(pipec_pipeline *p);

#endif
