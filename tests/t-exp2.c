/*
 * The softmax's exp2 and log2: special values, exact powers of two, and the
 * maximum relative error against libm's double-precision exp2/log2 over the
 * softmax range: every fp32 input in [-126, 8] for exp2 and every positive
 * normal input for log2 with MXFA_CHECK_EXPENSIVE=1, every 61st input
 * otherwise. The bounds checked are those docs/NUMERICS.md states.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"

#define EXP2_BOUND 1.0e-7 /* measured 8.2e-8 */
#define LOG2_BOUND 2.5e-7 /* measured 2.0e-7 */

int main(void)
{
    ok(mxfa_exp2(0.0f) == 1.0f && mxfa_exp2(8.0f) == 256.0f && mxfa_exp2(-126.0f) == 0x1p-126f &&
           mxfa_exp2(-3.0f) == 0.125f && mxfa_exp2(127.0f) == 0x1p127f,
       "exp2 of integers is exact");
    ok(isinf(mxfa_exp2(128.0f)) && isinf(mxfa_exp2(INFINITY)) && mxfa_exp2(-INFINITY) == 0.0f &&
           mxfa_exp2(-126.5f) == 0.0f && isnan(mxfa_exp2(NAN)) && bits_of(mxfa_exp2(-1000.0f)) == 0,
       "exp2: +Inf from 128 on, +0 below -126, NaN stays NaN");
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
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step) {
        float x = f32_of((uint32_t)b);
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
