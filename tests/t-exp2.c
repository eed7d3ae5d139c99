/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The softmax's exp2 and log2: special values, exact cases, exp2 against a
 * model written from its definition in docs/NUMERICS.md (rintf for the
 * range reduction, ldexpf for the power of two) bit for bit, and the
 * maximum relative error against libm's double-precision exp2/log2 over the
 * softmax range: every fp32 input in [-126, 8] for exp2 and every positive
 * normal input for log2 with MXFA_CHECK_EXPENSIVE=1, every 61st input
 * otherwise. The bounds checked are those docs/NUMERICS.md states.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"

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

int main(void)
{
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
