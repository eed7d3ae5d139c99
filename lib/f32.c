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

uint32_t mxfa_f32_round_pack(uint32_t sign, uint64_t sig, int exp)
{
    sign <<= 31;
    if (sig == 0)
        return sign;
    /* Normalize so that the leading one is bit 63 of sig. */
    int lz = __builtin_clzll(sig);
    sig <<= lz;
    exp -= lz;
    /* value = sig * 2^exp with sig in [2^63, 2^64): floor(log2) = exp + 63. */
    int e = exp + 63;
    if (e > 127)
        return sign | F32_INF;
    /* The unit in the last place of the result: 2^(e-23), or 2^-149 below
     * the normal range. shift = how many low bits of sig fall below it. */
    int ulp_exp = (e < -126 ? -126 : e) - 23;
    int shift = ulp_exp - exp; /* >= 40 */
    if (shift > 64)
        return sign; /* below half of the smallest subnormal */
    uint64_t q, rem, half;
    if (shift == 64) {
        q = 0;
        rem = sig;
    } else {
        q = sig >> shift;
        rem = sig & ((UINT64_C(1) << shift) - 1);
    }
    half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    /* q counts ulps: below 2^24 it packs directly as a subnormal or, with the
     * biased exponent added, as a normal; a carry into 2^24 moves one binade
     * up and packs with the same formula. */
    if (e < -126)
        return sign | (uint32_t)q; /* q == 2^23 packs as the smallest normal */
    uint32_t bits = ((uint32_t)(e + 127 - 1) << 23) + (uint32_t)q;
    if (bits >= F32_INF)
        return sign | F32_INF;
    return sign | bits;
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
