// Needs <cooperative_groups.h> and <cuda/atomic> of the NVRTC in use (the CUDA runtime and
// CCCL header wheels, or a matching toolkit); tests/test_soundness_corpus.py skips it where
// NVRTC finds no such headers. The library's own lines are skipped in a finding's chain.
#include <cooperative_groups.h>
#include <cuda/atomic>
namespace cg = cooperative_groups;

// grid-sync: the barrier, in a function that is not inlined
__device__ __noinline__ void sync_all() { cg::this_grid().sync(); }  // note: PC319
extern "C" __global__ void sync_noinline(float* x) {
    x[threadIdx.x] = 1.0f;
    sync_all();  // expect: PC319
    x[threadIdx.x + 1] = 2.0f;
}

// clean: the grid's shape, without waiting for it; a block-wide barrier
extern "C" __global__ void rank_only(float* x) { x[cg::this_grid().thread_rank()] = 1.0f; }
extern "C" __global__ void block_sync(float* x) {
    cg::this_thread_block().sync();
    x[threadIdx.x] = 1.0f;
}

// spin-wait: an acquire load through cuda::atomic_ref until another block raises the flag
extern "C" __global__ void wait_ref(int* flag, float* out) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
    while (f.load(cuda::memory_order_acquire) == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}

// atomics: cuda::std-style fetch_add
extern "C" __global__ void count_ref(int* c) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*c);
    f.fetch_add(1, cuda::memory_order_relaxed);  // expect: PC305
}

// clean: relaxed loads in a loop that a counter ends
extern "C" __global__ void bounded_ref(int* flag, int* out, int n) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
    int acc = 0;
    for (int i = 0; i < n; ++i) acc += f.load(cuda::memory_order_relaxed);
    out[0] = acc;
}
