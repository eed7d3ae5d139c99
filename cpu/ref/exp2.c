/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The library's own exp2 and log2 for the softmax. Every backend computes
 * the same bits: fp32 arithmetic in a fixed order (range reduction by the
 * 1.5 * 2^23 shift, a fixed polynomial evaluated with explicit fused
 * multiply-adds, the power of two made from the bits), no library calls.
 * Accuracy (measured over every fp32 input of the softmax range) is stated
 * in docs/NUMERICS.md.
 */
#include <math.h>

#include "formats.h"
#include "ref.h"

/* 2^f on [-1/2, 1/2]: degree-3 minimax polynomial for relative error
 * (about 7.5e-5 before the coefficients were rounded to fp32), C0 first.
 * C0 is not 1, so exp2(0) = C0 = 0.99993...: the softmax divides it out. */
static const uint32_t exp2_coef[4] = {0x3F7FFB49u, 0x3F31798Du, 0x3E786F0Du, 0x3D61FBB0u};
#define EXP2_SHIFT 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */

/* log2(m) = s * P(s^2) with s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2)]:
 * the atanh series 2/ln2 * (s + s^3/3 + s^5/5 + s^7/7 + s^9/9), coefficients
 * rounded to fp32 (the first omitted term is below 3e-9 relative). */
static const uint32_t log2_coef[5] = {0x4038AA3Bu, 0x3F76384Fu, 0x3F13BB63u, 0x3ED30BB1u, 0x3EA4258Au};

/*
 * exp2(x), the definition every backend follows:
 *   NaN: the input.
 *   xc = x clamped to [-127, 128]
 *   t = fl(xc + 1.5 * 2^23)   xc rounded to an integer n, nearest even
 *   n = t - 1.5 * 2^23, f = xc - n   (both exact, |f| <= 1/2)
 *   p = fma(fma(fma(C3, f, C2), f, C1), f, C0)
 *   s = the float with bits (bits(t) << 23) + 0x3F800000 mod 2^32: the low
 *       9 bits of bits(t) are n mod 512, so s = 2^n for -126 <= n <= 127,
 *       +0 for n = -127 and +Inf for n = 128
 *   exp2(x) = fl(p * s), one rounding to nearest even; subnormal results
 *   are kept, x < -126.5 gives +0, x >= 127.5 +Inf.
 */
MXFA_API float mxfa_exp2(float x)
{
    if (x != x)
        return x;
    const float xc = x < -127.0f ? -127.0f : x > 128.0f ? 128.0f : x;
    const float t = xc + EXP2_SHIFT;
    const float n = t - EXP2_SHIFT;
    const float f = xc - n;
    float p = f32_from_bits(exp2_coef[3]);
    for (int i = 2; i >= 0; i--)
        p = fmaf(p, f, f32_from_bits(exp2_coef[i]));
    const float s = f32_from_bits((f32_bits(t) << 23) + 0x3F800000u);
    return p * s;
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

/*
 * The forward softmax's exponential (docs/NUMERICS.md section 6): E(h) =
 * 2^h rounded toward zero to f16, h an f16, except E(-2^-24) = 1.
 *
 * How it is exact: an integer h has 2^h exactly (ldexp). For any other f16
 * h, 2^h is irrational and lies at least 2^-25.1 (relative, the least at
 * h = 0x95C6) from the nearest f16 (tests/t-exp2 measures the margin with
 * exp2l and checks every result), so libm's double exp2, within an ulp or
 * two (2^-52), cannot be rounded to the wrong side. The rounding toward zero of the double is
 * then exact arithmetic: floor of a power-of-two multiple.
 *
 * The exception is where Hopper's ex2.approx.f16, which the sm90 kernels use,
 * differs from the rounding (exact value 2^-24.5 below 1; the instruction
 * gives 1.0): the contract takes the hardware's value, once.
 */
MXFA_API uint16_t mxfa_exp2_f16(uint16_t h)
{
    if ((h & 0x7C00u) == 0x7C00u) {
        if (h & 0x3FFu)
            return 0x7E00u; /* NaN: one quiet NaN, whatever the input's bits */
        return h & 0x8000u ? 0x0000u : 0x7C00u;
    }
    if (h == 0x8001u)
        return 0x3C00u;
    const float x = mxfa_f16_to_f32(h);
    const double e = x == floorf(x) ? ldexp(1.0, (int)x) : exp2((double)x);
    if (e >= 65504.0)
        return 0x7BFFu; /* toward zero: the largest finite */
    if (e < 0x1p-24)
        return 0x0000u;
    int k;
    frexp(e, &k); /* e in [2^(k-1), 2^k) */
    if (k - 1 < -14) /* a subnormal f16: the step is 2^-24 */
        return (uint16_t)floor(ldexp(e, 24));
    const uint32_t q = (uint32_t)floor(ldexp(e, 10 - (k - 1))); /* in [1024, 2048) */
    return (uint16_t)((uint32_t)(k - 1 + 15) << 10 | (q - 1024u));
}

/* The softmax's weight from a score (docs/NUMERICS.md sections 6 and 7):
 * E(RN_f16(min(fma(s, c, b), 0))) as fp32 (exact), the min keeping a NaN.
 * The forward's P is 256 times it with b = 2^-11 - m, the backward's P it
 * with b = 2^-11 - fl(LSE log2 e). */
float mxfa_ref_softmax_e(float s, float c, float b)
{
    float w = fmaf(s, c, b);
    if (w > 0.0f)
        w = 0.0f;
    return mxfa_f16_to_f32(mxfa_exp2_f16(mxfa_f32_to_f16(w)));
}
