// clean twin of spin_loaded_address.cu, shaped like kernels/sumtree.cu's per_update_priorities:
// the loop reads an address from memory (`idx[i]`) and NVRTC lays powf's slow path out before
// the loop's top and the counter's increment after a backward branch into it; the loop is the
// whole cycle, counter included
extern "C" __global__ void scatter_pow(const int* idx, const float* td, float* leaves, int n,
                                       float alpha) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int leaf = idx[i];
        bool last = true;
        for (int j = i + 1; j < n; ++j)
            if (idx[j] == leaf) {
                last = false;
                break;
            }
        if (last) leaves[leaf] = powf(fabsf(td[i]) + 1e-6f, alpha);
    }
}
