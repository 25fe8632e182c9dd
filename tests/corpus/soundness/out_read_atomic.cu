// an atomic add reads the old value: into memory bound `out`, that is garbage
/// pipec: out counts
extern "C" __global__ void histogram_out(int* counts, const int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&counts[bins[i] & 255], 1);  // expect: PC305, PC404
}
