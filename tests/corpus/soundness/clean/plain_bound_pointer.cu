// the bound is re-read every iteration (the store may alias it), but a counter ends the loop
extern "C" __global__ void fill_to(const int* n, int* out) {
    for (int i = 0; i < *n; ++i) out[i] = i;
}
