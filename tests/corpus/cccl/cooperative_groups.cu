// Needs <cooperative_groups.h> and <cuda/atomic> matched to the NVRTC in use (the
// nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 wheels); tests/test_soundness_corpus.py
// skips it where they are not installed.
#include <cooperative_groups.h>
#include <cuda/atomic>
namespace cg = cooperative_groups;

// grid-sync: the barrier, in a function that is not inlined
__device__ __noinline__ void sync_all() { cg::this_grid().sync(); }
extern "C" __global__ void sync_noinline(float* x) {
    x[threadIdx.x] = 1.0f;
    sync_all();
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
    while (f.load(cuda::memory_order_acquire) == 0) {
    }
    out[threadIdx.x] = 1.0f;
}

// atomics: cuda::std-style fetch_add
extern "C" __global__ void count_ref(int* c) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*c);
    f.fetch_add(1, cuda::memory_order_relaxed);
}

// clean: relaxed loads in a loop that a counter ends
extern "C" __global__ void bounded_ref(int* flag, int* out, int n) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
    int acc = 0;
    for (int i = 0; i < n; ++i) acc += f.load(cuda::memory_order_relaxed);
    out[0] = acc;
}
