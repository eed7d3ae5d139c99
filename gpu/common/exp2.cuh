// The library's exp2 and log2 on the device, the same bits as
// cpu/ref/exp2.c: the same fixed polynomials by explicit fmas in the same
// order and correctly rounded fp32 arithmetic (the module is compiled with
// -fmad=false). log2 follows the reference line by line; exp2 reaches the
// same range reduction and result without branches.
#ifndef MXFA_GPU_EXP2_CUH
#define MXFA_GPU_EXP2_CUH

#include <cstdint>

namespace mxfa_gpu {

// Without branches, for the softmax's inner loop: the input clamped to
// [-127, 128] (where the reference's early returns give 0 and +Inf, the
// clamped input gives the same through the field checks below);
// n = floor(x + 1/2) from the sum rounded down (exact in every case, and 0
// for |x| < 1/2, as the reference's fixed point gives it); the result's
// exponent added as an integer, then saturated to +Inf above and flushed
// to +0 below the normal range. A C transliteration matched mxfa_exp2 for
// all 2^32 inputs.
__device__ __forceinline__ float mx_exp2(float xf)
{
    const float xc = fminf(fmaxf(xf, -127.0f), 128.0f); // NaN becomes -127 here, and is returned at the end
    const float nf = floorf(__fadd_rd(xc, 0.5f));
    const float f = __fsub_rn(xc, nf);
    float p = __uint_as_float(0x39222000u);
    p = __fmaf_rn(p, f, __uint_as_float(0x3AAFA460u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3C1D950Eu));
    p = __fmaf_rn(p, f, __uint_as_float(0x3D635766u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3E75FDF0u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3F317218u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3F800000u));
    // p in [2^-1/2, 2^1/2] and n in [-127, 128]: no wrap past the sign bit
    int32_t r = (int32_t)__float_as_uint(p) + (int32_t)((uint32_t)(int32_t)nf << 23);
    r = min(r, 0x7F800000);       // the field reached 255: +Inf
    r = r < 0x00800000 ? 0 : r;   // the field fell to 0 or below: +0
    return xf != xf ? xf : __int_as_float(r);
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
