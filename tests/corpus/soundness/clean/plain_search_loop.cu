extern "C" __global__ void find(const int* a, int key, int n, int* where) {
    int i = 0;
    while (i < n && a[i] != key) ++i;
    where[blockIdx.x] = i;
}
