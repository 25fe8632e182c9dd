// kernels/sumtree.cuh: the prioritized-replay draw (docs/dqn.md 6.1, 6.2), shared by
// per_sample (kernels/sumtree.cu, one block draws and gathers the whole batch) and the ring
// block of mlp_act_push (kernels/mlp_act.cu, which draws the step's first batch while the
// acting blocks are still writing the flushed leaves). Both call the same functions, so they
// draw the same leaves and weights, bit for bit. And the sum tree's update above a flush
// (sumtree_fill_flush), which spares the one-node pushes a rebuild.
//
// Heap layout as in sumtree.cu: node 1 the root, children 2n and 2n+1, leaves C .. 2C-1.
#pragma once

#include "common.cuh"

#define PER_TOP_NODES 2048  // tree nodes the draw keeps on chip (depths 0 .. 10)

// Loads tree depths top .. 10 (of those the tree has) into stop and builds depths top-1 .. 0
// there, each node fl(left + right), level by level, so the nodes are the bits a rebuild in
// separate launches computes; with write_back they are written to the tree as well. The
// caller issues the loads (per_load_tree_top) before its learning test and builds after it
// (per_build_tree_top), so the loads overlap its other first loads. stop holds PER_TOP_NODES.
__device__ __forceinline__ int per_top_nodes(int capacity) {
    return (2 * capacity < PER_TOP_NODES) ? 2 * capacity : PER_TOP_NODES;
}
__device__ __forceinline__ void per_load_tree_top(const float* tree, float* stop, int capacity,
                                                  int top) {
    const int first = 1 << top;
    pipec_copy_to_shared(tree + first, stop + first, per_top_nodes(capacity) - first);
}
__device__ __forceinline__ void per_build_tree_top(float* tree, float* stop, int top,
                                                   bool write_back) {
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    __syncthreads();
    for (int d = top - 1; d >= 0; --d) {
        const int base = 1 << d;
        for (int n = base + t; n < 2 * base; n += nt) {
            const float v = stop[2 * n] + stop[2 * n + 1];
            stop[n] = v;
            if (write_back) tree[n] = v;
        }
        __syncthreads();
    }
}

// Leaves a flush is writing while a draw runs (mlp_act_push draws beside the blocks that
// write them): slots base .. base + total - 1 (mod capacity; all of them when total >=
// capacity) hold `leaf` whatever the tree holds yet. total = 0: none.
struct PerFlush {
    int base, total;
    float leaf;
    __device__ __forceinline__ float at(int slot, float stored, int capacity) const {
        const int d = slot - base + ((slot < base) ? capacity : 0);
        return (total >= capacity || d < total) ? leaf : stored;
    }
};

// One step down the walk: children c (left) and c + 1 with values left and right (leaves
// read through `flush`); go left when u < left, else subtract it and go right.
__device__ __forceinline__ void per_descend(int c, float left, float right, int capacity,
                                            const PerFlush& flush, float& u, int& node,
                                            float& pick) {
    if (c >= capacity) {  // the leaves
        left = flush.at(c - capacity, left, capacity);
        right = flush.at(c + 1 - capacity, right, capacity);
    }
    if (u < left) {
        node = c;
        pick = left;
    } else {
        u = u - left;
        node = c + 1;
        pick = right;
    }
}
// Draw i of a batch of B (docs/dqn.md 6.2): u = (i + U_i) * total / B, U_i = u24 of word x of
// Philox(seed, SAMPLE) at counter (step, i, update, 0); walk from the root (left when u < left
// sum, else subtract it and go right; nodes below per_top_nodes from stop); the leaf clamped
// to size - 1. Returns the leaf (its data slot) and sets *p to its priority. Below the chip's
// nodes a walk at node n loads the next three levels at once, n's children 2n, 2n + 1, their
// children 4n .. 4n + 3 and theirs 8n .. 8n + 7 (one 8-, 16- and 32-byte load each when the tree
// is 32-byte aligned), and takes three steps from registers: one round trip to L2 per three
// levels instead of per level, the same comparisons and subtractions in the same order. The
// leaf's priority needs no load of its own unless the leaf was clamped. Leaves `flush` covers
// read as its value.
__device__ __forceinline__ int per_draw(int i, int B, float total, const float* stop,
                                        const float* tree, int capacity, int size,
                                        unsigned int step, unsigned int seed, int update,
                                        const PerFlush& flush, float* p) {
    const pipec_u4 r = pipec_philox(step, (unsigned int)i, (unsigned int)update, 0u, seed,
                                    PIPEC_STREAM_SAMPLE);
    const int ntop = per_top_nodes(capacity);
    const bool vectors = (reinterpret_cast<unsigned long long>(tree) & 31ull) == 0;
    float u = ((float)i + pipec_u01f(r.x)) * total / (float)B;
    int node = 1;
    float pick = total;  // the value of the node the walk is at (the root: the total)
    while (node < capacity) {
        const int c = 2 * node;
        if (c < ntop) {
            per_descend(c, stop[c], stop[c + 1], capacity, flush, u, node, pick);
            continue;
        }
        // c, 2c and 4c are the first nodes of the next three levels; the walk takes a second
        // (third) step when both nodes it may reach after the first (second) are inner ones.
        // The capacity is a power of two, so a level is all inner nodes or all leaves, and
        // a walk that takes no further step stands on a leaf.
        const bool second = c + 1 < capacity, third = 2 * c + 3 < capacity;
        float n1[2], n2[4] = {0.0f, 0.0f, 0.0f, 0.0f}, n3[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (vectors) {
            const float2 a = *reinterpret_cast<const float2*>(tree + c);
            n1[0] = a.x;
            n1[1] = a.y;
            if (second) {
                const float4 b = *reinterpret_cast<const float4*>(tree + 2 * c);
                n2[0] = b.x; n2[1] = b.y; n2[2] = b.z; n2[3] = b.w;
            }
            if (third) {
                const float4 d0 = *reinterpret_cast<const float4*>(tree + 4 * c);
                const float4 d1 = *reinterpret_cast<const float4*>(tree + 4 * c + 4);
                n3[0] = d0.x; n3[1] = d0.y; n3[2] = d0.z; n3[3] = d0.w;
                n3[4] = d1.x; n3[5] = d1.y; n3[6] = d1.z; n3[7] = d1.w;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 2; ++k) n1[k] = tree[c + k];
#pragma unroll
            for (int k = 0; k < 4; ++k) n2[k] = second ? tree[2 * c + k] : 0.0f;
#pragma unroll
            for (int k = 0; k < 8; ++k) n3[k] = third ? tree[4 * c + k] : 0.0f;
        }
        per_descend(c, n1[0], n1[1], capacity, flush, u, node, pick);
        if (!second) break;
        const int b1 = node - c;  // 0: went left
        per_descend(2 * node, b1 ? n2[2] : n2[0], b1 ? n2[3] : n2[1], capacity, flush, u, node, pick);
        if (!third) break;
        const int q = node - 2 * c;  // which of the four: 2 * b1 + b2
        const float left = (q == 0) ? n3[0] : (q == 1) ? n3[2] : (q == 2) ? n3[4] : n3[6];
        const float right = (q == 0) ? n3[1] : (q == 1) ? n3[3] : (q == 2) ? n3[5] : n3[7];
        per_descend(2 * node, left, right, capacity, flush, u, node, pick);
    }
    const int leaf = node - capacity;
    if (leaf > size - 1) {
        *p = flush.at(size - 1, tree[capacity + size - 1], capacity);
        return size - 1;
    }
    *p = pick;
    return leaf;
}

// Importance weight of a draw before the batch maximum divides it: (size * p / total)^-beta.
__device__ __forceinline__ float per_weight(float p, int size, float total, float beta) {
    return powf((float)size * p / total, -beta);
}

// After a flush set the leaves of slots a .. b (a <= b) all to `leaf`, brings the nodes of
// heights 1 .. kmax above them up to date: the depths L - kmax .. L - 1 a rebuild computes,
// with the same bits. A node whose leaves all lie in a .. b sums 2^k equal leaves, and
// fl(x + x) = 2x exactly, so it holds `leaf` doubled k times; at each height at most two
// nodes (those holding a and b) have leaves outside the range too, and are the sum of their
// children: an outside child (read from the tree, current since the last rebuild), a covered
// one, or a partial one of the height below. One thread per such node works out its operands
// and loads the outside ones, all at once (one round trip); thread 0 then only adds them up
// the heights, while every thread writes the covered nodes. `scratch` is 10 * kmax floats of
// shared memory; the caller puts a barrier between two calls whose ranges share ancestors.
__device__ __forceinline__ bool sumtree_covered(int j, int k, int a, int b) {
    return (j << k) >= a && ((j + 1) << k) - 1 <= b;
}
__device__ __forceinline__ bool sumtree_disjoint(int j, int k, int a, int b) {
    return (j << k) > b || ((j + 1) << k) - 1 < a;
}
__device__ __noinline__ void sumtree_fill_range(float* tree, int capacity, int kmax, int a,
                                                int b, float leaf, float* scratch) {
    const int t = (int)pipec_tid();
    const int nt = (int)pipec_nthreads();
    // Per partial node i = 2 * (k - 1) + side: its heap index (-1: none at that side) and its
    // two operands, each a value (kind 0) or the left (1) or right (2) partial node of height
    // k - 1.
    float* op = scratch;                                         // 2 per node
    int* node = reinterpret_cast<int*>(scratch + 4 * kmax);      // 1 per node
    int* kind = node + 2 * kmax;                                 // 2 per node
    for (int i = t; i < 2 * kmax; i += nt) {
        const int k = i / 2 + 1;
        const int side = i & 1;
        const int j = (side ? b : a) >> k;
        const bool partial = !sumtree_covered(j, k, a, b) && !(side == 1 && j == (a >> k));
        node[i] = partial ? (capacity >> k) + j : -1;
        if (!partial) continue;
        float full = leaf;
        for (int d = 1; d < k; ++d) full = full + full;  // a covered child: leaf doubled k-1 times
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c = 2 * j + h;
            int kd = 0;
            float v = 0.0f;
            if (sumtree_disjoint(c, k - 1, a, b)) v = tree[(capacity >> (k - 1)) + c];
            else if (sumtree_covered(c, k - 1, a, b)) v = full;
            else kd = (c == (a >> (k - 1))) ? 1 : 2;
            op[2 * i + h] = v;
            kind[2 * i + h] = kd;
        }
    }
    __syncthreads();
    if (t == 0) {
        float below[2] = {0.0f, 0.0f};  // the partial nodes one height below, left and right
        for (int k = 1; k <= kmax; ++k) {
            float here[2] = {0.0f, 0.0f};
#pragma unroll
            for (int side = 0; side < 2; ++side) {
                const int i = 2 * (k - 1) + side;
                if (node[i] < 0) continue;
                const int k0 = kind[2 * i], k1 = kind[2 * i + 1];
                const float v0 = k0 ? below[k0 - 1] : op[2 * i];
                const float v1 = k1 ? below[k1 - 1] : op[2 * i + 1];
                here[side] = v0 + v1;
                tree[node[i]] = here[side];
            }
            below[0] = here[0];
            below[1] = here[1];
        }
    }
    float full = leaf;
    for (int k = 1; k <= kmax; ++k) {
        full = full + full;
        const int j0 = (a + (1 << k) - 1) >> k;
        const int j1 = ((b + 1) >> k) - 1;
        for (int j = j0 + t; j <= j1; j += nt) tree[(capacity >> k) + j] = full;
    }
}

// The tree after a flush of `total` transitions from ring slot `base`, every flushed leaf set
// to `leaf`: sumtree_fill_range over the flushed slots (all of them when the flush overran
// the ring, else base .. base + total - 1, in two runs when that wraps), heights 1 .. L - top.
// Called by every thread of one block; `scratch` as sumtree_fill_range's (300 floats hold
// any capacity up to 2^30).
__device__ __forceinline__ void sumtree_fill_flush(float* tree, int capacity, int top, int base,
                                                   int total, float leaf, float* scratch) {
    const int kmax = (31 - __clz(capacity)) - top;
    if (total <= 0 || kmax <= 0) return;
    if (total >= capacity) {
        sumtree_fill_range(tree, capacity, kmax, 0, capacity - 1, leaf, scratch);
        return;
    }
    const int last = base + total - 1;
    sumtree_fill_range(tree, capacity, kmax, base, (last < capacity) ? last : capacity - 1, leaf,
                       scratch);
    if (last < capacity) return;
    __syncthreads();
    sumtree_fill_range(tree, capacity, kmax, 0, last - capacity, leaf, scratch);
}
