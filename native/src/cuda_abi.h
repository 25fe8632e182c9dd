/* The slice of the CUDA driver's ABI (cuda.h, 12.4 and later, 13.x) that pipec uses, declared
 * here so that the library builds without the CUDA toolkit. Layouts follow cuda.h exactly;
 * every entry point is reached through the `driver` table (driver.c), by the exported symbol
 * name that cuda.h's macros select (cuGraphAddKernelNode is cuGraphAddKernelNode_v2, ...). */
#ifndef PIPEC_CUDA_ABI_H
#define PIPEC_CUDA_ABI_H

#include <stddef.h>

#include "pipec.h"

typedef int CUresult;
typedef int CUdevice;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUkern_st *CUkernel;
typedef unsigned long long CUgraphConditionalHandle;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_READY 600
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DISABLE_TIMING 2
#define CU_MEMHOSTALLOC_PORTABLE 1
#define CU_MEMHOSTALLOC_DEVICEMAP 2
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_UNIFIED 4
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_GRAPH_COND_ASSIGN_DEFAULT 1
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC 1
#define CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC 1
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6

enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
};

enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};

enum {
    CU_GRAPH_NODE_TYPE_KERNEL = 0,
    CU_GRAPH_NODE_TYPE_MEMCPY = 1,
    CU_GRAPH_NODE_TYPE_MEMSET = 2,
    CU_GRAPH_NODE_TYPE_HOST = 3,
    CU_GRAPH_NODE_TYPE_GRAPH = 4,
    CU_GRAPH_NODE_TYPE_EMPTY = 5,
    CU_GRAPH_NODE_TYPE_CONDITIONAL = 13
};

enum { CU_GRAPH_COND_TYPE_IF = 0, CU_GRAPH_COND_TYPE_WHILE = 1, CU_GRAPH_COND_TYPE_SWITCH = 2 };

typedef struct CUDA_KERNEL_NODE_PARAMS_v2 {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;

typedef struct CUDA_MEMSET_NODE_PARAMS {
    CUdeviceptr dst;
    size_t pitch;
    unsigned int value;
    unsigned int elementSize;
    size_t width;
    size_t height;
} CUDA_MEMSET_NODE_PARAMS;

typedef struct CUDA_MEMCPY3D {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

typedef struct CUDA_CONDITIONAL_NODE_PARAMS {
    CUgraphConditionalHandle handle;
    int type;
    unsigned int size;
    CUgraph *phGraph_out;
    CUcontext ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;

typedef struct CUgraphNodeParams {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_CONDITIONAL_NODE_PARAMS conditional;
    } u;
    long long reserved2;
} CUgraphNodeParams;

/* An edge's kind (CUDA 12.3+): ordinary when zeroed; programmatic from a kernel node's
 * programmatic port. */
typedef struct CUgraphEdgeData {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type;
    unsigned char reserved[5];
} CUgraphEdgeData;

typedef struct CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char pad[64];
        int programmaticStreamSerializationAllowed;
    } value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

_Static_assert(sizeof(CUgraphEdgeData) == 8, "CUgraphEdgeData is 8 bytes in cuda.h");
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes in cuda.h");
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig is 56 bytes in cuda.h");
_Static_assert(sizeof(CUgraphNodeParams) == 256, "CUgraphNodeParams is 256 bytes in cuda.h");
_Static_assert(sizeof(CUDA_MEMCPY3D) == 200, "CUDA_MEMCPY3D is 200 bytes in cuda.h");

/* Every entry point pipec calls: X(field, exported symbol, parameters). */
#define PIPEC_DRIVER_ENTRY_POINTS(X) \
    X(Init, "cuInit", (unsigned int flags)) \
    X(DriverGetVersion, "cuDriverGetVersion", (int *version)) \
    X(GetErrorName, "cuGetErrorName", (CUresult error, const char **name)) \
    X(DeviceGetCount, "cuDeviceGetCount", (int *count)) \
    X(DeviceGet, "cuDeviceGet", (CUdevice *device, int ordinal)) \
    X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *value, int attribute, CUdevice device)) \
    X(DeviceGetName, "cuDeviceGetName", (char *name, int length, CUdevice device)) \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *context, CUdevice device)) \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice device)) \
    X(CtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext context)) \
    X(CtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *context)) \
    X(CtxGetDevice, "cuCtxGetDevice", (CUdevice *device)) \
    X(StreamCreate, "cuStreamCreate", (CUstream *stream, unsigned int flags)) \
    X(StreamDestroy, "cuStreamDestroy_v2", (CUstream stream)) \
    X(StreamSynchronize, "cuStreamSynchronize", (CUstream stream)) \
    X(StreamQuery, "cuStreamQuery", (CUstream stream)) \
    X(StreamWaitEvent, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned int flags)) \
    X(StreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream stream, int mode)) \
    X(StreamEndCapture, "cuStreamEndCapture", (CUstream stream, CUgraph *graph)) \
    X(EventCreate, "cuEventCreate", (CUevent *event, unsigned int flags)) \
    X(EventRecord, "cuEventRecord", (CUevent event, CUstream stream)) \
    X(EventDestroy, "cuEventDestroy_v2", (CUevent event)) \
    X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr *pointer, size_t bytes)) \
    X(MemFree, "cuMemFree_v2", (CUdeviceptr pointer)) \
    X(MemHostAlloc, "cuMemHostAlloc", (void **host, size_t bytes, unsigned int flags)) \
    X(MemFreeHost, "cuMemFreeHost", (void *host)) \
    X(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", (CUdeviceptr *pointer, void *host, unsigned int flags)) \
    X(PointerGetAttribute, "cuPointerGetAttribute", (void *data, int attribute, CUdeviceptr pointer)) \
    X(MemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr dst, const void *src, size_t bytes)) \
    X(MemcpyDtoH, "cuMemcpyDtoH_v2", (void *dst, CUdeviceptr src, size_t bytes)) \
    X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(MemsetD8, "cuMemsetD8_v2", (CUdeviceptr dst, unsigned char value, size_t count)) \
    X(MemsetD16, "cuMemsetD16_v2", (CUdeviceptr dst, unsigned short value, size_t count)) \
    X(MemsetD32, "cuMemsetD32_v2", (CUdeviceptr dst, unsigned int value, size_t count)) \
    X(MemsetD8Async, "cuMemsetD8Async", (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream)) \
    X(MemsetD16Async, "cuMemsetD16Async", (CUdeviceptr dst, unsigned short value, size_t count, CUstream stream)) \
    X(MemsetD32Async, "cuMemsetD32Async", (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream)) \
    X(ModuleLoadData, "cuModuleLoadData", (CUmodule *module, const void *image)) \
    X(ModuleUnload, "cuModuleUnload", (CUmodule module)) \
    X(ModuleGetFunction, "cuModuleGetFunction", (CUfunction *function, CUmodule module, const char *name)) \
    X(FuncGetAttribute, "cuFuncGetAttribute", (int *value, int attribute, CUfunction function)) \
    X(FuncSetAttribute, "cuFuncSetAttribute", (CUfunction function, int attribute, int value)) \
    X(LaunchKernel, "cuLaunchKernel", (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, \
        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params, \
        void **extra)) \
    X(LaunchKernelEx, "cuLaunchKernelEx", (const CUlaunchConfig *config, CUfunction f, void **params, \
        void **extra)) \
    X(GraphCreate, "cuGraphCreate", (CUgraph *graph, unsigned int flags)) \
    X(GraphDestroy, "cuGraphDestroy", (CUgraph graph)) \
    X(GraphAddKernelNode, "cuGraphAddKernelNode_v2", (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, \
        size_t count, const CUDA_KERNEL_NODE_PARAMS_v2 *params)) \
    X(GraphAddMemsetNode, "cuGraphAddMemsetNode", (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, \
        size_t count, const CUDA_MEMSET_NODE_PARAMS *params, CUcontext context)) \
    X(GraphAddMemcpyNode, "cuGraphAddMemcpyNode", (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, \
        size_t count, const CUDA_MEMCPY3D *params, CUcontext context)) \
    X(GraphAddChildGraphNode, "cuGraphAddChildGraphNode", (CUgraphNode *node, CUgraph graph, \
        const CUgraphNode *deps, size_t count, CUgraph child)) \
    X(GraphAddEmptyNode, "cuGraphAddEmptyNode", (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, \
        size_t count)) \
    /* With edge data: cuGraphAddDependencies_v2 in cuda.h 12.3-12.9, which 13.x's maps \
     * cuGraphAddDependencies to (the unversioned 12.x symbol takes none). */ \
    X(GraphAddDependencies, "cuGraphAddDependencies_v2", (CUgraph graph, const CUgraphNode *from, \
        const CUgraphNode *to, const CUgraphEdgeData *edges, size_t count)) \
    X(GraphConditionalHandleCreate, "cuGraphConditionalHandleCreate", (CUgraphConditionalHandle *handle, \
        CUgraph graph, CUcontext context, unsigned int default_value, unsigned int flags)) \
    X(GraphAddNode, "cuGraphAddNode", (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t count, \
        CUgraphNodeParams *params)) \
    X(GraphInstantiate, "cuGraphInstantiateWithFlags", (CUgraphExec *exec, CUgraph graph, unsigned long long flags)) \
    X(GraphUpload, "cuGraphUpload", (CUgraphExec exec, CUstream stream)) \
    X(GraphLaunch, "cuGraphLaunch", (CUgraphExec exec, CUstream stream)) \
    X(GraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec exec)) \
    X(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2", (CUgraphExec exec, CUgraphNode node, \
        const CUDA_KERNEL_NODE_PARAMS_v2 *params)) \
    X(GraphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph", (CUgraphNode node, CUgraph *graph)) \
    X(GraphNodeFindInClone, "cuGraphNodeFindInClone", (CUgraphNode *clone_node, CUgraphNode original, \
        CUgraph clone)) \
    X(GraphGetNodes, "cuGraphGetNodes", (CUgraph graph, CUgraphNode *nodes, size_t *count)) \
    X(GraphNodeGetType, "cuGraphNodeGetType", (CUgraphNode node, int *type)) \
    X(GraphMemcpyNodeGetParams, "cuGraphMemcpyNodeGetParams", (CUgraphNode node, CUDA_MEMCPY3D *params))

typedef struct driver {
    void *library; /* the dlopen handle */
    char path[512];
#define PIPEC_DRIVER_FIELD(field, symbol, params) CUresult (*field) params;
    PIPEC_DRIVER_ENTRY_POINTS(PIPEC_DRIVER_FIELD)
#undef PIPEC_DRIVER_FIELD
} driver;

#endif
