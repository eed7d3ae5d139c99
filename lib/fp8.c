/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FP8 element codecs (OCP OFP8: E4M3 "e4m3fn" and E5M2), integer-only.
 *
 * One encoder serves both formats, driven by the fp8_format table: the
 * value is split into an integer significand and exponent, shifted onto the
 * target's grid (the quantum is 2^(max(e, emin) - mbits)), rounded once, and
 * packed. Packing uses one formula for normals and subnormals: with q the
 * rounded value in quanta, code = ((max(e, emin) - emin) << mbits) + q. A
 * carry of q into the next binade lands on the right code by the same sum.
 */
#include "formats.h"

const fp8_format mxfa_fp8_e4m3 = {
    .dtype = MXFA_E4M3, .mbits = 3, .emin = -6, .emax = 8,
    .max_code = 0x7E, .nan_code = 0x7F, .has_inf = 0,
    .rcp_max = 0x3B124925u, /* fl(1/448), round to nearest even */
};

const fp8_format mxfa_fp8_e5m2 = {
    .dtype = MXFA_E5M2, .mbits = 2, .emin = -14, .emax = 15,
    .max_code = 0x7B, .nan_code = 0x7F, .has_inf = 1,
    .rcp_max = 0x37924925u, /* fl(1/57344), round to nearest even */
};

const fp8_format *mxfa_fp8_format(mxfa_dtype dtype)
{
    switch (dtype) {
    case MXFA_E4M3: return &mxfa_fp8_e4m3;
    case MXFA_E5M2: return &mxfa_fp8_e5m2;
    default: return NULL;
    }
}

static uint8_t fp8_overflow(const fp8_format *fmt, uint8_t sign, mxfa_overflow overflow)
{
    if (overflow == MXFA_SATFINITE)
        return sign | fmt->max_code;
    return sign | (fmt->has_inf ? 0x7C : fmt->nan_code);
}

uint8_t mxfa_fp8_encode(const fp8_format *fmt, uint32_t x, int scale_exp,
                        fp8_rounding rounding, mxfa_overflow overflow)
{
    uint8_t sign = (uint8_t)(F32_SIGN(x) << 7);
    if (F32_IS_NAN(x))
        return sign | fmt->nan_code;
    if (F32_IS_INF(x))
        return fp8_overflow(fmt, sign, overflow);
    int exp;
    uint32_t sig = f32_unpack(x, &exp);
    if (sig == 0)
        return sign;
    exp += scale_exp; /* exact scaling by a power of two */
    int e = 31 - __builtin_clz(sig) + exp; /* floor(log2 |x * 2^scale_exp|) */
    if (e > fmt->emax + 1)
        return fp8_overflow(fmt, sign, overflow);
    int ebin = e < fmt->emin ? fmt->emin : e;
    int shift = ebin - fmt->mbits - exp; /* bits of sig below the quantum */
    uint32_t q;
    if (shift <= 0) {
        q = sig << -shift; /* cannot happen for fp32 input; kept exact anyway */
    } else if (shift > 25) {
        q = 0; /* |value| < quantum / 4 */
    } else {
        uint32_t rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
        q = sig >> shift;
        if (rem > half || (rem == half && (rounding == FP8_ROUND_NEAREST_AWAY || (q & 1))))
            q++;
    }
    uint32_t code = ((uint32_t)(ebin - fmt->emin) << fmt->mbits) + q;
    if (code > fmt->max_code)
        return fp8_overflow(fmt, sign, overflow);
    return sign | (uint8_t)code;
}

uint32_t mxfa_fp8_decode(const fp8_format *fmt, uint8_t code, int scale_exp)
{
    uint32_t sign = (uint32_t)(code >> 7);
    uint32_t mag = code & 0x7Fu;
    if (fmt->has_inf) {
        if (mag == 0x7C)
            return (sign << 31) | F32_INF;
        if (mag > 0x7C)
            return (sign << 31) | F32_QNAN;
    } else if (mag == 0x7F) {
        return (sign << 31) | F32_QNAN;
    }
    uint32_t field = mag >> fmt->mbits, frac = mag & ((1u << fmt->mbits) - 1);
    /* value = sig * 2^(ebin - mbits), with the hidden bit for normals */
    uint32_t sig = field ? (frac | (1u << fmt->mbits)) : frac;
    int ebin = field ? (int)field - 1 + fmt->emin : fmt->emin;
    return mxfa_f32_round_pack(sign, sig, ebin - fmt->mbits + scale_exp);
}

MXFA_API uint8_t mxfa_f32_to_e4m3(float x, mxfa_overflow overflow)
{
    return mxfa_fp8_encode(&mxfa_fp8_e4m3, f32_bits(x), 0, FP8_ROUND_NEAREST_EVEN,
                           overflow == MXFA_NONSAT ? MXFA_NONSAT : MXFA_SATFINITE);
}

MXFA_API uint8_t mxfa_f32_to_e5m2(float x, mxfa_overflow overflow)
{
    return mxfa_fp8_encode(&mxfa_fp8_e5m2, f32_bits(x), 0, FP8_ROUND_NEAREST_EVEN,
                           overflow == MXFA_NONSAT ? MXFA_NONSAT : MXFA_SATFINITE);
}

MXFA_API float mxfa_e4m3_to_f32(uint8_t code)
{
    return f32_from_bits(mxfa_fp8_decode(&mxfa_fp8_e4m3, code, 0));
}

MXFA_API float mxfa_e5m2_to_f32(uint8_t code)
{
    return f32_from_bits(mxfa_fp8_decode(&mxfa_fp8_e5m2, code, 0));
}
