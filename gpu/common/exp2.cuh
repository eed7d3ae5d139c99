// SPDX-License-Identifier: BSD-3-Clause
// The library's exp2 and log2 on the device, the same bits as
// cpu/ref/exp2.c (which defines them): the same fp32 operations in the same
// order, each written as its correctly rounded intrinsic (the module is
// compiled with -fmad=false, and the intrinsics keep any other build from
// fusing them).
#ifndef MXFA_GPU_EXP2_CUH
#define MXFA_GPU_EXP2_CUH

#include <cstdint>

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

// The forward softmax's P = exp2(min(z, 8)) (docs/NUMERICS.md, "Attention
// forward"): one clamp to [-127, 8] in place of two.
__device__ __forceinline__ float mx_exp2_capped8(float z)
{
    return mx_exp2_clamped(fmin_nan(fmax_nan(z, -127.0f), 8.0f));
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
