/* SPDX-License-Identifier: BSD-3-Clause */
/* The ref backend: the executable specification. Plain loops, no tricks. */
#ifndef MXFA_REF_H
#define MXFA_REF_H

#include "internal.h"

/* What a preset decides for one block. */
typedef struct mxfa_block_rule {
    uint8_t scale;  /* E8M0 byte */
    int poisoned;   /* every element becomes NaN (scale 0xFF) */
    fp8_rounding rounding;
} mxfa_block_rule;

mxfa_block_rule mxfa_ref_block_rule(const fp8_format *fmt, mxfa_preset preset, const uint32_t *x, int n);
/* The same from the block's amax (|x| bits, NaN ignored) and whether it
 * holds a NaN or an Inf. */
mxfa_block_rule mxfa_ref_rule_from_amax(const fp8_format *fmt, mxfa_preset preset, uint32_t amax, int has_nan,
                                        int has_inf);
uint8_t mxfa_ref_encode_element(const fp8_format *fmt, const mxfa_block_rule *rule, uint32_t x);

/* fp32 bits of element (r, c) of an f32 or bf16 view (bf16 widened exactly). */
static inline uint32_t ref_load_f32(const mxfa_view *v, int64_t r, int64_t c)
{
    const void *p = view_at(v, r, c);
    if (v->dtype == MXFA_BF16) {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        return bf16_to_f32_bits(h);
    }
    uint32_t b;
    memcpy(&b, p, sizeof b);
    return b;
}

/* A NaN as the canonical 0x7FFFFFFF, for outputs (O, LSE, dQ, dK, dV):
 * the NaN an fp32 operation makes differs between processors (x86 makes
 * 0xFFC00000, a GPU 0x7FFFFFFF), and outputs must be the same bits on
 * every backend. */
static inline float ref_canonical_nan(float x)
{
    return x != x ? f32_from_bits(0x7FFFFFFFu) : x;
}

/* Store x at element (i0, i1, i2) of a 3-D f32 or bf16 view (bf16 rounded
 * to nearest even; a NaN canonical). */
static inline void ref_store_f32_3d(const mxfa_view_nd *v, int64_t i0, int64_t i1, int64_t i2, float x)
{
    int64_t idx[3] = {i0, i1, i2};
    x = ref_canonical_nan(x);
    void *p = view_nd_at(v, idx);
    if (v->dtype == MXFA_BF16) {
        uint16_t h = mxfa_f32_bits_to_bf16(f32_bits(x));
        memcpy(p, &h, 2);
    } else {
        memcpy(p, &x, 4);
    }
}

mxfa_status mxfa_ref_quantize(mxfa_ctx *ctx, const mxfa_view *x, const mxfa_segment *segs, int nsegs,
                              mxfa_preset preset, mxfa_block block, const mxfa_view *data,
                              const mxfa_view *scales);
mxfa_status mxfa_ref_dequantize(mxfa_ctx *ctx, const mxfa_view *data, const mxfa_view *scales,
                                mxfa_block block, const mxfa_view *out);
mxfa_status mxfa_ref_copy(mxfa_ctx *ctx, const mxfa_view *src, const mxfa_view *dst);
mxfa_status mxfa_ref_expand(mxfa_ctx *ctx, const mxfa_view *src, int64_t rdiv, int64_t cdiv,
                            const mxfa_view *dst);
mxfa_status mxfa_ref_swizzle(mxfa_ctx *ctx, const mxfa_view *index, int axis, const mxfa_segment *segs,
                             int nsegs, uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols);
mxfa_status mxfa_ref_unswizzle(mxfa_ctx *ctx, const uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols,
                               int axis, const mxfa_segment *segs, int nsegs, const mxfa_view *index);

mxfa_status mxfa_ref_gemm(mxfa_ctx *ctx, mxfa_model model, const mxfa_view *a, const mxfa_view *sa,
                          const mxfa_view *b, const mxfa_view *sb, const mxfa_view *c, const mxfa_view *d);
mxfa_status mxfa_ref_mma_chain(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_view *a, const mxfa_view *b,
                               const mxfa_view *c, const mxfa_view *d);

/* The forward pass's row sum: its partial sums' step for a block of 32 keys
 * (P, 256 E, of keys b0 .. b0 + 31), and l from the partials (cpu/ref/attn_fwd.c
 * defines them). */
#define MXFA_ROW_PARTIALS 8
void mxfa_ref_row_sum_block(float *L, const float *p);
float mxfa_ref_row_sum(const float *L);

/* The softmax's weight E(RN_f16(min(fma(s, c, b), 0))) (cpu/ref/exp2.c) */
float mxfa_ref_softmax_e(float s, float c, float b);

mxfa_status mxfa_ref_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q, const int32_t *cu_k,
                              int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse);

mxfa_status mxfa_ref_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *o,
                              const mxfa_view_nd *dout, const mxfa_view_nd *lse, const int32_t *cu_q,
                              const int32_t *cu_k, int batch, const mxfa_view_nd *dq, const mxfa_view_nd *dk,
                              const mxfa_view_nd *dv);

#endif
