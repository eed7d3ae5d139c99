/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block quantization and dequantization, the plain way: for every block,
 * gather its elements, let the preset choose the scale, encode each element.
 * A block cut short by the edge of the matrix or of a sequence simply has
 * fewer elements: the missing ones are zeros for the amax and never stored.
 */
#include "ref.h"

/* One block: rows r0 .. r0+nr-1, columns c0 .. c0+nc-1 of x, its scale at
 * (sr, sc) of the scale matrix. */
static void quantize_block(const fp8_format *fmt, mxfa_preset preset, const mxfa_view *x, int64_t r0,
                           int64_t nr, int64_t c0, int64_t nc, const mxfa_view *data,
                           const mxfa_view *scales, int64_t sr, int64_t sc)
{
    uint32_t v[32 * 32];
    int n = 0;
    for (int64_t r = r0; r < r0 + nr; r++)
        for (int64_t c = c0; c < c0 + nc; c++)
            v[n++] = ref_load_f32(x, r, c);
    mxfa_block_rule rule = mxfa_ref_block_rule(fmt, preset, v, n);
    *(uint8_t *)view_at(scales, sr, sc) = rule.scale;
    n = 0;
    for (int64_t r = r0; r < r0 + nr; r++)
        for (int64_t c = c0; c < c0 + nc; c++)
            *(uint8_t *)view_at(data, r, c) = mxfa_ref_encode_element(fmt, &rule, v[n++]);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

mxfa_status mxfa_ref_quantize(mxfa_ctx *ctx, const mxfa_view *x, const mxfa_segment *segs, int nsegs,
                              mxfa_preset preset, mxfa_block block, const mxfa_view *data,
                              const mxfa_view *scales)
{
    (void)ctx;
    const fp8_format *fmt = mxfa_fp8_format(data->dtype);
    if (block == MXFA_BLOCK_ROW) {
        for (int64_t r = 0; r < x->rows; r++)
            for (int64_t cb = 0; cb * 32 < x->cols; cb++)
                quantize_block(fmt, preset, x, r, 1, cb * 32, min64(32, x->cols - cb * 32), data, scales, r, cb);
        return MXFA_OK;
    }
    /* col and square: blocks of 32 rows restart at every segment (sequence) */
    for (int s = 0; s < nsegs; s++) {
        const mxfa_segment *seg = &segs[s];
        for (int64_t rb = 0; rb * 32 < seg->count; rb++) {
            int64_t r0 = seg->src + rb * 32, nr = min64(32, seg->count - rb * 32);
            if (block == MXFA_BLOCK_COL) {
                for (int64_t c = 0; c < x->cols; c++)
                    quantize_block(fmt, preset, x, r0, nr, c, 1, data, scales, seg->dst + rb, c);
            } else {
                for (int64_t cb = 0; cb * 32 < x->cols; cb++)
                    quantize_block(fmt, preset, x, r0, nr, cb * 32, min64(32, x->cols - cb * 32), data, scales,
                                   seg->dst + rb, cb);
            }
        }
    }
    return MXFA_OK;
}

mxfa_status mxfa_ref_dequantize(mxfa_ctx *ctx, const mxfa_view *data, const mxfa_view *scales,
                                mxfa_block block, const mxfa_view *out)
{
    (void)ctx;
    const fp8_format *fmt = mxfa_fp8_format(data->dtype);
    for (int64_t r = 0; r < data->rows; r++) {
        for (int64_t c = 0; c < data->cols; c++) {
            int64_t sr = block == MXFA_BLOCK_ROW ? r : r / 32;
            int64_t sc = block == MXFA_BLOCK_COL ? c : c / 32;
            uint8_t code = *(const uint8_t *)view_at(data, r, c);
            uint8_t scale = *(const uint8_t *)view_at(scales, sr, sc);
            /* A NaN scale makes the element NaN (with the element's sign). */
            uint32_t v = scale == 0xFF ? ((uint32_t)(code >> 7) << 31) | F32_QNAN
                                       : mxfa_fp8_decode(fmt, code, (int)scale - 127);
            void *p = view_at(out, r, c);
            if (out->dtype == MXFA_BF16) {
                uint16_t h = mxfa_f32_bits_to_bf16(v); /* v is exact: one rounding */
                memcpy(p, &h, sizeof h);
            } else {
                memcpy(p, &v, sizeof v);
            }
        }
    }
    return MXFA_OK;
}
