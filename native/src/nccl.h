/* NCCL, loaded at run time (nccl.c): the entry points the C runtime calls, declared as nccl.h
 * declares them (ncclComm_t is a pointer, ncclResult_t, ncclDataType_t and ncclRedOp_t are
 * ints: NCCL's stable ABI), so no NCCL header or library is needed to build pipec. */
#ifndef PIPEC_NCCL_H
#define PIPEC_NCCL_H

#include "runtime.h"

typedef int nccl_result;
typedef void *nccl_comm;

enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7 };
enum { NCCL_UINT32 = 3 };
enum { NCCL_MAX = 2 };

#define NCCL_ENTRY_POINTS(X) \
    X(GetVersion, "ncclGetVersion", nccl_result, (int *version)) \
    X(GetErrorString, "ncclGetErrorString", const char *, (nccl_result result)) \
    X(CommCount, "ncclCommCount", nccl_result, (nccl_comm comm, int *count)) \
    X(CommUserRank, "ncclCommUserRank", nccl_result, (nccl_comm comm, int *rank)) \
    X(CommGetAsyncError, "ncclCommGetAsyncError", nccl_result, (nccl_comm comm, nccl_result *error)) \
    X(CommAbort, "ncclCommAbort", nccl_result, (nccl_comm comm)) \
    X(GroupStart, "ncclGroupStart", nccl_result, (void)) \
    X(GroupEnd, "ncclGroupEnd", nccl_result, (void)) \
    X(AllReduce, "ncclAllReduce", nccl_result, (const void *src, void *dst, size_t count, int type, int op, \
        nccl_comm comm, CUstream stream)) \
    X(Broadcast, "ncclBroadcast", nccl_result, (const void *src, void *dst, size_t count, int type, int root, \
        nccl_comm comm, CUstream stream)) \
    X(AllGather, "ncclAllGather", nccl_result, (const void *src, void *dst, size_t count, int type, \
        nccl_comm comm, CUstream stream)) \
    X(ReduceScatter, "ncclReduceScatter", nccl_result, (const void *src, void *dst, size_t count, int type, \
        int op, nccl_comm comm, CUstream stream))

typedef struct nccl_library {
    void *handle; /* the dlopen handle */
    char path[512];
#define NCCL_FIELD(field, symbol, result, params) result (*field) params;
    NCCL_ENTRY_POINTS(NCCL_FIELD)
#undef NCCL_FIELD
} nccl_library;

/* dlopen of `path`, else $PIPEC_NCCL_LIBRARY, else libnccl.so.2; `node` names the collective
 * that needs it in the one-line error. */
pipec_status nccl_open(const char *path, const node_spec *node, nccl_library *out);
void nccl_close(nccl_library *library);
/* ncclDataType_t of a pipec element type, -1 for one NCCL has not. */
int nccl_type(dtype t);
/* ncclRedOp_t of sum, avg, max, min; -1 otherwise. */
int nccl_op(const char *op);
const char *nccl_error(const nccl_library *library, nccl_result result);

#endif
