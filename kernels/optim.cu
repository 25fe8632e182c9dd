// kernels/optim.cu: global-norm gradient clipping (second stage) fused with AdamW and the
// target-network soft update (docs/dqn.md 6.4, 6.5, 6.7).
//
// The first stage of the norm (per-block partial sums of squares) is done by mlp_grad, so the
// gradient is read once. The second stage runs in every block of adamw_step: each block's
// first warp sums the few hundred partials in one fixed order (lane-strided, then a shuffle
// tree with the pairs of pipec_block_sum over 32 threads), so every block gets the same norm,
// bit for bit the value a separate one-warp finalize node computed, without a node of its own
// on the critical path. The learner update count is advanced by the step's tick (in
// replay_push_scan, by UPDATES when learning), so AdamW only reads it.
#include "common.cuh"

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
/// Reads: learn_on[1], grad[P], gnorm_part[nparts], adam_t[1], sched[3].
/// Updates: params[P], m[P], v[P], target[P]. Writes: opt[4].
/// Launch: 1-D, at least P threads in total, blocks of at least 32 threads
/// (e.g. <<<ceil_div(P, 256), 256>>>).
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
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    // Every load that depends on no other (the learning flag, the per-parameter values) is
    // issued before the learning test, so they cost one round trip and overlap the norm.
    const int on = learn_on[0];
    const bool mine = i < P;
    const float gi = mine ? grad[i] : 0.0f;
    const float m0 = mine ? m[i] : 0.0f;
    const float v0 = mine ? v[i] : 0.0f;
    const float p = mine ? params[i] : 0.0f;
    const float tg = mine ? target[i] : 0.0f;
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
    if (!mine) return;
    const float b1f = (float)b1, b2f = (float)b2;
    const float g = gi * s_scale;
    const float mi = b1f * m0 + (1.0f - b1f) * g;
    const float vi = b2f * v0 + (1.0f - b2f) * (g * g);
    const float mhat = mi / bc1;
    const float vhat = vi / bc2;
    const float pn = p - lr * (wd * p + mhat / (sqrtf(vhat) + eps));
    m[i] = mi;
    v[i] = vi;
    params[i] = pn;
    target[i] = tau * pn + (1.0f - tau) * tg;
}
