/* SPDX-License-Identifier: BSD-3-Clause */
/* Integer round-and-pack for fp32, the primitive of every exact conversion. */
#include "formats.h"

int mxfa_f32_ilogb(uint32_t bits)
{
    uint32_t e = F32_EXP(bits);
    if (e != 0)
        return (int)e - 127;
    /* subnormal: the leading one of the fraction gives the exponent */
    return -149 + 31 - __builtin_clz(F32_FRAC(bits));
}

static int clz128(mxfa_u128 x)
{
    uint64_t hi = (uint64_t)(x >> 64);
    return hi ? __builtin_clzll(hi) : 64 + __builtin_clzll((uint64_t)x);
}

uint32_t mxfa_f32_round_pack_wide(uint32_t sign, mxfa_u128 sig, int exp, int sticky, f32_rounding rounding,
                                  int rz_overflow_inf)
{
    sign <<= 31;
    if (sig == 0)
        return sign;
    /* value = sig * 2^exp with floor(log2) = e */
    int e = exp + 127 - clz128(sig);
    if (e > 127)
        goto overflow;
    /* The unit in the last place of the result: 2^(e-23), or 2^-149 below
     * the normal range. shift = how many low bits of sig fall below it. */
    int ulp_exp = (e < -126 ? -126 : e) - 23;
    int shift = ulp_exp - exp;
    mxfa_u128 q;
    int half_or_more, above_half;
    if (shift <= 0) {
        q = sig << -shift; /* exact: fewer than 24 significant bits */
        half_or_more = above_half = 0;
    } else if (shift > 128) {
        q = 0;
        half_or_more = above_half = 0;
        sticky = 1;
    } else {
        mxfa_u128 rem = shift == 128 ? sig : sig & (((mxfa_u128)1 << shift) - 1);
        mxfa_u128 half = (mxfa_u128)1 << (shift - 1);
        q = shift == 128 ? 0 : sig >> shift;
        half_or_more = rem >= half;
        above_half = rem > half || (rem == half && sticky);
        sticky = sticky || rem != 0;
    }
    if (rounding == F32_ROUND_NEAREST_EVEN && half_or_more && (above_half || (q & 1)))
        q++;
    /* q counts ulps: below 2^24 it packs directly as a subnormal or, with the
     * biased exponent added, as a normal; a carry into 2^24 moves one binade
     * up and packs with the same formula. */
    if (e < -126)
        return sign | (uint32_t)q; /* q == 2^23 packs as the smallest normal */
    uint32_t bits = ((uint32_t)(e + 127 - 1) << 23) + (uint32_t)q;
    if (bits >= F32_INF)
        goto overflow;
    return sign | bits;
overflow:
    if (rounding == F32_ROUND_TOWARD_ZERO && !rz_overflow_inf)
        return sign | 0x7F7FFFFFu;
    return sign | F32_INF;
}

uint16_t mxfa_f32_bits_to_bf16(uint32_t bits)
{
    if (F32_IS_NAN(bits))
        return (uint16_t)((bits >> 16) | 0x0040u);
    /* ties to even on the 16 dropped bits; a carry may reach Inf, as it should */
    uint32_t lsb = (bits >> 16) & 1u;
    return (uint16_t)((bits + 0x7FFFu + lsb) >> 16);
}

MXFA_API float mxfa_bf16_to_f32(uint16_t x)
{
    return f32_from_bits(bf16_to_f32_bits(x));
}

MXFA_API uint16_t mxfa_f32_to_bf16(float x)
{
    return mxfa_f32_bits_to_bf16(f32_bits(x));
}
