// kernels/pdl.cuh: programmatic dependent launch for pipec kernels (docs/plan.md,
// "Programmatic edges").
//
// pipec makes the graph edge into a kernel node programmatic only when the kernel's PTX proves
// it safe: the kernel executes pipec_wait_for_producer() on every path, and nothing it touches
// before that call is touched by an earlier node (rule PC323 reports what is). Put constants,
// shared-memory set-up and index arithmetic before the wait, every load and store of a buffer an
// earlier node writes (or reads, for a store) after it, and call the wait before an early
// `return` too. pipec_let_dependents_start() lets the next kernel start its own part before the
// wait while this one finishes; its writes stay invisible to that kernel until its wait returns.
//
// Both compile to nothing below sm_90 (no programmatic launch there), and both are harmless in a
// kernel launched without it: the wait returns at once, the trigger does nothing.
#pragma once

__device__ __forceinline__ void pipec_wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pipec_let_dependents_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
