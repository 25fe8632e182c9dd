extern "C" __global__ void say(const float* x) {
    if (threadIdx.x == 0) printf("x0=%f\n", x[0]);
}
