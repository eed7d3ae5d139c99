// SPDX-License-Identifier: BSD-3-Clause
// The library's exp2 and log2 on the device, the same bits as
// cpu/ref/exp2.c (which defines them): the same fp32 operations in the same
// order, each written as its correctly rounded intrinsic (the module is
// compiled with -fmad=false, and the intrinsics keep any other build from
// fusing them).
#ifndef MXFA_GPU_EXP2_CUH
#define MXFA_GPU_EXP2_CUH

#include <cstdint>
#include <cuda_fp16.h>

#define MXFA_E16_SLOW_SPACE __constant__
#include "exp2_f16_slow.h"

namespace mxfa_gpu {

// max and min that return NaN when either input is NaN (PTX's .NaN forms;
// fmaxf and fminf return the other input)
__device__ __forceinline__ float fmax_nan(float a, float b)
{
    float d;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
}

__device__ __forceinline__ float fmin_nan(float a, float b)
{
    float d;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
}

// mxfa_exp2's steps after its clamp, for x already in [-127, 128] (or NaN):
// a NaN passes every operation, so it comes out a NaN (the device's
// canonical one rather than the input's bits; nothing downstream tells NaNs
// apart: P's code is 0x7F and the outputs are canonical).
__device__ __forceinline__ float mx_exp2_clamped(float xc)
{
    constexpr float SHIFT = 12582912.0f; // 1.5 * 2^23
    const float t = __fadd_rn(xc, SHIFT);
    const float f = __fsub_rn(xc, __fsub_rn(t, SHIFT));
    float p = __fmaf_rn(__uint_as_float(0x3D61FBB0u), f, __uint_as_float(0x3E786F0Du));
    p = __fmaf_rn(p, f, __uint_as_float(0x3F31798Du));
    p = __fmaf_rn(p, f, __uint_as_float(0x3F7FFB49u));
    return __fmul_rn(p, __uint_as_float((__float_as_uint(t) << 23) + 0x3F800000u));
}

// mxfa_exp2 without branches, for the softmax's inner loop.
__device__ __forceinline__ float mx_exp2(float x)
{
    return mx_exp2_clamped(fmin_nan(fmax_nan(x, -127.0f), 128.0f));
}

// The softmax's P from the f16 exponential (docs/NUMERICS.md, "Attention
// forward" and "Attention backward"), two scores at a time as f16 pairs,
// the first in the low half:
//   h = RN_f16(min(fma(S, c, b), 0)), E(h) = 2^h rounded toward zero to
//   f16 (E(-2^-24) = 1);
//   forward: b = fl(2^-11 - m) and P = 256 E(h); backward: b = fl(2^-11 -
//   fl(LSE log2 e)) and P = E(h).
// On Hopper exp2_capped_sm90 makes E(h) from the scores; elsewhere
// p_exponent2 makes h and exp2_f16x2_exact E. p_times256 makes the
// forward's P, exact in f16 (E <= 1, times a power of two).

// h for two scores, each with its offset: the fmas (rounded once), the
// pair rounded to f16, then capped at 0 (one instruction for the two; the
// rounding is monotonic and keeps 0, so capping before it gives the same
// bits), NaN kept.
__device__ __forceinline__ uint32_t p_exponent2(float s0, float s1, float c, float b0, float b1)
{
    const float w0 = __fmaf_rn(s0, c, b0), w1 = __fmaf_rn(s1, c, b1);
    uint32_t h;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(w1), "f"(w0));
    asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(h) : "r"(h), "r"(0u));
    return h;
}

// 256 E(h) in each half
__device__ __forceinline__ uint32_t p_times256(uint32_t e)
{
    uint32_t p;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(p) : "r"(e), "r"(0x5C005C00u)); // 256 twice
    return p;
}

// E(min(RN_f16(fma(s, c, b)), 0)) for two scores on Hopper, given nc = -c
// and nb = -b. ex2.approx.f16x2 computes E itself, on every input (the
// H200's, checked on all 65536 by tests/t-ex2-gpu.sh; tests/t-cuda checks
// the kernels' P against the cpu backend). The cap: fma(s, nc, nb) is
// -fma(s, c, b) exactly (one rounding, and rounding to nearest is odd),
// cvt.rn.relu makes RN_f16 of it with its negative values (and -0) raised
// to +0 and any NaN kept, and ex2 of its negation is E of the capped h.
// ptxas folds the negation into MUFU.EX2's operand, so the cap costs no
// instruction (run 68).
__device__ __forceinline__ uint32_t exp2_capped_sm90(float s0, float s1, float nc, float nb0, float nb1)
{
    const float v0 = __fmaf_rn(s0, nc, nb0), v1 = __fmaf_rn(s1, nc, nb1);
    uint32_t d, e;
    asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v1), "f"(v0));
    asm("{\n\t.reg .b32 t;\n\tneg.f16x2 t, %1;\n\tex2.approx.f16x2 %0, t;\n\t}" : "=r"(e) : "r"(d));
    return e;
}

// E on any GPU (the sm100 kernels: whether Blackwell's ex2.approx.f16
// equals E is not known), assuming only that ex2.approx.f32 is within 2^-21 of 2^x
// (relative; CUDA documents exp2f, this instruction, to 2 ulp, 2^-22): its
// result times 1 - 2^-20 and 1 + 2^-20 brackets the exact 2^h, and where
// both round toward zero to the same f16, that is E. Elsewhere (with an
// exact 2^h, 91 of the 20033 h in [-25, 0], the integers among them, where
// 2^h is an f16) an integer h gives 2^h from its bits, and any other h is
// looked up in exp2_f16_slow.h: the 308 non-integer h whose 2^h lies
// within 2^-18 of an f16, a band that holds every h the bracket can leave
// undecided (its ends lie within 2^-20 + 2^-21 + 2^-24 of 2^h).
__device__ __forceinline__ uint16_t exp2_f16_slow(uint16_t h, uint16_t fallback)
{
    const float x = __half2float(__ushort_as_half(h));
    if (x == floorf(x)) // 2^x from its bits (x <= 0 here; 2^x below 2^-24 is 0)
        return x < -24.0f ? 0 : __half_as_ushort(__float2half_rz(__uint_as_float((uint32_t)((int)x + 127) << 23)));
    // the list of exp2_f16_slow.h, by binary search (few registers: the
    // sm100 softmax threads have 128); every h the bracket can leave
    // undecided is there, under the assumption above
    int lo = 0, hi = MXFA_E16_SLOW_COUNT - 1;
#pragma unroll 1
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if ((mxfa_e16_slow[mid] >> 16) < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    const uint32_t e = mxfa_e16_slow[lo];
    return e >> 16 == h ? (uint16_t)e : fallback;
}

// The bracket alone: E of each half where the bracket decides it, and in
// *undecided a bit per half (1 the low, 2 the high) where it does not
__device__ __forceinline__ uint32_t exp2_f16x2_bracket(uint32_t h, uint32_t *undecided)
{
    float x0, x1, y0, y1;
    asm("{.reg .f16 l, u;\n\tmov.b32 {l, u}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, u;}"
        : "=f"(x0), "=f"(x1) : "r"(h));
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y0) : "f"(x0));
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y1) : "f"(x1));
    constexpr float DOWN = 1.0f - 0x1p-20f, UP = 1.0f + 0x1p-20f;
    uint32_t lo, hi;
    asm("cvt.rz.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(__fmul_rn(y1, DOWN)), "f"(__fmul_rn(y0, DOWN)));
    asm("cvt.rz.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(__fmul_rn(y1, UP)), "f"(__fmul_rn(y0, UP)));
    // (h = -2^-24 always goes undecided: its 2^h is 2^-24.5 below 1, and
    // the bracket holds 1)
    *undecided = ((lo ^ hi) & 0xFFFFu ? 1u : 0u) | ((lo ^ hi) >> 16 ? 2u : 0u);
    return lo;
}

// e with the halves the bracket left undecided made by the slow path
__device__ __forceinline__ uint32_t exp2_f16x2_settle(uint32_t h, uint32_t e, uint32_t undecided)
{
    if (undecided & 1u)
        e = (e & 0xFFFF0000u) | exp2_f16_slow((uint16_t)h, (uint16_t)e);
    if (undecided & 2u)
        e = (e & 0xFFFFu) | (uint32_t)exp2_f16_slow((uint16_t)(h >> 16), (uint16_t)(e >> 16)) << 16;
    return e;
}

__device__ __forceinline__ uint32_t exp2_f16x2_exact(uint32_t h)
{
    uint32_t undecided;
    const uint32_t e = exp2_f16x2_bracket(h, &undecided);
    return exp2_f16x2_settle(h, e, undecided);
}

__device__ __forceinline__ uint32_t p_from_exponent2_exact(uint32_t h)
{
    return p_times256(exp2_f16x2_exact(h));
}

// the f16 pair as two fp32 values (exact)
__device__ __forceinline__ void f16x2_to_f32(uint32_t v, float &lo, float &hi)
{
    asm("{.reg .f16 l, u;\n\tmov.b32 {l, u}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, u;}"
        : "=f"(lo), "=f"(hi) : "r"(v));
}

// The forward's row sum (cpu/ref/attn_fwd.c, mxfa_ref_row_sum_block): a
// block of 32 keys adds to partial k the f16 sum (P0 + P1) + (P2 + P3) of
// its keys k, k + 8, k + 16, k + 24. On a wgmma fragment a thread's f16 pair
// of keys 8j + 2t, 8j + 2t + 1 holds classes 2t and 2t + 1, so the four
// pairs j = 4 kb .. 4 kb + 3 of a block give both classes' sums in three
// additions (RN_f16 of the exact sum each, as the reference rounds them).
__device__ __forceinline__ uint32_t block_sum_f16x2(uint32_t p0, uint32_t p1, uint32_t p2, uint32_t p3)
{
    uint32_t a, b, s;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(a) : "r"(p0), "r"(p1));
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(b) : "r"(p2), "r"(p3));
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(s) : "r"(a), "r"(b));
    return s;
}

// x rounded to the nearest f16, as an fp32 (the same for the sum of two f16
// values in fp32, which is exact or rounded where f16 keeps nothing)
__device__ __forceinline__ float round_f16(float x)
{
    uint16_t h;
    float y;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    asm("cvt.f32.f16 %0, %1;" : "=f"(y) : "h"(h));
    return y;
}

// The backward's P of two scores in fp32, in place: Hopper's instruction,
// and the portable exact form
__device__ __forceinline__ void bwd_p2_sm90(float &x0, float &x1, float c, float b0, float b1)
{
    // (the negations go into the fma's operands)
    f16x2_to_f32(exp2_capped_sm90(x0, x1, -c, -b0, -b1), x0, x1);
}

__device__ __forceinline__ void bwd_p2_exact(float &x0, float &x1, float c, float b0, float b1)
{
    f16x2_to_f32(exp2_f16x2_exact(p_exponent2(x0, x1, c, b0, b1)), x0, x1);
}

// The backward's P offset of a row from its LSE: fl(2^-11 - fl(LSE log2 e))
__device__ __forceinline__ float bwd_p_offset(float lse, float log2e)
{
    return __fsub_rn(0x1p-11f, __fmul_rn(lse, log2e));
}

__device__ __forceinline__ float mx_log2(float xf)
{
    const uint32_t x = __float_as_uint(xf);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return xf;
    if ((x & 0x7FFFFFFFu) == 0)
        return __uint_as_float(0xFF800000u);
    if (x >> 31)
        return __uint_as_float(0x7FC00000u);
    if (x == 0x7F800000u)
        return xf;
    int e;
    uint32_t frac;
    if (((x >> 23) & 0xFFu) == 0) { // subnormal: normalize the fraction
        const int lz = __clz((int)x) - 8;
        frac = (x << lz) & 0x7FFFFFu;
        e = -126 - lz;
    } else {
        frac = x & 0x7FFFFFu;
        e = (int)((x >> 23) & 0xFFu) - 127;
    }
    uint32_t mbits = 0x3F800000u | frac;
    if (mbits > 0x3FB504F3u) {
        mbits -= 0x00800000u;
        e++;
    }
    const float m = __uint_as_float(mbits);
    const float s = __fdiv_rn(__fsub_rn(m, 1.0f), __fadd_rn(m, 1.0f));
    const float z = __fmul_rn(s, s);
    float p = __uint_as_float(0x3EA4258Au);
    p = __fmaf_rn(p, z, __uint_as_float(0x3ED30BB1u));
    p = __fmaf_rn(p, z, __uint_as_float(0x3F13BB63u));
    p = __fmaf_rn(p, z, __uint_as_float(0x3F76384Fu));
    p = __fmaf_rn(p, z, __uint_as_float(0x4038AA3Bu));
    return __fmaf_rn(s, p, __int2float_rn(e));
}

} // namespace mxfa_gpu

#endif
