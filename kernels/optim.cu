// kernels/optim.cu: global-norm gradient clipping (second stage) fused with AdamW and the
// target-network soft update (docs/dqn.md 6.4, 6.5, 6.7).
//
// The first stage of the norm (per-block partial sums of squares) is done by mlp_grad, so the
// gradient is read once. The second stage runs in every block of adamw_step: each block's
// first warp sums the few hundred partials in one fixed order (lane-strided, then a shuffle
// tree with the pairs of pipec_block_sum over 32 threads), so every block gets the same norm,
// bit for bit the value a separate one-warp finalize node computed, without a node of its own
// on the critical path. The learner update count is advanced by the step's tick (in
// the replay push, by UPDATES when learning), so AdamW only reads it.
#include "common.cuh"

// One parameter's AdamW step and target update: the same arithmetic for the vector and the
// scalar path, so the result does not depend on which one a parameter takes.
__device__ __forceinline__ void pipec_adamw_one(float g, float& m, float& v, float& p, float& target,
                                                float b1f, float b2f, float bc1, float bc2,
                                                float lr, float eps, float wd, float tau) {
    const float mi = b1f * m + (1.0f - b1f) * g;
    const float vi = b2f * v + (1.0f - b2f) * (g * g);
    const float mhat = mi / bc1;
    const float vhat = vi / bc2;
    const float pn = p - lr * (wd * p + mhat / (sqrtf(vhat) + eps));
    m = mi;
    v = vi;
    p = pn;
    target = tau * pn + (1.0f - tau) * target;
}

/// Global-norm clip and AdamW (decoupled weight decay), then the target soft update:
///   norm = sqrt(sum of gnorm_part), scale = min(1, max_norm / (norm + 1e-6));
///   g = grad * scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
///   p -= lr * (wd * p + (m / bc1) / (sqrt(v / bc2) + eps)), bc = 1 - b^t in double with
///   t = *adam_t - updates + update + 1 (the tick advanced *adam_t by `updates`), as float;
///   target = tau * p + (1 - tau) * target.
/// The norm is summed by the first warp of every block in one fixed order: lane l adds
/// gnorm_part[l], [l + 32], ... in turn, then lanes combine as pipec_block_sum does over 32
/// threads (pairs (l, l + h), h = 16 .. 1). The moment updates use float(b1), float(b2).
/// lr is read from sched[2], the controller's learning rate snapshotted by the tick.
/// Block 0 also records opt = (scale, bc1, bc2, norm) for diagnostics and tests.
/// Does nothing when *learn_on == 0.
/// Thread i updates parameters 4i .. 4i + 3: with 16-byte loads and stores when all four lie
/// below P and the five vectors are 16-byte aligned, else one by one. The update is memory
/// bound (nine 4-byte accesses a parameter); measured on an H200 at 17 million parameters
/// (c51_step at HIDDEN 4096), one parameter a thread reached about half the memory bandwidth.
/// Reads: learn_on[1], grad[P], gnorm_part[nparts], adam_t[1], sched[3].
/// Updates: params[P], m[P], v[P], target[P]. Writes: opt[4].
/// Launch: 1-D, at least ceil(P / 4) threads in total, blocks of at least 32 threads
/// (e.g. <<<ceil_div(P, 4 * 256), 256>>>).
/// pipec: extent learn_on = 1
/// pipec: extent grad = P
/// pipec: extent gnorm_part = nparts
/// pipec: extent adam_t = 1
/// pipec: extent sched = 3
/// pipec: extent params = P
/// pipec: extent m = P
/// pipec: extent v = P
/// pipec: extent target = P
/// pipec: extent opt = 4
/// pipec: out opt
extern "C" __global__ void adamw_step(const int* learn_on, const float* grad,
                                      const float* gnorm_part, const int* adam_t,
                                      const float* sched, float* params, float* m, float* v,
                                      float* target, float* opt, int P, int nparts,
                                      float max_norm, double b1, double b2, float eps, float wd,
                                      float tau, int updates, int update) {
    __shared__ float s_scale;
    const long long first = 4LL * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
    const bool aligned = ((reinterpret_cast<unsigned long long>(grad) | reinterpret_cast<unsigned long long>(params) |
                           reinterpret_cast<unsigned long long>(m) | reinterpret_cast<unsigned long long>(v) |
                           reinterpret_cast<unsigned long long>(target)) & 15ull) == 0;
    const bool whole = aligned && first + 4 <= P;
    // Every load that depends on no other (the learning flag, this thread's parameters) is
    // issued before the learning test, so they cost one round trip and overlap the norm.
    const int on = learn_on[0];
    float4 g4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), m4 = g4, v4 = g4, p4 = g4, t4 = g4;
    if (whole) {
        g4 = *reinterpret_cast<const float4*>(grad + first);
        m4 = *reinterpret_cast<const float4*>(m + first);
        v4 = *reinterpret_cast<const float4*>(v + first);
        p4 = *reinterpret_cast<const float4*>(params + first);
        t4 = *reinterpret_cast<const float4*>(target + first);
    }
    const float lr = sched[PIPEC_SCHED_LR];
    const int t = adam_t[0] - updates + update + 1;
    if (on == 0) return;  // uniform: learning off, nothing written
    if (threadIdx.x < 32) {
        const unsigned int lane = threadIdx.x;
        float acc = 0.0f;
        for (int k = (int)lane; k < nparts; k += 32) acc += gnorm_part[k];
#pragma unroll
        for (unsigned int h = 16; h > 0; h >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, h);
        if (lane == 0) {
            const float norm = sqrtf(acc);
            const float scale = fminf(1.0f, max_norm / (norm + 1e-6f));
            s_scale = scale;
            if (blockIdx.x == 0) {
                opt[PIPEC_OPT_SCALE] = scale;
                opt[PIPEC_OPT_BC1] = (float)(1.0 - pipec_powi(b1, t));
                opt[PIPEC_OPT_BC2] = (float)(1.0 - pipec_powi(b2, t));
                opt[PIPEC_OPT_NORM] = norm;
            }
        }
    }
    // Every thread computes the bias corrections itself (same double arithmetic) while the
    // first warp sums the norm.
    const float bc1 = (float)(1.0 - pipec_powi(b1, t));
    const float bc2 = (float)(1.0 - pipec_powi(b2, t));
    __syncthreads();
    if (first >= P) return;
    const float b1f = (float)b1, b2f = (float)b2, scale = s_scale;
    if (whole) {
        pipec_adamw_one(g4.x * scale, m4.x, v4.x, p4.x, t4.x, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        pipec_adamw_one(g4.y * scale, m4.y, v4.y, p4.y, t4.y, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        pipec_adamw_one(g4.z * scale, m4.z, v4.z, p4.z, t4.z, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        pipec_adamw_one(g4.w * scale, m4.w, v4.w, p4.w, t4.w, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        *reinterpret_cast<float4*>(m + first) = m4;
        *reinterpret_cast<float4*>(v + first) = v4;
        *reinterpret_cast<float4*>(params + first) = p4;
        *reinterpret_cast<float4*>(target + first) = t4;
        return;
    }
    for (long long i = first; i < first + 4 && i < P; ++i) {
        float mi = m[i], vi = v[i], pi = params[i], ti = target[i];
        pipec_adamw_one(grad[i] * scale, mi, vi, pi, ti, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        m[i] = mi;
        v[i] = vi;
        params[i] = pi;
        target[i] = ti;
    }
}
