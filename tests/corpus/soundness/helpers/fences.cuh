__device__ inline void system_fence() {
    __threadfence_system();  // note: PC307
}
