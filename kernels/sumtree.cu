// kernels/sumtree.cu: the prioritized-replay sum tree (docs/dqn.md 6.1, 6.2, 6.6).
//
// Heap layout over C = capacity leaves (a power of two): node 1 is the root, node n has
// children 2n and 2n+1, leaves are nodes C .. 2C-1 (leaf i = data slot i), node 0 unused.
// Depth d holds nodes [2^d, 2^(d+1)); the leaves are at depth L = log2(C). Every internal node
// is fl(left + right) of its two children, so any schedule of the rebuild that computes each
// node after its children gives bit-identical trees.
#include "sumtree.cuh"

#define ST_SMEM 2048
#define ST_SW 2048   // importance weights kept on chip by per_sample

/// Sum-tree rebuild of the depths hi-1 down to lo (inputs: depth hi), one launch per stage:
/// block b owns the subtree rooted at node 2^lo + b and computes its nodes level by level
/// (__syncthreads between levels; on-chip once a level fits in 2048 nodes). With hi = lo + 1
/// this is exactly one tree level per launch; a compile-time loop over stages covering
/// depths L .. 0 rebuilds the whole tree (leaves to root). Blocks touch disjoint subtrees.
/// Reads: tree[2^hi .. 2^(hi+1)). Writes: tree[2^lo .. 2^hi).
/// Launch: <<<2^lo, T>>>, any T <= 1024 (2^(hi-lo-1) threads give one node each at the first
/// level), 0 <= lo < hi <= 30.
/// pipec: extent tree = 1 << (hi + 1)
extern "C" __global__ void sumtree_rebuild(float* tree, int lo, int hi) {
    __shared__ float sa[ST_SMEM];
    __shared__ float sb[ST_SMEM / 2];
    const unsigned int b = blockIdx.x;
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (lo < 0 || hi <= lo || b >= (1u << lo)) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    int d = hi - 1;
    // Levels whose children do not fit on chip: straight from global memory.
    for (; d >= lo && (2 << (d - lo)) > ST_SMEM; --d) {
        const int cnt = 1 << (d - lo);
        const int base = (1 << d) + (int)b * cnt;
        for (int n = t; n < cnt; n += nt) {
            const int v = base + n;
            tree[v] = tree[2 * v] + tree[2 * v + 1];
        }
        __syncthreads();
    }
    // Remaining levels on chip: load the children of depth d, then reduce in shared memory,
    // ping-ponging between sa (children) and sb (parents), writing each level back.
    {
        const int ccnt = 2 << (d - lo);
        const int cbase = (2 << d) + (int)b * ccnt;
        pipec_copy_to_shared(tree + cbase, sa, ccnt);
        __syncthreads();
    }
    float* src = sa;
    float* dst = sb;
    for (; d >= lo; --d) {
        const int cnt = 1 << (d - lo);
        const int base = (1 << d) + (int)b * cnt;
        for (int n = t; n < cnt; n += nt) {
            const float v = src[2 * n] + src[2 * n + 1];
            dst[n] = v;
            tree[base + n] = v;
        }
        __syncthreads();
        float* tmp = src;
        src = dst;
        dst = tmp;
    }
}

/// Top of the sum-tree rebuild, stratified proportional sampling (docs/dqn.md 6.1, 6.2) and
/// gather of the training batch. On entry the tree depths top .. L are current (rebuilt by
/// sumtree_rebuild launches); this block loads depths top .. 10 into shared memory, computes
/// depths top-1 .. 0 there (each node fl(left + right), level by level, so the tree is
/// bit-identical to a rebuild in separate launches) and writes them back to tree. Then
/// total = tree[1]; u_i = (i + U_i) * total / B with U_i = u24 of word x of
/// Philox(seed, SAMPLE) at counter (*step, i, update, 0); walk from the root (left when
/// u < left sum, else subtract it and go right; nodes below 2048 read from a shared-memory
/// copy); leaf clamped to size - 1; importance weight
/// w_i = (size * p_i / total)^(-beta), divided by the batch maximum.
/// Does nothing when *learn_on == 0 (or the replay is empty): the tree top is then not
/// rebuilt either (nothing reads it before the next learning step rebuilds it).
/// Reads: learn_on[1], tree[2C], replay_size[1], step[1], sched[3] (beta = sched[1]),
///   rb_obs[C*4], rb_act[C], rb_ret[C], rb_next[C*4], rb_disc[C].
/// Writes: tree[1 .. 2^top), b_idx[B] (leaf = data slot), b_w[B], b_obs[B*4], b_act[B],
///   b_ret[B], b_next[B*4], b_disc[B].
/// Launch: <<<1, T>>>, any T <= 1024 (T = min(B, 1024) is best); 0 <= top <= min(10, L)
/// (top = 0: the rebuild launches built the whole tree).
/// pipec: extent learn_on = 1
/// pipec: extent tree = 2 * capacity
/// pipec: extent replay_size = 1
/// pipec: extent step = 1
/// pipec: extent sched = 3
/// pipec: extent rb_obs = capacity * 4
/// pipec: extent rb_act = capacity
/// pipec: extent rb_ret = capacity
/// pipec: extent rb_next = capacity * 4
/// pipec: extent rb_disc = capacity
/// pipec: extent b_idx = B
/// pipec: extent b_w = B
/// pipec: extent b_obs = B * 4
/// pipec: extent b_act = B
/// pipec: extent b_ret = B
/// pipec: extent b_next = B * 4
/// pipec: extent b_disc = B
/// pipec: out b_idx
/// pipec: out b_w
/// pipec: out b_obs
/// pipec: out b_act
/// pipec: out b_ret
/// pipec: out b_next
/// pipec: out b_disc
extern "C" __global__ void per_sample(const int* learn_on, float* tree,
                                      const int* replay_size, const int* step,
                                      const float* sched, const float* rb_obs, const int* rb_act,
                                      const float* rb_ret, const float* rb_next,
                                      const float* rb_disc, int* b_idx, float* b_w,
                                      float* b_obs, int* b_act, float* b_ret, float* b_next,
                                      float* b_disc, int B, int capacity, int top,
                                      unsigned int seed, int update) {
    __shared__ float stop[PER_TOP_NODES];
    __shared__ float sw[ST_SW];
    __shared__ float red[1024];
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (blockIdx.x != 0) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    // Every load that depends on no other is issued before the learning test: one round trip.
    const int on = learn_on[0];
    const int size = replay_size[0];
    const float beta = sched[PIPEC_SCHED_BETA];
    const unsigned int st = (unsigned int)step[0];
    per_load_tree_top(tree, stop, capacity, top);
    if (on == 0 || size <= 0) return;  // uniform: learning off or empty replay, nothing written
    per_build_tree_top(tree, stop, top, true);
    const float total = stop[1];

    float wmax = 0.0f;
    for (int i = t; i < B; i += nt) {
        float p;
        const int leaf = per_draw(i, B, total, stop, tree, capacity, size, st, seed, update,
                                  PerFlush{0, 0, 0.0f}, &p);
        // all loads first, then the stores (they would serialize if interleaved)
        const PipecTransition x =
            pipec_load_transition(rb_obs, rb_act, rb_ret, rb_next, rb_disc, leaf);
        const float w = per_weight(p, size, total, beta);
        wmax = fmaxf(wmax, w);
        if (i < ST_SW) sw[i] = w;
        else b_w[i] = w;  // re-read below by this same thread
        b_idx[i] = leaf;
        pipec_store_transition(x, b_obs, b_act, b_ret, b_next, b_disc, i);
    }
    wmax = pipec_block_max(wmax, red);
    // Each thread rescales the weights it computed itself (same i stride).
    for (int i = t; i < B; i += nt) {
        const float w = (i < ST_SW) ? sw[i] : b_w[i];
        b_w[i] = w / wmax;
    }
}

/// New priorities and loss statistics after a learner update (docs/dqn.md 6.6):
/// leaf b_idx[i] = (|td_i| + per_eps)^alpha, the last sample (highest i) winning when one
/// leaf was sampled several times; *max_prio = max(*max_prio, max_i(|td_i| + per_eps));
/// loss = mean_i lossi_i (fixed-order block sum); *loss_last = loss;
/// *loss_ema = ema_decay * *loss_ema + (1 - ema_decay) * loss.
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], b_idx[B], td[B], lossi[B].
/// Updates: leaves[capacity] (only sampled leaves), max_prio[1], loss_ema[1].
/// Writes: loss_last[1].
/// Launch: <<<1, T>>>, any T <= 1024 (T = min(B, 1024) is best).
/// pipec: extent learn_on = 1
/// pipec: extent b_idx = B
/// pipec: extent td = B
/// pipec: extent lossi = B
/// pipec: extent leaves = capacity
/// pipec: extent max_prio = 1
/// pipec: extent loss_last = 1
/// pipec: extent loss_ema = 1
/// pipec: out loss_last
extern "C" __global__ void per_update_priorities(const int* learn_on, const int* b_idx,
                                                 const float* td, const float* lossi,
                                                 float* leaves, float* max_prio,
                                                 float* loss_last, float* loss_ema, int B,
                                                 int capacity, float alpha, float per_eps,
                                                 float ema_decay) {
    __shared__ int sidx[4096];
    __shared__ float red[1024];
    __shared__ float red2[1024];
    __shared__ int sint[1024];
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (learn_on[0] == 0 || blockIdx.x != 0) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    const float mp_old = max_prio[0];  // loaded early, used by thread 0
    const float ema_old = loss_ema[0];
    const bool on_chip = B <= 4096;
    if (on_chip)
        for (int i = t; i < B; i += nt) sidx[i] = b_idx[i];
    __syncthreads();
    const int* idx = on_chip ? sidx : b_idx;

    // Stratified sampling yields non-decreasing leaves; then duplicates are adjacent.
    // (Counted with a block scan rather than __syncthreads_and, whose PTX is bar.red.)
    int unsorted = 0;
    for (int i = t; i + 1 < B; i += nt) unsorted += (idx[i] > idx[i + 1]) ? 1 : 0;
    int n_unsorted = 0;
    pipec_block_exscan(unsorted, sint, &n_unsorted);
    const bool sorted = n_unsorted == 0;

    float pmax = 0.0f, lsum = 0.0f;
    for (int i = t; i < B; i += nt) {
        const int leaf = idx[i];
        const float d = td[i];
        const float li = lossi[i];
        bool last = true;
        if (sorted) {
            last = (i + 1 >= B) || (idx[i + 1] != leaf);
        } else {
            for (int j = i + 1; j < B; ++j)
                if (idx[j] == leaf) {
                    last = false;
                    break;
                }
        }
        const float pr = fabsf(d) + per_eps;
        if (last && leaf >= 0 && leaf < capacity) leaves[leaf] = powf(pr, alpha);
        pmax = fmaxf(pmax, pr);
        lsum += li;
    }
    // max and sum in one tree (same pairing as pipec_block_max / pipec_block_sum)
    red[t] = pmax;
    red2[t] = lsum;
    __syncthreads();
    unsigned int pw = 1;
    while (pw < (unsigned int)nt) pw <<= 1;
    for (unsigned int h = pw >> 1; h > 0; h >>= 1) {
        if ((unsigned int)t < h && (unsigned int)t + h < (unsigned int)nt) {
            red[t] = fmaxf(red[t], red[t + h]);
            red2[t] = red2[t] + red2[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        const float loss = red2[0] / (float)B;
        max_prio[0] = fmaxf(mp_old, red[0]);
        loss_last[0] = loss;
        loss_ema[0] = ema_decay * ema_old + (1.0f - ema_decay) * loss;
    }
}
