__device__ __noinline__ int depth_sum(int d) { return d <= 0 ? 0 : d + depth_sum(d - 1); }
extern "C" __global__ void recurse(int* out, int d) { out[threadIdx.x] = depth_sum(d); }
