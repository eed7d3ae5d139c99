/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal bit-level model of the formats: fp32 fields, the FP8 element
 * formats as data, and the one rounding routine of each target format.
 * Everything here works on integers only, so results do not depend on the
 * host FPU's rounding mode or flush-to-zero state.
 */
#ifndef MXFA_FORMATS_H
#define MXFA_FORMATS_H

#include <stdint.h>
#include <string.h>

#include "mxfa.h"

/* ---- fp32 fields ---- */
#define F32_SIGN(b) ((uint32_t)(b) >> 31)
#define F32_EXP(b) (((uint32_t)(b) >> 23) & 0xFFu)
#define F32_FRAC(b) ((uint32_t)(b) & 0x7FFFFFu)
#define F32_ABS(b) ((uint32_t)(b) & 0x7FFFFFFFu)
#define F32_IS_NAN(b) (F32_ABS(b) > 0x7F800000u)
#define F32_IS_INF(b) (F32_ABS(b) == 0x7F800000u)
#define F32_INF 0x7F800000u
#define F32_QNAN 0x7FC00000u

static inline uint32_t f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/*
 * A finite, non-zero fp32 magnitude as an integer significand and exponent:
 * |x| = sig * 2^exp with sig < 2^24 (normal: the hidden bit set). Returns 0
 * for a zero.
 */
static inline uint32_t f32_unpack(uint32_t bits, int *exp)
{
    uint32_t e = F32_EXP(bits), f = F32_FRAC(bits);
    if (e == 0) {
        *exp = -149;
        return f;
    }
    *exp = (int)e - 150;
    return f | 0x800000u;
}

/* floor(log2 |x|) of a finite non-zero fp32, subnormals included. */
int mxfa_f32_ilogb(uint32_t bits);

typedef unsigned __int128 mxfa_u128;

typedef enum f32_rounding {
    F32_ROUND_NEAREST_EVEN = 0,
    F32_ROUND_TOWARD_ZERO = 1
} f32_rounding;

/*
 * Round sig * 2^exp to fp32 (sign 0 or 1), with gradual underflow. When
 * `sticky` is set, the true magnitude is a little above sig * 2^exp (bits
 * below it were non-zero); sig must then carry at least two bits below the
 * result's last place, so that the remainder cannot reach half an ulp. Overflow gives
 * Inf under nearest-even; under toward-zero it gives the largest finite
 * value, or Inf when `rz_overflow_inf` is set. The one round-and-pack of
 * fp32 that integer-emulated arithmetic goes through.
 */
uint32_t mxfa_f32_round_pack_wide(uint32_t sign, mxfa_u128 sig, int exp, int sticky, f32_rounding rounding,
                                  int rz_overflow_inf);

/* Nearest-even rounding of sig * 2^exp, the common case. */
static inline uint32_t mxfa_f32_round_pack(uint32_t sign, uint64_t sig, int exp)
{
    return mxfa_f32_round_pack_wide(sign, sig, exp, 0, F32_ROUND_NEAREST_EVEN, 1);
}

/* ---- FP8 element formats as data ---- */
typedef struct fp8_format {
    mxfa_dtype dtype;
    int mbits;        /* stored fraction bits: 3 (E4M3) or 2 (E5M2) */
    int emin;         /* exponent of the smallest normal: -6 or -14 */
    int emax;         /* exponent of the largest normal binade: 8 or 15 */
    uint8_t max_code; /* largest finite magnitude code: 0x7E or 0x7B */
    uint8_t nan_code; /* the NaN magnitude code written: 0x7F (both) */
    int has_inf;      /* E5M2: 0x7C is Inf */
    uint32_t rcp_max; /* fl(1/max) as fp32 bits, round to nearest even */
} fp8_format;

extern const fp8_format mxfa_fp8_e4m3;
extern const fp8_format mxfa_fp8_e5m2;

/* The format of an element dtype, or NULL. */
const fp8_format *mxfa_fp8_format(mxfa_dtype dtype);

typedef enum fp8_rounding {
    FP8_ROUND_NEAREST_EVEN = 0,
    FP8_ROUND_NEAREST_AWAY = 1 /* ties away from zero (microxcaling) */
} fp8_rounding;

/*
 * FP8 code of x * 2^scale_exp, where x is fp32 bits: the scaling is exact
 * and the result is rounded once. NaN gives nan_code with x's sign; Inf and
 * finite overflow follow `overflow`.
 */
uint8_t mxfa_fp8_encode(const fp8_format *fmt, uint32_t x, int scale_exp,
                        fp8_rounding rounding, mxfa_overflow overflow);

/*
 * fp32 bits of code * 2^scale_exp: exact (every such value with scale_exp in
 * [-127, 127] is representable in fp32) except beyond FLT_MAX, which is Inf.
 * NaN codes give the quiet NaN with the code's sign.
 */
uint32_t mxfa_fp8_decode(const fp8_format *fmt, uint8_t code, int scale_exp);

/* ---- E8M0 ---- */
uint8_t mxfa_e8m0_encode_bits(uint32_t x, mxfa_e8m0_rounding rounding, mxfa_overflow overflow);

/* ---- bf16 ---- */
static inline uint32_t bf16_to_f32_bits(uint16_t h)
{
    return (uint32_t)h << 16;
}
uint16_t mxfa_f32_bits_to_bf16(uint32_t bits);

/* ---- f16 (IEEE binary16) ---- */
/* fp32 -> f16 to nearest even: subnormals kept, overflow to Inf, NaN quiet */
uint16_t mxfa_f32_bits_to_f16(uint32_t bits);
uint32_t mxfa_f16_to_f32_bits(uint16_t h); /* exact */

/* x >= 0 (or NaN), below 65520, rounded to the nearest f16 value, ties to
 * even, as an fp32 (what mxfa_f32_bits_to_f16 and back give): c = 2^(e + 13),
 * e x's exponent but at least -14 (the f16 subnormals' step is 2^-24), has
 * x's f16 step as its fp32 ulp and x + c < 2c, so x + c rounds x to that
 * step, ties to even, and subtracting c is exact. */
static inline float f32_round_f16(float x)
{
    uint32_t e = f32_bits(x) & 0x7F800000u;
    e = e < 0x38800000u ? 0x38800000u : e;
    const float c = f32_from_bits(e + (13u << 23));
    return (x + c) - c;
}

#endif
