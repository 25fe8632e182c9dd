// kernels/tutorial.cu: the kernels of pipelines/examples/tutorial.pipe (docs/language.md).
#include "common.cuh"

/// y = a * x, element-wise.
/// Reads: x[n]. Writes: y[n].
/// Launch: 1-D, at least n threads in total (e.g. <<<ceil_div(n, 256), 256>>>).
/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

/// *total += sum(y), one block, deterministic: thread t sums y[t], y[t + T], ... in order,
/// then a fixed tree over the block.
/// Reads: y[n]. Updates: total[1].
/// Launch: <<<1, T>>>, any T <= 1024.
/// pipec: extent y = n
/// pipec: extent total = 1
extern "C" __global__ void accumulate(const float* y, float* total, int n) {
    __shared__ float red[1024];
    if (blockIdx.x != 0) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    float acc = 0.0f;
    for (int i = t; i < n; i += nt) acc += y[i];
    const float s = pipec_block_sum(acc, red);
    if (t == 0) total[0] = total[0] + s;
}

/// Report: *steps += 1, then diag = [steps, total] (diag is mapped host memory).
/// Reads: total[1]. Updates: steps[1]. Writes: diag[2].
/// Launch: <<<1, T>>>, any T (thread 0 does the work).
/// pipec: extent total = 1
/// pipec: extent steps = 1
/// pipec: extent diag = 2
/// pipec: out diag
extern "C" __global__ void report(const float* total, int* steps, float* diag) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int s = steps[0] + 1;
    steps[0] = s;
    diag[0] = (float)s;
    diag[1] = total[0];
}
