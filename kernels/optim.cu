// kernels/optim.cu: global-norm gradient clipping (second stage), AdamW with the target-network
// soft update (docs/dqn.md 6.4, 6.5, 6.7).
//
// The first stage of the norm (per-block partial sums of squares) is done by mlp_grad, so the
// gradient is read once. opt[4] = [clip scale, 1 - b1^t, 1 - b2^t, grad norm] is written by
// grad_clip_finalize and read by adamw_step.
#include "common.cuh"

/// Clip finalize (one block): sumsq = sum of the partials (thread-strided, then a fixed tree),
/// norm = sqrt(sumsq), scale = min(1, max_norm / (norm + 1e-6)); bumps the learner update
/// counter t = *adam_t + 1 and writes the bias corrections 1 - b1^t and 1 - b2^t (in double
/// from double betas, b^t by binary exponentiation, stored as float).
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], gnorm_part[nparts]. Updates: adam_t[1]. Writes: opt[4].
/// Launch: <<<1, T>>>, any T <= 1024 (32 is plenty).
/// pipec: extent learn_on = 1
/// pipec: extent gnorm_part = nparts
/// pipec: extent adam_t = 1
/// pipec: extent opt = 4
/// pipec: out opt
extern "C" __global__ void grad_clip_finalize(const int* learn_on, const float* gnorm_part,
                                              int* adam_t, float* opt, int nparts,
                                              float max_norm, double b1, double b2) {
    __shared__ float red[1024];
    if (learn_on[0] == 0 || blockIdx.x != 0) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    const int step = adam_t[0] + 1;  // loaded early, used by thread 0
    float acc = 0.0f;
    for (int i = t; i < nparts; i += nt) acc += gnorm_part[i];
    const float sumsq = pipec_block_sum(acc, red);
    if (t == 0) {
        const float norm = sqrtf(sumsq);
        const float scale = fminf(1.0f, max_norm / (norm + 1e-6f));
        adam_t[0] = step;
        opt[PIPEC_OPT_SCALE] = scale;
        opt[PIPEC_OPT_BC1] = (float)(1.0 - pipec_powi(b1, step));
        opt[PIPEC_OPT_BC2] = (float)(1.0 - pipec_powi(b2, step));
        opt[PIPEC_OPT_NORM] = norm;
    }
}

/// AdamW (decoupled weight decay) on the clipped gradient, then the target soft update:
///   g = grad * scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
///   p -= lr * (wd * p + (m / bc1) / (sqrt(v / bc2) + eps));
///   target = tau * p + (1 - tau) * target.
/// lr is read from sched[2], the controller's learning rate snapshotted by the tick.
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], grad[P], opt[4], sched[3].
/// Updates: params[P], m[P], v[P], target[P].
/// Launch: 1-D, at least P threads in total (e.g. <<<ceil_div(P, 256), 256>>>).
/// pipec: extent learn_on = 1
/// pipec: extent grad = P
/// pipec: extent opt = 4
/// pipec: extent sched = 3
/// pipec: extent params = P
/// pipec: extent m = P
/// pipec: extent v = P
/// pipec: extent target = P
extern "C" __global__ void adamw_step(const int* learn_on, const float* grad, const float* opt,
                                      const float* sched, float* params, float* m, float* v,
                                      float* target, int P, float b1, float b2, float eps,
                                      float wd, float tau) {
    if (learn_on[0] == 0) return;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P) return;
    const float lr = sched[PIPEC_SCHED_LR];
    const float g = grad[i] * opt[PIPEC_OPT_SCALE];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * (g * g);
    const float mhat = mi / opt[PIPEC_OPT_BC1];
    const float vhat = vi / opt[PIPEC_OPT_BC2];
    const float p = params[i];
    const float pn = p - lr * (wd * p + mhat / (sqrtf(vhat) + eps));
    m[i] = mi;
    v[i] = vi;
    params[i] = pn;
    target[i] = tau * pn + (1.0f - tau) * target[i];
}
