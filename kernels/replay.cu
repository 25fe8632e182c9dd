// kernels/replay.cu: n-step push and flush into the replay ring (docs/dqn.md 4-5), with the
// step's tick.
//
// Per env e, the env step (cp_step_env, kernels/cartpole.cuh) reports step_info[e] = (t, done),
// t the episode step before this step's increment. The env flushes
// pipec_flush_count(t, done, nstep) transitions: every entry of its window when the episode
// ended, else the oldest one when the window is full (t + 1 >= nstep), else none. Slots are
// made unique by an exclusive prefix sum over the envs. Two forms, the same bits:
//   - replay_push_flush (n_envs <= 1024): one block, thread e owns env e: scan, tick and
//     writes in one node;
//   - replay_push_scan (one block: the scan and the tick, offsets to flush_off) then
//     replay_flush_write (one block per env), for any n_envs.
// Both write an env's transitions and window entry with replay_flush_env. No atomics, no
// inter-block communication inside a launch.
//
// Window layout per env (docs/dqn.md): win_obs[e][slot][4], win_act[e][slot],
// win_rew[e][slot], slot = episode step % nstep.
// Replay ring: rb_obs[C][4], rb_act[C], rb_ret[C] (n-step return), rb_next[C][4],
// rb_disc[C] (bootstrap discount); sum-tree leaves leaves[C] (tree[C .. 2C-1]).
// flush_off[n_envs + 2]: [e] exclusive offset of env e, [n_envs] base slot (the old head),
// [n_envs + 1] total flushed this step.
#include "common.cuh"

// The tick (docs/dqn.md 1), run by thread 0 of the push's single block rather than in a
// single-thread node ahead of acting: acting and the environment read the counter before it
// advances (they use *step + 1), and the push is the first single-block node after them.
// s = *step + 1, *step = s; sched = (pipec_epsilon(s, ...), min(1, beta0 + (1 - beta0) * s /
// beta_steps) in double, *lr), sched[2] being the learning rate in force for this step's
// updates (the plateau controller writes *lr at the end of the step without racing this
// step's AdamW nodes); *learn_on = (old *size >= learning_starts && old *size > 0), the
// replay size before this push, fixed for the step; when learning, *adam_t += updates: this
// step's updates are learner updates old + 1 .. old + updates (adamw_step of update u uses
// *adam_t - updates + u + 1). Returns the old head (the flush's base slot) and size.
__device__ __forceinline__ void replay_tick(const int* head, const int* size, int* step,
                                            float* sched, int* learn_on, const float* lr,
                                            int* adam_t, double eps_start, double eps_end,
                                            int eps_decay_steps, double beta0, int beta_steps,
                                            int learning_starts, int updates, int* base,
                                            int* old_size) {
    *base = head[0];
    *old_size = size[0];
    const int st = step[0] + 1;  // this step
    const float lr_now = lr[0];
    const int t_old = adam_t[0];
    double beta = beta0 + (1.0 - beta0) * (double)st / (double)beta_steps;
    if (beta > 1.0) beta = 1.0;
    const int on = (*old_size >= learning_starts && *old_size > 0) ? 1 : 0;
    step[0] = st;
    sched[PIPEC_SCHED_EPS] = pipec_epsilon(st, eps_start, eps_end, eps_decay_steps);
    sched[PIPEC_SCHED_BETA] = (float)beta;
    sched[PIPEC_SCHED_LR] = lr_now;
    learn_on[0] = on;
    if (on) adam_t[0] = t_old + updates;
}

// The ring after a flush of `total` transitions from slot `base` (thread 0, after the scan).
__device__ __forceinline__ void replay_advance(int* head, int* size, int base, int old_size,
                                               int total, int capacity) {
    const int sz = old_size + total;
    head[0] = (int)(((long long)base + (long long)total) % (long long)capacity);
    size[0] = (sz < capacity) ? sz : capacity;
}

// Env e's part of the flush, env e having step_info (t, done): its transitions, oldest first,
// to ring slots (base + off + i) % capacity with leaves set to `leaf` (max_prio^alpha), and
// this step's (obs, action, reward) into its window at slot t % nstep. Entry j gives
// (obs_j, a_j, R = sum_{k=j..t} gamma^(k-j) r_k (summed k ascending), next_obs,
// discount = terminated ? 0 : gamma^(t-j+1)). When more than `capacity` transitions are
// flushed in one step (`total` in all) only the last `capacity` are written (slots stay
// unique). `lanes` threads share the env: lane l writes transitions i = l, l + lanes, ...,
// lane 0 the window entry (a slot no transition reads).
__device__ __forceinline__ void replay_flush_env(
    int e, int lane, int lanes, int t, int done, int off, int base, int total, float leaf,
    const float* obs, const int* action, const float* reward, const float* next_obs,
    float* win_obs, int* win_act, float* win_rew, float* rb_obs, int* rb_act, float* rb_ret,
    float* rb_next, float* rb_disc, float* leaves, int nstep, int capacity, float gamma) {
    const int cnt = pipec_flush_count(t, done, nstep);
    const int inwin = (t + 1 < nstep) ? (t + 1) : nstep;  // entries of this episode held
    const int j0 = t - inwin + 1;                          // oldest held entry
    const float* wo = win_obs + (long long)e * nstep * PIPEC_OBS;
    const int* wa = win_act + (long long)e * nstep;
    const float* wr = win_rew + (long long)e * nstep;

    // Transitions: entry j = j0 + i for i < cnt. Entry t is this step's (obs, action,
    // reward), read from the inputs; entries j < t come from the window (slot j % nstep,
    // never the slot t % nstep written below, which holds entry t - nstep < j0).
    for (int i = lane; i < cnt; i += lanes) {
        const int g = off + i;
        if (g < total - capacity) continue;  // overwritten within this same flush
        const int slot = (int)(((long long)base + (long long)g) % (long long)capacity);
        const int j = j0 + i;
        const int js = j % nstep;
        // all loads first, then the stores (they would serialize if interleaved)
        float o[PIPEC_OBS], nx[PIPEC_OBS];
#pragma unroll
        for (int c = 0; c < PIPEC_OBS; ++c) {
            o[c] = (j == t) ? obs[e * PIPEC_OBS + c] : wo[js * PIPEC_OBS + c];
            nx[c] = next_obs[e * PIPEC_OBS + c];
        }
        const int a = (j == t) ? action[e] : wa[js];
        float R = 0.0f, gp = 1.0f;
        for (int k = j; k <= t; ++k) {
            const float rk = (k == t) ? reward[e] : wr[k % nstep];
            R = fmaf(gp, rk, R);
            gp = gp * gamma;
        }
        const float disc = (done == PIPEC_DONE_TERMINATED) ? 0.0f : gp;
#pragma unroll
        for (int c = 0; c < PIPEC_OBS; ++c) {
            rb_obs[slot * PIPEC_OBS + c] = o[c];
            rb_next[slot * PIPEC_OBS + c] = nx[c];
        }
        rb_act[slot] = a;
        rb_ret[slot] = R;
        rb_disc[slot] = disc;
        leaves[slot] = leaf;
    }
    // Window push of this step's entry.
    if (lane == 0) {
        const int ws = t % nstep;
        float o[PIPEC_OBS];
#pragma unroll
        for (int c = 0; c < PIPEC_OBS; ++c) o[c] = obs[e * PIPEC_OBS + c];
        const int a = action[e];
        const float r = reward[e];
        float* wow = win_obs + ((long long)e * nstep + ws) * PIPEC_OBS;
#pragma unroll
        for (int c = 0; c < PIPEC_OBS; ++c) wow[c] = o[c];
        win_act[e * nstep + ws] = a;
        win_rew[e * nstep + ws] = r;
    }
}

/// The push in one node (n_envs <= 1024): thread e owns env e. Its flush count from
/// step_info, the exclusive prefix sum of the counts in env order (pipec_block_exscan), the
/// tick in thread 0 (replay_tick; base = old *head, *head = (base + total) % capacity,
/// *size = min(*size + total, capacity)), then every
/// thread writes its env's transitions and window entry (replay_flush_env, as
/// replay_flush_write). The same bits as replay_push_scan then replay_flush_write.
/// Reads: obs[n_envs*4], action[n_envs], reward[n_envs], next_obs[n_envs*4],
///   step_info[n_envs*2], max_prio[1], lr[1].
/// Updates: win_obs[n_envs*nstep*4], win_act[n_envs*nstep], win_rew[n_envs*nstep], head[1],
///   size[1], step[1], adam_t[1].
/// Writes: sched[3], learn_on[1], rb_obs[capacity*4], rb_act[capacity], rb_ret[capacity],
///   rb_next[capacity*4], rb_disc[capacity], leaves[capacity] (only the flushed slots).
/// Launch: <<<1, T>>> with n_envs <= T <= 1024.
/// pipec: extent obs = n_envs * 4
/// pipec: extent action = n_envs
/// pipec: extent reward = n_envs
/// pipec: extent next_obs = n_envs * 4
/// pipec: extent step_info = n_envs * 2
/// pipec: extent max_prio = 1
/// pipec: extent win_obs = n_envs * nstep * 4
/// pipec: extent win_act = n_envs * nstep
/// pipec: extent win_rew = n_envs * nstep
/// pipec: extent head = 1
/// pipec: extent size = 1
/// pipec: extent step = 1
/// pipec: extent sched = 3
/// pipec: extent learn_on = 1
/// pipec: extent lr = 1
/// pipec: extent adam_t = 1
/// pipec: extent rb_obs = capacity * 4
/// pipec: extent rb_act = capacity
/// pipec: extent rb_ret = capacity
/// pipec: extent rb_next = capacity * 4
/// pipec: extent rb_disc = capacity
/// pipec: extent leaves = capacity
/// pipec: out sched
/// pipec: out learn_on
/// pipec: out rb_obs
/// pipec: out rb_act
/// pipec: out rb_ret
/// pipec: out rb_next
/// pipec: out rb_disc
/// pipec: out leaves
extern "C" __global__ void replay_push_flush(
    const float* obs, const int* action, const float* reward, const float* next_obs,
    const int* step_info, const float* max_prio, float* win_obs, int* win_act, float* win_rew,
    int* head, int* size, int* step, float* sched, int* learn_on, const float* lr, int* adam_t,
    float* rb_obs, int* rb_act, float* rb_ret, float* rb_next, float* rb_disc, float* leaves,
    int n_envs, int nstep, int capacity, float gamma, float alpha, double eps_start,
    double eps_end, int eps_decay_steps, double beta0, int beta_steps, int learning_starts,
    int updates) {
    __shared__ int s[1024];
    __shared__ int s_base;
    if (blockIdx.x != 0) return;
    const int e = (int)pipec_tid();
    const bool mine = e < n_envs;
    const int t = mine ? step_info[e * 2] : 0;
    const int done = mine ? step_info[e * 2 + 1] : PIPEC_DONE_NONE;
    const float leaf = powf(max_prio[0], alpha);
    // Thread 0 runs the tick before the scan, so that its latency overlaps the scan's
    // barriers (the first of which publishes s_base).
    int base = 0, old_size = 0;
    if (e == 0) {
        replay_tick(head, size, step, sched, learn_on, lr, adam_t, eps_start, eps_end,
                    eps_decay_steps, beta0, beta_steps, learning_starts, updates, &base,
                    &old_size);
        s_base = base;
    }
    int total = 0;
    const int off = pipec_block_exscan(mine ? pipec_flush_count(t, done, nstep) : 0, s, &total);
    if (e == 0) replay_advance(head, size, base, old_size, total, capacity);
    if (mine)
        replay_flush_env(e, 0, 1, t, done, off, s_base, total, leaf, obs, action, reward,
                         next_obs, win_obs, win_act, win_rew, rb_obs, rb_act, rb_ret, rb_next,
                         rb_disc, leaves, nstep, capacity, gamma);
}

/// Flush scan and the step's tick (one block; the first form of the push for any n_envs,
/// replay_flush_write the second): per-env flush counts from step_info, their exclusive
/// prefix sum in env order, the tick in thread 0 (replay_tick), base = old *head,
/// *head = (base + total) % capacity, *size = min(*size + total, capacity).
/// Reads: step_info[n_envs*2], lr[1]. Updates: head[1], size[1], step[1], adam_t[1].
/// Writes: flush_off[n_envs + 2] (offsets, base, total), sched[3], learn_on[1].
/// Launch: <<<1, T>>> with any T <= 1024 (each thread owns a contiguous run of envs).
/// pipec: extent step_info = n_envs * 2
/// pipec: extent head = 1
/// pipec: extent size = 1
/// pipec: extent flush_off = n_envs + 2
/// pipec: extent step = 1
/// pipec: extent sched = 3
/// pipec: extent learn_on = 1
/// pipec: extent lr = 1
/// pipec: extent adam_t = 1
/// pipec: out flush_off
/// pipec: out sched
/// pipec: out learn_on
extern "C" __global__ void replay_push_scan(const int* step_info, int* head, int* size,
                                            int* flush_off, int* step, float* sched,
                                            int* learn_on, const float* lr, int* adam_t,
                                            int n_envs, int nstep, int capacity,
                                            double eps_start, double eps_end,
                                            int eps_decay_steps, double beta0, int beta_steps,
                                            int learning_starts, int updates) {
    __shared__ int s[1024];
    if (blockIdx.x != 0) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    const int per = (n_envs + nt - 1) / nt;
    const int e0 = t * per;
    const int e1 = (e0 + per < n_envs) ? (e0 + per) : n_envs;
    // Thread 0 loads its scalars and runs the tick (which needs no scan) first, so that their
    // latency overlaps the scan's barriers.
    int base = 0, old_size = 0;
    if (t == 0)
        replay_tick(head, size, step, sched, learn_on, lr, adam_t, eps_start, eps_end,
                    eps_decay_steps, beta0, beta_steps, learning_starts, updates, &base,
                    &old_size);
    int mine = 0;
    for (int e = e0; e < e1; ++e)
        mine += pipec_flush_count(step_info[e * 2], step_info[e * 2 + 1], nstep);
    int total = 0;
    int off = pipec_block_exscan(mine, s, &total);
    for (int e = e0; e < e1; ++e) {
        flush_off[e] = off;
        off += pipec_flush_count(step_info[e * 2], step_info[e * 2 + 1], nstep);
    }
    if (t == 0) {
        flush_off[n_envs] = base;
        flush_off[n_envs + 1] = total;
        replay_advance(head, size, base, old_size, total, capacity);
    }
}

/// Flush write (one block per env, after replay_push_scan): the env's transitions and window
/// entry (replay_flush_env, the block's threads sharing the transitions), at the offsets
/// replay_push_scan left in flush_off.
/// Reads: obs[n_envs*4], action[n_envs], reward[n_envs], next_obs[n_envs*4],
///   step_info[n_envs*2], flush_off[n_envs+2], max_prio[1].
/// Updates: win_obs[n_envs*nstep*4], win_act[n_envs*nstep], win_rew[n_envs*nstep].
/// Writes: rb_obs[capacity*4], rb_act[capacity], rb_ret[capacity], rb_next[capacity*4],
///   rb_disc[capacity], leaves[capacity] (only the flushed slots).
/// Launch: <<<n_envs, T>>>, any T (32 is plenty: at most nstep transitions per env).
/// pipec: extent obs = n_envs * 4
/// pipec: extent action = n_envs
/// pipec: extent reward = n_envs
/// pipec: extent next_obs = n_envs * 4
/// pipec: extent step_info = n_envs * 2
/// pipec: extent flush_off = n_envs + 2
/// pipec: extent max_prio = 1
/// pipec: extent win_obs = n_envs * nstep * 4
/// pipec: extent win_act = n_envs * nstep
/// pipec: extent win_rew = n_envs * nstep
/// pipec: extent rb_obs = capacity * 4
/// pipec: extent rb_act = capacity
/// pipec: extent rb_ret = capacity
/// pipec: extent rb_next = capacity * 4
/// pipec: extent rb_disc = capacity
/// pipec: extent leaves = capacity
/// pipec: out rb_obs
/// pipec: out rb_act
/// pipec: out rb_ret
/// pipec: out rb_next
/// pipec: out rb_disc
/// pipec: out leaves
extern "C" __global__ void replay_flush_write(
    const float* obs, const int* action, const float* reward, const float* next_obs,
    const int* step_info, const int* flush_off, const float* max_prio, float* win_obs,
    int* win_act, float* win_rew, float* rb_obs, int* rb_act, float* rb_ret, float* rb_next,
    float* rb_disc, float* leaves, int n_envs, int nstep, int capacity, float gamma,
    float alpha) {
    const int e = blockIdx.x;
    if (e >= n_envs) return;
    replay_flush_env(e, (int)pipec_tid(), (int)pipec_nthreads(), step_info[e * 2],
                     step_info[e * 2 + 1], flush_off[e], flush_off[n_envs],
                     flush_off[n_envs + 1], powf(max_prio[0], alpha), obs, action, reward,
                     next_obs, win_obs, win_act, win_rew, rb_obs, rb_act, rb_ret, rb_next,
                     rb_disc, leaves, nstep, capacity, gamma);
}
