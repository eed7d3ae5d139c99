/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scale rules of the presets: from the elements of one block to its
 * E8M0 scale byte, and how the elements are then rounded. Integer-only.
 * docs/NUMERICS.md gives the contract and the implementations each preset
 * reproduces.
 */
#include "ref.h"

/* Does the block hold a NaN or an Inf, and what is its amax (|x| bits, NaN
 * ignored)? Non-negative fp32 bit patterns order like their values. */
static uint32_t block_amax(const uint32_t *x, int n, int *has_nan, int *has_inf)
{
    uint32_t amax = 0;
    *has_nan = *has_inf = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = F32_ABS(x[i]);
        if (a > F32_INF) {
            *has_nan = 1;
            continue;
        }
        if (a == F32_INF)
            *has_inf = 1;
        if (a > amax)
            amax = a;
    }
    return amax;
}

/* round-up to a power of two of fl(amax * fl(1/max_elem)), the product
 * rounded to nearest even as an fp32 multiply would. */
static uint8_t scale_rceil(const fp8_format *fmt, uint32_t amax, mxfa_overflow overflow)
{
    if (amax == F32_INF)
        return mxfa_e8m0_encode_bits(F32_INF, MXFA_E8M0_CEIL, overflow);
    int ea, er;
    uint32_t sa = f32_unpack(amax, &ea);
    uint32_t sr = f32_unpack(fmt->rcp_max, &er);
    uint32_t prod = mxfa_f32_round_pack(0, (uint64_t)sa * sr, ea + er);
    return mxfa_e8m0_encode_bits(prod, MXFA_E8M0_CEIL, overflow);
}

/* floor(log2 amax) - emax_elem, clamped to the E8M0 range. */
static uint8_t scale_ocp(const fp8_format *fmt, uint32_t amax)
{
    if (amax == 0)
        return 0x00;
    int e = mxfa_f32_ilogb(amax) - fmt->emax;
    if (e < -127)
        e = -127;
    if (e > 127)
        e = 127;
    return (uint8_t)(e + 127);
}

mxfa_block_rule mxfa_ref_rule_from_amax(const fp8_format *fmt, mxfa_preset preset, uint32_t amax, int has_nan,
                                        int has_inf)
{
    mxfa_block_rule rule = {0, 0, FP8_ROUND_NEAREST_EVEN};
    switch (preset) {
    case MXFA_PRESET_RCEIL:
        /* NaN is ignored for the amax and encodes as NaN; an Inf drives the
         * scale to 2^127 (saturated), so the block's finite elements mostly
         * flush to zero and the Inf saturates to +-max. */
        rule.scale = scale_rceil(fmt, amax, MXFA_SATFINITE);
        break;
    case MXFA_PRESET_TORCHAO_RCEIL:
        if (has_nan || has_inf)
            rule.poisoned = 1;
        else
            rule.scale = scale_rceil(fmt, amax, MXFA_NONSAT);
        break;
    case MXFA_PRESET_MICROXCALING:
        rule.rounding = FP8_ROUND_NEAREST_AWAY;
        __attribute__((fallthrough)); /* the scale rule is the OCP one */
    case MXFA_PRESET_OCP:
        if (has_nan || has_inf)
            rule.poisoned = 1;
        else
            rule.scale = scale_ocp(fmt, amax);
        break;
    }
    if (rule.poisoned)
        rule.scale = 0xFF;
    return rule;
}

mxfa_block_rule mxfa_ref_block_rule(const fp8_format *fmt, mxfa_preset preset, const uint32_t *x, int n)
{
    int has_nan, has_inf;
    uint32_t amax = block_amax(x, n, &has_nan, &has_inf);
    return mxfa_ref_rule_from_amax(fmt, preset, amax, has_nan, has_inf);
}

uint8_t mxfa_ref_encode_element(const fp8_format *fmt, const mxfa_block_rule *rule, uint32_t x)
{
    if (rule->poisoned)
        return fmt->nan_code;
    /* q = fp8(x * 2^(127 - scale)): the reciprocal of the scale is exact */
    return mxfa_fp8_encode(fmt, x, 127 - (int)rule->scale, rule->rounding, MXFA_SATFINITE);
}
