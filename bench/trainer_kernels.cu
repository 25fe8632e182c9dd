// Kernels of bench/trainer_step.py's generated pipeline: the small kernels a training step runs
// between its GEMM nodes. Each waits for the node before it and lets the next start
// (kernels/pdl.cuh), so every edge between two of them can be programmatic. Deterministic: no
// atomics, fixed-order reductions for a fixed launch shape.
#include "common.cuh"

/// y = x + r (a residual), element-wise.
/// pipec: extent x = n
/// pipec: extent r = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void tr_residual(const float* x, const float* r, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i < n) y[i] = x[i] + r[i];
}

/// y[row] = x[row] - mean(x[row]): one block per row, a fixed-order block sum.
/// pipec: extent x = rows * cols
/// pipec: extent y = rows * cols
/// pipec: out y
extern "C" __global__ void tr_center_rows(const float* x, float* y, int rows, int cols) {
    __shared__ float red[1024];
    const int row = blockIdx.x;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (row >= rows) return;
    float acc = 0.0f;
    for (int c = t; c < cols; c += nt) acc += x[row * cols + c];
    const float mean = pipec_block_sum(acc, red) / (float)cols;
    for (int c = t; c < cols; c += nt) y[row * cols + c] = x[row * cols + c] - mean;
}

/// dy = (y - target) / n, and loss[0] = mean squared error / 2 (one block).
/// pipec: extent y = n
/// pipec: extent target = n
/// pipec: extent dy = n
/// pipec: extent loss = 1
/// pipec: out dy
/// pipec: out loss
extern "C" __global__ void tr_mse_grad(const float* y, const float* target, float* dy, float* loss, int n) {
    __shared__ float red[1024];
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (blockIdx.x != 0) return;
    float acc = 0.0f;
    for (int i = t; i < n; i += nt) {
        const float d = y[i] - target[i];
        dy[i] = d / (float)n;
        acc += d * d;
    }
    const float s = pipec_block_sum(acc, red);
    if (t == 0) loss[0] = 0.5f * s / (float)n;
}

/// part[0] = sum of g[i]^2 (one block, fixed order).
/// pipec: extent g = n
/// pipec: extent part = 1
/// pipec: out part
extern "C" __global__ void tr_sumsq(const float* g, float* part, int n) {
    __shared__ float red[1024];
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (blockIdx.x != 0) return;
    float acc = 0.0f;
    for (int i = t; i < n; i += nt) acc += g[i] * g[i];
    const float s = pipec_block_sum(acc, red);
    if (t == 0) part[0] = s;
}

/// scale[0] = min(1, max_norm / sqrt(sum(parts))): the global-norm clip factor.
/// pipec: extent parts = nparts
/// pipec: extent scale = 1
/// pipec: out scale
extern "C" __global__ void tr_clip_scale(const float* parts, float* scale, int nparts, float max_norm) {
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float s = 0.0f;
    for (int i = 0; i < nparts; ++i) s += parts[i];
    const float norm = sqrtf(s);
    scale[0] = norm > max_norm ? max_norm / norm : 1.0f;
}

/// AdamW on one parameter buffer, its gradient scaled by the clip factor; t[0] is the step
/// count (1 on the first step) and lr[0] the learning rate, both written by the controller.
/// pipec: extent g = n
/// pipec: extent scale = 1
/// pipec: extent sched = 2
/// pipec: extent w = n
/// pipec: extent m = n
/// pipec: extent v = n
extern "C" __global__ void tr_adamw(const float* g, const float* scale, const float* sched, float* w, float* m,
                                    float* v, int n, float b1, float b2, float eps, float wd) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i >= n) return;
    const float lr = sched[0];
    const float t = sched[1];
    const float gi = g[i] * scale[0];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float mhat = mi / (1.0f - powf(b1, t));
    const float vhat = vi / (1.0f - powf(b2, t));
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] - lr * (wd * w[i] + mhat / (sqrtf(vhat) + eps));
}

/// The controller: sched = [lr, t] for this step, a cosine schedule from lr0 over `steps`.
/// pipec: extent step = 1
/// pipec: extent sched = 2
/// pipec: out sched
extern "C" __global__ void tr_schedule(int* step, float* sched, float lr0, int steps) {
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int s = step[0] + 1;
    step[0] = s;
    const float phase = (float)(s % steps) / (float)steps;
    sched[0] = lr0 * 0.5f * (1.0f + cospif(phase));
    sched[1] = (float)s;
}

/// diag = [step, loss, clip scale, lr]: mapped host memory the host reads without a copy.
/// pipec: extent sched = 2
/// pipec: extent loss = 1
/// pipec: extent scale = 1
/// pipec: extent diag = 4
/// pipec: out diag
extern "C" __global__ void tr_diagnostics(const float* sched, const float* loss, const float* scale, float* diag) {
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    diag[0] = sched[1];
    diag[1] = loss[0];
    diag[2] = scale[0];
    diag[3] = sched[0];
}
