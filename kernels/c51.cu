// kernels/c51.cu: the distributional (C51) head of pipelines/c51_step.pipe (docs/c51.md).
//
// The network's layers are GEMM nodes of the pipeline (cuBLASLt); these kernels do what lies
// between them: the observation, acting from the expected Q of the online logits (fused with
// the CartPole step of kernels/cartpole.cuh, as rl_step's mlp_act_env), the categorical
// projection of the double-DQN target fused with the softmax cross-entropy and its gradient
// w.r.t. the logits, the first stage of the global gradient norm, and the bf16 mode's
// conversions, among them AdamW (kernels/adamw.cuh, adamw_step's body) writing the bf16
// copies of the parameters. The replay, sum tree, AdamW (with the target soft update),
// controllers and diagnostics are the kernels rl_step.pipe uses, unchanged.
//
// Parameter layout (float32, H = hidden width, O = actions * atoms, OP = O rounded up to a
// multiple of 4 so that every GEMM row is 16-byte aligned; rows O .. OP-1 of W3 and b3 are
// zero and stay zero): W1[H][4] at 0, b1[H] at 4H, W2[H][H] at 5H, b2[H] at 5H+H*H,
// W3[OP][H] at 6H+H*H, b3[OP] at 6H+H*H+OP*H; total H*H + 6H + OP*(H+1).
// Logits rows: OP floats, action a's atoms at a*atoms .. a*atoms+atoms-1, then padding.
// Atom i is at z_i = vmin + i * (vmax - vmin) / (atoms - 1).
//
// Every reduction has a fixed order: a warp holds one env or sample, lane l the atoms l and
// l + 32; sums and maxima over atoms combine by the xor butterfly (h = 16 .. 1), which gives
// every lane the same bits (IEEE addition is commutative). No atomics; no inter-block
// communication.
#include <cuda_bf16.h>

#include "adamw.cuh"
#include "cartpole.cuh"

#define C51_MAX_ATOMS 64  // two atoms per lane of a warp

/// Initialises the C51 network as PyTorch's nn.Linear default: every weight and bias of a
/// layer uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in 4, H, H), from the init stream
/// exactly as mlp_init_params: element p uses Philox(seed, INIT) at counter (p, 0, 0, 0),
/// word x, u = top 24 bits, value = bound * (2u - 1). The padding rows of the output layer
/// (W3 rows and b3 entries o >= outs) are 0.
/// Reads: nothing. Writes: params[H*H + 6H + outs_pad*(H+1)].
/// Launch: 1-D, at least that many threads in total (e.g. <<<ceil_div(P, 256), 256>>>).
/// pipec: extent params = H * H + 6 * H + outs_pad * (H + 1)
/// pipec: out params
extern "C" __global__ void c51_init_params(float* params, int H, int outs, int outs_pad,
                                           unsigned int seed) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const int off_w3 = 6 * H + H * H;
    const int off_b3 = off_w3 + outs_pad * H;
    if (p >= off_b3 + outs_pad) return;
    const bool padding = (p >= off_w3 && p < off_b3) ? (p - off_w3) / H >= outs
                                                     : (p >= off_b3 && p - off_b3 >= outs);
    const int fan_in = (p < 5 * H) ? PIPEC_OBS : H;
    const float bound = 1.0f / sqrtf((float)fan_in);
    const pipec_u4 r = pipec_philox((unsigned int)p, 0u, 0u, 0u, seed, PIPEC_STREAM_INIT);
    params[p] = padding ? 0.0f : bound * (2.0f * pipec_u01f(r.x) - 1.0f);
}

/// The observation acted on: obs = float32(state), the input of the acting GEMMs.
/// Reads: state[n_envs*4] (f64). Writes: obs[n_envs*4].
/// Launch: 1-D, at least n_envs*4 threads in total.
/// pipec: extent state = n_envs * 4
/// pipec: extent obs = n_envs * 4
/// pipec: out obs
extern "C" __global__ void c51_observe(const double* state, float* obs, int n_envs) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (i < n_envs * PIPEC_OBS) obs[i] = (float)state[i];
}

// Softmax statistics of one action's atoms held by a warp (lane l: atoms l, l + 32):
// the maximum logit and the sum of exp(logit - max), identical in every lane.
struct C51Softmax {
    float max, sum;
};

__device__ __forceinline__ float c51_warp_sum(float v) {
#pragma unroll
    for (int h = 16; h > 0; h >>= 1) v += __shfl_xor_sync(0xffffffffu, v, h);
    return v;
}

__device__ __forceinline__ float c51_warp_max(float v) {
#pragma unroll
    for (int h = 16; h > 0; h >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, h));
    return v;
}

// Loads the lane's two logits of one action (-inf beyond the atoms) and their softmax stats.
__device__ __forceinline__ C51Softmax c51_softmax(const float* row, int atoms, int lane,
                                                  float* l0, float* l1) {
    const float ninf = -pipec_inf();
    *l0 = (lane < atoms) ? row[lane] : ninf;
    *l1 = (lane + 32 < atoms) ? row[lane + 32] : ninf;
    C51Softmax s;
    s.max = c51_warp_max(fmaxf(*l0, *l1));
    const float e0 = (lane < atoms) ? expf(*l0 - s.max) : 0.0f;
    const float e1 = (lane + 32 < atoms) ? expf(*l1 - s.max) : 0.0f;
    s.sum = c51_warp_sum(e0 + e1);
    return s;
}

// Expected value sum_i p_i z_i of one action's categorical distribution.
__device__ __forceinline__ float c51_expected(const float* row, int atoms, int lane, float vmin,
                                              float dz) {
    float l0, l1;
    const C51Softmax s = c51_softmax(row, atoms, lane, &l0, &l1);
    const float z0 = vmin + (float)lane * dz;
    const float z1 = vmin + (float)(lane + 32) * dz;
    const float t0 = (lane < atoms) ? expf(l0 - s.max) * z0 : 0.0f;
    const float t1 = (lane + 32 < atoms) ? expf(l1 - s.max) * z1 : 0.0f;
    return c51_warp_sum(t0 + t1) / s.sum;
}

// Greedy action of a logits row under expected Q (ties to action 0), in every lane.
__device__ __forceinline__ int c51_greedy(const float* row, int atoms, int lane, float vmin,
                                          float dz) {
    const float q0 = c51_expected(row, atoms, lane, vmin, dz);
    const float q1 = c51_expected(row + atoms, atoms, lane, vmin, dz);
    return (q1 > q0) ? 1 : 0;
}

/// Acting and the environment step (one node): for every env, Q(a) = sum_i
/// softmax(logits[e][a])_i z_i; with probability epsilon a uniformly random action, else
/// argmax Q (ties to action 0); then lane 0 steps the env with that action (cp_step_env,
/// kernels/cartpole.cuh, as mlp_act_env). As mlp_act_env: this is step s = *step + 1,
/// epsilon = pipec_epsilon(s, ...), Philox(seed, ACT) at counter (s, env, 0, 0): word x gives
/// the coin (explore when u24(x) < epsilon), word y the random action (y >> 31); a reset
/// draws from Philox(seed, RESET) at (s, env, half, 0).
/// Reads: logits[n_envs*ld] (the online network on obs, which c51_observe took from state),
///   step[1] (the number of steps before this one).
/// Updates: state[n_envs*4] (f64), ep_steps[n_envs], ep_return[n_envs] (as mlp_act_env).
/// Writes: action[n_envs], next_obs[n_envs*4], reward[n_envs], step_info[n_envs*2],
///   fin_return[n_envs] (as mlp_act_env).
/// Launch: block (32, epb): one warp per env; grid ceil_div(n_envs, epb); atoms <= 64,
/// 2 * atoms <= ld.
/// pipec: extent logits = n_envs * ld
/// pipec: extent state = n_envs * 4
/// pipec: extent ep_steps = n_envs
/// pipec: extent ep_return = n_envs
/// pipec: extent step = 1
/// pipec: extent action = n_envs
/// pipec: extent next_obs = n_envs * 4
/// pipec: extent reward = n_envs
/// pipec: extent step_info = n_envs * 2
/// pipec: extent fin_return = n_envs
/// pipec: out action
/// pipec: out next_obs
/// pipec: out reward
/// pipec: out step_info
/// pipec: out fin_return
extern "C" __global__ void c51_act_env(const float* logits, double* state, int* ep_steps,
                                       float* ep_return, const int* step, int* action,
                                       float* next_obs, float* reward, int* step_info,
                                       float* fin_return, int n_envs, int atoms, int ld,
                                       unsigned int seed, float vmin, float vmax,
                                       double eps_start, double eps_end, int eps_decay_steps,
                                       int max_steps) {
    const int e = blockIdx.x * blockDim.y + threadIdx.y;
    const int lane = threadIdx.x;
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it

    if (e >= n_envs) return;  // uniform over the warp
    const int s_now = step[0] + 1;
    const float dz = (vmax - vmin) / (float)(atoms - 1);
    const int greedy = c51_greedy(logits + (size_t)e * ld, atoms, lane, vmin, dz);
    if (lane != 0) return;
    const float eps = pipec_epsilon(s_now, eps_start, eps_end, eps_decay_steps);
    const pipec_u4 r = pipec_philox((unsigned int)s_now, (unsigned int)e, 0u, 0u, seed,
                                    PIPEC_STREAM_ACT);
    const int a = (pipec_u01f(r.x) < eps) ? (int)(r.y >> 31) : greedy;
    action[e] = a;
    cp_step_env(e, a, (unsigned int)s_now, state, ep_steps, ep_return, next_obs, reward,
                step_info, fin_return, seed, max_steps);
}

/// Categorical double-DQN target, cross-entropy and its gradient, per sample i:
///   a* = argmax_a E[online(next_i)(a)] (ties to 0); p = softmax(target(next_i)(a*));
///   Tz_j = clamp(R_i + disc_i * z_j, vmin, vmax), b_j = (Tz_j - vmin) / dz;
///   m_k = sum_j p_j * max(0, 1 - |b_j - k|)   (the projection onto the support: b_j's mass
///   split between floor(b_j) and ceil(b_j) in proportion to the distance, all of it on k
///   when b_j == k), summed over j in order;
///   q = softmax(online(obs_i)(act_i)); CE_i = -sum_k m_k log q_k (log q_k = l_k - max - log sum);
///   td[i] = CE_i (the priority's error term), lossi[i] = w_i * CE_i;
///   dlogits[i][act_i*atoms + k] = w_i * (q_k - m_k) / B (the gradient of mean_i w_i CE_i,
///   as sum_k m_k = 1), every other column of the row (the other action, the padding) 0.
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], online_obs[B*ld], online_next[B*ld], target_next[B*ld], b_act[B],
///   b_ret[B], b_disc[B], b_w[B].
/// Writes: dlogits[B*ld], td[B], lossi[B].
/// Launch: block (32, spb): one warp per sample; grid ceil_div(B, spb); atoms <= 64,
/// 2 * atoms <= ld.
/// pipec: extent learn_on = 1
/// pipec: extent online_obs = B * ld
/// pipec: extent online_next = B * ld
/// pipec: extent target_next = B * ld
/// pipec: extent b_act = B
/// pipec: extent b_ret = B
/// pipec: extent b_disc = B
/// pipec: extent b_w = B
/// pipec: extent dlogits = B * ld
/// pipec: extent td = B
/// pipec: extent lossi = B
/// pipec: out dlogits
/// pipec: out td
/// pipec: out lossi
extern "C" __global__ void c51_loss_grad(const int* learn_on, const float* online_obs,
                                         const float* online_next, const float* target_next,
                                         const int* b_act, const float* b_ret,
                                         const float* b_disc, const float* b_w, float* dlogits,
                                         float* td, float* lossi, int B, int atoms, int ld,
                                         float vmin, float vmax) {
    __shared__ float sp[32][C51_MAX_ATOMS];  // target probabilities p_j, per warp
    __shared__ float sb[32][C51_MAX_ATOMS];  // projected positions b_j, per warp
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    const int lane = threadIdx.x;
    const int w = threadIdx.y;
    const int i = blockIdx.x * blockDim.y + w;
    const bool mine = i < B;  // uniform over the warp; every warp reaches the barrier
    const int on = learn_on[0];
    const int a = mine ? b_act[i] : 0;
    const float ret = mine ? b_ret[i] : 0.0f;
    const float disc = mine ? b_disc[i] : 0.0f;
    const float wi = mine ? b_w[i] : 0.0f;
    if (on == 0) return;  // uniform: learning off, nothing written
    const float dz = (vmax - vmin) / (float)(atoms - 1);
    const size_t row = (size_t)(mine ? i : 0) * ld;

    if (mine) {
        const int astar = c51_greedy(online_next + row, atoms, lane, vmin, dz);
        float l0, l1;
        const C51Softmax s = c51_softmax(target_next + row + astar * atoms, atoms, lane, &l0, &l1);
        for (int k = 0; k < 2; ++k) {
            const int j = lane + 32 * k;
            if (j < atoms) {
                const float tz = fminf(fmaxf(ret + disc * (vmin + (float)j * dz), vmin), vmax);
                sp[w][j] = expf((k == 0 ? l0 : l1) - s.max) / s.sum;
                sb[w][j] = (tz - vmin) / dz;
            }
        }
    }
    __syncthreads();
    if (!mine) return;

    float l0, l1;
    const float* qrow = online_obs + row + a * atoms;
    const C51Softmax s = c51_softmax(qrow, atoms, lane, &l0, &l1);
    const float log_sum = logf(s.sum);
    float m[2], q[2], ce = 0.0f;
    for (int k = 0; k < 2; ++k) {
        const int kk = lane + 32 * k;
        m[k] = 0.0f;
        q[k] = 0.0f;
        if (kk < atoms) {
            for (int j = 0; j < atoms; ++j)
                m[k] = fmaf(sp[w][j], fmaxf(0.0f, 1.0f - fabsf(sb[w][j] - (float)kk)), m[k]);
            const float lk = (k == 0 ? l0 : l1) - s.max;
            q[k] = expf(lk) / s.sum;
            ce -= m[k] * (lk - log_sum);
        }
    }
    ce = c51_warp_sum(ce);
    const float g = wi / (float)B;
    for (int k = 0; k < 2; ++k)
        if (lane + 32 * k < atoms) dlogits[row + a * atoms + lane + 32 * k] = g * (q[k] - m[k]);
    for (int c = lane; c < ld; c += 32)
        if (c < a * atoms || c >= (a + 1) * atoms) dlogits[row + c] = 0.0f;
    if (lane == 0) {
        td[i] = ce;
        lossi[i] = wi * ce;
    }
}

// acc + x^2 + y^2 + z^2 + w^2 of a float4, added in that order (c51_grad_sumsq).
__device__ __forceinline__ float c51_sumsq4(float4 g, float acc) {
    acc = fmaf(g.x, g.x, acc);
    acc = fmaf(g.y, g.y, acc);
    acc = fmaf(g.z, g.z, acc);
    return fmaf(g.w, g.w, acc);
}

/// First stage of the global-norm clip (docs/dqn.md 6.4) over one region of the gradient the
/// GEMM nodes wrote (a slice of `grad`: the pipeline launches one per region, so that a region
/// written early is summed while later GEMMs still run; docs/c51.md). grad may start anywhere
/// a float can: the slice is split into a head of h = the floats before its first 16-byte
/// boundary (0 .. 3, at most P), a body of n4 = (P - h) / 4 float4s, and a tail of
/// (P - h) % 4 floats. Thread t of block b (T = blockDim.x, S = gridDim.x * T) adds, in this
/// order, the squares of: grad[t] if b == 0 and t < h; the four elements (x, y, z, w in
/// turn) of body4[k] for k = b*T + t + n*S, n = 0, 1, ... (body4 = grad + h as float4);
/// grad[h + 4 n4 + t] if b == 0 and t < the tail's length. The body loop loads four float4s
/// (k, k + S, k + 2S, k + 3S) before it adds any, in that same order, so the loads overlap
/// and the sum is the one of a loop of one load at a time. The block combines its threads
/// with pipec_block_sum and gnorm_part[b] = the block's sum. adamw_step sums every partial
/// in each of its blocks, so the pipeline keeps the total of the grids to a few hundred.
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], grad[P]. Writes: gnorm_part[gridDim.x].
/// Launch: 1-D, any grid, blocks of at least 4 and at most 1024 threads; a grid of
/// ceil_div(P, 16 T) blocks gives every thread one round of four loads (c51_step:
/// <<<min(264, ceil_div(P, 16 * 512)), 512>>>, at most 2 blocks an SM of an H200).
/// pipec: extent learn_on = 1
/// pipec: extent grad = P
/// pipec: extent gnorm_part = gridDim.x
/// pipec: out gnorm_part
extern "C" __global__ void c51_grad_sumsq(const int* learn_on, const float* grad,
                                          float* gnorm_part, int P) {
    __shared__ float red[1024];
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    const int on = learn_on[0];
    const unsigned int t = threadIdx.x;
    const unsigned long long past_boundary = reinterpret_cast<unsigned long long>(grad) & 15ull;
    const size_t to_boundary = (16 - past_boundary) % 16 / sizeof(float);
    const size_t head = to_boundary < (size_t)P ? to_boundary : (size_t)P;
    const size_t n4 = ((size_t)P - head) >> 2;
    const size_t tail = ((size_t)P - head) & 3;
    const float4* body4 = reinterpret_cast<const float4*>(grad + head);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float acc = 0.0f;
    if (blockIdx.x == 0 && t < head) acc = fmaf(grad[t], grad[t], acc);
    size_t k = (size_t)blockIdx.x * blockDim.x + t;
    for (; k + 3 * stride < n4; k += 4 * stride) {
        const float4 g0 = body4[k];
        const float4 g1 = body4[k + stride];
        const float4 g2 = body4[k + 2 * stride];
        const float4 g3 = body4[k + 3 * stride];
        acc = c51_sumsq4(g0, acc);
        acc = c51_sumsq4(g1, acc);
        acc = c51_sumsq4(g2, acc);
        acc = c51_sumsq4(g3, acc);
    }
    for (; k < n4; k += stride) acc = c51_sumsq4(body4[k], acc);
    if (blockIdx.x == 0 && t < tail) {
        const float g = grad[head + 4 * n4 + t];
        acc = fmaf(g, g, acc);
    }
    if (on == 0) return;  // uniform: learning off, nothing written
    const float sum = pipec_block_sum(acc, red);
    if (t == 0) gnorm_part[blockIdx.x] = sum;
}

/// The bf16 mode's conversion (docs/c51.md, "bf16"): dst[i] = src[i] rounded to the nearest
/// bf16 (ties to even, __float2bfloat16_rn), for the GEMMs' bf16 operands: the parameters and
/// the target parameters at init (c51_adamw_step_bf16 writes them after that), layer 1's
/// output, dL/dlogits and layer 2's gradient.
/// Reads: src[n]. Writes: dst[n].
/// Launch: 1-D, at least n threads in total (e.g. <<<ceil_div(n, 256), 256>>>).
/// pipec: extent src = n
/// pipec: extent dst = n
/// pipec: out dst
extern "C" __global__ void c51_to_bf16(const float* src, __nv_bfloat16* dst, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (i < n) dst[i] = __float2bfloat16_rn(src[i]);
}

// Four floats rounded as c51_to_bf16 rounds them, packed for one 8-byte store (element 0 in
// the low half of .x: the order in memory).
__device__ __forceinline__ uint2 c51_bf16x4(float4 x) {
    const unsigned int a = __bfloat16_as_ushort(__float2bfloat16_rn(x.x));
    const unsigned int b = __bfloat16_as_ushort(__float2bfloat16_rn(x.y));
    const unsigned int c = __bfloat16_as_ushort(__float2bfloat16_rn(x.z));
    const unsigned int d = __bfloat16_as_ushort(__float2bfloat16_rn(x.w));
    return make_uint2(a | (b << 16), c | (d << 16));
}

// c51_adamw_step_bf16's copy policy: the new parameters and target parameters rounded to
// bf16 as c51_to_bf16 rounds them.
struct C51Bf16Copies {
    __nv_bfloat16* params;
    __nv_bfloat16* target;
    // The vector path stores four bf16 (8 bytes) at element 4i of each copy.
    __device__ bool aligned() const {
        return ((reinterpret_cast<unsigned long long>(params) |
                 reinterpret_cast<unsigned long long>(target)) & 7ull) == 0;
    }
    __device__ void four(long long i, float4 p, float4 t) const {
        *reinterpret_cast<uint2*>(params + i) = c51_bf16x4(p);
        *reinterpret_cast<uint2*>(target + i) = c51_bf16x4(t);
    }
    __device__ void one(long long i, float p, float t) const {
        params[i] = __float2bfloat16_rn(p);
        target[i] = __float2bfloat16_rn(t);
    }
};

/// The bf16 mode's AdamW (docs/c51.md, "bf16"): adamw_step (kernels/optim.cu; the same body,
/// kernels/adamw.cuh, so params, m, v, target and opt get the same bits), and in the same pass
/// params_bf16[i] and target_bf16[i] = the new params[i] and target[i] rounded to the nearest
/// bf16 (ties to even, __float2bfloat16_rn: c51_to_bf16's values) from the registers that hold
/// them, instead of a conversion pass over each after every AdamW. Does nothing when
/// *learn_on == 0: the copies made at init (or by the last learning update) are still right
/// then, because params and target only change in AdamW. The vector path also needs both
/// copies 8-byte aligned.
/// Reads: learn_on[1], grad[P], gnorm_part[nparts], adam_t[1], sched[3].
/// Updates: params[P], m[P], v[P], target[P]. Writes: opt[4], params_bf16[P], target_bf16[P].
/// Launch: as adamw_step (e.g. <<<ceil_div(P, 4 * 256), 256>>>).
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
/// pipec: extent params_bf16 = P
/// pipec: extent target_bf16 = P
/// pipec: out opt
/// pipec: out params_bf16
/// pipec: out target_bf16
extern "C" __global__ void c51_adamw_step_bf16(const int* learn_on, const float* grad,
                                               const float* gnorm_part, const int* adam_t,
                                               const float* sched, float* params, float* m, float* v,
                                               float* target, float* opt, __nv_bfloat16* params_bf16,
                                               __nv_bfloat16* target_bf16, int P, int nparts,
                                               float max_norm, double b1, double b2, float eps,
                                               float wd, float tau, int updates, int update) {
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    pipec_adamw_step(learn_on, grad, gnorm_part, adam_t, sched, params, m, v, target, opt, P, nparts,
                     max_norm, b1, b2, eps, wd, tau, updates, update,
                     C51Bf16Copies{params_bf16, target_bf16});
}
