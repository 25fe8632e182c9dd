// a flag read through an atomic that adds nothing, re-read until another block raises it
extern "C" __global__ void spin_atomic(unsigned int* flag, float* out) {
    while (atomicAdd(flag, 0u) == 0u) {  // expect: PC305, PC306
        __nanosleep(20);
    }
    out[threadIdx.x] = 1.0f;
}
