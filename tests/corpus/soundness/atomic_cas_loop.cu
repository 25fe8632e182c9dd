// a lock-free update loop: an atomic, not a wait on another block
extern "C" __global__ void cas_max(float* best, const float* x) {
    float v = x[threadIdx.x];
    int* addr = (int*)best;
    int old = *addr, assumed;
    do {
        assumed = old;
        old = atomicCAS(addr, assumed, __float_as_int(fmaxf(v, __int_as_float(assumed))));  // expect: PC305
    } while (assumed != old);
}
