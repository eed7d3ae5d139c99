/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The softmax's exp2 and log2: special values, exact cases, exp2 against a
 * model written from its definition in docs/NUMERICS.md (rintf for the
 * range reduction, ldexpf for the power of two) bit for bit, and the
 * maximum relative error against libm's double-precision exp2/log2 over the
 * softmax range: every fp32 input in [-126, 8] for exp2 and every positive
 * normal input for log2 with MXFA_CHECK_EXPENSIVE=1, every 61st input
 * otherwise. The bounds checked are those docs/NUMERICS.md states.
 * And the softmax's f16 exponential on every input (against a
 * double-double 2^h), with the f16 conversions it rests on.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"

#include "../gpu/common/exp2_f16_slow.h"

#define EXP2_BOUND 7.5e-5 /* measured 7.48e-5 */
#define LOG2_BOUND 2.5e-7 /* measured 2.0e-7 */

/* exp2's polynomial for 2^f on [-1/2, 1/2], C0 first (fp32 bits) */
static const uint32_t exp2_c[4] = {0x3F7FFB49u, 0x3F31798Du, 0x3E786F0Du, 0x3D61FBB0u};

/* exp2 as docs/NUMERICS.md defines it: x clamped to [-127, 128], n its
 * nearest integer (ties to even), p(x - n) by Horner's rule in fmas, times
 * 2^n rounded once; 2^-127 is taken as 0 and 2^128 as Inf. */
static float exp2_model(float x)
{
    if (isnan(x))
        return x;
    float xc = fminf(fmaxf(x, -127.0f), 128.0f), n = rintf(xc), f = xc - n;
    float p = fmaf(fmaf(fmaf(f32_of(exp2_c[3]), f, f32_of(exp2_c[2])), f, f32_of(exp2_c[1])), f, f32_of(exp2_c[0]));
    float s = n == 128.0f ? INFINITY : n == -127.0f ? 0.0f : ldexpf(1.0f, (int)n);
    return p * s;
}

/* The value of an f16 code, from its fields (independent of lib/f16.c) */
static double f16_value(uint16_t h)
{
    const int e = h >> 10 & 0x1F, f = h & 0x3FF;
    double v = e == 0x1F ? (f ? NAN : INFINITY) : e ? ldexp(1024 + f, e - 25) : ldexp(f, -24);
    return h & 0x8000u ? -v : v;
}

/* RN_f16(x) as a value, by the arithmetic of its definition: the nearest
 * multiple of the f16 step at x's binade (2^-24 below 2^-14), ties to even
 * (nearbyint in the default mode), 65520 and beyond to Inf. */
static double f16_round_model(float x)
{
    if (isnan(x) || isinf(x))
        return x;
    const double a = fabs((double)x);
    if (a >= 65520.0)
        return x < 0 ? -INFINITY : INFINITY;
    int k = 0;
    if (a != 0)
        frexp(a, &k);
    const int step = k - 1 < -14 ? -24 : k - 1 - 10;
    const double r = ldexp(nearbyint(ldexp(a, -step)), step);
    return x < 0 || (x == 0 && signbit(x)) ? -r : r;
}

/* The f16 conversions: widening every code (value and sign), narrowing a
 * strided sweep of every fp32 input (all with MXFA_CHECK_EXPENSIVE=1) and
 * every tie between f16 neighbours with its fp32 neighbours. */
static void check_f16_conversions(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float x = mxfa_f16_to_f32((uint16_t)h);
        const double v = f16_value((uint16_t)h);
        bad += isnan(v) ? !isnan(x) : ((double)x != v || !signbit(x) != !signbit(v));
        bad += !isnan(v) && mxfa_f32_to_f16(x) != h; /* and back */
    }
    ok(bad == 0, "f16 -> fp32 exact on all 65536 codes, and back");
    uint64_t checked = 0, differ = 0;
    uint32_t first = 0;
    const uint32_t step = expensive() ? 1 : 257;
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step) {
        const float x = f32_of((uint32_t)b);
        const uint16_t h = mxfa_f32_to_f16(x);
        const double want = f16_round_model(x), got = f16_value(h);
        checked++;
        int wrong = isnan(x) ? !isnan(got) || (h & 0x8000u) != (b >> 16 & 0x8000u)
                             : got != want || !signbit(got) != !signbit(want);
        if (wrong && !differ++)
            first = (uint32_t)b;
    }
    for (uint32_t h = 0; h < 0x7C00u; h++) {
        const float lo = (float)f16_value((uint16_t)h), hi = h == 0x7BFFu ? 65536.0f : (float)f16_value((uint16_t)(h + 1));
        const uint32_t mid = bits_of((lo + hi) / 2);
        for (int d = -2; d <= 2; d++)
            for (int neg = 0; neg < 2; neg++) {
                const float x = f32_of((mid + (uint32_t)d) | (uint32_t)neg << 31);
                checked++;
                if (f16_value(mxfa_f32_to_f16(x)) != f16_round_model(x) && !differ++)
                    first = bits_of(x);
            }
    }
    if (!ok(differ == 0, "fp32 -> f16 rounds to nearest even (subnormals, overflow, NaN) on %llu inputs",
            (unsigned long long)checked))
        diag("%llu differ, the first at 0x%08x", (unsigned long long)differ, (unsigned)first);
}

/* Double-double arithmetic (a value hi + lo, |lo| <= ulp(hi) / 2) from
 * plain double operations (Dekker's exact products by splitting, Knuth's
 * exact sums), for a 2^x about 2^-100 accurate that owes nothing to libm,
 * to long double (which valgrind computes in double precision) or to fma. */
typedef struct dd {
    double hi, lo;
} dd;

static dd two_sum(double a, double b)
{
    const double s = a + b, bb = s - a;
    return (dd){s, (a - (s - bb)) + (b - bb)};
}

static dd two_prod(double a, double b)
{
    const double p = a * b, ca = 134217729.0 * a, cb = 134217729.0 * b; /* 2^27 + 1 */
    const double ah = ca - (ca - a), al = a - ah, bh = cb - (cb - b), bl = b - bh;
    return (dd){p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

static dd dd_norm(double hi, double lo)
{
    const double s = hi + lo;
    return (dd){s, lo - (s - hi)};
}

static dd dd_add(dd a, dd b)
{
    const dd s = two_sum(a.hi, b.hi);
    return dd_norm(s.hi, s.lo + a.lo + b.lo);
}

static dd dd_mul(dd a, dd b)
{
    const dd p = two_prod(a.hi, b.hi);
    return dd_norm(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}

static dd dd_div_int(dd a, int k) /* a / k, k small */
{
    const double q1 = a.hi / k;
    const dd r = dd_add(a, dd_mul((dd){q1, 0}, (dd){-(double)k, 0}));
    return dd_norm(q1, (r.hi + r.lo) / k);
}

/* 2^x for x = n + f, n an integer, |f| <= 1/2 (x is an f16 here): e^(f ln 2)
 * by its Taylor series to the term below 2^-110, times 2^n. */
static dd exp2_dd(double x)
{
    const double n = nearbyint(x), f = x - n; /* exact */
    const dd ln2 = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56};
    const dd t = dd_mul((dd){f, 0}, ln2);
    dd sum = {1, 0}, term = {1, 0};
    for (int k = 1; k <= 30; k++) {
        term = dd_div_int(dd_mul(term, t), k);
        sum = dd_add(sum, term);
    }
    return (dd){ldexp(sum.hi, (int)n), ldexp(sum.lo, (int)n)};
}

/* sign of (hi + lo) - v, exactly: hi - v is exact where v is near hi
 * (within a factor of two), and rounding a sum never flips its sign */
static double dd_minus(dd e, double v)
{
    return (e.hi - v) + e.lo;
}

/* The forward softmax's exponential on every f16 input against RZ_f16(2^h)
 * decided here from a double-double 2^h: the largest f16 at or below the
 * value, refused (counted as a failure) where the 2^-100 error could
 * decide it. Also the least distance of a non-integer h's 2^h from an f16,
 * which is what makes the library's double-precision computation exact,
 * and the largest relative error of E. */
static void check_exp2_f16(void)
{
    int bad = 0, undecided = 0;
    double margin = 1, worst = 0;
    uint16_t margin_at = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const uint16_t got = mxfa_exp2_f16((uint16_t)h);
        const double x = f16_value((uint16_t)h);
        uint16_t want;
        if (isnan(x)) {
            bad += !isnan(f16_value(got));
            continue;
        }
        if (h == 0x8001u) { /* the contract's one exception */
            bad += got != 0x3C00u;
            continue;
        }
        const int integer = x == floor(x);
        const dd e = isinf(x) ? (dd){0, 0}
                     : integer ? (dd){ldexp(1.0, x < -100 ? -100 : x > 100 ? 100 : (int)x), 0}
                               : exp2_dd(x);
        if (isinf(x))
            want = x > 0 ? 0x7C00u : 0;
        else if (dd_minus(e, 65504.0) >= 0)
            want = 0x7BFFu;
        else if (dd_minus(e, 0x1p-24) < 0)
            want = 0;
        else {
            uint16_t lo = 1, hi = 0x7BFFu; /* the largest code whose value is <= e */
            while (lo < hi) {
                const uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
                if (dd_minus(e, f16_value(mid)) >= 0)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            want = lo;
            const double below = dd_minus(e, f16_value(lo)), above = -dd_minus(e, f16_value((uint16_t)(lo + 1)));
            const double near = (below < above ? below : above) / e.hi;
            if (!integer) {
                if (near < 0x1p-60)
                    undecided++;
                if (near < margin) {
                    margin = near;
                    margin_at = (uint16_t)h;
                }
            }
            if (e.hi >= 0x1p-14 && below / e.hi > worst) /* normal results */
                worst = below / e.hi;
        }
        bad += got != want;
    }
    ok(bad == 0 && undecided == 0, "f16 exp2: RZ_f16(2^h) on all 65536 inputs but -2^-24 (gives 1), NaN to NaN");
    ok(margin > 0x1p-26, "f16 exp2: 2^h of a non-integer h lies at least 2^%.2f from an f16 (at h = 0x%04x), far beyond a double's error",
       log2(margin), margin_at);
    ok(worst < 0x1p-10, "f16 exp2: relative error below 2^-10 where 2^h is a normal f16 (largest %.3g), the rounding toward zero's", worst);
}

/* The GPU's list of E where its bracket of ex2.approx.f32 cannot decide
 * (gpu/common/exp2_f16_slow.h): in increasing order of h, each E
 * mxfa_exp2_f16's, and exactly the non-integer h <= 0 whose 2^h lies within
 * 2^-18 of an f16 (the double-double 2^h decides it). */
static void check_slow_list(void)
{
    int bad = 0, n = 0;
    for (int i = 0; i < MXFA_E16_SLOW_COUNT; i++) {
        const uint16_t h = (uint16_t)(mxfa_e16_slow[i] >> 16);
        bad += (uint16_t)mxfa_e16_slow[i] != mxfa_exp2_f16(h);
        bad += i > 0 && (mxfa_e16_slow[i - 1] >> 16) >= h;
    }
    for (uint32_t h = 0x8000u; h < 0xFC00u; h++) {
        const double x = f16_value((uint16_t)h);
        if (x == floor(x))
            continue;
        const dd e = exp2_dd(x);
        if (e.hi < 0x1p-25)
            continue;
        /* an f16 within 2^-18 of 2^h: the ends of the band round toward
         * zero to different f16 (compared through their values) */
        const double lo = e.hi * (1 - 0x1p-18), hi = e.hi * (1 + 0x1p-18);
        const float a = (float)f16_value(mxfa_f32_to_f16((float)lo)), b = (float)f16_value(mxfa_f32_to_f16((float)hi));
        int near = 0;
        for (uint16_t y = mxfa_f32_to_f16(a) - 1; y <= mxfa_f32_to_f16(b) + 1; y++)
            near |= f16_value(y) >= lo && f16_value(y) <= hi;
        if (!near)
            continue;
        n++;
        int found = 0;
        for (int i = 0; i < MXFA_E16_SLOW_COUNT; i++)
            found |= mxfa_e16_slow[i] >> 16 == h;
        bad += !found;
    }
    ok(bad == 0 && n == MXFA_E16_SLOW_COUNT,
       "the GPU's list of undecidable exponents: %d entries, in order, each E as mxfa_exp2_f16, exactly the %d "
       "non-integer h whose 2^h lies within 2^-18 of an f16", MXFA_E16_SLOW_COUNT, n);
}

int main(void)
{
    check_f16_conversions();
    check_exp2_f16();
    check_slow_list();

    const float c0 = f32_of(exp2_c[0]);
    int exact = mxfa_exp2(0.0f) == c0 && bits_of(mxfa_exp2(-0.0f)) == exp2_c[0];
    for (int k = -126; k <= 127; k++) /* C0 2^k, rounded once where it is subnormal */
        exact &= mxfa_exp2((float)k) == ldexpf(c0, k);
    ok(exact, "exp2 of an integer k is C0 2^k (exp2(0) = C0 = %.9g)", (double)c0);
    ok(isinf(mxfa_exp2(128.0f)) && isinf(mxfa_exp2(127.5f)) && isfinite(mxfa_exp2(nextafterf(127.5f, 0.0f))) &&
           isinf(mxfa_exp2(INFINITY)) && isinf(mxfa_exp2(3.0e38f)),
       "exp2: +Inf from 127.5 (n = 128) on");
    ok(mxfa_exp2(-126.5f) > 0.0f && mxfa_exp2(-126.5f) < 0x1p-126f && bits_of(mxfa_exp2(nextafterf(-126.5f, -127.0f))) == 0 &&
           bits_of(mxfa_exp2(-127.0f)) == 0 && bits_of(mxfa_exp2(-1000.0f)) == 0 && bits_of(mxfa_exp2(-INFINITY)) == 0,
       "exp2: subnormal results kept down to -126.5, +0 below (n = -127)");
    ok(bits_of(mxfa_exp2(f32_of(0x7FC01234u))) == 0x7FC01234u && bits_of(mxfa_exp2(f32_of(0xFFC00000u))) == 0xFFC00000u,
       "exp2 of a NaN is that NaN");
    ok(mxfa_log2(1.0f) == 0.0f && mxfa_log2(256.0f) == 8.0f && mxfa_log2(0x1p-149f) == -149.0f &&
           mxfa_log2(0x1p-126f) == -126.0f,
       "log2 of powers of two is exact, subnormals included");
    ok(isinf(mxfa_log2(0.0f)) && mxfa_log2(-0.0f) < 0 && isnan(mxfa_log2(-1.0f)) && isnan(mxfa_log2(NAN)) &&
           isinf(mxfa_log2(INFINITY)),
       "log2: -Inf at zero, NaN below zero, +Inf at +Inf");

    const uint32_t step = expensive() ? 1 : 61;
    double worst = 0;
    float worst_at = 0;
    uint64_t n = 0;
    uint64_t differ = 0, checked = 0;
    uint32_t first = 0;
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step) {
        float x = f32_of((uint32_t)b);
        checked++;
        if (bits_of(mxfa_exp2(x)) != bits_of(exp2_model(x)) && !differ++)
            first = (uint32_t)b;
        if (!(x >= -126.0f && x <= 8.0f))
            continue;
        double want = exp2((double)x), got = (double)mxfa_exp2(x);
        double e = fabs(got - want) / want;
        n++;
        if (e > worst) {
            worst = e;
            worst_at = x;
        }
    }
    if (!ok(differ == 0, "exp2 follows its definition bit for bit on %llu inputs", (unsigned long long)checked))
        diag("%llu differ, the first at 0x%08x", (unsigned long long)differ, (unsigned)first);
    ok(worst <= EXP2_BOUND, "exp2 over %llu inputs in [-126, 8]: max relative error %.3g (at %a), bound %.2g",
       (unsigned long long)n, worst, (double)worst_at, EXP2_BOUND);
    worst = 0;
    n = 0;
    for (uint64_t b = 0x00800000u; b < 0x7F800000u; b += step) {
        float x = f32_of((uint32_t)b);
        double want = log2((double)x), got = (double)mxfa_log2(x);
        double e = want == 0 ? fabs(got) : fabs(got - want) / fabs(want);
        n++;
        if (e > worst) {
            worst = e;
            worst_at = x;
        }
    }
    ok(worst <= LOG2_BOUND, "log2 over %llu positive normal inputs: max relative error %.3g (at %a), bound %.2g",
       (unsigned long long)n, worst, (double)worst_at, LOG2_BOUND);
    return done_testing();
}
