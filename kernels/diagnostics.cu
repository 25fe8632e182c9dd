// kernels/diagnostics.cu: episode statistics and the mapped diagnostics buffer (docs/dqn.md 8).
//
// Episode ring: the last `ring_size` finished-episode returns, ordered by (step, env index):
// the k-th finished episode (k counted from 0 over the run) sits in slot k % ring_size.
#include "common.cuh"

#define DIAG_RING_MAX 1024

/// Episode statistics (one block): pushes this step's finished-episode returns, in env order,
/// into the ring (an exclusive block scan over the done flags gives each finished env its
/// rank; when more than ring_size finish in one step only the last ring_size are kept, so
/// ring slots are unique), adds their number to *ep_count, and writes the mean of the valid
/// ring entries (min(count, ring_size) of them, summed in slot order by a fixed tree; 0
/// before any episode) to *ep_mean.
/// Reads: step_info[n_envs*2] (done = step_info[2e+1] != 0), fin_return[n_envs].
/// Updates: ring[ring_size], ep_count[1]. Writes: ep_mean[1].
/// Launch: <<<1, T>>>, any T <= 1024; ring_size <= 1024.
/// pipec: extent step_info = n_envs * 2
/// pipec: extent fin_return = n_envs
/// pipec: extent ring = ring_size
/// pipec: extent ep_count = 1
/// pipec: extent ep_mean = 1
/// pipec: out ep_mean
extern "C" __global__ void episode_stats(const int* step_info, const float* fin_return,
                                         float* ring, int* ep_count, float* ep_mean, int n_envs,
                                         int ring_size) {
    __shared__ float sring[DIAG_RING_MAX];
    __shared__ int sint[1024];
    __shared__ float red[1024];
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (blockIdx.x != 0 || ring_size <= 0 || ring_size > DIAG_RING_MAX) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    const int c0 = ep_count[0];
    for (int i = t; i < ring_size; i += nt) sring[i] = ring[i];

    const int per = (n_envs + nt - 1) / nt;
    const int e0 = t * per;
    const int e1 = (e0 + per < n_envs) ? (e0 + per) : n_envs;
    int mine = 0;
    for (int e = e0; e < e1; ++e) mine += (step_info[e * 2 + 1] != PIPEC_DONE_NONE) ? 1 : 0;
    int total = 0;
    int rank = pipec_block_exscan(mine, sint, &total);  // has barriers: sring loads are done
    for (int e = e0; e < e1; ++e) {
        if (step_info[e * 2 + 1] != PIPEC_DONE_NONE) {
            if (rank >= total - ring_size) sring[(c0 + rank) % ring_size] = fin_return[e];
            ++rank;
        }
    }
    __syncthreads();
    const int count = c0 + total;
    const int valid = (count < ring_size) ? count : ring_size;
    float acc = 0.0f;
    // Contiguous runs per thread, then the block tree: a fixed order for a fixed block size.
    const int rper = (valid + nt - 1) / nt;
    const int r0 = t * rper;
    const int r1 = (r0 + rper < valid) ? (r0 + rper) : valid;
    for (int i = r0; i < r1; ++i) acc += sring[i];
    for (int i = t; i < ring_size; i += nt) ring[i] = sring[i];
    const float sum = pipec_block_sum(acc, red);
    if (t == 0) {
        ep_count[0] = count;
        ep_mean[0] = (valid > 0) ? sum / (float)valid : 0.0f;
    }
}

/// Writes the mapped diagnostics buffer:
/// diag = [step, mean_return_100, episodes, loss, loss_ema, lr, epsilon, replay_size]
/// (all as float32; lr is the one this step's AdamW used, sched[2], which the tick took from
/// the controller: reading it rather than the controller's own value lets this node run beside
/// the controller instead of after it).
/// Reads: step[1], ep_mean[1], ep_count[1], loss_last[1], loss_ema[1], sched[3],
///   replay_size[1]. Writes: diag[8].
/// Launch: <<<1, 1>>>.
/// pipec: extent step = 1
/// pipec: extent ep_mean = 1
/// pipec: extent ep_count = 1
/// pipec: extent loss_last = 1
/// pipec: extent loss_ema = 1
/// pipec: extent sched = 3
/// pipec: extent replay_size = 1
/// pipec: extent diag = 8
/// pipec: out diag
extern "C" __global__ void diag_write(const int* step, const float* ep_mean, const int* ep_count,
                                      const float* loss_last, const float* loss_ema,
                                      const float* sched,
                                      const int* replay_size, float* diag) {
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    diag[0] = (float)step[0];
    diag[1] = ep_mean[0];
    diag[2] = (float)ep_count[0];
    diag[3] = loss_last[0];
    diag[4] = loss_ema[0];
    diag[5] = sched[PIPEC_SCHED_LR];
    diag[6] = sched[PIPEC_SCHED_EPS];
    diag[7] = (float)replay_size[0];
}
