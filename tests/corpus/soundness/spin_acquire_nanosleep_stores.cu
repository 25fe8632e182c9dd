extern "C" __global__ void spin_acquire_sleep(const int* flag, int* polls) {
    int v, n = 0;
    for (;;) {
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");  // expect: PC306
        if (v != 0) break;
        polls[blockIdx.x] = ++n;
        __nanosleep(32);
    }
}
