// stores in the loop body no longer hide the wait
extern "C" __global__ void spin_stores(volatile int* flag, int* spins) {
    int n = 0;
    while (*flag == 0) {  // expect: PC306
        spins[blockIdx.x] = ++n;
    }
}
