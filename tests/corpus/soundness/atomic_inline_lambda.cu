extern "C" __global__ void lambda_atomic(int* c, int n) {
    auto add = [&](int v) { atomicAdd(c, v); };  // note: PC305
    if (threadIdx.x < n) add(1);  // expect: PC305
}
