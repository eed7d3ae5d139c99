/* SPDX-License-Identifier: BSD-3-Clause */
/* IEEE binary16 (f16) <-> fp32: the softmax's exponential works in f16. */
#include "formats.h"

uint16_t mxfa_f32_bits_to_f16(uint32_t bits)
{
    const uint16_t sign = (uint16_t)(bits >> 16 & 0x8000u);
    const uint32_t a = F32_ABS(bits);
    if (a > F32_INF) /* NaN: quiet, the top of the payload kept */
        return sign | 0x7E00u | (uint16_t)(F32_FRAC(a) >> 13);
    if (a >= 0x477FF000u) /* 65520 and above (the tie rounds to even: up) */
        return sign | 0x7C00u;
    if (a >= 0x38800000u) { /* 2^-14 and above: a normal f16 */
        const uint32_t r = a - 0x38000000u; /* the exponent rebiased */
        return sign | (uint16_t)((r + 0xFFFu + (r >> 13 & 1u)) >> 13);
    }
    /* A subnormal f16 (or 0): adding 1/2, whose ulp is 2^-24 (the f16
     * subnormal step), rounds |x| to that step, ties to even; the low bits
     * of the sum are the f16 code (0x400, the smallest normal, included). */
    return sign | (uint16_t)(f32_bits(f32_from_bits(a) + 0.5f) - 0x3F000000u);
}

uint32_t mxfa_f16_to_f32_bits(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1Fu, f = h & 0x3FFu;
    if (e == 0x1F)
        return sign | F32_INF | f << 13;
    if (e == 0) /* f 2^-24, exact in fp32 */
        return sign | f32_bits((float)f * 0x1p-24f);
    return sign | (e + 112) << 23 | f << 13;
}

MXFA_API float mxfa_f16_to_f32(uint16_t x)
{
    return f32_from_bits(mxfa_f16_to_f32_bits(x));
}

MXFA_API uint16_t mxfa_f32_to_f16(float x)
{
    return mxfa_f32_bits_to_f16(f32_bits(x));
}
