extern "C" __global__ void const_atomic(const int* counts, int n) {
    if (threadIdx.x < n) atomicAdd((int*)counts, 1);  // expect: PC305, PC318
}
