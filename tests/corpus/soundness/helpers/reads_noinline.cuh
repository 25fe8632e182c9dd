__device__ __noinline__ float load_noinline(const unsigned long long* addresses, int i) {
    return reinterpret_cast<const float*>(addresses[0])[i];  // note: PC324
}
