// kernels/common.cuh: helpers shared by every kernel of the flagship pipeline.
//
// No standard-library headers: this file must compile with plain NVRTC (no toolkit headers),
// so it only uses int, unsigned int, unsigned long long, float, double and CUDA built-ins.
//
// Contents:
//   - Philox4x32-10, the counter-based generator every random stream derives from, keyed by
//     (seed, stream id) and indexed by four 32-bit counter words;
//   - conversions of random words to uniform floats and doubles;
//   - deterministic block-wide reductions and scans (fixed combination order for a given
//     blockDim where the order changes the bits, no atomics, ordering by __syncthreads and
//     warp shuffles only);
//   - the Q network's parameter layout (docs/dqn.md), one replay transition's load and store,
//     small dense-layer helpers and the two-phase staging of global memory into shared.
#pragma once

#include "pdl.cuh"  // pipec_wait_for_producer, pipec_let_dependents_start

// ---------------------------------------------------------------------------------------
// Random streams. key = (seed, stream id); counter words are documented per stream.
// ---------------------------------------------------------------------------------------
#define PIPEC_STREAM_INIT 0x494E4954u    // "INIT": parameter init, counter (element, 0, 0, 0)
#define PIPEC_STREAM_ACT 0x41435421u     // "ACT!": epsilon-greedy, counter (step, env, 0, 0)
#define PIPEC_STREAM_RESET 0x52534554u   // "RSET": env reset, counter (step, env, half, 0)
#define PIPEC_STREAM_SAMPLE 0x53414D50u  // "SAMP": replay sampling, counter (step, i, update, 0)

struct pipec_u4 {
    unsigned int x, y, z, w;
};

// Philox4x32 with 10 rounds (Salmon et al., SC'11; Random123's philox4x32_10).
__device__ __forceinline__ pipec_u4 pipec_philox(unsigned int c0, unsigned int c1,
                                                 unsigned int c2, unsigned int c3,
                                                 unsigned int k0, unsigned int k1) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        const unsigned int lo0 = 0xD2511F53u * c0;
        const unsigned int hi0 = __umulhi(0xD2511F53u, c0);
        const unsigned int lo1 = 0xCD9E8D57u * c2;
        const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2);
        const unsigned int n0 = hi1 ^ c1 ^ k0;
        const unsigned int n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    pipec_u4 out;
    out.x = c0;
    out.y = c1;
    out.z = c2;
    out.w = c3;
    return out;
}

// Uniform float in [0, 1) from the top 24 bits of a word (exactly representable).
__device__ __forceinline__ float pipec_u01f(unsigned int r) {
    return (float)(r >> 8) * 5.9604644775390625e-08f;  // 2^-24
}

// Uniform double in [0, 1) with 53 random bits, as NumPy's random_standard_uniform:
// ((a >> 5) * 2^26 + (b >> 6)) / 2^53.
__device__ __forceinline__ double pipec_u01d(unsigned int a, unsigned int b) {
    return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * 1.1102230246251565e-16;
}

// ---------------------------------------------------------------------------------------
// Q network parameter layout (docs/dqn.md), H = hidden width, 4 inputs, 2 actions.
// W1[H][4] at 0, b1[H] at 4H, W2[H][H] at 5H, b2[H] at 5H+H*H, W3[2][H] at 6H+H*H,
// b3[2] at 8H+H*H; total 8H+H*H+2. Wk[o][i] multiplies input i into output o.
// ---------------------------------------------------------------------------------------
#define PIPEC_OBS 4
#define PIPEC_ACTIONS 2

__device__ __forceinline__ int pipec_off_w1(int) { return 0; }
__device__ __forceinline__ int pipec_off_b1(int H) { return 4 * H; }
__device__ __forceinline__ int pipec_off_w2(int H) { return 5 * H; }
__device__ __forceinline__ int pipec_off_b2(int H) { return 5 * H + H * H; }
__device__ __forceinline__ int pipec_off_w3(int H) { return 6 * H + H * H; }
__device__ __forceinline__ int pipec_off_b3(int H) { return 8 * H + H * H; }
__device__ __forceinline__ int pipec_nparams(int H) { return 8 * H + H * H + 2; }

// sched buffer written by the tick (replay_tick, replay.cu): [epsilon, beta, lr in force this
// step].
#define PIPEC_SCHED_EPS 0
#define PIPEC_SCHED_BETA 1
#define PIPEC_SCHED_LR 2

// opt buffer written by adamw_step (block 0): [clip scale, 1-b1^t, 1-b2^t, grad norm].
#define PIPEC_OPT_SCALE 0
#define PIPEC_OPT_BC1 1
#define PIPEC_OPT_BC2 2
#define PIPEC_OPT_NORM 3

// step_info written by the env step (cp_step_env, cartpole.cuh), per env: [t, done code],
// t = episode step before this step's increment; done code 0 = running, 1 = terminated,
// 2 = truncated (not terminated).
#define PIPEC_DONE_NONE 0
#define PIPEC_DONE_TERMINATED 1
#define PIPEC_DONE_TRUNCATED 2

// Number of transitions an env flushes this step (docs/dqn.md, n-step push).
__device__ __forceinline__ int pipec_flush_count(int t, int done, int nstep) {
    if (done != PIPEC_DONE_NONE) return (t + 1 < nstep) ? (t + 1) : nstep;
    return (t + 1 >= nstep) ? 1 : 0;
}

// One replay transition (docs/dqn.md 5): obs, action, n-step return, next obs, bootstrap
// discount; stored column-wise, element i of rb_obs[*][4], rb_act[*], rb_ret[*],
// rb_next[*][4], rb_disc[*] (the ring, and the learner's gathered batch b_*, alike).
struct PipecTransition {
    float obs[PIPEC_OBS], next[PIPEC_OBS];
    int act;
    float ret, disc;
};
__device__ __forceinline__ PipecTransition pipec_load_transition(
    const float* obs, const int* act, const float* ret, const float* next, const float* disc,
    int i) {
    PipecTransition x;
#pragma unroll
    for (int c = 0; c < PIPEC_OBS; ++c) {
        x.obs[c] = obs[i * PIPEC_OBS + c];
        x.next[c] = next[i * PIPEC_OBS + c];
    }
    x.act = act[i];
    x.ret = ret[i];
    x.disc = disc[i];
    return x;
}
__device__ __forceinline__ void pipec_store_transition(const PipecTransition& x, float* obs,
                                                       int* act, float* ret, float* next,
                                                       float* disc, int i) {
#pragma unroll
    for (int c = 0; c < PIPEC_OBS; ++c) {
        obs[i * PIPEC_OBS + c] = x.obs[c];
        next[i * PIPEC_OBS + c] = x.next[c];
    }
    act[i] = x.act;
    ret[i] = x.ret;
    disc[i] = x.disc;
}

// Exploration rate of step s (docs/dqn.md 1): max(end, start - (start - end) * s / decay),
// in double from double constants as Python computes it, rounded to float once. The acting
// kernels and the tick (which records it in sched) all call this, so they agree bit for bit.
__device__ __forceinline__ float pipec_epsilon(int s, double start, double end, int decay) {
    double eps = start - (start - end) * (double)s / (double)decay;
    if (eps < end) eps = end;
    return (float)eps;
}

// ---------------------------------------------------------------------------------------
// Deterministic block-wide primitives. Every thread of the block must call them (they
// contain __syncthreads). `s` is shared scratch with at least blockDim.x*blockDim.y*
// blockDim.z elements. The combination order depends only on the block size, so a fixed
// launch shape gives bit-identical results on every run.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned int pipec_tid() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ unsigned int pipec_nthreads() {
    return blockDim.x * blockDim.y * blockDim.z;
}

// The contiguous run [*begin, *end) of n items that thread t of a block owns (ceil(n / nt) a
// thread, in thread order): scans over the block then see the items in order.
__device__ __forceinline__ void pipec_thread_run(int n, int* begin, int* end) {
    const int per = (n + (int)pipec_nthreads() - 1) / (int)pipec_nthreads();
    *begin = (int)pipec_tid() * per;
    *end = (*begin + per < n) ? (*begin + per) : n;
}

// Tree reduction over the block: pairs (t, t + h) for h = P/2, P/4, ..., 1 with P the next
// power of two of the thread count. Returns the result to every thread.
template <class T, class Combine>
__device__ __forceinline__ T pipec_block_reduce(T v, T* s, Combine combine) {
    const unsigned int t = pipec_tid();
    const unsigned int n = pipec_nthreads();
    s[t] = v;
    __syncthreads();
    unsigned int p = 1;
    while (p < n) p <<= 1;
    for (unsigned int h = p >> 1; h > 0; h >>= 1) {
        if (t < h && t + h < n) s[t] = combine(s[t], s[t + h]);
        __syncthreads();
    }
    const T r = s[0];
    __syncthreads();
    return r;
}

struct PipecAdd {
    template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

__device__ __forceinline__ float pipec_block_sum(float v, float* s) {
    return pipec_block_reduce(v, s, PipecAdd());
}
// The maximum does not depend on the order of the comparisons, so it takes the short way:
// a shuffle tree in each warp, then one over the warps' maxima (one barrier, not log2 n).
__device__ __forceinline__ unsigned int pipec_warp_mask() {
    const unsigned int n = pipec_nthreads();
    const unsigned int first = pipec_tid() & ~31u;  // the warp's first thread
    return (n - first >= 32u) ? 0xffffffffu : ((1u << (n - first)) - 1u);
}
__device__ __forceinline__ float pipec_block_max(float v, float* s) {
    const unsigned int t = pipec_tid();
    const unsigned int n = pipec_nthreads();
    const unsigned int lane = t & 31u;
    const unsigned int lanes = (n - (t & ~31u) >= 32u) ? 32u : n - (t & ~31u);
    const unsigned int mask = pipec_warp_mask();
    for (unsigned int h = 16; h > 0; h >>= 1) {
        const float o = __shfl_down_sync(mask, v, h);
        if (lane + h < lanes) v = fmaxf(v, o);
    }
    if (lane == 0) s[t >> 5] = v;
    __syncthreads();
    float r = s[0];
    for (unsigned int w = 1; w < (n + 31u) / 32u; ++w) r = fmaxf(r, s[w]);
    __syncthreads();
    return r;
}
__device__ __forceinline__ double pipec_block_sum_d(double v, double* s) {
    return pipec_block_reduce(v, s, PipecAdd());
}

// Exclusive prefix sum of one int per thread (thread order): a shuffle scan in each warp, then
// one over the warps' totals. Integer sums are exact, so the result does not depend on the
// order. Writes the block total to *total. s holds one int per warp.
__device__ __forceinline__ int pipec_block_exscan(int v, int* s, int* total) {
    const unsigned int t = pipec_tid();
    const unsigned int n = pipec_nthreads();
    const unsigned int lane = t & 31u;
    const unsigned int warps = (n + 31u) / 32u;
    const unsigned int mask = pipec_warp_mask();
    int incl = v;
    for (unsigned int off = 1; off < 32u; off <<= 1) {
        const int o = __shfl_up_sync(mask, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == 31u || t == n - 1u) s[t >> 5] = incl;
    __syncthreads();
    int before = 0, all = 0;
    for (unsigned int w = 0; w < warps; ++w) {
        const int x = s[w];
        if (w < (t >> 5)) before += x;
        all += x;
    }
    *total = all;
    __syncthreads();
    return before + incl - v;
}

// ---------------------------------------------------------------------------------------
// Dense-layer helpers (fixed summation order: four interleaved partial sums).
// ---------------------------------------------------------------------------------------
// sum_k w[k * ws] * x[k], k < K, as four partial sums (term k goes to sum k % 4), combined
// (a0 + a1) + (a2 + a3). When ws == 1, K % 4 == 0 and both pointers are 16-byte aligned the
// loads are 16 bytes wide; the order of the arithmetic, and so the result, is the same. The
// loops are not unrolled: every kernel inlines several dots, and measured on an H200 the
// smaller code (rl_step's learner: 182 KB of SASS unrolled, 94 KB not; ncu had shown its
// warps waiting for instructions) made the learner 2.5 us and acting 0.6 us faster, while
// unrolling by two gained less.
__device__ __forceinline__ float pipec_dot(const float* w, int ws, const float* x, int K) {
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    if (ws == 1 && (K & 3) == 0 &&
        ((reinterpret_cast<unsigned long long>(w) | reinterpret_cast<unsigned long long>(x)) &
         15ull) == 0) {
        const float4* w4 = reinterpret_cast<const float4*>(w);
        const float4* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll 1
        for (int k4 = 0; k4 < (K >> 2); ++k4) {
            const float4 a = w4[k4];
            const float4 b = x4[k4];
            a0 = fmaf(a.x, b.x, a0);
            a1 = fmaf(a.y, b.y, a1);
            a2 = fmaf(a.z, b.z, a2);
            a3 = fmaf(a.w, b.w, a3);
        }
        return (a0 + a1) + (a2 + a3);
    }
    int k = 0;
#pragma unroll 1
    for (; k + 4 <= K; k += 4) {
        a0 = fmaf(w[(k + 0) * ws], x[k + 0], a0);
        a1 = fmaf(w[(k + 1) * ws], x[k + 1], a1);
        a2 = fmaf(w[(k + 2) * ws], x[k + 2], a2);
        a3 = fmaf(w[(k + 3) * ws], x[k + 3], a3);
    }
    for (; k < K; ++k) a0 = fmaf(w[k * ws], x[k], a0);
    return (a0 + a1) + (a2 + a3);
}

// out[s*Nout + j] = act(bias[j] + sum_k W[j*ldw + k] * in[s*K + k]) for s < ns, j < Nout,
// one (s, j) per thread, strided over the block. relu != 0 applies max(0, .).
__device__ __forceinline__ void pipec_dense(const float* W, int ldw, const float* bias,
                                            const float* in, int K, float* out, int Nout,
                                            int ns, int relu) {
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    for (int w = t; w < ns * Nout; w += nt) {
        const int s = w / Nout;
        const int j = w - s * Nout;
        float v = bias[j] + pipec_dot(W + j * ldw, 1, in + s * K, K);
        if (relu) v = fmaxf(v, 0.0f);
        out[w] = v;
    }
}


// Staging global memory into shared memory in two phases, load() then store(): a kernel
// issues every staging load it needs before the first store, so that all of them cost one L2
// round trip. (A loop of loads then stores per region waits a round trip per region: the
// compiler does not move a load through a generic pointer above the shared-memory stores
// before it.) Each object holds U elements a thread in registers; store() copies any
// elements beyond U per thread itself, a round trip more, in shapes larger than planned for.
template <int U, class T = float>
struct PipecStage {  // n contiguous elements
    T v[U];
    __device__ __forceinline__ void load(const T* src, int n) {
        const int t = (int)pipec_tid();
        const int nt = (int)pipec_nthreads();
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = (t + u * nt < n) ? src[t + u * nt] : T(0);
    }
    __device__ __forceinline__ void store(const T* src, T* dst, int n) const {
        const int t = (int)pipec_tid();
        const int nt = (int)pipec_nthreads();
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (t + u * nt < n) dst[t + u * nt] = v[u];
        for (int i = t + U * nt; i < n; i += nt) dst[i] = src[i];
    }
};

// Row stride of a staged H x H matrix in shared memory: H + 4 when H % 4 == 0 (rows stay
// 16-byte aligned for vector loads; row walks by consecutive threads hit distinct 4-bank groups
// and column walks distinct banks), else H + 1. Allocate H * (H + 4) floats per matrix.
__device__ __forceinline__ int pipec_w2_ld(int H) { return (H & 3) ? H + 1 : H + 4; }

// Advances (row r, column c) of an H-column matrix by dr rows and dc < H columns.
__device__ __forceinline__ void pipec_next_cell(int& r, int& c, int dr, int dc, int H) {
    r += dr;
    c += dc;
    if (c >= H) {
        c -= H;
        ++r;
    }
}

template <int U>
struct PipecSquareStage {  // an H x H row-major matrix, stored with row stride pipec_w2_ld(H)
    PipecStage<U> flat;
    __device__ __forceinline__ void load(const float* W, int H) { flat.load(W, H * H); }
    __device__ __forceinline__ void store(const float* W, float* Ws, int H) const {
        const int t = (int)pipec_tid();
        const int nt = (int)pipec_nthreads();
        const int ld = pipec_w2_ld(H);
        const int dr = nt / H, dc = nt - (nt / H) * H;  // one step of nt elements
        int r = t / H, c = t - (t / H) * H;             // the row and column of element t
        int e = t;
#pragma unroll
        for (int u = 0; u < U; ++u, e += nt) {
            if (e < H * H) Ws[r * ld + c] = flat.v[u];
            pipec_next_cell(r, c, dr, dc, H);
        }
        for (; e < H * H; e += nt) {
            Ws[r * ld + c] = W[e];
            pipec_next_cell(r, c, dr, dc, H);
        }
    }
};

// Copies n floats from global src to shared dst, loads batched 8 per thread before stores.
__device__ __forceinline__ void pipec_copy_to_shared(const float* src, float* dst, int n) {
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    for (int i0 = t; i0 < n; i0 += 8 * nt) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = (i0 + u * nt < n) ? src[i0 + u * nt] : 0.0f;
#pragma unroll
        for (int u = 0; u < 8; ++u)
            if (i0 + u * nt < n) dst[i0 + u * nt] = v[u];
    }
}

// b^n for n >= 0 by binary exponentiation in double (a few multiplies instead of pow()).
__device__ __forceinline__ double pipec_powi(double b, int n) {
    double r = 1.0;
    while (n > 0) {
        if (n & 1) r *= b;
        b *= b;
        n >>= 1;
    }
    return r;
}

// Positive infinity without math headers.
__device__ __forceinline__ float pipec_inf() { return __int_as_float(0x7f800000); }
