/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Slow, independent references for the tests. They share no code with the
 * library: values are built with ldexp in double precision (which holds
 * every fp32, FP8 and E8M0 value and every midpoint between neighbouring
 * FP8 values exactly), and rounding is decided by comparing against the
 * exact midpoint in a table of all the format's values, not by bit
 * manipulation.
 */
#ifndef MXFA_SLOWFP8_H
#define MXFA_SLOWFP8_H

#include <math.h>
#include <stdint.h>

typedef struct slow_fmt {
    int ebits, mbits, bias;
    int has_inf;      /* E5M2 */
    uint8_t max_code; /* largest finite magnitude */
    double max_value;
    int emax;         /* floor(log2 max_value) */
    double value[129]; /* magnitude codes 0 .. max_code + 1 (one past the top) */
} slow_fmt;

/* The magnitude of a code from its fields, as the OCP spec defines it. */
static __attribute__((unused)) double slow_field_value(int ebits, int mbits, int bias, unsigned mag)
{
    unsigned field = mag >> mbits, frac = mag & ((1u << mbits) - 1);
    (void)ebits;
    if (field == 0)
        return ldexp((double)frac, 1 - bias - mbits);
    return ldexp((double)((1u << mbits) + frac), (int)field - bias - mbits);
}

static __attribute__((unused)) void slow_fmt_init(slow_fmt *f, int e4m3)
{
    f->ebits = e4m3 ? 4 : 5;
    f->mbits = e4m3 ? 3 : 2;
    f->bias = e4m3 ? 7 : 15;
    f->has_inf = !e4m3;
    f->max_code = e4m3 ? 0x7E : 0x7B;
    /* one past the top: 0x7F (480) for E4M3, 0x7C (65536) for E5M2, valued
     * by the same field formula as if the exponent range went on */
    for (unsigned k = 0; k <= f->max_code + 1u; k++)
        f->value[k] = slow_field_value(f->ebits, f->mbits, f->bias, k);
    f->max_value = f->value[f->max_code];
    f->emax = e4m3 ? 8 : 15;
}

/* Decode a code to double (NaN and Inf as the formats define them). */
static __attribute__((unused)) double slow_decode(const slow_fmt *f, uint8_t code)
{
    unsigned mag = code & 0x7F;
    double s = (code & 0x80) ? -1.0 : 1.0;
    if (f->has_inf && mag == 0x7C)
        return s * INFINITY;
    if (mag > f->max_code)
        return NAN;
    return s * f->value[mag];
}

/*
 * Round x to the format: nearest, ties to even code (ties_away: away from
 * zero); beyond the top, overflow saturates (sat) or gives NaN (E4M3) / Inf
 * (E5M2). NaN keeps its sign, code 0x7F.
 */
static __attribute__((unused)) uint8_t slow_encode(const slow_fmt *f, double x, int ties_away, int sat)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return sign | 0x7F;
    double a = fabs(x);
    unsigned k;
    if (isinf(a)) {
        k = f->max_code + 1u;
    } else {
        /* largest k with value[k] <= a, k <= max_code + 1 */
        unsigned lo = 0, hi = f->max_code + 1u;
        if (a >= f->value[hi]) {
            k = hi;
        } else {
            while (hi - lo > 1) {
                unsigned mid = (lo + hi) / 2;
                if (f->value[mid] <= a)
                    lo = mid;
                else
                    hi = mid;
            }
            k = lo;
            double midpoint = (f->value[k] + f->value[k + 1]) / 2; /* exact */
            if (a > midpoint || (a == midpoint && (ties_away || (k & 1))))
                k++;
        }
    }
    if (k > f->max_code)
        return sign | (sat ? f->max_code : (f->has_inf ? 0x7C : 0x7F));
    return sign | (uint8_t)k;
}

/* E8M0 references: the power-of-two exponent clamped to [-127, 127]. */
static __attribute__((unused)) uint8_t slow_e8m0(double x, int ceil_rule, int sat)
{
    if (isnan(x))
        return 0xFF;
    double a = fabs(x);
    if (isinf(a))
        return sat ? 0xFE : 0xFF;
    if (ceil_rule) {
        for (int k = -127; k <= 127; k++)
            if (ldexp(1.0, k) >= a)
                return (uint8_t)(k + 127);
        return sat ? 0xFE : 0xFF;
    }
    int best = -127;
    for (int k = -127; k <= 127; k++)
        if (ldexp(1.0, k) <= a)
            best = k;
    return (uint8_t)(best + 127);
}

#endif
