// a table read through a table: pipec follows one level, a second load is of unknown origin
extern "C" __global__ void twice_removed(const float* const* tables, float* out) {
    const float* const* inner = reinterpret_cast<const float* const*>(tables[0]);
    out[threadIdx.x] = inner[1][threadIdx.x];  // expect: PC324
}
