/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * E8M0: the OCP MX scale format, 2^(code - 127). No sign, no zero, no Inf;
 * 0xFF is NaN. Code 0x00 is 2^-127, an fp32 subnormal (never 0 or 1).
 */
#include "formats.h"

uint8_t mxfa_e8m0_encode_bits(uint32_t x, mxfa_e8m0_rounding rounding, mxfa_overflow overflow)
{
    uint8_t too_big = overflow == MXFA_NONSAT ? 0xFF : 0xFE;
    if (F32_IS_NAN(x))
        return 0xFF;
    if (F32_IS_INF(x))
        return too_big;
    x = F32_ABS(x);
    if (x == 0)
        return 0x00; /* the smallest scale: what a zero block gets */
    int e = mxfa_f32_ilogb(x);
    if (rounding == MXFA_E8M0_CEIL) {
        int exp;
        uint32_t sig = f32_unpack(x, &exp);
        if ((sig & (sig - 1)) != 0) /* not a power of two: round up */
            e++;
    }
    if (e < -127)
        return 0x00;
    if (e > 127)
        return too_big;
    return (uint8_t)(e + 127);
}

MXFA_API uint8_t mxfa_f32_to_e8m0(float x, mxfa_e8m0_rounding rounding, mxfa_overflow overflow)
{
    return mxfa_e8m0_encode_bits(f32_bits(x), rounding == MXFA_E8M0_FLOOR ? MXFA_E8M0_FLOOR : MXFA_E8M0_CEIL,
                                 overflow == MXFA_NONSAT ? MXFA_NONSAT : MXFA_SATFINITE);
}

MXFA_API float mxfa_e8m0_to_f32(uint8_t code)
{
    if (code == 0xFF)
        return f32_from_bits(F32_QNAN);
    if (code == 0)
        return f32_from_bits(0x00400000u); /* 2^-127 */
    return f32_from_bits((uint32_t)code << 23);
}
