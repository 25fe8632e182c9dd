// clean twin of spin_loaded_address.cu: the search starts at a loaded index, then a counter
// walks on from it
extern "C" __global__ void next_free(const int* start, const int* used, int n, int* where) {
    int j = start[0];
    while (j < n && used[j] != 0) ++j;
    where[blockIdx.x] = j;
}
