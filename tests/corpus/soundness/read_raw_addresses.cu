// addresses kept as 64-bit integers in a buffer: what the kernel reads through them is no
// buffer it binds, so nothing orders the read after their writers
extern "C" __global__ void norms_raw(const unsigned long long* addresses, const int* sizes, float* norms) {
    const float* t = reinterpret_cast<const float*>(addresses[blockIdx.x]);
    float s = 0.0f;
    for (int i = threadIdx.x; i < sizes[blockIdx.x]; i += blockDim.x)
        s += t[i] * t[i];  // expect: PC324
    if (threadIdx.x == 0) norms[blockIdx.x] = s;
}
