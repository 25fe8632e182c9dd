// Kernels for the soundness rules: a grid-wide barrier (PC319), calls through function
// pointers (PC317) and writes through pointers bound or declared read-only (PC318).

// The grid barrier of cooperative groups, as <cooperative_groups.h> compiles it: arrive on the
// driver's grid workspace (its address in %envreg1/%envreg2), then poll until it flips.
__device__ __forceinline__ unsigned int* grid_workspace() {
    unsigned int lo, hi;
    asm volatile("mov.u32 %0, %%envreg1;" : "=r"(lo));
    asm volatile("mov.u32 %0, %%envreg2;" : "=r"(hi));
    return (unsigned int*)(((unsigned long long)lo << 32) | hi);
}

__device__ __forceinline__ void grid_sync() {
    unsigned int* arrived = grid_workspace() + 1;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int old, now;
        asm volatile("atom.add.release.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(arrived) : "memory");
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(now) : "l"(arrived) : "memory");
        } while (((old ^ now) & 0x80000000u) == 0);
    }
    __syncthreads();
}

extern "C" __global__ void sum_with_grid_sync(const float* x, float* partial, float* total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) partial[blockIdx.x] = i < n ? x[i] : 0.0f;
    grid_sync();
    if (i == 0) {
        float s = 0.0f;
        for (int b = 0; b < gridDim.x; ++b) s += partial[b];
        *total = s;
    }
}

__device__ __noinline__ void add_plain(float* p, float v) { *p += v; }
__device__ __noinline__ void add_atomic(float* p, float v) { atomicAdd(p, v); }

__device__ void (*mixed_ops[2])(float*, float) = {add_plain, add_atomic};

extern "C" __global__ void apply_mixed_op(float* x, int op, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) mixed_ops[op & 1](x + i, 1.0f);
}

/// Scales x in place although nothing in the signature says it writes.
extern "C" __global__ void scale_in_place(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i];
}

/// The const is cast away: the kernel writes its "input".
extern "C" __global__ void normalize_casting(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] / n;
        const_cast<float*>(x)[i] = 0.0f;
    }
}

/// Reads x, writes y: `in x` is the truth.
extern "C" __global__ void scale_into(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
