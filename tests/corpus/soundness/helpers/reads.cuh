__device__ inline float load_at(unsigned long long address, int i) {
    return reinterpret_cast<const float*>(address)[i];  // note: PC324
}
