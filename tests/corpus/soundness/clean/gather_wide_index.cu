// a 64-bit index read from memory and added to a parameter still points into that parameter
extern "C" __global__ void gather_wide(const float* x, const long long* index, float* out) {
    out[threadIdx.x] = x[index[threadIdx.x]];
}
