// clean twin of spin_loaded_address.cu, shaped like kernels/controllers.cu's lr_plateau: NVRTC
// lays the shared `return` out first, so every early return on a loaded value is a backward
// branch to it; a branch to code that never comes back is no loop
extern "C" __global__ void step_every(const int* step, const int* enabled, const int* every,
                                      float* lr, int* bad, float factor) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (enabled[0] == 0 || step[0] % every[0] != 0) return;
    int b = bad[0] + 1;
    if (b >= 4) {
        lr[0] *= factor;
        b = 0;
    }
    bad[0] = b;
}
