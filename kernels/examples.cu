// kernels/examples.cu: small kernels for the device control-flow examples (docs/language.md)
// and tests/gpu/test_conditionals.py.

/// flag[0] = value.
/// pipec: extent flag = 1
/// pipec: out flag
extern "C" __global__ void set_flag(int* flag, int value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) flag[0] = value;
}

/// counter[0] -= 1, so that `while counter[0] { }` ends once it reaches 0.
/// pipec: extent counter = 1
extern "C" __global__ void count_down(int* counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) counter[0] = counter[0] - 1;
}

/// x[i] += a for i < n.
/// pipec: extent x = n
extern "C" __global__ void add_value(float* x, float a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + a;
}
