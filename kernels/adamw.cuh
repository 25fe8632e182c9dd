// kernels/adamw.cuh: the body of adamw_step (kernels/optim.cu), shared with the bf16 mode's
// c51_adamw_step_bf16 (kernels/c51.cu), which also writes bf16 copies of the new parameters.
//
// The copies are a policy the body calls with the values it holds in registers, so both entry
// points run the same AdamW arithmetic and the plain one needs no bf16 header: optim.cu
// compiles with plain NVRTC (no toolkit headers), as every kernel of rl_step.pipe does. A
// policy provides aligned() (its outputs allow the vector path's stores of four elements),
// four(i, p4, t4) (parameters and target parameters i .. i + 3) and one(i, p, t).
#pragma once

#include "common.cuh"

// One parameter's AdamW step and target update: the same arithmetic for the vector and the
// scalar path, so the result does not depend on which one a parameter takes.
__device__ __forceinline__ void pipec_adamw_one(float g, float& m, float& v, float& p, float& target,
                                                float b1f, float b2f, float bc1, float bc2,
                                                float lr, float eps, float wd, float tau) {
    const float mi = b1f * m + (1.0f - b1f) * g;
    const float vi = b2f * v + (1.0f - b2f) * (g * g);
    const float mhat = mi / bc1;
    const float vhat = vi / bc2;
    const float pn = p - lr * (wd * p + mhat / (sqrtf(vhat) + eps));
    m = mi;
    v = vi;
    p = pn;
    target = tau * pn + (1.0f - tau) * target;
}

// adamw_step's copy policy: no copies.
struct PipecNoCopies {
    __device__ bool aligned() const { return true; }
    __device__ void four(long long, float4, float4) const {}
    __device__ void one(long long, float, float) const {}
};

// The body of adamw_step; its doc comment (kernels/optim.cu) is the contract. `copies`
// receives every new (parameter, target parameter) pair once, after AdamW computed it.
template <class Copies>
__device__ __forceinline__ void pipec_adamw_step(const int* learn_on, const float* grad,
                                                 const float* gnorm_part, const int* adam_t,
                                                 const float* sched, float* params, float* m,
                                                 float* v, float* target, float* opt, int P,
                                                 int nparts, float max_norm, double b1, double b2,
                                                 float eps, float wd, float tau, int updates,
                                                 int update, const Copies& copies) {
    __shared__ float s_scale, s_bc[2];
    const long long first = 4LL * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
    const bool aligned = ((reinterpret_cast<unsigned long long>(grad) | reinterpret_cast<unsigned long long>(params) |
                           reinterpret_cast<unsigned long long>(m) | reinterpret_cast<unsigned long long>(v) |
                           reinterpret_cast<unsigned long long>(target)) & 15ull) == 0 && copies.aligned();
    const bool whole = aligned && first + 4 <= P;
    // Every load that depends on no other (the learning flag, this thread's parameters) is
    // issued before the learning test, so they cost one round trip and overlap the norm.
    const int on = learn_on[0];
    float4 g4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), m4 = g4, v4 = g4, p4 = g4, t4 = g4;
    if (whole) {
        g4 = *reinterpret_cast<const float4*>(grad + first);
        m4 = *reinterpret_cast<const float4*>(m + first);
        v4 = *reinterpret_cast<const float4*>(v + first);
        p4 = *reinterpret_cast<const float4*>(params + first);
        t4 = *reinterpret_cast<const float4*>(target + first);
    }
    const float lr = sched[PIPEC_SCHED_LR];
    const int t = adam_t[0] - updates + update + 1;
    // the first warp's partial sums of squares too (lane l: parts l, l + 32, l + 64, l + 96)
    float part[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int k = (int)threadIdx.x + 32 * u;
        part[u] = (threadIdx.x < 32 && k < nparts) ? gnorm_part[k] : 0.0f;
    }
    if (on == 0) return;  // uniform: learning off, nothing written
    // The second warp computes the bias corrections (double arithmetic, log2(t) dependent
    // multiplies) while the first sums the norm; in a block of one warp the first does both.
    if (threadIdx.x == ((blockDim.x > 32) ? 32u : 0u)) {
        s_bc[0] = (float)(1.0 - pipec_powi(b1, t));
        s_bc[1] = (float)(1.0 - pipec_powi(b2, t));
    }
    if (threadIdx.x < 32) {
        const unsigned int lane = threadIdx.x;
        float acc = 0.0f;
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if ((int)lane + 32 * u < nparts) acc += part[u];
        for (int k = (int)lane + 128; k < nparts; k += 32) acc += gnorm_part[k];
#pragma unroll
        for (unsigned int h = 16; h > 0; h >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, h);
        if (lane == 0) {
            const float norm = sqrtf(acc);
            const float scale = fminf(1.0f, max_norm / (norm + 1e-6f));
            s_scale = scale;
            if (blockIdx.x == 0) {
                opt[PIPEC_OPT_SCALE] = scale;
                opt[PIPEC_OPT_NORM] = norm;
            }
        }
    }
    __syncthreads();
    const float bc1 = s_bc[0], bc2 = s_bc[1];
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        opt[PIPEC_OPT_BC1] = bc1;
        opt[PIPEC_OPT_BC2] = bc2;
    }
    if (first >= P) return;
    const float b1f = (float)b1, b2f = (float)b2, scale = s_scale;
    if (whole) {
        pipec_adamw_one(g4.x * scale, m4.x, v4.x, p4.x, t4.x, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        pipec_adamw_one(g4.y * scale, m4.y, v4.y, p4.y, t4.y, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        pipec_adamw_one(g4.z * scale, m4.z, v4.z, p4.z, t4.z, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        pipec_adamw_one(g4.w * scale, m4.w, v4.w, p4.w, t4.w, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        *reinterpret_cast<float4*>(m + first) = m4;
        *reinterpret_cast<float4*>(v + first) = v4;
        *reinterpret_cast<float4*>(params + first) = p4;
        *reinterpret_cast<float4*>(target + first) = t4;
        copies.four(first, p4, t4);
        return;
    }
    for (long long i = first; i < first + 4 && i < P; ++i) {
        float mi = m[i], vi = v[i], pi = params[i], ti = target[i];
        pipec_adamw_one(grad[i] * scale, mi, vi, pi, ti, b1f, b2f, bc1, bc2, lr, eps, wd, tau);
        m[i] = mi;
        v[i] = vi;
        params[i] = pi;
        target[i] = ti;
        copies.one(i, pi, ti);
    }
}
