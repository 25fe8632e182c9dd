// kernels/mlp.cu: the Q network (4 -> H -> H -> 2, ReLU) of docs/dqn.md.
//
// Parameter layout (float32, see common.cuh): W1[H][4] at 0, b1[H] at 4H, W2[H][H] at 5H,
// b2[H] at 5H+H*H, W3[2][H] at 6H+H*H, b3[2] at 8H+H*H, total P = 8H+H*H+2.
//
// Kernels:
//   mlp_init_params  parameter init with the device generator (PyTorch nn.Linear bounds)
//   mlp_td_backward  gather of the drawn batch, double-DQN targets, TD errors, IS-weighted
//                    Huber loss per sample, dQ, and the backward deltas of both hidden
//                    layers (one fused pass)
//   mlp_grad         weight gradients summed over the batch + per-block partial sums of
//                    squares for the global-norm clip
// The acting kernel, which pushes too, is kernels/mlp_act.cu. Every reduction has a fixed
// order; no atomics; no inter-block communication.
#include "common.cuh"

// Samples per chunk of mlp_grad that take its all-loads-first path (B 256 over 8 chunks).
#define PIPEC_GRAD_CHUNK 32

/// Initialises the Q network parameters as PyTorch's nn.Linear default: every weight and bias
/// of a layer uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in 4, H, H for the three
/// layers), from the init stream: element p uses Philox(seed, INIT) at counter (p, 0, 0, 0),
/// word x, u = top 24 bits, value = bound * (2u - 1).
/// Reads: nothing. Writes: params[8H+H*H+2].
/// Launch: 1-D, at least 8H+H*H+2 threads in total (e.g. <<<ceil_div(P, 256), 256>>>).
/// pipec: extent params = 8 * H + H * H + 2
/// pipec: out params
extern "C" __global__ void mlp_init_params(float* params, int H, unsigned int seed) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const int P = pipec_nparams(H);
    if (p >= P) return;
    const int fan_in = (p < pipec_off_w2(H)) ? PIPEC_OBS : H;
    const float bound = 1.0f / sqrtf((float)fan_in);
    const pipec_u4 r = pipec_philox((unsigned int)p, 0u, 0u, 0u, seed, PIPEC_STREAM_INIT);
    const float u = pipec_u01f(r.x);
    params[p] = bound * (2.0f * u - 1.0f);
}

/// Learner forward, per-sample loss and backward deltas of one update (docs/dqn.md 6.3), on
/// the batch drawn by per_sample or, for the step's first update, by mlp_act_push: each block
/// gathers its spb samples' transitions from the ring (and records them in b_obs .. b_disc
/// for mlp_grad and the tests), then, per sample:
///   a* = argmax_a online(next)(a) (ties to 0), y = R + disc * target(next)(a*),
///   delta = online(obs)(act) - y, loss_i = w_i * huber(delta_i) (threshold 1),
///   dq[i][a] = dL/dQ(obs_i, a) for L = mean_i loss_i (only a = act_i is non-zero),
///   dh2 = (W3^T dq) * [h2 > 0], dh1 = (W2^T dh2) * [h1 > 0].
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], b_idx[B] (leaf = data slot), b_w[B] (importance weights), the ring
///   rb_*[C], params[P], target[P].
/// Writes: b_obs[B*4], b_act[B], b_ret[B], b_next[B*4], b_disc[B] (the gathered batch);
///   h1[B*H], h2[B*H] (online hidden activations on obs, post-ReLU), dh1[B*H], dh2[B*H] (loss
///   gradients w.r.t. the pre-activations), dq[B*2], td[B] (delta), lossi[B] (w_i *
///   huber(delta_i), not divided by B).
/// Launch: grid ceil_div(B, spb) blocks, any block size (ideally spb*H, at most 1024),
/// dynamic shared memory 4 * (2*H*(H+4) + 16*H + 8 + spb*(6*H + 20)) bytes.
/// pipec: extent learn_on = 1
/// pipec: extent b_idx = B
/// pipec: extent b_w = B
/// pipec: extent rb_obs = capacity * 4
/// pipec: extent rb_act = capacity
/// pipec: extent rb_ret = capacity
/// pipec: extent rb_next = capacity * 4
/// pipec: extent rb_disc = capacity
/// pipec: extent params = 8 * H + H * H + 2
/// pipec: extent target = 8 * H + H * H + 2
/// pipec: extent b_obs = B * 4
/// pipec: extent b_act = B
/// pipec: extent b_ret = B
/// pipec: extent b_next = B * 4
/// pipec: extent b_disc = B
/// pipec: extent h1 = B * H
/// pipec: extent h2 = B * H
/// pipec: extent dh1 = B * H
/// pipec: extent dh2 = B * H
/// pipec: extent dq = B * 2
/// pipec: extent td = B
/// pipec: extent lossi = B
/// pipec: out b_obs
/// pipec: out b_act
/// pipec: out b_ret
/// pipec: out b_next
/// pipec: out b_disc
/// pipec: out h1
/// pipec: out h2
/// pipec: out dh1
/// pipec: out dh2
/// pipec: out dq
/// pipec: out td
/// pipec: out lossi
extern "C" __global__ void mlp_td_backward(
    const int* learn_on, const int* b_idx, const float* b_w, const float* rb_obs,
    const int* rb_act, const float* rb_ret, const float* rb_next, const float* rb_disc,
    const float* params, const float* target, float* b_obs, int* b_act, float* b_ret,
    float* b_next, float* b_disc, float* h1, float* h2, float* dh1, float* dh2, float* dq,
    float* td, float* lossi, int B, int H, int spb, int capacity) {
    extern __shared__ __align__(16) float smem[];
    const int ld = pipec_w2_ld(H);
    float* W2t = smem;                  // H * (H + 4)  target W2, row stride ld
    float* W2o = W2t + H * (H + 4);     // H * (H + 4)  online W2, row stride ld
    float* xo = W2o + H * (H + 4);      // spb * 4      obs
    float* xn = xo + spb * PIPEC_OBS;   // spb * 4      next obs
    float* A1 = xn + spb * PIPEC_OBS;   // spb * H      online(obs) layer 1
    float* A2 = A1 + spb * H;           // spb * H      online(obs) layer 2
    float* N1 = A2 + spb * H;           // spb * H      online(next) layer 1
    float* N2 = N1 + spb * H;           // spb * H      online(next) layer 2, later dh2
    float* T1 = N2 + spb * H;           // spb * H      target(next) layer 1
    float* T2 = T1 + spb * H;           // spb * H      target(next) layer 2
    float* q = T2 + spb * H;            // spb * 2      online(obs)
    float* qn = q + spb * 2;            // spb * 2      online(next)
    float* qt = qn + spb * 2;           // spb * 2      target(next)
    float* g = qt + spb * 2;            // spb * 2      dq
    float* W3t = g + spb * 2;           // 2 * H + 4    target W3, b3 (padded)
    float* W3o = W3t + 2 * H + 4;       // 2 * H + 4    online W3, b3 (padded)
    float* W1t = W3o + 2 * H + 4;       // 5 * H        target W1, b1 (contiguous)
    float* W1o = W1t + 5 * H;           // 5 * H        online W1, b1
    float* b2t = W1o + 5 * H;           // H            target b2
    float* b2o = b2t + H;               // H            online b2
    float* s_ret = b2o + H;             // spb          the block's samples: return,
    float* s_disc = s_ret + spb;        // spb          discount,
    float* s_w = s_disc + spb;          // spb          weight,
    int* s_act = reinterpret_cast<int*>(s_w + spb);  // spb  action

    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    const int s0 = blockIdx.x * spb;
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    if (s0 >= B) {  // uniform over the block
        pipec_wait_for_producer();  // on every path: the block ends after the nodes before it
        return;
    }
    const int ns = (B - s0 < spb) ? (B - s0) : spb;
    // Every weight the block uses is staged before the wait for the node before: no node of
    // the step before this one writes `params` or `target` (AdamW, after it, does), so over a
    // programmatic edge the staging overlaps the previous node's end. Then the flag and the
    // block's draws, which the acting node wrote. No layer waits for a global load after a
    // barrier. (Measured on an H200 in this kernel's earlier form, which drew the batch too,
    // per-region loops beat issuing every load before any store, PipecStage, by 0.6 us: the
    // stores of the small regions overlap the loads of W2.)
    for (int i = t; i < 2 * H + 2; i += nt) {
        const float a = target[pipec_off_w3(H) + i];  // W3 then b3: contiguous
        const float b = params[pipec_off_w3(H) + i];
        W3t[i] = a;
        W3o[i] = b;
    }
    for (int i = t; i < 5 * H; i += nt) {
        const float a = target[pipec_off_w1(H) + i];  // W1 then b1: contiguous
        const float b = params[pipec_off_w1(H) + i];
        W1t[i] = a;
        W1o[i] = b;
    }
    for (int i = t; i < H; i += nt) {
        const float a = target[pipec_off_b2(H) + i];
        const float b = params[pipec_off_b2(H) + i];
        b2t[i] = a;
        b2o[i] = b;
    }
    PipecSquareStage<16> w2t, w2o;  // sized for H = 64 in blocks of 256
    w2t.load(target + pipec_off_w2(H), H);
    w2o.load(params + pipec_off_w2(H), H);
    w2t.store(target + pipec_off_w2(H), W2t, H);
    w2o.store(params + pipec_off_w2(H), W2o, H);
    pipec_wait_for_producer();  // every access below sees the nodes before it
    const int on = learn_on[0];
    const int leaf = (t < ns) ? b_idx[s0 + t] : 0;
    const float w_own = (t < ns) ? b_w[s0 + t] : 0.0f;
    if (on == 0) return;  // uniform: learning off, nothing written
    // The block's samples, gathered by one thread each (all loads first, then the stores).
    for (int s = t; s < ns; s += nt) {
        const int i = s0 + s;
        const PipecTransition x = pipec_load_transition(rb_obs, rb_act, rb_ret, rb_next, rb_disc,
                                                        (s == t) ? leaf : b_idx[i]);
        pipec_store_transition(x, xo, s_act, s_ret, xn, s_disc, s);
        s_w[s] = (s == t) ? w_own : b_w[i];
        pipec_store_transition(x, b_obs, b_act, b_ret, b_next, b_disc, i);
    }
    __syncthreads();

    // The three forward passes, layer by layer (independent outputs, one barrier per layer).
    pipec_dense(W1t, PIPEC_OBS, W1t + 4 * H, xn, PIPEC_OBS, T1, H, ns, 1);
    pipec_dense(W1o, PIPEC_OBS, W1o + 4 * H, xo, PIPEC_OBS, A1, H, ns, 1);
    pipec_dense(W1o, PIPEC_OBS, W1o + 4 * H, xn, PIPEC_OBS, N1, H, ns, 1);
    __syncthreads();
    pipec_dense(W2t, ld, b2t, T1, H, T2, H, ns, 1);
    pipec_dense(W2o, ld, b2o, A1, H, A2, H, ns, 1);
    pipec_dense(W2o, ld, b2o, N1, H, N2, H, ns, 1);
    __syncthreads();
    // Output layer of the three passes: 3 * ns * 2 dot products, one per thread, on chip.
    for (int w = t; w < 6 * ns; w += nt) {
        const int net = w / (2 * ns);   // 0 target(next), 1 online(obs), 2 online(next)
        const int r = w - net * 2 * ns;  // s * 2 + a
        const int s = r >> 1;
        const int a = r & 1;
        const float* Wh = (net == 0) ? W3t : W3o;
        const float* x = ((net == 0) ? T2 : (net == 1) ? A2 : N2) + s * H;
        float* o = (net == 0) ? qt : (net == 1) ? q : qn;
        o[r] = Wh[2 * H + a] + pipec_dot(Wh + a * H, 1, x, H);
    }
    __syncthreads();

    // Per-sample TD error, weighted Huber loss and dL/dQ.
    const float inv_b = 1.0f / (float)B;
    for (int s = t; s < ns; s += nt) {
        const int i = s0 + s;
        const int a = s_act[s];
        const float r = s_ret[s];
        const float disc = s_disc[s];
        const float w = s_w[s];
        const int astar = (qn[s * 2 + 1] > qn[s * 2 + 0]) ? 1 : 0;
        const float y = r + disc * qt[s * 2 + astar];
        const float d = q[s * 2 + a] - y;
        const float ad = fabsf(d);
        const float hub = (ad <= 1.0f) ? 0.5f * d * d : ad - 0.5f;
        const float dh = fminf(fmaxf(d, -1.0f), 1.0f);  // huber'(d)
        const float gq = w * dh * inv_b;
        const float g0 = (a == 0) ? gq : 0.0f;
        const float g1 = (a == 1) ? gq : 0.0f;
        g[s * 2 + 0] = g0;
        g[s * 2 + 1] = g1;
        td[i] = d;
        lossi[i] = w * hub;
        dq[i * 2 + 0] = g0;
        dq[i * 2 + 1] = g1;
    }
    __syncthreads();

    // dh2 = (W3^T dq) * [h2 > 0], kept on chip in N2 (no longer needed).
    for (int w = t; w < ns * H; w += nt) {
        const int s = w / H;
        const int j = w - s * H;
        const float v = fmaf(W3o[j], g[s * 2 + 0], W3o[H + j] * g[s * 2 + 1]);
        const float a2 = A2[w];
        const float d2 = (a2 > 0.0f) ? v : 0.0f;
        N2[w] = d2;
        dh2[s0 * H + w] = d2;
        h2[s0 * H + w] = a2;
    }
    __syncthreads();
    // dh1 = (W2^T dh2) * [h1 > 0], W2 read by columns from the padded shared copy.
    for (int w = t; w < ns * H; w += nt) {
        const int s = w / H;
        const int k = w - s * H;
        const float v = pipec_dot(W2o + k, ld, N2 + s * H, H);
        const float a1 = A1[w];
        dh1[s0 * H + w] = (a1 > 0.0f) ? v : 0.0f;
        h1[s0 * H + w] = a1;
    }
}

/// Weight gradients of the batch loss, summed over the B samples, and per-block partial sums
/// of their squares (first stage of the global-norm clip):
///   dW1[j][c] = sum_i dh1[i][j] obs[i][c], db1 = sum_i dh1, dW2[j][k] = sum_i dh2[i][j] h1[i][k],
///   db2 = sum_i dh2, dW3[a][j] = sum_i dq[i][a] h2[i][j], db3 = sum_i dq.
/// Thread (x, y) of block b owns parameter p = b*blockDim.x + x and the y-th of blockDim.y
/// contiguous sample chunks; chunks are combined in y order, squares by a fixed tree.
/// Does nothing when *learn_on == 0.
/// Reads: learn_on[1], b_obs[B*4], h1[B*H], h2[B*H], dh1[B*H], dh2[B*H], dq[B*2].
/// Writes: grad[P], gnorm_part[gridDim.x].
/// Launch: grid ceil_div(P, blockDim.x), block (X, Y) with X*Y <= 1024 (e.g. (64, 8)).
/// pipec: extent learn_on = 1
/// pipec: extent b_obs = B * 4
/// pipec: extent h1 = B * H
/// pipec: extent h2 = B * H
/// pipec: extent dh1 = B * H
/// pipec: extent dh2 = B * H
/// pipec: extent dq = B * 2
/// pipec: extent grad = 8 * H + H * H + 2
/// pipec: extent gnorm_part = gridDim.x
/// pipec: out grad
/// pipec: out gnorm_part
extern "C" __global__ void mlp_grad(const int* learn_on, const float* b_obs, const float* h1,
                                    const float* h2, const float* dh1, const float* dh2,
                                    const float* dq, float* grad, float* gnorm_part, int B,
                                    int H) {
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    const int on = learn_on[0];  // waited for only after the sample loads are issued
    __shared__ float red[1024];
    const int P = pipec_nparams(H);
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int p = blockIdx.x * blockDim.x + tx;

    // Decode which sum this parameter is: sum_i L[i*ldl + l] * (R ? R[i*ldr + r] : 1).
    const float* L = dq;
    const float* R = 0;
    int ldl = PIPEC_ACTIONS, l = 0, ldr = 0, r = 0;
    if (p < pipec_off_b1(H)) {
        L = dh1; ldl = H; l = p >> 2; R = b_obs; ldr = PIPEC_OBS; r = p & 3;
    } else if (p < pipec_off_w2(H)) {
        L = dh1; ldl = H; l = p - pipec_off_b1(H);
    } else if (p < pipec_off_b2(H)) {
        const int o = p - pipec_off_w2(H);
        L = dh2; ldl = H; l = o / H; R = h1; ldr = H; r = o - (o / H) * H;
    } else if (p < pipec_off_w3(H)) {
        L = dh2; ldl = H; l = p - pipec_off_b2(H);
    } else if (p < pipec_off_b3(H)) {
        const int o = p - pipec_off_w3(H);
        L = dq; ldl = PIPEC_ACTIONS; l = o / H; R = h2; ldr = H; r = o - (o / H) * H;
    } else if (p < P) {
        L = dq; ldl = PIPEC_ACTIONS; l = p - pipec_off_b3(H);
    }

    const int chunk = (B + (int)blockDim.y - 1) / (int)blockDim.y;
    const int i0 = ty * chunk;
    const int i1 = (i0 + chunk < B) ? (i0 + chunk) : B;
    // Eight interleaved partial sums (sample i adds into acc[(i - i0) % 8]).
    float acc[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) acc[u] = 0.0f;
    if (p < P && i1 - i0 == PIPEC_GRAD_CHUNK) {
        // The usual chunk: every load is issued before the first sum needs one, so the
        // chunk costs one round trip to L2 instead of one per eight samples; the sums are
        // the loop's below, in its order.
        float lv[PIPEC_GRAD_CHUNK];
#pragma unroll
        for (int k = 0; k < PIPEC_GRAD_CHUNK; ++k) lv[k] = L[(i0 + k) * ldl + l];
        if (R) {
            float rv[PIPEC_GRAD_CHUNK];
#pragma unroll
            for (int k = 0; k < PIPEC_GRAD_CHUNK; ++k) rv[k] = R[(i0 + k) * ldr + r];
#pragma unroll
            for (int k = 0; k < PIPEC_GRAD_CHUNK; ++k) acc[k % 8] = fmaf(lv[k], rv[k], acc[k % 8]);
        } else {
#pragma unroll
            for (int k = 0; k < PIPEC_GRAD_CHUNK; ++k) acc[k % 8] += lv[k];
        }
    } else if (p < P) {
        int i = i0;
        if (R) {
            for (; i + 8 <= i1; i += 8) {
#pragma unroll
                for (int u = 0; u < 8; ++u)
                    acc[u] = fmaf(L[(i + u) * ldl + l], R[(i + u) * ldr + r], acc[u]);
            }
            for (; i < i1; ++i) acc[0] = fmaf(L[i * ldl + l], R[i * ldr + r], acc[0]);
        } else {
            for (; i + 8 <= i1; i += 8) {
#pragma unroll
                for (int u = 0; u < 8; ++u) acc[u] += L[(i + u) * ldl + l];
            }
            for (; i < i1; ++i) acc[0] += L[i * ldl + l];
        }
    }
    if (on == 0) return;  // uniform: learning off, nothing written
    red[ty * blockDim.x + tx] =
        ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    __syncthreads();
    // The first warp finishes alone, with no barrier more: lane l adds the chunks of the
    // block's parameters x = l, l + 32, ... in chunk order and keeps their squares in red[x]
    // (the chunk-0 entry only it reads), then sums the squares by pairs (x, x + h) for
    // h = pw/2 .. 1: in its own entries while h >= 32, then by shuffles (a lane past h that
    // adds is never read again).
    const unsigned int lane = ty * blockDim.x + tx;
    if (lane >= 32) return;
    const int bx = (int)blockDim.x;
    for (int x = (int)lane; x < bx; x += 32) {
        float gsum = 0.0f;
        for (int y = 0; y < (int)blockDim.y; ++y) gsum += red[y * bx + x];
        const int px = blockIdx.x * bx + x;
        if (px < P) grad[px] = gsum;
        red[x] = (px < P) ? gsum * gsum : 0.0f;
    }
    unsigned int pw = 1;
    while (pw < blockDim.x) pw <<= 1;
    unsigned int h = pw >> 1;
    for (; h >= 32; h >>= 1)
        for (unsigned int x = lane; x < h; x += 32)
            if (x + h < blockDim.x) red[x] = red[x] + red[x + h];
    float v = (lane < blockDim.x) ? red[lane] : 0.0f;
    const unsigned int mask = pipec_warp_mask();  // a block of fewer than 32 threads
    for (; h > 0; h >>= 1) {
        const float o = __shfl_down_sync(mask, v, h);
        if (lane + h < blockDim.x) v = v + o;
    }
    if (lane == 0) gnorm_part[blockIdx.x] = v;
}
