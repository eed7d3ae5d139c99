// SPDX-License-Identifier: BSD-3-Clause
/*
 * ex2-probe: what the GPU's half-precision exponential computes, on every
 * input. The softmax's exponential is the largest cost of the Hopper
 * attention forward (BENCHMARKS.md); PTX's ex2.approx.f16 takes one
 * instruction for two scores, but PTX documents only its error bound. On
 * the H200 it is, on every input but one, the exact 2^x rounded toward
 * zero to f16, which is a definition every backend can compute bit for
 * bit. This probe checks that fact on the GPU at hand: each of the 65536
 * f16 inputs through ex2.approx.f16 and, paired, ex2.approx.f16x2, against
 * RZ_f16(2^x) computed on the host from exp2l and decided exactly (the
 * probe refuses to decide where exp2l's error could matter).
 *
 * The one known exception: x = -2^-24 (0x8001) gives 1.0 where RZ gives
 * 0x3BFF (the exact value is 2^-24.5 below 1). Inputs whose 2^x passes the
 * largest finite f16 are counted (+Inf or not) and not judged.
 *
 * It also runs the portable exact form of E that the sm100 kernels use
 * (gpu/common/exp2.cuh: ex2.approx.f32 bracketed, the exponents it cannot
 * decide looked up in a list) on every h <= 0, the contract's domain, where it
 * must give E with its exception on any GPU.
 *
 * usage: ex2-probe [--verbose]
 * Exit status: 0 when the GPU computes RZ_f16(2^x) on every input but the
 * known exception and the portable form gives E, 1 otherwise, 77 when no usable GPU is present
 * (automake's SKIP), 2 for usage errors.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "exp2.cuh"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 65536 };

// Every input through the scalar instruction, and each pair (i, i ^ 0x5555)
// through the paired one and through the portable exact form the sm100
// kernels use (gpu/common/exp2.cuh), which must give E itself.
__global__ void ex2_all(uint16_t *scalar, uint32_t *paired, uint32_t *portable)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N)
        return;
    uint16_t y;
    asm("ex2.approx.f16 %0, %1;" : "=h"(y) : "h"((uint16_t)i));
    scalar[i] = y;
    uint32_t two = i | (i ^ 0x5555u) << 16, r;
    asm("ex2.approx.f16x2 %0, %1;" : "=r"(r) : "r"(two));
    paired[i] = r;
    portable[i] = mxfa_gpu::exp2_f16x2_exact(two);
}

// An f16's value (exact in float, and so in long double).
static long double f16_value(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}

static int f16_is_nan(uint16_t h)
{
    return (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
}

// RZ_f16(2^x) for an x whose exact 2^x lies below 65504 (the largest
// finite f16) or is infinite: the largest f16 at or below the exact value,
// 0 below the least subnormal, +Inf for x = +Inf. Returns 1 where 2^x is
// finite and above 65504 (outside the range the probe decides), -1 where
// exp2l's error (a few units of 2^-64) could change the answer: the exact
// value that close to an f16, x not an integer.
static int rz_exp2(uint16_t x, uint16_t *out)
{
    const long double xv = f16_value(x);
    if (isinf(xv)) {
        *out = xv > 0 ? 0x7C00 : 0x0000;
        return 0;
    }
    const long double e = exp2l(xv);
    if (e > f16_value(0x7BFF))
        return 1;
    if (e < f16_value(1)) {
        *out = 0;
        return 0;
    }
    uint16_t lo = 1, hi = 0x7BFF; // the answer lies in [lo, hi]
    while (lo < hi) { // the largest h with value(h) <= e
        const uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (f16_value(mid) <= e)
            lo = mid;
        else
            hi = (uint16_t)(mid - 1);
    }
    *out = lo;
    const long double near_lo = e - f16_value(lo);
    const long double near_hi = lo < 0x7BFF ? f16_value((uint16_t)(lo + 1)) - e : 1.0L;
    const int integer = xv == floorl(xv);
    if (!integer && (near_lo < ldexpl(e, -56) || near_hi < ldexpl(e, -56)))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    int verbose = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--verbose") == 0) {
            verbose = 1;
        } else {
            fprintf(stderr, "usage: ex2-probe [--verbose]\n");
            return 2;
        }
    }
    int ndev = 0, major = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("ex2-probe: no usable CUDA device; nothing checked\n");
        return 77;
    }
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess || major != 9) {
        printf("ex2-probe: the device is not a Hopper GPU (compute capability %d.x); nothing checked\n", major);
        return 77;
    }
    uint16_t *scalar = NULL;
    uint32_t *paired = NULL, *portable = NULL;
    if (cudaMallocManaged(&scalar, N * sizeof *scalar) != cudaSuccess ||
        cudaMallocManaged(&paired, N * sizeof *paired) != cudaSuccess ||
        cudaMallocManaged(&portable, N * sizeof *portable) != cudaSuccess) {
        printf("ex2-probe: out of device memory\n");
        return 1;
    }
    ex2_all<<<N / 256, 256>>>(scalar, paired, portable);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("ex2-probe: the kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    long checked = 0, differ = 0, undecided = 0, pair_differ = 0, exception_seen = 0, overflow = 0, overflow_inf = 0;
    long portable_checked = 0, portable_differ = 0;
    for (uint32_t i = 0; i < N; i++) {
        const uint16_t x = (uint16_t)i, other = (uint16_t)(i ^ 0x5555u);
        // the portable form: E on the contract's domain, h <= 0 (E's
        // exception included), a NaN for a NaN
        if (x >> 15 || x == 0) {
            const uint16_t got = (uint16_t)portable[i];
            uint16_t want = 0;
            const int r = x == 0x8001 ? (want = 0x3C00, 0) : rz_exp2(x, &want);
            portable_checked++;
            if (f16_is_nan(x) ? !f16_is_nan(got) : r != 0 || got != want) {
                if (portable_differ < 10 || verbose)
                    printf("x = 0x%04x: the portable form 0x%04x, E 0x%04x\n", x, got, want);
                portable_differ++;
            }
        }
        if ((uint16_t)(portable[i] >> 16) != (uint16_t)portable[other] && !f16_is_nan(other))
            pair_differ++;
        if ((uint16_t)paired[i] != scalar[i] && !f16_is_nan(x))
            pair_differ++;
        if ((uint16_t)(paired[i] >> 16) != scalar[other] && !f16_is_nan(other))
            pair_differ++;
        if (f16_is_nan(x)) {
            if (!f16_is_nan(scalar[i]))
                differ++;
            continue;
        }
        uint16_t want;
        const int r = rz_exp2(x, &want);
        if (r > 0) { // past f16's range: reported, not judged
            overflow++;
            overflow_inf += scalar[i] == 0x7C00;
            continue;
        }
        if (r < 0) {
            undecided++;
            continue;
        }
        checked++;
        if (x == 0x8001 && scalar[i] == 0x3C00 && want == 0x3BFF) {
            exception_seen = 1; // the known exception
            continue;
        }
        if (scalar[i] != want) {
            if (differ < 10 || verbose)
                printf("x = 0x%04x (%.9Lg): the GPU 0x%04x, RZ_f16(2^x) 0x%04x\n", x, f16_value(x), scalar[i], want);
            differ++;
        }
    }
    printf("ex2-probe: %ld inputs decided (%ld too near an f16 to decide), %ld differ from RZ_f16(2^x) beyond "
           "the known exception (0x8001 -> 1.0: %s); NaN inputs give NaN; the paired instruction differs from the "
           "scalar one on %ld halves; of the %ld inputs whose 2^x passes 65504, %ld give +Inf\n",
           checked, undecided, differ, exception_seen ? "seen" : "not seen", pair_differ, overflow, overflow_inf);
    printf("ex2-probe: the portable exact form (the sm100 kernels') differs from E on %ld of %ld inputs h <= 0\n",
           portable_differ, portable_checked);
    cudaFree(scalar);
    cudaFree(paired);
    cudaFree(portable);
    return differ == 0 && pair_differ == 0 && undecided == 0 && portable_differ == 0 ? 0 : 1;
}
