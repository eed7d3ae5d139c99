/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Float64 and float16 inputs with the float32 each must become, known by
 * construction rather than by a conversion. For float64: two neighbouring
 * float32 values lo and hi, the point halfway between them (a tie: the one
 * whose last bit is even wins), the doubles just either side of it (the
 * nearer one wins), and points a fraction of the way; above FLT_MAX the
 * next value up is 2^128, which rounds to Inf. For float16: the value of
 * its fields, exponent and significand taken apart.
 */
#ifndef MXFA_NARROWING_H
#define MXFA_NARROWING_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "tap.h"

typedef struct narrow_case {
    double x;      /* the float64 input */
    uint32_t want; /* the bits of the float32 it rounds to; 0x7FC00000: any NaN */
} narrow_case;

/* The value of the non-negative float32 bits b, where the bits of +Inf
 * stand for 2^128, the next value up from FLT_MAX for rounding. */
static double narrow_value(uint32_t b)
{
    return b == 0x7F800000u ? ldexp(1.0, 128) : (double)f32_of(b);
}

/* The cases between the float32 of bits b (non-negative, below +Inf) and
 * the next one up, and their negatives: ten in c. */
static __attribute__((unused)) int narrow_between(uint32_t b, narrow_case *c)
{
    const double lo = narrow_value(b), hi = narrow_value(b + 1);
    const double mid = lo + (hi - lo) / 2; /* exact: hi - lo is a power of two */
    const narrow_case up[5] = {
        {lo, b},
        {mid, (b & 1) ? b + 1 : b},
        {nextafter(mid, 0), b},
        {nextafter(mid, INFINITY), b + 1},
        {lo + (hi - lo) * 0.75, b + 1},
    };
    for (int i = 0; i < 5; i++) {
        c[2 * i] = up[i];
        c[2 * i + 1] = (narrow_case){-up[i].x, up[i].want | 0x80000000u};
    }
    return 10;
}

/* A double near the float x (finite, below FLT_MAX in magnitude), a
 * fraction t of the way from it to its neighbour away from zero, with t
 * in [0.05, 0.45] or [0.55, 0.95]: far from the tie. */
static __attribute__((unused)) narrow_case narrow_near(float x, double t)
{
    const uint32_t b = bits_of(x) & 0x7FFFFFFFu, sign = bits_of(x) & 0x80000000u;
    const double lo = narrow_value(b), y = lo + (narrow_value(b + 1) - lo) * t;
    return (narrow_case){sign ? -y : y, sign | (t < 0.5 ? b : b + 1)};
}

/* The boundary cases: zero and the subnormals, the subnormal-normal
 * boundary, around 1, the top of fp32, beyond it, and NaN; then those of
 * `random` neighbours drawn from the whole range. Returns the count,
 * NARROW_EDGE_CASES + 10 * random (c must hold as many). */
enum { NARROW_EDGE_CASES = 128 };
static __attribute__((unused)) int narrow_cases(narrow_case *c, int random)
{
    static const uint32_t edges[] = {0, 1, 2, 0x007FFFFE, 0x007FFFFF, 0x00800000, 0x3F7FFFFF,
                                     0x3F800000, 0x3F800001, 0x4B7FFFFF, 0x7F7FFFFE, 0x7F7FFFFF};
    int n = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        n += narrow_between(edges[i], c + n);
    const narrow_case beyond[] = {
        {INFINITY, 0x7F800000u},     {-INFINITY, 0xFF800000u}, {1e300, 0x7F800000u},
        {-1e300, 0xFF800000u},       {DBL_MAX, 0x7F800000u},   {1e-300, 0},
        {-1e-300, 0x80000000u},      {NAN, 0x7FC00000u},
    };
    for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++)
        c[n++] = beyond[i];
    for (int i = 0; i < random; i++)
        n += narrow_between((uint32_t)rng_below(0x7F7FFFFFu), c + n);
    return n;
}

/* The float32 of float16 bits h, from its fields: (-1)^s m 2^(e - 25) with
 * m = 1024 + f for normal halves, m = f (and e = 1) for subnormal ones. */
static __attribute__((unused)) float narrow_half(uint16_t h)
{
    const int s = h >> 15, e = (h >> 10) & 0x1F, f = h & 0x3FF;
    float v;
    if (e == 0x1F)
        v = f ? NAN : INFINITY;
    else
        v = ldexpf((float)(e ? 1024 + f : f), (e ? e : 1) - 25);
    return s ? -v : v;
}

/* Whether the float32 bits got are what a case wants (any NaN for NaN). */
static __attribute__((unused)) int narrow_match(uint32_t got, uint32_t want)
{
    if (want == 0x7FC00000u)
        return (got & 0x7F800000u) == 0x7F800000u && (got & 0x7FFFFFu) != 0;
    return got == want;
}

#endif
