/* The fake driver's model (fake_cuda.c, fake_graph.c): graphs, nodes, handles, the JSON log. */
#ifndef PIPEC_FAKE_H
#define PIPEC_FAKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cuda_abi.h"
#include "../src/json.h"

#define EXPORT __attribute__((visibility("default")))
#define OK CUDA_SUCCESS
#define INVALID 1

typedef struct fgraph fgraph;
typedef struct fnode fnode;

enum { K_KERNEL, K_MEMSET, K_MEMCPY, K_GRAPH, K_EMPTY, K_CONDITIONAL };

struct fnode {
    int kind;
    fnode **deps;
    size_t ndeps;
    fnode **programmatic; /* producers of programmatic edges into this node (cuGraphAddDependencies_v2) */
    size_t nprogrammatic;
    const fnode *origin; /* the node this one was cloned from */
    char *function;
    unsigned grid[3], block[3], shared;
    unsigned char *args;
    size_t *arg_sizes, nargs;
    int args_known;
    int serialized; /* launched with programmatic stream serialization (cuLaunchKernelEx) */
    uint64_t dst, src;
    int dst_memory, src_memory; /* a copy's memory types: DEVICE for pipec's own, UNIFIED for NCCL's */
    unsigned element_size;
    uint32_t value;
    size_t count;
    fgraph *child;
    int cond_type;
    uint64_t handle;
    fgraph **bodies;
    unsigned nbodies;
    /* what a fake library's kernel does when it runs (fake_nccl.c's collectives): a function of
     * bytes the node owns, copied with the node */
    void (*effect)(const unsigned char *data, size_t size);
    unsigned char *effect_data;
    size_t effect_size;
};

struct fgraph {
    int id;
    fnode **nodes;
    size_t count, capacity;
    int body; /* owned by a conditional node */
};

typedef struct ffunction { char *name; struct fmodule *module; } ffunction;
typedef struct fmodule { ffunction **functions; size_t count; } fmodule;
typedef struct fstream { fgraph *capture; } fstream;
typedef struct fexec { fgraph *graph; } fexec;
typedef struct fhandle { uint64_t value; int graph, default_value, flags, current; } fhandle;

typedef struct fake_state {
    int next_id;
    fgraph **graphs; size_t graph_count; /* live top-level graphs */
    void **allocations; size_t *sizes; size_t allocation_count;
    int *host; /* per allocation: cuMemHostAlloc's (pinned host memory) */
    int modules, streams, events, execs;
    fhandle *handles; size_t handle_count;
    json *param_sizes;
    int param_sizes_read;
    _Atomic int stuck; /* the device's work never finishes (a collective waiting for a rank that stopped) */
} fake_state;

extern fake_state fake;

typedef struct text { char *data; size_t length, capacity; } text;
void put(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
void emit(text *t);
void put_kernel(text *t, const fnode *n);
void put_graph(text *t, const fgraph *g);

/* fake_cuda.c: host memory standing in for device memory */
int inside(uint64_t address, size_t bytes);
CUresult do_memset(uint64_t dst, unsigned size, uint32_t value, size_t count);
CUresult do_memcpy(uint64_t dst, uint64_t src, size_t bytes);

/* fake_graph.c */
fnode *new_node(int kind);
void add_programmatic(fnode *producer, fnode *consumer);
void set_kernel(fnode *n, const char *function, const unsigned grid[3], const unsigned block[3], unsigned shared,
                void **params);
fhandle *find_handle(uint64_t value);
void execute(const fnode *n);
void run(const fgraph *g);
fgraph *new_graph(int top);
void free_node(fnode *n);
void free_graph(fgraph *g);
int live_graph(const fgraph *g);
fnode *append(fgraph *g, fnode *n, const CUgraphNode *deps, size_t count);
fgraph *clone_graph(const fgraph *g);
const fnode *find_in(const fgraph *g, const fnode *target);
const fnode *find_clone(const fgraph *g, const fnode *original);

#endif
