// SPDX-License-Identifier: BSD-3-Clause
// A kernel that does not finish in time, for testing what watches for hangs
// (`mxfa selftest --stall-test`): one thread spins on the GPU's global timer
// for the seconds asked, so that it still ends if nothing stops it first.
// The module exports it by name beside its entry for that test alone; no
// operation of the library launches it.
#include <cstddef>
#include <cstdio>

#include <cuda_runtime.h>

namespace {

__global__ void stall(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

} // namespace

// Runs the kernel on the current device and waits for it: 0 when it ended
// (after `seconds`), -1 with the reason in why when the launch or the wait
// failed.
extern "C" __attribute__((visibility("default"))) int mxfa_cuda_test_stall(double seconds, char *why, size_t why_len)
{
    stall<<<1, 1>>>((unsigned long long)(seconds * 1e9));
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        snprintf(why, why_len, "the stall kernel: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
