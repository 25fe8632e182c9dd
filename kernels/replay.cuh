// kernels/replay.cuh: the n-step flush's pieces (docs/dqn.md 1, 4-5), shared by the push
// kernels of replay.cu and by mlp_act_push (kernels/mlp_act.cu), which writes each env's
// transitions from the thread that stepped it: the tick, the ring's advance and one env's
// part of the flush. Layouts are replay.cu's.
#pragma once

#include "cartpole.cuh"
#include "sumtree.cuh"

// The tick (docs/dqn.md 1), run by one thread of a block that no other block of its launch
// reads the counters from, rather than in a single-thread node ahead of acting: the push's
// single block (c51_step, whose acting reads the counter before it and uses *step + 1) or
// mlp_act_push's ring block (rl_step, whose acting blocks take the step from the plan).
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
// this step's entry (o_now, a_now, r_now) into its window at slot t % nstep. Entry j gives
// (obs_j, a_j, R = sum_{k=j..t} gamma^(k-j) r_k (summed k ascending), next_obs,
// discount = terminated ? 0 : gamma^(t-j+1)). When more than `capacity` transitions are
// flushed in one step (`total` in all) only the last `capacity` are written (slots stay
// unique). `lanes` threads share the env: lane l writes transitions i = l, l + lanes, ...,
// lane 0 the window entry (a slot no transition reads). The window is read through wo, wa,
// wr (the env's nstep rows: global memory, or a copy the caller staged on chip) and written
// through win_obs, win_act, win_rew (the env's rows in global memory).
__device__ __forceinline__ void replay_flush_env(
    int lane, int lanes, int t, int done, int off, int base, int total, float leaf,
    const float* o_now, int a_now, float r_now, const float* nx, const float* wo, const int* wa,
    const float* wr, float* win_obs, int* win_act, float* win_rew, float* rb_obs, int* rb_act,
    float* rb_ret, float* rb_next, float* rb_disc, float* leaves, int nstep, int capacity,
    float gamma) {
    const int cnt = pipec_flush_count(t, done, nstep);
    const int inwin = (t + 1 < nstep) ? (t + 1) : nstep;  // entries of this episode held
    const int j0 = t - inwin + 1;                          // oldest held entry

    // Transitions: entry j = j0 + i for i < cnt. Entry t is this step's; entries j < t come
    // from the window (slot j % nstep, never the slot t % nstep written below, which holds
    // entry t - nstep < j0).
    for (int i = lane; i < cnt; i += lanes) {
        const int g = off + i;
        if (g < total - capacity) continue;  // overwritten within this same flush
        // base < capacity and g < total: one subtraction wraps the slot unless the flush
        // overran the ring (integer division is dozens of instructions on this serial path)
        int slot = base + g;
        if (slot >= capacity) slot = (total > capacity) ? slot % capacity : slot - capacity;
        const int j = j0 + i;
        const int js = j % nstep;
        // all loads first, then the stores (they would serialize if interleaved)
        PipecTransition x;
#pragma unroll
        for (int c = 0; c < PIPEC_OBS; ++c) {
            x.obs[c] = (j == t) ? o_now[c] : wo[js * PIPEC_OBS + c];
            x.next[c] = nx[c];
        }
        x.act = (j == t) ? a_now : wa[js];
        float R = 0.0f, gp = 1.0f;
        for (int k = j, ks = js; k <= t; ++k, ks = (ks + 1 == nstep) ? 0 : ks + 1) {
            const float rk = (k == t) ? r_now : wr[ks];
            R = fmaf(gp, rk, R);
            gp = gp * gamma;
        }
        x.ret = R;
        x.disc = (done == PIPEC_DONE_TERMINATED) ? 0.0f : gp;
        pipec_store_transition(x, rb_obs, rb_act, rb_ret, rb_next, rb_disc, slot);
        leaves[slot] = leaf;
    }
    // Window push of this step's entry.
    if (lane == 0) {
        const int ws = t % nstep;
#pragma unroll
        for (int c = 0; c < PIPEC_OBS; ++c) win_obs[ws * PIPEC_OBS + c] = o_now[c];
        win_act[ws] = a_now;
        win_rew[ws] = r_now;
    }
}

// replay_flush_env for the push kernels: this step's entry and the window from global memory.
__device__ __forceinline__ void replay_flush_env_global(
    int e, int lane, int lanes, int t, int done, int off, int base, int total, float leaf,
    const float* obs, const int* action, const float* reward, const float* next_obs,
    float* win_obs, int* win_act, float* win_rew, float* rb_obs, int* rb_act, float* rb_ret,
    float* rb_next, float* rb_disc, float* leaves, int nstep, int capacity, float gamma) {
    float o[PIPEC_OBS], nx[PIPEC_OBS];
#pragma unroll
    for (int c = 0; c < PIPEC_OBS; ++c) {
        o[c] = obs[e * PIPEC_OBS + c];
        nx[c] = next_obs[e * PIPEC_OBS + c];
    }
    float* wo = win_obs + (long long)e * nstep * PIPEC_OBS;
    int* wa = win_act + (long long)e * nstep;
    float* wr = win_rew + (long long)e * nstep;
    replay_flush_env(lane, lanes, t, done, off, base, total, leaf, o, action[e], reward[e], nx, wo,
                     wa, wr, wo, wa, wr, rb_obs, rb_act, rb_ret, rb_next, rb_disc, leaves, nstep,
                     capacity, gamma);
}
