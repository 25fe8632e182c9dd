// Kernels of the PC323 examples: one step of a chain, with the wait placed well and badly.
#include "pdl.cuh"

/// y = x + 1, waiting for the producer of x before reading it.
/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void add_one(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // index arithmetic: before the wait
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i < n) y[i] = x[i] + 1.0f;
}

/// y = x + 1, reading x before the wait: the read can see what the producer has not written.
/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void add_one_early(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float v = i < n ? x[i] : 0.0f;
    pipec_wait_for_producer();
    if (i < n) y[i] = v + 1.0f;
}

/// y = x * w[0], reading the weight w before the wait: no earlier node writes it.
/// pipec: extent x = n
/// pipec: extent w = 1
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void scale_by_weight(const float* x, const float* w, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float scale = w[0];
    pipec_wait_for_producer();
    if (i < n) y[i] = x[i] * scale;
}
