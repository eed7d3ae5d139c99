/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scale rule of a preset as a table over the binade of the block's
 * amax (kern.h, rule_table). Every preset's scale is a non-decreasing
 * function of amax (a correctly rounded product by a positive constant, a
 * power-of-two rounding and a clamp, or a floor of the logarithm), so within
 * a binade it takes at most a few values; where it takes one or two the
 * table keeps the value at the binade's start and the first amax of the
 * second, found by bisection on the reference rule itself. The table is
 * therefore the reference's rule, not a second implementation of it.
 */
#include <pthread.h>

#include "kern.h"

static rule_table tables[2][MXFA_PRESET_COUNT]; /* [E5M2?][preset] */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint8_t scale_of(const fp8_format *fmt, mxfa_preset preset, uint32_t amax)
{
    return mxfa_ref_rule_from_amax(fmt, preset, amax, 0, 0).scale;
}

static void build(rule_table *t, const fp8_format *fmt, mxfa_preset preset)
{
    mxfa_block_rule zero = mxfa_ref_rule_from_amax(fmt, preset, 0, 0, 0);
    t->zero_scale = zero.scale;
    t->rounding = zero.rounding;
    t->decided[0] = t->decided[255] = 0;
    for (uint32_t f = 1; f < 255; f++) {
        uint32_t lo = f << 23, hi = lo | 0x7FFFFFu;
        uint8_t s0 = scale_of(fmt, preset, lo), s1 = scale_of(fmt, preset, hi);
        t->lo[f] = s0;
        t->thr[f] = UINT32_MAX;
        t->decided[f] = s1 == s0 || s1 == s0 + 1;
        if (s1 != s0 + 1)
            continue;
        while (lo + 1 < hi) { /* scale(lo) == s0, scale(hi) == s0 + 1 */
            uint32_t mid = lo + (hi - lo) / 2;
            if (scale_of(fmt, preset, mid) == s0)
                lo = mid;
            else
                hi = mid;
        }
        t->thr[f] = hi;
    }
}

static void build_all(void)
{
    for (int p = 0; p < MXFA_PRESET_COUNT; p++) {
        build(&tables[0][p], &mxfa_fp8_e4m3, (mxfa_preset)p);
        build(&tables[1][p], &mxfa_fp8_e5m2, (mxfa_preset)p);
    }
}

const rule_table *mxfa_cpu_rule_table(mxfa_dtype dtype, mxfa_preset preset)
{
    pthread_once(&once, build_all);
    return &tables[dtype == MXFA_E5M2][preset];
}
