__device__ inline void wait_nonzero(volatile unsigned int* flag) {
    while (*flag == 0u) __nanosleep(64);  // note: PC306
}
