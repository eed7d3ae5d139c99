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

/* An MXFP8 element widened with its scale to bf16, as the sm90-bf16 model
 * feeds the tensor cores: the exact value rounded once to nearest even
 * (exact unless beyond bf16's range); a NaN scale gives NaN. */
static mma_operand widen_bf16(const fp8_format *fmt, uint8_t code, uint8_t scale)
{
    uint32_t v = scale == 0xFF ? F32_QNAN : mxfa_fp8_decode(fmt, code, (int)scale - 127);
    return mxfa_mma_operand_bf16(mxfa_f32_bits_to_bf16(v));
}

/* One output element of D = A * B^T + C under a model. */
static uint32_t gemm_element(const mma_model_def *m, const fp8_format *fa, const fp8_format *fb, const mxfa_view *a,
                             const mxfa_view *sa, const mxfa_view *b, const mxfa_view *sb, int64_t i, int64_t j,
                             uint32_t acc)
{
    const mma_step *step = m->step;
    int64_t K = a->cols;
    mma_term terms[33];
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
        uint8_t s_a = load_u8(sa, i, k0 / 32), s_b = load_u8(sb, j, k0 / 32);
        int nan_scale = s_a == 0xFF || s_b == 0xFF;
        int scale_exp = (int)s_a + (int)s_b - 254;
        int64_t kend = k0 + 32 < K ? k0 + 32 : K; /* beyond K: zero padding, which adds nothing */
        switch (m->scaling) {
        case MMA_SCALE_AT_PROMOTION: {
            int n = 0;
            for (int64_t k = k0; k < kend; k++) {
                mma_operand x = mxfa_mma_operand_fp8(fa, load_u8(a, i, k));
                mma_operand y = mxfa_mma_operand_fp8(fb, load_u8(b, j, k));
                terms[n++] = mxfa_mma_product(&x, &y, 0);
            }
            mma_term partial;
            uint32_t bits = mxfa_mma_fused(step, terms, n, &partial);
            if (step->sum_bits != MMA_EXACT)
                partial = mxfa_mma_f32_term(bits);
            if (nan_scale)
                partial.cls = MMA_NAN;
            acc = mxfa_mma_promote(&partial, scale_exp, acc);
            break;
        }
        case MMA_SCALE_IN_EXPONENT: {
            int n = 0;
            for (int64_t k = k0; k < kend; k++) {
                mma_operand x = mxfa_mma_operand_fp8(fa, load_u8(a, i, k));
                mma_operand y = mxfa_mma_operand_fp8(fb, load_u8(b, j, k));
                terms[n] = mxfa_mma_product(&x, &y, scale_exp);
                if (nan_scale)
                    terms[n].cls = MMA_NAN;
                n++;
            }
            terms[n++] = mxfa_mma_f32_term(acc);
            acc = mxfa_mma_fused(step, terms, n, NULL);
            break;
        }
        case MMA_SCALE_INTO_BF16:
            for (int64_t g0 = k0; g0 < kend; g0 += step->group) {
                int n = 0;
                for (int64_t k = g0; k < g0 + step->group && k < kend; k++) {
                    mma_operand x = widen_bf16(fa, load_u8(a, i, k), s_a);
                    mma_operand y = widen_bf16(fb, load_u8(b, j, k), s_b);
                    terms[n++] = mxfa_mma_product(&x, &y, 0);
                }
                terms[n++] = mxfa_mma_f32_term(acc);
                acc = mxfa_mma_fused(step, terms, n, NULL);
            }
            break;
        }
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
