/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Matrix products under the numerics models, and chains of single
 * tensor-core instructions: plain loops over the output, each element the
 * model's sequence of fused steps and promotions in K order.
 */
#include "mma.h"

static uint32_t load_f32_bits(const mxfa_view *v, int64_t r, int64_t c)
{
    uint32_t b;
    memcpy(&b, view_at(v, r, c), sizeof b);
    return b;
}

static uint8_t load_u8(const mxfa_view *v, int64_t r, int64_t c)
{
    return *(const uint8_t *)view_at(v, r, c);
}

uint16_t mxfa_mma_widen_bf16_code(const mma_operand *x, int scale_exp, int nan_scale)
{
    uint32_t v;
    if (nan_scale || x->cls == MMA_NAN)
        v = F32_QNAN;
    else if (x->cls == MMA_INF)
        v = ((uint32_t)x->sign << 31) | F32_INF;
    else if (x->cls == MMA_ZERO)
        v = (uint32_t)x->sign << 31;
    else /* at most 8 significant bits: fp32 holds it exactly unless far below bf16's range */
        v = mxfa_f32_round_pack((uint32_t)x->sign, x->sig, x->raw - x->frac_bits + scale_exp);
    return mxfa_f32_bits_to_bf16(v);
}

mma_operand mxfa_mma_widen_bf16(const mma_operand *x, int scale_exp, int nan_scale)
{
    return mxfa_mma_operand_bf16(mxfa_mma_widen_bf16_code(x, scale_exp, nan_scale));
}

uint32_t mxfa_mma_block(const mma_model_def *m, const mma_operand *a, int sa, int a_nan, const mma_operand *b,
                        int sb, int b_nan, int n, uint32_t acc)
{
    const mma_step *step = m->step;
    int nan_scale = a_nan || b_nan, scale_exp = sa + sb;
    mma_term terms[33];
    switch (m->scaling) {
    case MMA_SCALE_AT_PROMOTION: {
        for (int k = 0; k < n; k++)
            terms[k] = mxfa_mma_product(&a[k], &b[k], 0);
        mma_term partial;
        uint32_t bits = mxfa_mma_fused(step, terms, n, &partial);
        if (step->sum_bits != MMA_EXACT)
            partial = mxfa_mma_f32_term(bits);
        if (nan_scale)
            partial.cls = MMA_NAN;
        return mxfa_mma_promote(&partial, scale_exp, acc);
    }
    case MMA_SCALE_IN_EXPONENT:
        for (int k = 0; k < n; k++) {
            terms[k] = mxfa_mma_product(&a[k], &b[k], scale_exp);
            if (nan_scale)
                terms[k].cls = MMA_NAN;
        }
        terms[n] = mxfa_mma_f32_term(acc);
        return mxfa_mma_fused(step, terms, n + 1, NULL);
    case MMA_SCALE_INTO_BF16: {
        mma_operand wa[32], wb[32];
        for (int k = 0; k < n; k++) {
            wa[k] = mxfa_mma_widen_bf16(&a[k], sa, a_nan);
            wb[k] = mxfa_mma_widen_bf16(&b[k], sb, b_nan);
        }
        return mxfa_mma_bf16_steps(m, wa, wb, n, acc);
    }
    }
    return acc;
}

uint32_t mxfa_mma_bf16_steps(const mma_model_def *m, const mma_operand *a, const mma_operand *b, int n, uint32_t acc)
{
    const mma_step *step = m->bf16_step;
    mma_term terms[33];
    if (step->sum_bits == MMA_EXACT) { /* ideal: the exact sum, added with one rounding */
        for (int k = 0; k < n; k++)
            terms[k] = mxfa_mma_product(&a[k], &b[k], 0);
        mma_term exact;
        mxfa_mma_fused(step, terms, n, &exact);
        return mxfa_mma_promote(&exact, 0, acc);
    }
    for (int g = 0; g < n; g += step->group) {
        int cnt = 0;
        for (int k = g; k < g + step->group && k < n; k++)
            terms[cnt++] = mxfa_mma_product(&a[k], &b[k], 0);
        terms[cnt++] = mxfa_mma_f32_term(acc);
        acc = mxfa_mma_fused(step, terms, cnt, NULL);
    }
    return acc;
}

/* One output element of D = A * B^T + C under a model. */
static uint32_t gemm_element(const mma_model_def *m, const fp8_format *fa, const fp8_format *fb, const mxfa_view *a,
                             const mxfa_view *sa, const mxfa_view *b, const mxfa_view *sb, int64_t i, int64_t j,
                             uint32_t acc)
{
    int64_t K = a->cols;
    mma_operand x[32], y[32];
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
        uint8_t s_a = load_u8(sa, i, k0 / 32), s_b = load_u8(sb, j, k0 / 32);
        int n = 0;
        for (int64_t k = k0; k < k0 + 32 && k < K; k++, n++) { /* beyond K: zero padding, which adds nothing */
            x[n] = mxfa_mma_operand_fp8(fa, load_u8(a, i, k));
            y[n] = mxfa_mma_operand_fp8(fb, load_u8(b, j, k));
        }
        acc = mxfa_mma_block(m, x, (int)s_a - 127, s_a == 0xFF, y, (int)s_b - 127, s_b == 0xFF, n, acc);
    }
    return acc;
}

mxfa_status mxfa_ref_gemm(mxfa_ctx *ctx, mxfa_model model, const mxfa_view *a, const mxfa_view *sa,
                          const mxfa_view *b, const mxfa_view *sb, const mxfa_view *c, const mxfa_view *d)
{
    (void)ctx;
    const mma_model_def *m = &mxfa_mma_models[model];
    const fp8_format *fa = mxfa_fp8_format(a->dtype), *fb = mxfa_fp8_format(b->dtype);
    for (int64_t i = 0; i < d->rows; i++)
        for (int64_t j = 0; j < d->cols; j++) {
            uint32_t acc = c ? load_f32_bits(c, i, j) : 0;
            acc = gemm_element(m, fa, fb, a, sa, b, sb, i, j, acc);
            memcpy(view_at(d, i, j), &acc, sizeof acc);
        }
    return MXFA_OK;
}

static mma_operand load_operand(const mxfa_view *v, int64_t r, int64_t c)
{
    if (v->dtype == MXFA_BF16) {
        uint16_t h;
        memcpy(&h, view_at(v, r, c), sizeof h);
        return mxfa_mma_operand_bf16(h);
    }
    return mxfa_mma_operand_fp8(mxfa_fp8_format(v->dtype), load_u8(v, r, c));
}

mxfa_status mxfa_ref_mma_chain(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_view *a, const mxfa_view *b,
                               const mxfa_view *c, const mxfa_view *d)
{
    (void)ctx;
    const mma_step *step = instr == MXFA_INSTR_SM90_WGMMA_FP8 ? &mxfa_step_sm90_wgmma_fp8 : &mxfa_step_sm90_wgmma_bf16;
    mma_term terms[33];
    for (int64_t i = 0; i < d->rows; i++)
        for (int64_t j = 0; j < d->cols; j++) {
            uint32_t acc = c ? load_f32_bits(c, i, j) : 0;
            for (int64_t k0 = 0; k0 < a->cols; k0 += step->group) {
                int n = 0;
                for (int64_t k = k0; k < k0 + step->group; k++) {
                    mma_operand x = load_operand(a, i, k), y = load_operand(b, j, k);
                    terms[n++] = mxfa_mma_product(&x, &y, 0);
                }
                terms[n++] = mxfa_mma_f32_term(acc);
                acc = mxfa_mma_fused(step, terms, n, NULL);
            }
            memcpy(view_at(d, i, j), &acc, sizeof acc);
        }
    return MXFA_OK;
}
