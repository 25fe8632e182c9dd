// Kernels declared through macros. A macro that takes the kernel's name as an argument keeps
// the annotations above its use; one that pastes the name together hides the declaration.

#define ADD_ONE(name) \
    extern "C" __global__ void name(float* x, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x; \
        if (i < n) x[i] += 1.0f; \
    }

#define SCALE(suffix) \
    extern "C" __global__ void scale_##suffix(float* x, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x; \
        if (i < n) x[i] *= 2.0f; \
    }

/// pipec: extent x = n
ADD_ONE(add_one_by_macro)

/// pipec: extent x = n
SCALE(f32)
