// kernels/replay.cu: n-step push and flush into the replay ring (docs/dqn.md 4-5), with the
// step's tick.
//
// Per env e, the env step (cp_step_env, kernels/cartpole.cuh) reports step_info[e] = (t, done),
// t the episode step before this step's increment. The env flushes
// pipec_flush_count(t, done, nstep) transitions: every entry of its window when the episode
// ended, else the oldest one when the window is full (t + 1 >= nstep), else none. Slots are
// made unique by an exclusive prefix sum over the envs. The push nodes (c51_step's), two
// forms with the same bits:
//   - replay_push_flush (n_envs <= 1024): one block, thread e owns env e: scan, tick, writes
//     and the sum tree's update above them in one node;
//   - replay_push_scan (one block: the scan and the tick, offsets to flush_off) then
//     replay_flush_write (one block per env), for any n_envs, then a tree rebuild.
// rl_step pushes inside its acting kernel (mlp_act_push, kernels/mlp_act.cu) at the offsets
// replay_plan, below, computed from the states before the step. All write an env's
// transitions and window entry with replay_flush_env (kernels/replay.cuh). No atomics, no
// inter-block communication inside a launch.
//
// Window layout per env (docs/dqn.md): win_obs[e][slot][4], win_act[e][slot],
// win_rew[e][slot], slot = episode step % nstep.
// Replay ring: rb_obs[C][4], rb_act[C], rb_ret[C] (n-step return), rb_next[C][4],
// rb_disc[C] (bootstrap discount); sum-tree leaves leaves[C] (tree[C .. 2C-1]).
// flush_off[n_envs + 3]: [e] exclusive offset of env e, [n_envs] base slot (the old head),
// [n_envs + 1] total flushed this step, [n_envs + 2] (replay_plan's) the step it is for.
#include "replay.cuh"

/// The push in one node (n_envs <= 1024): thread e owns env e. Its flush count from
/// step_info, the exclusive prefix sum of the counts in env order (pipec_block_exscan), the
/// tick in thread 0 (replay_tick; base = old *head, *head = (base + total) % capacity,
/// *size = min(*size + total, capacity)), then every
/// thread writes its env's transitions and window entry (replay_flush_env, as
/// replay_flush_write), and the block brings the sum tree's depths top .. L-1 above the
/// flushed leaves up to date (sumtree_fill_range, kernels/sumtree.cuh: the bits a rebuild
/// computes), so that no rebuild node stands between the push and the learner. The same bits
/// as replay_push_scan then replay_flush_write then a rebuild of those depths.
/// Reads: obs[n_envs*4], action[n_envs], reward[n_envs], next_obs[n_envs*4],
///   step_info[n_envs*2], max_prio[1], lr[1], tree[2*capacity] (depths top .. L current).
/// Updates: win_obs[n_envs*nstep*4], win_act[n_envs*nstep], win_rew[n_envs*nstep], head[1],
///   size[1], step[1], adam_t[1], tree (the flushed leaves and their ancestors to depth top).
/// Writes: sched[3], learn_on[1], rb_obs[capacity*4], rb_act[capacity], rb_ret[capacity],
///   rb_next[capacity*4], rb_disc[capacity] (only the flushed slots).
/// Launch: <<<1, T>>> with n_envs <= T <= 1024; 0 <= top <= log2(capacity).
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
/// pipec: extent tree = 2 * capacity
/// pipec: out sched
/// pipec: out learn_on
extern "C" __global__ void replay_push_flush(
    const float* obs, const int* action, const float* reward, const float* next_obs,
    const int* step_info, const float* max_prio, float* win_obs, int* win_act, float* win_rew,
    int* head, int* size, int* step, float* sched, int* learn_on, const float* lr, int* adam_t,
    float* rb_obs, int* rb_act, float* rb_ret, float* rb_next, float* rb_disc, float* tree,
    int n_envs, int nstep, int capacity, int top, float gamma, float alpha, double eps_start,
    double eps_end, int eps_decay_steps, double beta0, int beta_steps, int learning_starts,
    int updates) {
    __shared__ int s[1024];
    __shared__ int s_base;
    __shared__ float scratch[300];
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
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
        replay_flush_env_global(e, 0, 1, t, done, off, s_base, total, leaf, obs, action, reward,
                         next_obs, win_obs, win_act, win_rew, rb_obs, rb_act, rb_ret, rb_next,
                         rb_disc, tree + capacity, nstep, capacity, gamma);
    sumtree_fill_flush(tree, capacity, top, s_base, total, leaf, scratch);
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
    int e0, e1;
    pipec_thread_run(n_envs, &e0, &e1);
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
extern "C" __global__ void replay_flush_write(
    const float* obs, const int* action, const float* reward, const float* next_obs,
    const int* step_info, const int* flush_off, const float* max_prio, float* win_obs,
    int* win_act, float* win_rew, float* rb_obs, int* rb_act, float* rb_ret, float* rb_next,
    float* rb_disc, float* leaves, int n_envs, int nstep, int capacity, float gamma,
    float alpha) {
    const int e = blockIdx.x;
    if (e >= n_envs) return;
    replay_flush_env_global(e, (int)pipec_tid(), (int)pipec_nthreads(), step_info[e * 2],
                     step_info[e * 2 + 1], flush_off[e], flush_off[n_envs],
                     flush_off[n_envs + 1], powf(max_prio[0], alpha), obs, action, reward,
                     next_obs, win_obs, win_act, win_rew, rb_obs, rb_act, rb_ret, rb_next,
                     rb_disc, leaves, nstep, capacity, gamma);
}

/// The next step's flush plan (docs/dqn.md 4-5; rl_step runs it after acting, beside the
/// learner, and once in init): for every env, the transitions it will flush when it next
/// steps, known from its state now (cp_done_after: the step's termination does not depend on
/// the action); their exclusive prefix sum in env order; the ring's base slot (*head) and the
/// next step's number. The envs go by rows of one per thread (coalesced loads, four rows
/// loaded before any is used), each row scanned over the block on top of the rows before it.
/// Writes flush_off[n_envs + 3]: [e] exclusive offset of env e, [n_envs] base = *head,
/// [n_envs + 1] total, [n_envs + 2] the next step s = *step + 1.
/// Reads: state[n_envs*4], ep_steps[n_envs], head[1], step[1].
/// Launch: <<<1, T>>> with any T <= 1024.
/// pipec: extent state = n_envs * 4
/// pipec: extent ep_steps = n_envs
/// pipec: extent head = 1
/// pipec: extent step = 1
/// pipec: extent flush_off = n_envs + 3
/// pipec: out flush_off
extern "C" __global__ void replay_plan(const double* state, const int* ep_steps,
                                       const int* head, const int* step, int* flush_off,
                                       int n_envs, int nstep, int max_steps) {
    __shared__ int s[32];
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (blockIdx.x != 0) return;
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    const int base = head[0];
    const int next = step[0] + 1;
    int done_before = 0;  // transitions of the rows before
    for (int r0 = 0; r0 < n_envs; r0 += 4 * nt) {
        double st[4][4];
        int ts[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int e = r0 + u * nt + t;
            const int ec = (e < n_envs) ? e : 0;
            ts[u] = ep_steps[ec];
#pragma unroll
            for (int c = 0; c < 4; ++c) st[u][c] = state[ec * 4 + c];
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int e = r0 + u * nt + t;
            if (r0 + u * nt >= n_envs) break;  // uniform: no env left in this row
            const int n = (e < n_envs)
                              ? pipec_flush_count(ts[u], cp_done_after(st[u], ts[u], max_steps), nstep)
                              : 0;
            int row = 0;
            const int off = pipec_block_exscan(n, s, &row);
            if (e < n_envs) flush_off[e] = done_before + off;
            done_before += row;
        }
    }
    if (t == 0) {
        flush_off[n_envs] = base;
        flush_off[n_envs + 1] = done_before;
        flush_off[n_envs + 2] = next;
    }
}
