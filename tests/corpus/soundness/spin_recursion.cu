__device__ __noinline__ void wait_level(volatile int* flags, int level) {
    if (level < 0) return;
    while (flags[level] == 0) {  // note: PC306
    }
    wait_level(flags, level - 1);
}
extern "C" __global__ void spin_recursive(volatile int* flags, int levels) {
    wait_level(flags, levels);  // expect: PC306
}
