// A block-wide semaphore: one thread reads and writes the lock, the block agrees through a
// barrier reduction.
struct Semaphore {
    int* lock;
    bool wait_thread;
    int state;
    __device__ Semaphore(int* lock_, int thread) : lock(lock_), wait_thread(thread == 0), state(-1) {}
    __device__ void fetch() {
        if (wait_thread) asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(state) : "l"(lock));  // note: PC306
    }
    __device__ void wait(int status) {
        while (__syncthreads_and(state != status)) fetch();  // note: PC306
        __syncthreads();
    }
    __device__ void release(int status) {
        __syncthreads();
        if (wait_thread) asm volatile("st.global.release.gpu.b32 [%0], %1;" : : "l"(lock), "r"(status));
    }
};
