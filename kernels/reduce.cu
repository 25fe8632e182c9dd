// kernels/reduce.cu: the kernels of pipelines/examples/simple_cuda_graphs.pipe, a port of
// NVIDIA's simpleCudaGraphs sample (per-block partial sums, final reduction, readback).
#include "common.cuh"

/// Per-block partial sums: block b sums in[i] for i = b*T + t, b*T + t + G*T, ... (grid
/// stride, in double), then a fixed tree over the block; writes partial[b].
/// Reads: in[n]. Writes: partial[gridDim.x].
/// Launch: 1-D grid of G blocks of T threads, T <= 1024.
/// pipec: extent in = n
/// pipec: extent partial = gridDim.x
/// pipec: out partial
extern "C" __global__ void reduce(const float* in, double* partial, int n) {
    __shared__ double red[1024];
    const int t = (int)threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    double acc = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + t; i < n; i += stride)
        acc += (double)in[i];
    const double s = pipec_block_sum_d(acc, red);
    if (t == 0) partial[blockIdx.x] = s;
}

/// Final reduction (one block): *result = sum of partial[0 .. nparts), thread-strided then a
/// fixed tree.
/// Reads: partial[nparts]. Writes: result[1].
/// Launch: <<<1, T>>>, T <= 1024.
/// pipec: extent partial = nparts
/// pipec: extent result = 1
/// pipec: out result
extern "C" __global__ void reduce_final(const double* partial, double* result, int nparts) {
    __shared__ double red[1024];
    if (blockIdx.x != 0) return;
    const int t = (int)threadIdx.x;
    double acc = 0.0;
    for (int i = t; i < nparts; i += (int)blockDim.x) acc += partial[i];
    const double s = pipec_block_sum_d(acc, red);
    if (t == 0) result[0] = s;
}

/// Readback: copies the result into mapped host memory (the sample's device-to-host copy and
/// host callback become this node; the host reads the mapped buffer outside the replay).
/// Reads: src[1]. Writes: dst[1].
/// Launch: <<<1, 1>>>.
/// pipec: extent src = 1
/// pipec: extent dst = 1
/// pipec: out dst
extern "C" __global__ void reduce_readback(const double* src, double* dst) {
    if (blockIdx.x == 0 && threadIdx.x == 0) dst[0] = src[0];
}
