// mutation of atomic_cas_loop.cu: the CAS takes a lock that another block holds
extern "C" __global__ void locked_add(int* lock, float* total, const float* x) {
    if (threadIdx.x == 0) {
        while (atomicCAS(lock, 0, 1) != 0) {  // expect: PC305, PC306
        }
        *total += x[blockIdx.x];
        atomicExch(lock, 0);  // expect: PC305
    }
}
