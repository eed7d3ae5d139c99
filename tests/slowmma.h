/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A slow, independent reference of the tensor-core numerics models, for the
 * tests. It shares no code with the library: every value is an exact
 * fixed-point big integer (value * 2^BN_LSB in BN_LIMBS 64-bit limbs, two's
 * complement), operands are decoded from the OCP field formulas, and each
 * model is written straight from its definition in docs/NUMERICS.md:
 *
 *   fused step:  emax = the largest "raw" exponent of the non-zero terms
 *                (operand exponents added for a product, subnormals at the
 *                format's minimum exponent; the fp32 exponent for the
 *                accumulator); every term becomes trunc(term / 2^(emax-F))
 *                * 2^(emax-F) (toward zero); the exact sum is cut toward zero
 *                to `sum_bits` significant bits and then to fp32.
 *   promotion:   round-to-nearest-even of acc + partial * 2^s.
 */
#ifndef MXFA_SLOWMMA_H
#define MXFA_SLOWMMA_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define BN_LIMBS 12 /* 768 bits */
#define BN_LSB 384  /* the value of bit 0 is 2^-384 */

typedef struct bn {
    uint64_t w[BN_LIMBS]; /* little-endian limbs, two's complement */
} bn;

static __attribute__((unused)) void bn_zero(bn *x)
{
    memset(x, 0, sizeof *x);
}

static __attribute__((unused)) int bn_is_neg(const bn *x)
{
    return (int)(x->w[BN_LIMBS - 1] >> 63);
}

static __attribute__((unused)) int bn_is_zero(const bn *x)
{
    for (int i = 0; i < BN_LIMBS; i++)
        if (x->w[i])
            return 0;
    return 1;
}

static __attribute__((unused)) void bn_add(bn *x, const bn *y)
{
    unsigned __int128 carry = 0;
    for (int i = 0; i < BN_LIMBS; i++) {
        carry += (unsigned __int128)x->w[i] + y->w[i];
        x->w[i] = (uint64_t)carry;
        carry >>= 64;
    }
}

static __attribute__((unused)) void bn_neg(bn *x)
{
    for (int i = 0; i < BN_LIMBS; i++)
        x->w[i] = ~x->w[i];
    bn one;
    bn_zero(&one);
    one.w[0] = 1;
    bn_add(x, &one);
}

/* x = m * 2^e exactly (m >= 0); e + BN_LSB must stay inside the window. */
static __attribute__((unused)) void bn_from(bn *x, uint64_t m, int e)
{
    bn_zero(x);
    int pos = e + BN_LSB;
    while (m && pos < 0) { /* below the window: dropped */
        m >>= 1;
        pos++;
    }
    if (!m || pos >= 64 * BN_LIMBS - 64)
        return;
    int limb = pos / 64, sh = pos % 64;
    x->w[limb] |= m << sh;
    if (sh)
        x->w[limb + 1] |= m >> (64 - sh);
}

static __attribute__((unused)) int bn_bit(const bn *x, int p)
{
    return (int)((x->w[p / 64] >> (p % 64)) & 1);
}

/* index of the highest set bit of a non-negative x, -1 for zero */
static __attribute__((unused)) int bn_top(const bn *x)
{
    for (int i = BN_LIMBS - 1; i >= 0; i--)
        if (x->w[i])
            return 64 * i + 63 - __builtin_clzll(x->w[i]);
    return -1;
}

/* n <= 64 bits of x starting at bit position lo (bits outside the window read 0) */
static __attribute__((unused)) uint64_t bn_get_bits(const bn *x, int lo, int n)
{
    uint64_t r = 0;
    int i = 0;
    while (i < n && lo + i < 0) /* below the window: zeros */
        i++;
    for (; i < n;) {
        int p = lo + i;
        if (p >= 64 * BN_LIMBS)
            break;
        int limb = p / 64, sh = p % 64, take = 64 - sh < n - i ? 64 - sh : n - i;
        uint64_t chunk = x->w[limb] >> sh;
        if (take < 64)
            chunk &= ((uint64_t)1 << take) - 1;
        r |= chunk << i;
        i += take;
    }
    return r;
}

/* any bit set below position p? */
static __attribute__((unused)) int bn_any_below(const bn *x, int p)
{
    for (int i = 0; i < BN_LIMBS && 64 * i < p; i++) {
        uint64_t w = x->w[i];
        if (p < 64 * (i + 1))
            w &= ((uint64_t)1 << (p - 64 * i)) - 1;
        if (w)
            return 1;
    }
    return 0;
}

/* x * 2^s for a non-negative x, bits leaving the window dropped */
static __attribute__((unused)) void bn_shift(bn *x, int s)
{
    bn r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < BN_LIMBS; i++) {
        if (!x->w[i])
            continue;
        for (int b = 0; b < 64; b++)
            if ((x->w[i] >> b) & 1) {
                int q = 64 * i + b + s;
                if (q >= 0 && q < 64 * BN_LIMBS - 1)
                    r.w[q / 64] |= (uint64_t)1 << (q % 64);
            }
    }
    *x = r;
}

/* clear every bit below position p (truncation toward zero of a magnitude) */
static __attribute__((unused)) void bn_clear_below(bn *x, int p)
{
    for (int i = 0; i < BN_LIMBS; i++) {
        if (p >= 64 * (i + 1))
            x->w[i] = 0;
        else if (p > 64 * i)
            x->w[i] &= ~(((uint64_t)1 << (p - 64 * i)) - 1);
    }
}

/* ---- values ---- */

typedef enum { SV_ZERO, SV_FINITE, SV_INF, SV_NAN } sv_class;

typedef struct sval {
    sv_class cls;
    int neg;
    bn mag;  /* |value| * 2^BN_LSB */
    int raw; /* alignment exponent */
} sval;

/* Decode a minifloat with `eb` exponent bits, `mb` fraction bits, bias,
 * from its fields; e4m3fn has no Inf and NaN only at all ones. */
static __attribute__((unused)) sval slow_decode_mini(unsigned code, int eb, int mb, int bias, int fn_style)
{
    sval v;
    memset(&v, 0, sizeof v);
    unsigned sign = code >> (eb + mb), field = (code >> mb) & ((1u << eb) - 1), frac = code & ((1u << mb) - 1);
    v.neg = (int)sign;
    unsigned top = (1u << eb) - 1;
    if (fn_style) {
        if (field == top && frac == (1u << mb) - 1) {
            v.cls = SV_NAN;
            return v;
        }
    } else if (field == top) {
        v.cls = frac ? SV_NAN : SV_INF;
        return v;
    }
    if (field == 0 && frac == 0) {
        v.cls = SV_ZERO;
        return v;
    }
    v.cls = SV_FINITE;
    int emin = 1 - bias;
    if (field == 0) {
        v.raw = emin;
        bn_from(&v.mag, frac, emin - mb);
    } else {
        v.raw = (int)field - bias;
        bn_from(&v.mag, frac | (1u << mb), v.raw - mb);
    }
    return v;
}

static __attribute__((unused)) sval slow_e4m3(unsigned c) { return slow_decode_mini(c, 4, 3, 7, 1); }
static __attribute__((unused)) sval slow_e5m2(unsigned c) { return slow_decode_mini(c, 5, 2, 15, 0); }
static __attribute__((unused)) sval slow_bf16(unsigned h) { return slow_decode_mini(h, 8, 7, 127, 0); }
static __attribute__((unused)) sval slow_f32(uint32_t b) { return slow_decode_mini(b, 8, 23, 127, 0); }

/* The exact product, with 2^scale folded into its value and raw exponent. */
static __attribute__((unused)) sval slow_mul(const sval *a, const sval *b, int scale)
{
    sval p;
    memset(&p, 0, sizeof p);
    p.neg = a->neg ^ b->neg;
    if (a->cls == SV_NAN || b->cls == SV_NAN || (a->cls == SV_INF && b->cls == SV_ZERO) ||
        (a->cls == SV_ZERO && b->cls == SV_INF)) {
        p.cls = SV_NAN;
        return p;
    }
    if (a->cls == SV_INF || b->cls == SV_INF) {
        p.cls = SV_INF;
        return p;
    }
    if (a->cls == SV_ZERO || b->cls == SV_ZERO) {
        p.cls = SV_ZERO;
        return p;
    }
    p.cls = SV_FINITE;
    p.raw = a->raw + b->raw + scale;
    /* operand magnitudes have at most 24 significant bits: multiply them as
     * integers and place the product */
    int la = bn_top(&a->mag) - 23, lb = bn_top(&b->mag) - 23;
    uint64_t ma = bn_get_bits(&a->mag, la, 24), mb = bn_get_bits(&b->mag, lb, 24);
    bn_from(&p.mag, ma * mb, la + lb - 2 * BN_LSB + scale);
    return p;
}

/* fp32 bits of a magnitude (plus sign), cut to `bits` significant bits
 * toward zero and then rounded to fp32 by `rne` (1: nearest even, 0: toward
 * zero). Overflow: Inf for nearest even; for toward zero, Inf when
 * rz_overflow_inf, else FLT_MAX. */
static __attribute__((unused)) uint32_t slow_to_f32(int neg, const bn *mag_in, int bits, int rne, int rz_overflow_inf)
{
    bn mag = *mag_in;
    uint32_t sign = neg ? 0x80000000u : 0;
    int top = bn_top(&mag);
    if (top < 0)
        return sign;
    if (bits > 0 && top - bits + 1 > 0)
        bn_clear_below(&mag, top - bits + 1);
    int e = top - BN_LSB; /* floor(log2 |v|) */
    if (e > 127)
        return sign | (rne || rz_overflow_inf ? 0x7F800000u : 0x7F7FFFFFu);
    int ulp = (e < -126 ? -126 : e) - 23; /* exponent of the last place */
    int up = ulp + BN_LSB;               /* its bit position */
    /* q = floor(|v| / 2^ulp), and the remainder against half */
    uint64_t q = top >= up ? bn_get_bits(&mag, up, top - up + 1) : 0;
    if (up > 0 && rne) {
        int half = bn_bit(&mag, up - 1), rest = bn_any_below(&mag, up - 1);
        if (half && (rest || (q & 1)))
            q++;
    }
    /* repack: q ulps of 2^ulp */
    uint32_t out;
    if (e < -126) {
        out = (uint32_t)q; /* subnormal, or the smallest normal after a carry */
    } else {
        if (q >> 24) { /* carry into the next binade */
            q >>= 1;
            e++;
            if (e > 127)
                return sign | (rne || rz_overflow_inf ? 0x7F800000u : 0x7F7FFFFFu);
        }
        out = ((uint32_t)(e + 127) << 23) | ((uint32_t)q & 0x7FFFFFu);
    }
    return sign | out;
}

typedef struct slow_step {
    int frac_bits; /* -1: exact */
    int sum_bits;  /* -1: exact */
    int rz_overflow_inf;
    int emax_floor;    /* emax is never below this (where zeros sit) */
    int zero_positive; /* every zero result is +0 */
} slow_step;

/* One fused step over n values. Returns fp32 bits, or with sum_bits -1
 * stores the exact signed sum in *exact (and its class) */
static __attribute__((unused)) uint32_t slow_fused(const slow_step *st, const sval *t, int n, sval *exact)
{
    int nan = 0, pinf = 0, ninf = 0, any = 0, allneg0 = 1, emax = -100000;
    for (int i = 0; i < n; i++) {
        if (t[i].cls == SV_NAN)
            nan = 1;
        else if (t[i].cls == SV_INF)
            *(t[i].neg ? &ninf : &pinf) = 1;
        else if (t[i].cls == SV_FINITE) {
            any = 1;
            allneg0 = 0;
            if (t[i].raw > emax)
                emax = t[i].raw;
        } else if (!t[i].neg)
            allneg0 = 0;
    }
    sval r;
    memset(&r, 0, sizeof r);
    if (nan || (pinf && ninf)) {
        r.cls = SV_NAN;
    } else if (pinf || ninf) {
        r.cls = SV_INF;
        r.neg = ninf;
    } else if (!any) {
        r.cls = SV_ZERO;
        r.neg = allneg0;
    } else {
        bn sum;
        bn_zero(&sum);
        for (int i = 0; i < n; i++) {
            if (t[i].cls != SV_FINITE)
                continue;
            bn m = t[i].mag;
            if (st->frac_bits >= 0) {
                int e = emax > st->emax_floor ? emax : st->emax_floor;
                int gpos = e - st->frac_bits + BN_LSB;
                if (gpos > 0)
                    bn_clear_below(&m, gpos); /* toward zero: on the magnitude */
            }
            if (t[i].neg)
                bn_neg(&m);
            bn_add(&sum, &m);
        }
        if (bn_is_zero(&sum)) {
            r.cls = SV_ZERO; /* exact cancellation: +0 */
        } else {
            r.cls = SV_FINITE;
            r.neg = bn_is_neg(&sum);
            if (r.neg)
                bn_neg(&sum);
            r.mag = sum;
        }
    }
    if (st->sum_bits < 0) {
        *exact = r;
        return 0;
    }
    switch (r.cls) {
    case SV_NAN: return 0x7FFFFFFFu;
    case SV_INF: return r.neg ? 0xFF800000u : 0x7F800000u;
    case SV_ZERO: return r.neg && !st->zero_positive ? 0x80000000u : 0;
    default: {
        uint32_t bits = slow_to_f32(r.neg, &r.mag, st->sum_bits, 0, st->rz_overflow_inf);
        return (bits & 0x7FFFFFFFu) == 0 && st->zero_positive ? 0 : bits;
    }
    }
}

/* acc + v * 2^s rounded once to nearest even */
static __attribute__((unused)) uint32_t slow_promote(const sval *v_in, int s, uint32_t acc_bits)
{
    sval a = slow_f32(acc_bits), v = *v_in;
    if (v.cls == SV_NAN || a.cls == SV_NAN || (v.cls == SV_INF && a.cls == SV_INF && v.neg != a.neg))
        return 0x7FFFFFFFu;
    if (v.cls == SV_INF || a.cls == SV_INF) {
        int neg = v.cls == SV_INF ? v.neg : a.neg;
        return neg ? 0xFF800000u : 0x7F800000u;
    }
    if (v.cls == SV_ZERO && a.cls == SV_ZERO)
        return (v.neg && a.neg) ? 0x80000000u : 0;
    if (v.cls == SV_ZERO)
        return acc_bits;
    /* v * 2^s */
    bn vs = v.mag;
    bn_shift(&vs, s);
    bn sum = a.mag;
    if (a.neg)
        bn_neg(&sum);
    if (v.neg)
        bn_neg(&vs);
    bn_add(&sum, &vs);
    if (bn_is_zero(&sum))
        return 0;
    int neg = bn_is_neg(&sum);
    if (neg)
        bn_neg(&sum);
    return slow_to_f32(neg, &sum, 0, 1, 1);
}

#endif
