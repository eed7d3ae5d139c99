// The library's exp2 and log2 on the device, the same operations as
// cpu/ref/exp2.c in the same order (integer range reduction, the fixed
// polynomials by explicit fmas, correctly rounded fp32 arithmetic), so that
// they give the same bits; the module is compiled with -fmad=false.
#ifndef MXFA_GPU_EXP2_CUH
#define MXFA_GPU_EXP2_CUH

#include <cstdint>

namespace mxfa_gpu {

__device__ __forceinline__ float mx_exp2(float xf)
{
    const uint32_t x = __float_as_uint(xf);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return xf;
    if ((int32_t)x >= 0x43000000) // x >= 128 (and +Inf)
        return __uint_as_float(0x7F800000u);
    if (x > 0xC2FC0000u) // x < -126 (and -Inf)
        return 0.0f;
    // n = floor(x + 1/2), 0 for |x| < 1/2 (the reference takes it from the
    // bits as a fixed-point number). For |x| >= 1/2 the fp32 sum x + 1/2 is
    // exact, or rounds without reaching the next integer, so its floor is
    // that n: a C transliteration of these lines gave mxfa_exp2's bits for
    // all 2^32 inputs. (Below 1/2 the sum can round up to 1.)
    const int32_t n = fabsf(xf) >= 0.5f ? __float2int_rd(__fadd_rn(xf, 0.5f)) : 0;
    const float f = __fsub_rn(xf, __int2float_rn(n));
    float p = __uint_as_float(0x39222000u);
    p = __fmaf_rn(p, f, __uint_as_float(0x3AAFA460u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3C1D950Eu));
    p = __fmaf_rn(p, f, __uint_as_float(0x3D635766u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3E75FDF0u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3F317218u));
    p = __fmaf_rn(p, f, __uint_as_float(0x3F800000u));
    const uint32_t pb = __float_as_uint(p);
    const int32_t field = (int32_t)((pb >> 23) & 0xFFu) + n;
    if (field <= 0)
        return 0.0f;
    if (field >= 255)
        return __uint_as_float(0x7F800000u);
    return __uint_as_float((pb & 0x807FFFFFu) | (uint32_t)field << 23);
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
