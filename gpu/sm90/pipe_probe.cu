// SPDX-License-Identifier: BSD-3-Clause
/*
 * pipe-probe: how many of each of the Hopper attention softmax's
 * instructions one SM completes a clock, alone and in pairs. The sm90
 * forward kernels' softmax is a mix of exponentials (MUFU), conversions
 * (F2FP), maxima, byte permutations and f16 and fp32 arithmetic; which of
 * them share a pipe, and at what rate each runs, decides what a change to
 * the softmax can buy (BENCHMARKS.md, "sm90-bf16: the fused kernel").
 *
 * Each kernel runs 1024 threads on every SM, eight independent chains a
 * thread, each instruction feeding the next of its chain, and times the
 * loop with the SM's clock. A pair ("a + b") alternates the two: if it
 * runs at the rate of the slower alone, the two do not share a pipe.
 *
 * usage: pipe-probe
 * Exit status: 0 when it ran, 77 when no usable GPU is present
 * (automake's SKIP), 1 on a CUDA error.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>

#include <utility>

enum { ITERS = 256, CHAINS = 8, THREADS = 1024 };

enum op_kind {
    CVT_F16X2_F32, // cvt.rn.relu.f16x2.f32: the exponent to f16
    EX2_F16X2,     // ex2.approx.f16x2: the exponential
    CVT_E4M3X2,    // cvt.rn.satfinite.e4m3x2.f16x2: P to E4M3
    CVT_F16X2_E4M3, // cvt.rn.f16x2.e4m3x2: and back
    MUL_F16X2,     // mul.rn.f16x2: times 256
    MUL_BF16X2,    // mul.rn.bf16x2: the widening's scaling
    ADD_F16X2,     // add.rn.f16x2: the row sum's block sums
    FMA_F32,       // fma.rn.f32: the exponent
    MAX_F32,       // max.NaN.f32: the row maximum
    PRMT,          // prmt.b32: the exponential's halves joined
    CVT_F32_F16,   // cvt.f32.f16: a block sum widened
    OP_KINDS
};

static const char *const op_name[OP_KINDS] = {
    "cvt.rn.relu.f16x2.f32", "ex2.approx.f16x2", "cvt.rn.satfinite.e4m3x2.f16x2", "cvt.rn.f16x2.e4m3x2",
    "mul.rn.f16x2",          "mul.rn.bf16x2",    "add.rn.f16x2",                  "fma.rn.f32",
    "max.NaN.f32",           "prmt.b32",         "cvt.f32.f16",
};

// One instruction of kind K on chain value x (each result feeds the next).
template <int K> __device__ __forceinline__ void op(uint32_t &x)
{
    if constexpr (K == CVT_F16X2_F32) {
        asm volatile("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(x) : "f"(__uint_as_float(x)), "f"(__uint_as_float(x ^ 1u)));
    } else if constexpr (K == EX2_F16X2) {
        asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(x));
    } else if constexpr (K == CVT_E4M3X2) {
        uint16_t t;
        asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(t) : "r"(x));
        x ^= t;
    } else if constexpr (K == CVT_F16X2_E4M3) {
        asm volatile("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(x) : "h"((uint16_t)x));
    } else if constexpr (K == MUL_F16X2) {
        asm volatile("mul.rn.f16x2 %0, %0, %1;" : "+r"(x) : "r"(0x3C013C01u));
    } else if constexpr (K == MUL_BF16X2) {
        asm volatile("mul.rn.bf16x2 %0, %0, %1;" : "+r"(x) : "r"(0x3F803F80u));
    } else if constexpr (K == ADD_F16X2) {
        asm volatile("add.rn.f16x2 %0, %0, %1;" : "+r"(x) : "r"(0x3C013C01u));
    } else if constexpr (K == FMA_F32) {
        float f = __uint_as_float(x);
        asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(f) : "f"(1.0001f), "f"(0.5f));
        x = __float_as_uint(f);
    } else if constexpr (K == MAX_F32) {
        float f = __uint_as_float(x);
        asm volatile("max.NaN.f32 %0, %0, %1;" : "+f"(f) : "f"(0.25f));
        x = __float_as_uint(f);
    } else if constexpr (K == PRMT) {
        asm volatile("prmt.b32 %0, %0, %1, 0x5410;" : "+r"(x) : "r"(0x12345678u));
    } else {
        float f;
        asm volatile("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((uint16_t)x));
        x ^= __float_as_uint(f);
    }
}

// A (and B, where B differs from A: the pair alternating) on every chain.
template <int A, int B> __global__ void __launch_bounds__(THREADS) rate(uint32_t *out, long long *cycles)
{
    uint32_t x[CHAINS];
#pragma unroll
    for (int i = 0; i < CHAINS; i++)
        x[i] = 0x3C003C00u + threadIdx.x + i;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < ITERS; it++)
#pragma unroll
        for (int i = 0; i < CHAINS; i++) {
            op<A>(x[i]);
            if constexpr (B != A)
                op<B>(x[i]);
        }
    __syncthreads();
    const long long t1 = clock64();
    uint32_t s = 0;
#pragma unroll
    for (int i = 0; i < CHAINS; i++)
        s ^= x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s; // (keeps the chains)
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = t1 - t0;
}

static int failed(cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "pipe-probe: %s\n", cudaGetErrorString(e));
    return 1;
}

// The device buffers of the measurements and the host copy of the cycles.
struct probe {
    int sms;
    uint32_t *out;
    long long *cycles;
    long long host[1024];
};

// Thread instructions a clock on one SM (the fastest SM's loop), a pair's
// counted as two.
template <int A, int B> static int measure(probe &p)
{
    for (int round = 0; round < 2; round++) // the first warms up
        rate<A, B><<<p.sms, THREADS>>>(p.out, p.cycles);
    if (failed(cudaGetLastError()) || failed(cudaDeviceSynchronize()) ||
        failed(cudaMemcpy(p.host, p.cycles, sizeof(long long) * (size_t)p.sms, cudaMemcpyDeviceToHost)))
        return 1;
    long long best = p.host[0];
    for (int i = 1; i < p.sms; i++)
        best = p.host[i] < best ? p.host[i] : best;
    const double per = (double)THREADS * ITERS * CHAINS * (B != A ? 2 : 1) / (double)best;
    char name[96];
    if (B != A)
        snprintf(name, sizeof name, "%s + %s", op_name[A], op_name[B]);
    else
        snprintf(name, sizeof name, "%s", op_name[A]);
    printf("%-52s %6.1f a clock an SM\n", name, per);
    return 0;
}

// Every kind alone, in the order of op_kind; the first failure stops it.
template <int... K> static int each_alone(probe &p, std::integer_sequence<int, K...>)
{
    return (measure<K, K>(p) || ...);
}

int main(void)
{
    static probe p;
    int devices = 0, major = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess || major != 9) {
        printf("pipe-probe: no Hopper GPU (compute capability 9.x) here\n");
        return 77;
    }
    if (failed(cudaDeviceGetAttribute(&p.sms, cudaDevAttrMultiProcessorCount, 0)))
        return 1;
    if (p.sms > 1024 || failed(cudaMalloc(&p.out, sizeof(uint32_t) * THREADS * (size_t)p.sms)) ||
        failed(cudaMalloc(&p.cycles, sizeof(long long) * (size_t)p.sms)))
        return 1;
    // then the pairs: an exponential beside a conversion, each beside an
    // fma, and two conversions
    const int bad = each_alone(p, std::make_integer_sequence<int, OP_KINDS>()) ||
                    measure<CVT_F16X2_F32, EX2_F16X2>(p) || measure<EX2_F16X2, FMA_F32>(p) ||
                    measure<CVT_F16X2_F32, FMA_F32>(p) || measure<CVT_F16X2_F32, CVT_E4M3X2>(p);
    cudaFree(p.out);
    cudaFree(p.cycles);
    return bad ? 1 : 0;
}
