/*
 * The library's own exp2 and log2 for the softmax. Every backend computes
 * the same bits: range reduction by integer operations on the fp32 bits, a
 * fixed polynomial evaluated with explicit fused multiply-adds in a fixed
 * order, no library calls. Accuracy (measured over every fp32 input of the
 * softmax range) is stated in docs/NUMERICS.md.
 */
#include <math.h>

#include "formats.h"

/* 2^f on [-1/2, 1/2]: degree-6 polynomial, interpolating 2^f at the
 * Chebyshev nodes of the interval, coefficients rounded to fp32. */
static const uint32_t exp2_coef[7] = {
    0x3F800000u, 0x3F317218u, 0x3E75FDF0u, 0x3D635766u, 0x3C1D950Eu, 0x3AAFA460u, 0x39222000u,
};

/* log2(m) = s * P(s^2) with s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2)]:
 * the atanh series 2/ln2 * (s + s^3/3 + s^5/5 + s^7/7 + s^9/9), coefficients
 * rounded to fp32 (the first omitted term is below 3e-9 relative). */
static const uint32_t log2_coef[5] = {0x4038AA3Bu, 0x3F76384Fu, 0x3F13BB63u, 0x3ED30BB1u, 0x3EA4258Au};

MXFA_API float mxfa_exp2(float xf)
{
    uint32_t x = f32_bits(xf);
    if (F32_IS_NAN(x))
        return xf;
    if ((int32_t)x >= 0x43000000) /* x >= 128 (and +Inf) */
        return f32_from_bits(F32_INF);
    if (x > 0xC2FC0000u) /* x < -126 (and -Inf): results below 2^-126 are +0 */
        return 0.0f;
    /* n = floor(x + 1/2) from the bits: x as a fixed-point number with 24
     * fraction bits (exact for 1/2 <= |x| < 128) */
    int e = (int)F32_EXP(x) - 127;
    int32_t n = 0;
    if (e >= -1) {
        int64_t fixed = (int64_t)(F32_FRAC(x) | 0x800000u) << (e + 1);
        if (F32_SIGN(x))
            fixed = -fixed;
        n = (int32_t)((fixed + (INT64_C(1) << 23)) >> 24);
    }
    float f = xf - (float)n; /* exact: |f| <= 1/2 */
    float p = f32_from_bits(exp2_coef[6]);
    for (int i = 5; i >= 0; i--)
        p = fmaf(p, f, f32_from_bits(exp2_coef[i]));
    /* p * 2^n by adding n to the exponent field; below the normal range: +0 */
    int32_t field = (int32_t)F32_EXP(f32_bits(p)) + n;
    if (field <= 0)
        return 0.0f;
    if (field >= 255)
        return f32_from_bits(F32_INF);
    return f32_from_bits((f32_bits(p) & 0x807FFFFFu) | (uint32_t)field << 23);
}

MXFA_API float mxfa_log2(float xf)
{
    uint32_t x = f32_bits(xf);
    if (F32_IS_NAN(x))
        return xf;
    if (F32_ABS(x) == 0)
        return f32_from_bits(0xFF800000u); /* -Inf */
    if (F32_SIGN(x))
        return f32_from_bits(F32_QNAN);
    if (x == F32_INF)
        return xf;
    /* x = m * 2^e with m in [sqrt(1/2), sqrt(2)), by integer operations */
    int e;
    uint32_t frac;
    if (F32_EXP(x) == 0) { /* subnormal: normalize the fraction */
        int lz = __builtin_clz(x) - 8;
        frac = (x << lz) & 0x7FFFFFu;
        e = -126 - lz;
    } else {
        frac = F32_FRAC(x);
        e = (int)F32_EXP(x) - 127;
    }
    uint32_t mbits = 0x3F800000u | frac;
    if (mbits > 0x3FB504F3u) { /* m > sqrt(2): halve it */
        mbits -= 0x00800000u;
        e++;
    }
    float m = f32_from_bits(mbits);
    float s = (m - 1.0f) / (m + 1.0f);
    float z = s * s;
    float p = f32_from_bits(log2_coef[4]);
    for (int i = 3; i >= 0; i--)
        p = fmaf(p, z, f32_from_bits(log2_coef[i]));
    return fmaf(s, p, (float)e);
}
