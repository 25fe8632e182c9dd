// clean twin of spin_noinline_out_pointer.cu: the helper returns what it read through a
// reference, but each call reads the next element and a counter bounded by a parameter ends
// the loop
__device__ __noinline__ void read_at(const int* x, int& value) { value = *x; }
extern "C" __global__ void first_set(const int* x, int n, int* where) {
    int i = 0, value = 0;
    for (; i < n; ++i) {
        read_at(x + i, value);
        if (value != 0) break;
    }
    where[blockIdx.x] = i;
}
