// kernels/mlp_act.cu: acting for rl_step (docs/dqn.md 1-5): the Q network of kernels/mlp.cu
// (layout in common.cuh) on every env, epsilon-greedy, the env step (kernels/cartpole.cuh)
// and the n-step push of the transitions (kernels/replay.cuh), with the tick, the sum tree's
// update above the flushed slots and the first learner update's draw (kernels/sumtree.cuh)
// in one more block: one node. No atomics; no block depends on what another writes.
#include "replay.cuh"

/// Acting, the environment step and the n-step push, one node (docs/dqn.md 1-5). Blocks
/// 0 .. A-1 (A = ceil_div(n_envs, epb)) act: for each of their envs, obs = float32(state);
/// Q = online(obs); with probability epsilon a uniformly random action, else argmax Q (ties to
/// action 0); the env steps with that action (cp_step_env, kernels/cartpole.cuh: CartPole-v1
/// in f64, auto-reset, step_info, fin_return); then the env's thread writes its transitions
/// and window entry (replay_flush_env) at the offsets of the step's flush plan, which
/// replay_plan computed from the states before the step (a step's termination does not depend
/// on its action). Block A, the ring's block, runs the tick (replay_tick: step, sched,
/// learn_on, adam_t), advances head and size by the plan's total, brings the sum tree's
/// depths top .. L-1 above the flushed slots up to date (sumtree_fill_flush), then draws the
/// step's first learner batch as per_sample does (update 0; kernels/sumtree.cuh; the flushed
/// leaves, which the acting blocks are writing, read as max_prio^alpha) into b_idx and b_w,
/// whenever the replay holds anything. No block depends on what another writes: acting takes
/// the step number from the plan, not from the counter the ring block advances, and the
/// draw replaces whatever it reads of a flushed leaf by the leaf's known value.
/// This is step s = flush_off[n_envs + 2] (= *step + 1); epsilon = pipec_epsilon(s, eps_start,
/// eps_end, eps_decay_steps). Randomness: Philox(seed, ACT) at counter (s, env, 0, 0): word x
/// gives the coin (explore when u24(x) < epsilon), word y the random action (y >> 31); a
/// reset draws from Philox(seed, RESET) at (s, env, half, 0).
/// The bound of 512 threads is __launch_bounds__: with the env step the kernel needs more
/// than the 64 registers a thread that blocks of 1024 allow (measured on an H200: blocks of
/// 1024 failed to launch); under the bound it keeps to 64 and spills a few bytes.
/// Reads: params[P], flush_off[n_envs + 3] (replay_plan's), max_prio[1], lr[1].
/// Updates: state[n_envs*4] (f64), ep_steps[n_envs], ep_return[n_envs] (as cp_step_env),
///   win_obs[n_envs*nstep*4], win_act[n_envs*nstep], win_rew[n_envs*nstep], head[1], size[1],
///   step[1], adam_t[1], tree (the flushed leaves and their ancestors down to depth top).
/// Writes: obs[n_envs*4] (the observation acted on, f32), action[n_envs]; next_obs[n_envs*4],
///   reward[n_envs], step_info[n_envs*2], fin_return[n_envs] (as cp_step_env); sched[3],
///   learn_on[1]; the flushed slots of rb_obs[C*4], rb_act[C], rb_ret[C], rb_next[C*4],
///   rb_disc[C]; tree[1 .. 2^top) (built by the draw); b_idx[B], b_w[B] (the first update's
///   batch, as per_sample's).
/// Launch: grid ceil_div(n_envs, epb) + 1 blocks, any block size up to 512 (ideally epb*H),
/// dynamic shared memory 4 * (H*(H+4) + 8*H + 2 + epb*(2*H + 6 + 6*nstep)) bytes;
/// 0 <= top <= log2(C).
/// pipec: extent params = 8 * H + H * H + 2
/// pipec: extent state = n_envs * 4
/// pipec: extent ep_steps = n_envs
/// pipec: extent ep_return = n_envs
/// pipec: extent flush_off = n_envs + 3
/// pipec: extent max_prio = 1
/// pipec: extent obs = n_envs * 4
/// pipec: extent action = n_envs
/// pipec: extent next_obs = n_envs * 4
/// pipec: extent reward = n_envs
/// pipec: extent step_info = n_envs * 2
/// pipec: extent fin_return = n_envs
/// pipec: extent win_obs = n_envs * nstep * 4
/// pipec: extent win_act = n_envs * nstep
/// pipec: extent win_rew = n_envs * nstep
/// pipec: extent rb_obs = capacity * 4
/// pipec: extent rb_act = capacity
/// pipec: extent rb_ret = capacity
/// pipec: extent rb_next = capacity * 4
/// pipec: extent rb_disc = capacity
/// pipec: extent tree = 2 * capacity
/// pipec: extent head = 1
/// pipec: extent size = 1
/// pipec: extent step = 1
/// pipec: extent sched = 3
/// pipec: extent learn_on = 1
/// pipec: extent lr = 1
/// pipec: extent adam_t = 1
/// pipec: extent b_idx = B
/// pipec: extent b_w = B
/// pipec: out b_idx
/// pipec: out b_w
/// pipec: out obs
/// pipec: out action
/// pipec: out next_obs
/// pipec: out reward
/// pipec: out step_info
/// pipec: out fin_return
/// pipec: out sched
/// pipec: out learn_on
extern "C" __global__ void __launch_bounds__(512) mlp_act_push(
    const float* params, double* state, int* ep_steps, float* ep_return, const int* flush_off,
    const float* max_prio, float* obs, int* action, float* next_obs, float* reward,
    int* step_info, float* fin_return, float* win_obs, int* win_act, float* win_rew,
    float* rb_obs, int* rb_act, float* rb_ret, float* rb_next, float* rb_disc, float* tree,
    int* head, int* size, int* step, float* sched, int* learn_on, const float* lr, int* adam_t,
    int* b_idx, float* b_w, int n_envs, int H, int epb, unsigned int seed, double eps_start,
    double eps_end, int eps_decay_steps, int max_steps, int nstep, int capacity, int top,
    float gamma, float alpha, double beta0, int beta_steps, int learning_starts, int updates,
    int B) {
    extern __shared__ __align__(16) float smem[];
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    const int acting = (n_envs + epb - 1) / epb;
    const int base = flush_off[n_envs];
    const int total = flush_off[n_envs + 1];
    const float leaf = powf(max_prio[0], alpha);
    const int s_now = flush_off[n_envs + 2];  // this step (the plan's: *step + 1)
    const unsigned int st = (unsigned int)s_now;
    if ((int)blockIdx.x == acting) {  // the ring's block
        __shared__ float scratch[300];
        __shared__ float stop[PER_TOP_NODES];
        if (t == nt - 1) {  // not thread 0, which adds up the tree's partial nodes
            int b0 = 0, old_size = 0;
            replay_tick(head, size, step, sched, learn_on, lr, adam_t, eps_start, eps_end,
                        eps_decay_steps, beta0, beta_steps, learning_starts, updates, &b0,
                        &old_size);
            replay_advance(head, size, base, old_size, total, capacity);
        }
        sumtree_fill_flush(tree, capacity, top, base, total, leaf, scratch);
        __syncthreads();  // publishes the tick's values and the tree above the flush
        // The first update's batch, drawn now (as per_sample draws it) so that the learner
        // does not wait for a draw: the flushed leaves, which the acting blocks are writing,
        // read as `leaf`. Drawn whenever the replay holds anything: under data parallelism
        // the ranks agree on learning only after this node.
        const int sz = size[0];
        if (sz <= 0) return;
        const float beta = sched[PIPEC_SCHED_BETA];
        per_load_tree_top(tree, stop, capacity, top);
        per_build_tree_top(tree, stop, top, true);
        const float mass = stop[1];
        const PerFlush flush{base, total, leaf};
        float wmax = 0.0f, w_first = 0.0f;
        for (int i = t; i < B; i += nt) {
            float p;
            const int l = per_draw(i, B, mass, stop, tree, capacity, sz, st, seed, 0, flush, &p);
            const float w = per_weight(p, sz, mass, beta);
            wmax = fmaxf(wmax, w);
            if (i == t) w_first = w;
            else b_w[i] = w;  // re-read below by this same thread
            b_idx[i] = l;
        }
        wmax = pipec_block_max(wmax, scratch);
        for (int i = t; i < B; i += nt) b_w[i] = ((i == t) ? w_first : b_w[i]) / wmax;
        return;
    }
    const int ld = pipec_w2_ld(H);
    float* W2s = smem;                    // H * (H + 4), row stride ld
    float* W1s = W2s + H * (H + 4);       // 5 * H: W1 then b1 (contiguous in params)
    float* b2s = W1s + 5 * H;             // H
    float* x = b2s + H;                   // epb * 4
    float* a1 = x + epb * PIPEC_OBS;      // epb * H
    float* a2 = a1 + epb * H;             // epb * H
    float* q = a2 + epb * H;              // epb * 2
    float* W3s = q + epb * 2;             // 2 * H + 2: W3, b3
    float* wo = W3s + 2 * H + 2;          // epb * nstep * 4: the envs' windows, staged
    float* wr = wo + epb * nstep * PIPEC_OBS;            // epb * nstep
    int* wa = reinterpret_cast<int*>(wr + epb * nstep);  // epb * nstep

    const int e0 = blockIdx.x * epb;
    const int ne = (n_envs - e0 < epb) ? (n_envs - e0) : epb;

    const int off_first = (t < ne) ? flush_off[e0 + t] : 0;  // the thread's first env's offset

    // Every weight the block uses, its envs' states and windows: all loads first (one round
    // trip; sized for H = 64 in blocks of 256), then the stores, before the first barrier, so
    // that no layer and no flush waits for a global load after it.
    PipecSquareStage<16> w2;
    PipecStage<2> w1, w3;  // W1 then b1 (contiguous), W3 then b3
    PipecStage<1> b2, st_wo, st_wr;
    PipecStage<1, int> st_wa;
    PipecStage<1, double> st_x;
    w2.load(params + pipec_off_w2(H), H);
    w1.load(params + pipec_off_w1(H), 5 * H);
    w3.load(params + pipec_off_w3(H), 2 * H + 2);
    b2.load(params + pipec_off_b2(H), H);
    st_x.load(state + e0 * PIPEC_OBS, ne * PIPEC_OBS);
    st_wo.load(win_obs + e0 * nstep * PIPEC_OBS, ne * nstep * PIPEC_OBS);
    st_wr.load(win_rew + e0 * nstep, ne * nstep);
    st_wa.load(win_act + e0 * nstep, ne * nstep);
    w2.store(params + pipec_off_w2(H), W2s, H);
    w1.store(params + pipec_off_w1(H), W1s, 5 * H);
    w3.store(params + pipec_off_w3(H), W3s, 2 * H + 2);
    b2.store(params + pipec_off_b2(H), b2s, H);
    st_wo.store(win_obs + e0 * nstep * PIPEC_OBS, wo, ne * nstep * PIPEC_OBS);
    st_wr.store(win_rew + e0 * nstep, wr, ne * nstep);
    st_wa.store(win_act + e0 * nstep, wa, ne * nstep);
    for (int i = t; i < ne * PIPEC_OBS; i += nt) {  // obs = float32(state)
        const float o = (float)((i == t) ? st_x.v[0] : state[e0 * PIPEC_OBS + i]);
        x[i] = o;
        obs[e0 * PIPEC_OBS + i] = o;
    }
    __syncthreads();
    pipec_dense(W1s, PIPEC_OBS, W1s + 4 * H, x, PIPEC_OBS, a1, H, ne, 1);
    __syncthreads();
    pipec_dense(W2s, ld, b2s, a1, H, a2, H, ne, 1);
    __syncthreads();
    pipec_dense(W3s, H, W3s + 2 * H, a2, H, q, PIPEC_ACTIONS, ne, 0);
    __syncthreads();

    const float eps = pipec_epsilon(s_now, eps_start, eps_end, eps_decay_steps);
    for (int s = t; s < ne; s += nt) {
        const int e = e0 + s;
        const pipec_u4 r = pipec_philox(st, (unsigned int)e, 0u, 0u, seed, PIPEC_STREAM_ACT);
        int a;
        if (pipec_u01f(r.x) < eps) {
            a = (int)(r.y >> 31);
        } else {
            a = (q[s * 2 + 1] > q[s * 2 + 0]) ? 1 : 0;
        }
        action[e] = a;
        const CpStep r_env = cp_step_env(e, a, st, state, ep_steps, ep_return, next_obs, reward,
                                         step_info, fin_return, seed, max_steps);
        // the window from the staged copy, the step's entry from registers and shared memory
        const int off = (s == t) ? off_first : flush_off[e];
        replay_flush_env(0, 1, r_env.t, r_env.done, off, base, total, leaf, x + s * PIPEC_OBS, a,
                         r_env.reward, r_env.next_obs, wo + s * nstep * PIPEC_OBS, wa + s * nstep,
                         wr + s * nstep, win_obs + e * nstep * PIPEC_OBS, win_act + e * nstep,
                         win_rew + e * nstep, rb_obs, rb_act, rb_ret, rb_next, rb_disc,
                         tree + capacity, nstep, capacity, gamma);
    }
}
