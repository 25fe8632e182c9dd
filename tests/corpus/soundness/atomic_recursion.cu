__device__ __noinline__ int walk(int* counter, int depth) {
    if (depth <= 0) return 0;
    atomicAdd(counter, depth);  // note: PC305
    return walk(counter, depth - 1) + 1;
}
extern "C" __global__ void recurse(int* counter, int depth) {
    walk(counter, depth);  // expect: PC305
}
