// clean twin of spin_shared_other_warp.cu: the first warp raises a flag in shared memory once
// its own work is done and the other warps wait for it; the flag holds a constant, no value
// from global memory, so the wait stays inside the block
extern "C" __global__ void warp_handoff(const float* x, float* out) {
    __shared__ volatile int done;
    __shared__ float staged[32];
    if (threadIdx.x == 0) done = 0;
    __syncthreads();
    if (threadIdx.x < 32) {
        staged[threadIdx.x] = x[blockIdx.x * 32 + threadIdx.x] * 2.0f;
        __syncwarp();
        if (threadIdx.x == 0) done = 1;
    } else {
        while (done == 0) {
        }
        out[blockIdx.x * blockDim.x + threadIdx.x] = staged[threadIdx.x % 32];
    }
}
