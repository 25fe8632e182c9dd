// kernels/trainer.cu: the kernels of pipelines/examples/wide_trainer.pipe, a step shaped like
// the trainers pipec is for (docs/benchmarks.md, "A step shaped like a trainer"): a residual
// MLP of LAYERS blocks trained online on a synthetic regression stream, with global-norm
// clipping and AdamW over one parameter region per node. The GEMMs are the pipeline's `gemm`
// nodes; these are the elementwise and reduction kernels between them, written the way a
// trainer writes them: one element a thread, fixed-order block reductions so every replay gives
// the same bits (no atomics). Each lets its dependents start at once and waits for its producer
// before its first load (kernels/pdl.cuh), so the edges between them can be programmatic.
#include "common.cuh"

// The synthetic stream: input x[r, c] uniform in [-1, 1) from Philox keyed by (step, r, c),
// target y[r, o] = sin(sum_c x[r, c] * w*[o, c] / sqrt(D)) with a fixed w*[o, c] = cos(o * 7 + c).
// bench/trainer_spec.py computes the same stream for the PyTorch and JAX twins.
#define PIPEC_STREAM_TRAIN 0x54524E21u  // "TRN!": batch sample, counter (step, row, col, 0)

/// The step's batch: x (B x D) from the stream at *step, y_true (B x OUT) from x.
/// Reads: step[1]. Writes: x[B * D], y_true[B * OUT].
/// Launch: <<<B, 256>>>: block r makes row r.
/// pipec: extent step = 1
/// pipec: extent x = B * D
/// pipec: extent y_true = B * OUT
/// pipec: out x
/// pipec: out y_true
extern "C" __global__ void make_batch(const int* step, float* x, float* y_true, int B, int D, int OUT) {
    __shared__ float row[1024];
    const int r = (int)blockIdx.x;
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (r >= B) return;
    const unsigned int s = (unsigned int)step[0];
    for (int c = (int)threadIdx.x; c < D; c += (int)blockDim.x) {
        const pipec_u4 u = pipec_philox(s, (unsigned int)r, (unsigned int)c, 0u, PIPEC_STREAM_TRAIN, 0u);
        const float v = 2.0f * pipec_u01f(u.x) - 1.0f;
        x[(long long)r * D + c] = v;
        if (c < 1024) row[c] = v;
    }
    __syncthreads();
    for (int o = (int)threadIdx.x; o < OUT; o += (int)blockDim.x) {
        float acc = 0.0f;
        for (int c = 0; c < D && c < 1024; ++c) acc += row[c] * cosf((float)(o * 7 + c));
        y_true[(long long)r * OUT + o] = sinf(acc * rsqrtf((float)D));
    }
}

/// The residual: a = h + a_prev, elementwise over n.
/// Reads: h[n], a_prev[n]. Writes: a[n].
/// Launch: 1-D, n threads in total (e.g. <<<ceil_div(n, 256), 256>>>).
/// pipec: extent h = n
/// pipec: extent a_prev = n
/// pipec: extent a = n
/// pipec: out a
extern "C" __global__ void residual_add(const float* h, const float* a_prev, float* a, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i < n) a[i] = h[i] + a_prev[i];
}

/// The loss and its gradient: dy = 2 (y - t) / n, and per block the sum of (y - t)^2 in a
/// fixed tree, loss_part[blockIdx.x].
/// Reads: y[n], t[n]. Writes: dy[n], loss_part[gridDim.x].
/// Launch: 1-D, n threads in total, blocks of 256.
/// pipec: extent y = n
/// pipec: extent t = n
/// pipec: extent dy = n
/// pipec: extent loss_part = gridDim.x
/// pipec: out dy
/// pipec: out loss_part
extern "C" __global__ void mse_grad(const float* y, const float* t, float* dy, float* loss_part, int n) {
    __shared__ float red[256];
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    float e = 0.0f;
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i < n) {
        e = y[i] - t[i];
        dy[i] = 2.0f * e / (float)n;
    }
    const float s = pipec_block_sum(e * e, red);
    if (threadIdx.x == 0) loss_part[blockIdx.x] = s;
}

/// Through the ReLU of a block: dpre = da_next where the ReLU passed (its bit in mask), else
/// 0; and da = da_next, the residual path, which the block's dA GEMM then accumulates into.
/// mask holds one bit per element, row-major with rows of `cols` bits padded to 128 bits (the
/// layout cuBLASLt's ReLU epilogue writes: docs/language.md, "GEMM nodes").
/// Reads: da_next[rows * cols], mask[rows * ceil(cols / 128) * 16]. Writes: dpre, da (rows * cols).
/// Launch: 1-D, rows * cols threads in total.
/// pipec: extent da_next = rows * cols
/// pipec: extent mask = rows * ((cols + 127) / 128) * 16
/// pipec: extent dpre = rows * cols
/// pipec: extent da = rows * cols
/// pipec: out dpre
/// pipec: out da
extern "C" __global__ void relu_backward(const float* da_next, const unsigned char* mask, float* dpre, float* da,
                                         int rows, int cols) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i >= rows * cols) return;
    const int r = i / cols, c = i % cols;
    const int pitch = ((cols + 127) / 128) * 16;
    const bool passed = (mask[r * pitch + c / 8] >> (c % 8)) & 1;
    const float g = da_next[i];
    dpre[i] = passed ? g : 0.0f;
    da[i] = g;
}

/// First stage of the gradient's norm: part[blockIdx.x] = sum of g[i]^2 over the block's
/// elements (grid-strided, then a fixed tree).
/// Reads: g[n]. Writes: part[gridDim.x].
/// Launch: 1-D, G blocks of 256.
/// pipec: extent g = n
/// pipec: extent part = gridDim.x
/// pipec: out part
extern "C" __global__ void sum_squares(const float* g, float* part, int n) {
    __shared__ float red[256];
    float acc = 0.0f;
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += (int)(gridDim.x * blockDim.x))
        acc += g[i] * g[i];
    const float s = pipec_block_sum(acc, red);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/// Second stage and the clip factor: norm = sqrt(sum of part), clip[0] = min(1, max_norm /
/// (norm + 1e-6)), clip[1] = norm.
/// Reads: part[nparts]. Writes: clip[2].
/// Launch: <<<1, 256>>>.
/// pipec: extent part = nparts
/// pipec: extent clip = 2
/// pipec: out clip
extern "C" __global__ void clip_factor(const float* part, float* clip, int nparts, float max_norm) {
    __shared__ float red[256];
    float acc = 0.0f;
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    for (int i = (int)threadIdx.x; i < nparts; i += (int)blockDim.x) acc += part[i];
    const float s = pipec_block_sum(acc, red);
    if (threadIdx.x == 0) {
        const float norm = sqrtf(s);
        clip[0] = fminf(1.0f, max_norm / (norm + 1e-6f));
        clip[1] = norm;
    }
}

/// The schedule, once a step before the optimizer: t = ++sched_t[0]; lr = lr_max * 0.5 * (1 +
/// cos(pi * min(t, T) / T)) written to lr[0], the bias corrections 1 - b^t to lr[1], lr[2].
/// Updates: sched_t[1]. Writes: lr[3].
/// Launch: <<<1, 1>>>.
/// pipec: extent sched_t = 1
/// pipec: extent lr = 3
/// pipec: out lr
extern "C" __global__ void lr_schedule(int* sched_t, float* lr, float lr_max, int T, double b1, double b2) {
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    const int t = sched_t[0] + 1;
    sched_t[0] = t;
    const double phase = (double)(t < T ? t : T) / (double)T;
    lr[0] = (float)(lr_max * 0.5 * (1.0 + cos(3.14159265358979323846 * phase)));
    lr[1] = (float)(1.0 - pow(b1, (double)t));
    lr[2] = (float)(1.0 - pow(b2, (double)t));
}

/// AdamW on one parameter region: g = grad * clip[0]; m = b1 m + (1 - b1) g; v = b2 v +
/// (1 - b2) g^2; p -= lr (wd p + (m / bc1) / (sqrt(v / bc2) + eps)), with lr, bc1, bc2 from
/// lr[0..3).
/// Reads: grad[n], clip[2], lr[3]. Updates: p[n], m[n], v[n].
/// Launch: 1-D, n threads in total.
/// pipec: extent grad = n
/// pipec: extent clip = 2
/// pipec: extent lr = 3
/// pipec: extent p = n
/// pipec: extent m = n
/// pipec: extent v = n
extern "C" __global__ void adamw(const float* grad, const float* clip, const float* lr, float* p, float* m,
                                 float* v, int n, float b1, float b2, float eps, float wd) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (i >= n) return;
    const float g = grad[i] * clip[0];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr[0] * (wd * p[i] + (mi / lr[1]) / (sqrtf(vi / lr[2]) + eps));
}

/// Diagnostics into mapped memory: diag = (step, loss, grad norm, lr), the loss summed from
/// the per-block parts over `count` elements; advances *step.
/// Reads: loss_part[nparts], clip[2], lr[3]. Updates: step[1]. Writes: diag[4].
/// Launch: <<<1, 32>>>.
/// pipec: extent loss_part = nparts
/// pipec: extent clip = 2
/// pipec: extent lr = 3
/// pipec: extent step = 1
/// pipec: extent diag = 4
/// pipec: out diag
extern "C" __global__ void trainer_report(const float* loss_part, const float* clip, const float* lr, int* step,
                                          float* diag, int nparts, int count) {
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (threadIdx.x != 0) return;
    float loss = 0.0f;
    for (int i = 0; i < nparts; ++i) loss += loss_part[i];
    const int s = step[0];
    diag[0] = (float)s;
    diag[1] = loss / (float)count;
    diag[2] = clip[1];
    diag[3] = lr[0];
    step[0] = s + 1;
}
