// a bounded poll is still a poll: its exit depends on the flag as well as on the counter
extern "C" __global__ void spin_timeout(volatile int* flag, int* gave_up) {
    int i = 0;
    while (i < 1000000 && *flag == 0) ++i;  // expect: PC306
    gave_up[blockIdx.x] = i;
}
