// kernels/optim.cu: global-norm gradient clipping (second stage) fused with AdamW and the
// target-network soft update (docs/dqn.md 6.4, 6.5, 6.7).
//
// The first stage of the norm (per-block partial sums of squares) is done by mlp_grad, so the
// gradient is read once. The second stage runs in every block of adamw_step: each block's
// first warp sums the few hundred partials in one fixed order (lane-strided, then a shuffle
// tree with the pairs of pipec_block_sum over 32 threads), so every block gets the same norm,
// bit for bit the value a separate one-warp finalize node computed, without a node of its own
// on the critical path. The learner update count is advanced by the step's tick (in
// the replay push, by UPDATES when learning), so AdamW only reads it. The body is
// kernels/adamw.cuh, which c51.cu's bf16 variant (AdamW writing bf16 copies) shares.
#include "adamw.cuh"

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
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    pipec_adamw_step(learn_on, grad, gnorm_part, adam_t, sched, params, m, v, target, opt, P, nparts,
                     max_norm, b1, b2, eps, wd, tau, updates, update, PipecNoCopies());
}
