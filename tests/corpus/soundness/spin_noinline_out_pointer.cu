// mutation of spin_noinline_out_ref.cu: a plain read written through a pointer; NVRTC moves
// the read into the kernel and passes the value, so the poll is reported where the loop
// branches back
__device__ __noinline__ void peek_into(const int* flag, int* status) { *status = *flag; }
extern "C" __global__ void wait_out_pointer(const int* flag, float* out) {
    int status = 0;
    do {
        peek_into(flag, &status);
    } while (status == 0);  // expect: PC306
    out[threadIdx.x] = 1.0f;
}
