// The smallest useful kernels, for measuring what a graph node costs.
#include "pdl.cuh"  // shipped with pipec (kernels/), on pipec's include path

/// slot[0] += 1 by one thread: a dependent chain when every node gets the same slot.
extern "C" __global__ void tiny(unsigned int* slot) {
    if (threadIdx.x == 0) slot[0] += 1u;
}

/// slot[0] = root[0] + 1: a fan when every node reads one root and writes its own slot.
extern "C" __global__ void leaf(const unsigned int* root, unsigned int* slot) {
    if (threadIdx.x == 0) slot[0] = root[0] + 1u;
}

/// slot[0] += 1 after waiting for the node before (kernels/pdl.cuh), letting the next start at
/// once: a chain whose every edge pipec can make programmatic.
extern "C" __global__ void tiny_pdl(unsigned int* slot) {
    pipec_let_dependents_start();
    pipec_wait_for_producer();
    if (threadIdx.x == 0) slot[0] += 1u;
}
