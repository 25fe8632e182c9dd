__device__ inline void system_fence() {
    __threadfence_system();  // expect: PC307
}
