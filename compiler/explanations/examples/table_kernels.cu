// Kernels that reach buffers through addresses held in memory (PC324, PC325) and kernels that
// read a buffer before writing it (PC404).

/// The sum of squares of several tensors, one block per tensor, reached through a table of
/// their addresses (multi-tensor norms and optimizers work this way).
extern "C" __global__ void sum_squares(const float* const* tensors, const int* sizes, float* norms) {
    const float* t = tensors[blockIdx.x];
    float s = 0.0f;
    for (int i = threadIdx.x; i < sizes[blockIdx.x]; i += blockDim.x) s += t[i] * t[i];
    s += __shfl_xor_sync(0xffffffffu, s, 16);
    s += __shfl_xor_sync(0xffffffffu, s, 8);
    s += __shfl_xor_sync(0xffffffffu, s, 4);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    if (threadIdx.x == 0) norms[blockIdx.x] = s;
}

/// The same, with the addresses as plain 64-bit integers: pipec cannot tell what they point to.
extern "C" __global__ void sum_squares_raw(const unsigned long long* addresses, const int* sizes, float* norms) {
    const float* t = reinterpret_cast<const float*>(addresses[blockIdx.x]);
    float s = 0.0f;
    for (int i = threadIdx.x; i < sizes[blockIdx.x]; i += blockDim.x) s += t[i] * t[i];
    if (threadIdx.x == 0) norms[blockIdx.x] = s;
}

/// Scales every tensor of a table in place.
extern "C" __global__ void scale_all(float* const* tensors, const int* sizes, float a) {
    float* t = tensors[blockIdx.x];
    for (int i = threadIdx.x; i < sizes[blockIdx.x]; i += blockDim.x) t[i] *= a;
}

/// Points every element of a table at one buffer: it rewrites the table itself.
extern "C" __global__ void retarget(float** tensors, float* to, int n) {
    if (threadIdx.x < n) tensors[threadIdx.x] = to;
}

/// Adds x to y: it reads y before writing it.
extern "C" __global__ void accumulate(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

/// Writes y, then reads back what it wrote: no read of what y held before.
extern "C" __global__ void write_then_square(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
        __syncthreads();
        y[i] = y[i] * y[i];
    }
}
