/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fused truncated sum and the per-architecture rows (see mma.h).
 * Sources of the model: MMA-Sim (arXiv 2511.10909) and Khattak and Mikaitis
 * (arXiv 2512.07004); the Hopper rows are checked on an H200 by
 * gpu/sm90/mma_probe.cu, as docs/NUMERICS.md records.
 */
#include <limits.h>

#include "mma.h"

/*
 * name, group (K), F, sum bits, overflow to Inf, emax floor, zeros positive.
 * The Hopper rows agree with MMA-Sim and were confirmed on an H200 (all 32
 * bits, docs/NUMERICS.md): a zero term sits at exponent -133 for the
 * alignment (so emax never falls below it) and every zero result is +0.
 * The Blackwell row takes the same from MMA-Sim, unverified here.
 */
static const mma_step step_exact = {"exact 32-block sum", 32, MMA_EXACT, MMA_EXACT, 1, INT_MIN, 0};
static const mma_step step_sm100_mxf8 = {"tcgen05.mma kind::mxf8f6f4", 32, MMA_F_SM100, 24, 1, MMA_EMAX_FLOOR, 1};
static const mma_step step_sm100_bf16 = {"tcgen05.mma kind::f16 (bf16)", 16, MMA_F_SM100, 24, 1, MMA_EMAX_FLOOR, 1};
const mma_step mxfa_step_sm90_wgmma_fp8 = {"wgmma fp8 k32", 32, MMA_F_SM90_FP8, 14, 1, MMA_EMAX_FLOOR, 1};
const mma_step mxfa_step_sm90_wgmma_bf16 = {"wgmma bf16 k16", 16, MMA_F_SM90_BF16, 24, 1, MMA_EMAX_FLOOR, 1};

const mma_model_def mxfa_mma_models[MXFA_MODEL_COUNT] = {
    [MXFA_MODEL_IDEAL] = {&step_exact, MMA_SCALE_AT_PROMOTION, &step_exact},
    [MXFA_MODEL_SM100] = {&step_sm100_mxf8, MMA_SCALE_IN_EXPONENT, &step_sm100_bf16},
    [MXFA_MODEL_SM90_FP8] = {&mxfa_step_sm90_wgmma_fp8, MMA_SCALE_AT_PROMOTION, &mxfa_step_sm90_wgmma_bf16},
    [MXFA_MODEL_SM90_BF16] = {&mxfa_step_sm90_wgmma_bf16, MMA_SCALE_INTO_BF16, &mxfa_step_sm90_wgmma_bf16},
};

mma_operand mxfa_mma_operand_fp8(const fp8_format *fmt, uint8_t code)
{
    mma_operand o = {MMA_FINITE, code >> 7, 0, 0, fmt->mbits};
    unsigned mag = code & 0x7Fu;
    if ((fmt->has_inf && mag > 0x7C) || (!fmt->has_inf && mag == 0x7F)) {
        o.cls = MMA_NAN;
        return o;
    }
    if (fmt->has_inf && mag == 0x7C) {
        o.cls = MMA_INF;
        return o;
    }
    unsigned field = mag >> fmt->mbits, frac = mag & ((1u << fmt->mbits) - 1);
    if (mag == 0)
        o.cls = MMA_ZERO;
    o.sig = field ? frac | (1u << fmt->mbits) : frac;
    o.raw = field ? (int)field - 1 + fmt->emin : fmt->emin;
    return o;
}

mma_operand mxfa_mma_operand_bf16(uint16_t h)
{
    mma_operand o = {MMA_FINITE, h >> 15, 0, 0, 7};
    unsigned field = (h >> 7) & 0xFFu, frac = h & 0x7Fu;
    if (field == 0xFF) {
        o.cls = frac ? MMA_NAN : MMA_INF;
        return o;
    }
    if (field == 0 && frac == 0)
        o.cls = MMA_ZERO;
    o.sig = field ? frac | 0x80u : frac;
    o.raw = field ? (int)field - 127 : -126;
    return o;
}

mma_term mxfa_mma_product(const mma_operand *a, const mma_operand *b, int scale_exp)
{
    mma_term t = {MMA_FINITE, a->sign ^ b->sign, 0, 0, 0};
    if (a->cls == MMA_NAN || b->cls == MMA_NAN || (a->cls == MMA_INF && b->cls == MMA_ZERO) ||
        (a->cls == MMA_ZERO && b->cls == MMA_INF)) {
        t.cls = MMA_NAN;
    } else if (a->cls == MMA_INF || b->cls == MMA_INF) {
        t.cls = MMA_INF;
    } else if (a->cls == MMA_ZERO || b->cls == MMA_ZERO) {
        t.cls = MMA_ZERO;
    } else {
        t.sig = (mxfa_u128)a->sig * b->sig;
        t.raw = a->raw + b->raw + scale_exp;
        t.exp = t.raw - a->frac_bits - b->frac_bits;
    }
    return t;
}

mma_term mxfa_mma_f32_term(uint32_t bits)
{
    mma_term t = {MMA_FINITE, (int)F32_SIGN(bits), 0, 0, 0};
    uint32_t field = F32_EXP(bits), frac = F32_FRAC(bits);
    if (field == 0xFF) {
        t.cls = frac ? MMA_NAN : MMA_INF;
    } else if (field == 0 && frac == 0) {
        t.cls = MMA_ZERO;
    } else {
        t.sig = field ? frac | 0x800000u : frac;
        t.raw = field ? (int)field - 127 : -126;
        t.exp = t.raw - 23;
    }
    return t;
}

static int bit_length(mxfa_u128 x)
{
    uint64_t hi = (uint64_t)(x >> 64);
    return hi ? 128 - __builtin_clzll(hi) : (uint64_t)x ? 64 - __builtin_clzll((uint64_t)x) : 0;
}

/* Specials of a set of terms: NaN bits, Inf bits, or 0 when all are finite
 * or zero. *zero_sign is 1 when every term is a negative zero. */
static uint32_t specials(const mma_term *t, int n, int *any_finite, int *zero_sign)
{
    int nan = 0, pinf = 0, ninf = 0;
    *any_finite = 0;
    *zero_sign = 1;
    for (int i = 0; i < n; i++) {
        switch (t[i].cls) {
        case MMA_NAN: nan = 1; break;
        case MMA_INF: *(t[i].sign ? &ninf : &pinf) = 1; break;
        case MMA_FINITE: *any_finite = 1; *zero_sign = 0; break;
        case MMA_ZERO: if (!t[i].sign) *zero_sign = 0; break;
        }
    }
    if (nan || (pinf && ninf))
        return MMA_NAN_BITS;
    if (pinf || ninf)
        return ninf ? 0xFF800000u : F32_INF;
    return 0;
}

uint32_t mxfa_mma_fused(const mma_step *step, const mma_term *t, int n, mma_term *exact_out)
{
    int any_finite, zero_sign;
    uint32_t special = specials(t, n, &any_finite, &zero_sign);
    mma_term out = {MMA_ZERO, 0, 0, 0, 0};
    if (special) {
        out.cls = F32_IS_NAN(special) ? MMA_NAN : MMA_INF;
        out.sign = (int)F32_SIGN(special);
    } else if (any_finite) {
        /* the grid: 2^(emax - F), emax over the non-zero terms' raw exponents;
         * exact sums use the smallest term's last place instead */
        int grid = INT_MAX, emax = INT_MIN;
        for (int i = 0; i < n; i++)
            if (t[i].cls == MMA_FINITE) {
                emax = t[i].raw > emax ? t[i].raw : emax;
                grid = t[i].exp < grid ? t[i].exp : grid;
            }
        if (step->frac_bits != MMA_EXACT)
            grid = (emax > step->emax_floor ? emax : step->emax_floor) - step->frac_bits;
        /* each term truncated toward zero on the grid, then summed exactly */
        __int128 sum = 0;
        for (int i = 0; i < n; i++) {
            if (t[i].cls != MMA_FINITE)
                continue;
            int d = t[i].exp - grid;
            mxfa_u128 mag = d >= 0 ? t[i].sig << d : (-d >= 128 ? 0 : t[i].sig >> -d);
            sum += t[i].sign ? -(__int128)mag : (__int128)mag;
        }
        if (sum != 0) {
            out.cls = MMA_FINITE;
            out.sign = sum < 0;
            out.sig = (mxfa_u128)(sum < 0 ? -sum : sum);
            out.exp = grid;
        }
        /* an exact cancellation is +0 */
    } else {
        out.sign = zero_sign && !step->zero_positive;
    }
    if (step->sum_bits == MMA_EXACT) {
        *exact_out = out;
        return 0;
    }
    switch (out.cls) {
    case MMA_NAN: return MMA_NAN_BITS;
    case MMA_INF: return out.sign ? 0xFF800000u : F32_INF;
    case MMA_ZERO: return (uint32_t)out.sign << 31;
    case MMA_FINITE: break;
    }
    /* normalize once and cut toward zero to the output width */
    int excess = bit_length(out.sig) - step->sum_bits;
    if (excess > 0) {
        out.sig >>= excess;
        out.exp += excess;
    }
    uint32_t bits = mxfa_f32_round_pack_wide((uint32_t)out.sign, out.sig, out.exp, 0, F32_ROUND_TOWARD_ZERO,
                                             step->overflow_inf);
    if (F32_ABS(bits) == 0 && step->zero_positive)
        return 0; /* a negative sum that underflows is +0 too */
    return bits;
}

uint32_t mxfa_mma_promote(const mma_term *value, int scale_exp, uint32_t acc)
{
    mma_term v = *value, a = mxfa_mma_f32_term(acc);
    v.exp += scale_exp;
    mma_term both[2] = {v, a};
    int any_finite, zero_sign;
    uint32_t special = specials(both, 2, &any_finite, &zero_sign);
    if (special)
        return special;
    if (!any_finite)
        return (uint32_t)zero_sign << 31; /* +0 unless both are -0 */
    if (v.cls == MMA_ZERO)
        return acc;
    if (a.cls == MMA_ZERO)
        return mxfa_f32_round_pack_wide((uint32_t)v.sign, v.sig, v.exp, 0, F32_ROUND_NEAREST_EVEN, 1);
    /* Exact addition: both significands normalized to 125 bits, the smaller
     * operand shifted right with its lost bits jammed into bit 0, far below
     * the 24 bits kept, so that one rounding at the end is correct. */
    mma_term x[2] = {v, a};
    for (int i = 0; i < 2; i++) {
        int up = 125 - bit_length(x[i].sig);
        x[i].sig <<= up;
        x[i].exp -= up;
    }
    if (x[1].exp > x[0].exp) {
        mma_term tmp = x[0];
        x[0] = x[1];
        x[1] = tmp;
    }
    int d = x[0].exp - x[1].exp;
    mxfa_u128 small = d >= 126 ? 1 : (x[1].sig >> d) | ((x[1].sig & (((mxfa_u128)1 << d) - 1)) != 0);
    mxfa_u128 sum;
    int sign = x[0].sign;
    if (x[0].sign == x[1].sign) {
        sum = x[0].sig + small;
    } else if (x[0].sig >= small) {
        sum = x[0].sig - small;
    } else {
        sum = small - x[0].sig;
        sign = x[1].sign;
    }
    if (sum == 0)
        return 0; /* exact cancellation: +0 */
    return mxfa_f32_round_pack_wide((uint32_t)sign, sum, x[0].exp, 0, F32_ROUND_NEAREST_EVEN, 1);
}
