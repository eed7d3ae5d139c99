/* SPDX-License-Identifier: BSD-3-Clause */
/* Entry points for MXFP8 matrices: quantize, dequantize, transpose, and the
 * square-to-row/col scale expansion. Arguments are checked here, once. */
#include <stdlib.h>

#include "internal.h"

static mxfa_status check_ctx(mxfa_ctx *ctx, const char *fn)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "%s: ctx is NULL", fn);
    mxfa_clear_error(ctx);
    return MXFA_OK;
}

MXFA_API mxfa_status mxfa_scales_shape(mxfa_block block, int64_t rows, int64_t cols,
                                       int64_t *scale_rows, int64_t *scale_cols)
{
    if (!scale_rows || !scale_cols)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_scales_shape: NULL output");
    if (rows <= 0 || cols <= 0)
        return mxfa_fail(NULL, MXFA_ERR_SHAPE, "mxfa_scales_shape: sizes must be positive, got [%lld, %lld]",
                         (long long)rows, (long long)cols);
    switch (block) {
    case MXFA_BLOCK_ROW: *scale_rows = rows; *scale_cols = ceil_div(cols, 32); return MXFA_OK;
    case MXFA_BLOCK_COL: *scale_rows = ceil_div(rows, 32); *scale_cols = cols; return MXFA_OK;
    case MXFA_BLOCK_SQUARE: *scale_rows = ceil_div(rows, 32); *scale_cols = ceil_div(cols, 32); return MXFA_OK;
    }
    return mxfa_fail(NULL, MXFA_ERR_INVALID, "unknown block shape %d", (int)block);
}

MXFA_API mxfa_status mxfa_jagged_scale_rows(const int32_t *cu_seqlens, int batch, int64_t *scale_rows)
{
    mxfa_clear_error(NULL);
    if (!scale_rows)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_jagged_scale_rows: scale_rows is NULL");
    CHECK(mxfa_check_cu_seqlens(NULL, cu_seqlens, batch, -1));
    int64_t n = 0;
    for (int i = 0; i < batch; i++)
        n += ceil_div((int64_t)cu_seqlens[i + 1] - cu_seqlens[i], 32);
    *scale_rows = n;
    return MXFA_OK;
}

static mxfa_status check_block(mxfa_ctx *ctx, mxfa_block block)
{
    if ((unsigned)block >= MXFA_BLOCK_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "unknown block shape %d", (int)block);
    return MXFA_OK;
}

static mxfa_status check_compact(mxfa_ctx *ctx, const char *what, mxfa_layout layout)
{
    if (layout == MXFA_LAYOUT_COMPACT)
        return MXFA_OK;
    if (layout == MXFA_LAYOUT_SWIZZLED)
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED,
                         "%s: scales must be in the compact layout here (convert with mxfa_scales_swizzle/unswizzle)",
                         what);
    return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown layout %d", what, (int)layout);
}

static mxfa_status quantize_common(mxfa_ctx *ctx, const char *fn, const mxfa_tensor *x,
                                   const int32_t *cu_seqlens, int batch, mxfa_preset preset,
                                   mxfa_mx *out)
{
    CHECK(check_ctx(ctx, fn));
    mxfa_view xv, dv, sv;
    CHECK(mxfa_check_matrix(ctx, "x", x, DT(MXFA_F32) | DT(MXFA_BF16), -1, -1, 0, &xv));
    if (!out)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s: out is NULL", fn);
    if ((unsigned)preset >= MXFA_PRESET_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown preset %d", fn, (int)preset);
    CHECK(check_block(ctx, out->block));
    CHECK(check_compact(ctx, "out", out->layout));
    CHECK(mxfa_check_matrix(ctx, "out->data", &out->data, DT(MXFA_E4M3) | DT(MXFA_E5M2), xv.rows,
                            xv.cols, 1, &dv));
    int64_t srows, scols;
    CHECK(mxfa_scales_shape(out->block, xv.rows, xv.cols, &srows, &scols));

    mxfa_segment one = {0, xv.rows, 0}, *segs = &one;
    int nsegs = 1;
    if (cu_seqlens) {
        CHECK(mxfa_check_cu_seqlens(ctx, cu_seqlens, batch, xv.rows));
        if (out->block != MXFA_BLOCK_ROW) {
            CHECK(mxfa_jagged_scale_rows(cu_seqlens, batch, &srows));
            segs = malloc((size_t)batch * sizeof *segs);
            if (!segs)
                return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "%s: cannot allocate %d segments", fn, batch);
            int64_t blk = 0;
            for (int i = 0; i < batch; i++) {
                segs[i].src = cu_seqlens[i];
                segs[i].count = (int64_t)cu_seqlens[i + 1] - cu_seqlens[i];
                segs[i].dst = blk;
                blk += ceil_div(segs[i].count, 32);
            }
            nsegs = batch;
        }
    }
    mxfa_status st = mxfa_check_matrix(ctx, "out->scales", &out->scales, DT(MXFA_E8M0), srows, scols, 1, &sv);
    if (st == MXFA_OK)
        st = mxfa_check_disjoint(ctx, "out->data", &dv, "x", &xv);
    if (st == MXFA_OK)
        st = mxfa_check_disjoint(ctx, "out->scales", &sv, "x", &xv);
    if (st == MXFA_OK)
        st = mxfa_check_disjoint(ctx, "out->data", &dv, "out->scales", &sv);
    if (st == MXFA_OK)
        st = ctx->backend->quantize(ctx, &xv, segs, nsegs, preset, out->block, &dv, &sv);
    if (segs != &one)
        free(segs);
    return st;
}

static mxfa_status quantize_in_env(mxfa_ctx *ctx, const mxfa_tensor *x, mxfa_preset preset, mxfa_mx *out)
{
    return quantize_common(ctx, "mxfa_quantize", x, NULL, 0, preset, out);
}

MXFA_API mxfa_status mxfa_quantize(mxfa_ctx *ctx, const mxfa_tensor *x, mxfa_preset preset, mxfa_mx *out)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(quantize_in_env(ctx, x, preset, out));
}

static mxfa_status quantize_jagged_in_env(mxfa_ctx *ctx, const mxfa_tensor *x, const int32_t *cu_seqlens,
                                          int batch, mxfa_preset preset, mxfa_mx *out)
{
    if (ctx && !cu_seqlens)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "mxfa_quantize_jagged: cu_seqlens is NULL");
    return quantize_common(ctx, "mxfa_quantize_jagged", x, cu_seqlens, batch, preset, out);
}

MXFA_API mxfa_status mxfa_quantize_jagged(mxfa_ctx *ctx, const mxfa_tensor *x, const int32_t *cu_seqlens,
                                          int batch, mxfa_preset preset, mxfa_mx *out)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(quantize_jagged_in_env(ctx, x, cu_seqlens, batch, preset, out));
}

/* Check an MXFP8 input in the compact layout; *dv and *sv are its views. */
static mxfa_status check_mx_input(mxfa_ctx *ctx, const char *what, const mxfa_mx *in, mxfa_view *dv,
                                  mxfa_view *sv)
{
    if (!in)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s is NULL", what);
    CHECK(check_block(ctx, in->block));
    CHECK(check_compact(ctx, what, in->layout));
    CHECK(mxfa_check_matrix(ctx, "in->data", &in->data, DT(MXFA_E4M3) | DT(MXFA_E5M2), -1, -1, 0, dv));
    int64_t srows, scols;
    CHECK(mxfa_scales_shape(in->block, dv->rows, dv->cols, &srows, &scols));
    return mxfa_check_matrix(ctx, "in->scales", &in->scales, DT(MXFA_E8M0), srows, scols, 0, sv);
}

static mxfa_status dequantize_in_env(mxfa_ctx *ctx, const mxfa_mx *in, mxfa_tensor *out)
{
    CHECK(check_ctx(ctx, "mxfa_dequantize"));
    mxfa_view dv, sv, ov;
    CHECK(check_mx_input(ctx, "in", in, &dv, &sv));
    CHECK(mxfa_check_matrix(ctx, "out", out, DT(MXFA_F32) | DT(MXFA_BF16), dv.rows, dv.cols, 1, &ov));
    CHECK(mxfa_check_disjoint(ctx, "out", &ov, "in->data", &dv));
    CHECK(mxfa_check_disjoint(ctx, "out", &ov, "in->scales", &sv));
    return ctx->backend->dequantize(ctx, &dv, &sv, in->block, &ov);
}

MXFA_API mxfa_status mxfa_dequantize(mxfa_ctx *ctx, const mxfa_mx *in, mxfa_tensor *out)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(dequantize_in_env(ctx, in, out));
}

MXFA_API mxfa_status mxfa_transpose(mxfa_ctx *ctx, const mxfa_mx *in, mxfa_mx *out)
{
    CHECK(check_ctx(ctx, "mxfa_transpose"));
    mxfa_view dv, sv, odv, osv;
    CHECK(check_mx_input(ctx, "in", in, &dv, &sv));
    if (!out)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "mxfa_transpose: out is NULL");
    CHECK(check_block(ctx, out->block));
    CHECK(check_compact(ctx, "out", out->layout));
    int ok = (in->block == MXFA_BLOCK_SQUARE && out->block == MXFA_BLOCK_SQUARE) ||
             (in->block == MXFA_BLOCK_ROW && out->block == MXFA_BLOCK_COL) ||
             (in->block == MXFA_BLOCK_COL && out->block == MXFA_BLOCK_ROW);
    if (!ok) {
        if (in->block == MXFA_BLOCK_SQUARE || out->block == MXFA_BLOCK_SQUARE)
            return mxfa_fail(ctx, MXFA_ERR_NEEDS_SOURCE,
                             "mxfa_transpose: %s blocks cannot become %s blocks: they cover different "
                             "elements; quantize the high-precision data again",
                             mxfa_block_name(in->block), mxfa_block_name(out->block));
        return mxfa_fail(ctx, MXFA_ERR_NEEDS_SOURCE,
                         "mxfa_transpose: X quantized in %s blocks cannot give X^T in %s blocks: those "
                         "blocks run along the other axis of X and cover different elements, so the "
                         "high-precision X is needed (quantize X^T, or X with block = %s)",
                         mxfa_block_name(in->block), mxfa_block_name(out->block),
                         mxfa_block_name(out->block == MXFA_BLOCK_ROW ? MXFA_BLOCK_COL : MXFA_BLOCK_ROW));
    }
    CHECK(mxfa_check_matrix(ctx, "out->data", &out->data, DT(in->data.dtype), dv.cols, dv.rows, 1, &odv));
    int64_t srows, scols;
    CHECK(mxfa_scales_shape(out->block, dv.cols, dv.rows, &srows, &scols));
    CHECK(mxfa_check_matrix(ctx, "out->scales", &out->scales, DT(MXFA_E8M0), srows, scols, 1, &osv));
    CHECK(mxfa_check_disjoint(ctx, "out->data", &odv, "in->data", &dv));
    CHECK(mxfa_check_disjoint(ctx, "out->data", &odv, "in->scales", &sv));
    CHECK(mxfa_check_disjoint(ctx, "out->scales", &osv, "in->data", &dv));
    CHECK(mxfa_check_disjoint(ctx, "out->scales", &osv, "in->scales", &sv));
    CHECK(mxfa_check_disjoint(ctx, "out->data", &odv, "out->scales", &osv));
    mxfa_view tdv = view_transposed(dv), tsv = view_transposed(sv);
    CHECK(ctx->backend->copy(ctx, &tdv, &odv));
    return ctx->backend->copy(ctx, &tsv, &osv);
}

MXFA_API mxfa_status mxfa_scales_expand_square(mxfa_ctx *ctx, const mxfa_tensor *square_scales,
                                               int64_t rows, int64_t cols, mxfa_block block,
                                               mxfa_tensor *out)
{
    CHECK(check_ctx(ctx, "mxfa_scales_expand_square"));
    if (block != MXFA_BLOCK_ROW && block != MXFA_BLOCK_COL)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "mxfa_scales_expand_square: block must be row or col, got %s",
                         mxfa_block_name(block));
    int64_t qr, qc, orows, ocols;
    CHECK(mxfa_scales_shape(MXFA_BLOCK_SQUARE, rows, cols, &qr, &qc) == MXFA_OK
              ? MXFA_OK
              : mxfa_fail(ctx, MXFA_ERR_SHAPE, "mxfa_scales_expand_square: sizes must be positive, got [%lld, %lld]",
                          (long long)rows, (long long)cols));
    mxfa_scales_shape(block, rows, cols, &orows, &ocols);
    mxfa_view sv, ov;
    CHECK(mxfa_check_matrix(ctx, "square_scales", square_scales, DT(MXFA_E8M0), qr, qc, 0, &sv));
    CHECK(mxfa_check_matrix(ctx, "out", out, DT(MXFA_E8M0), orows, ocols, 1, &ov));
    CHECK(mxfa_check_disjoint(ctx, "out", &ov, "square_scales", &sv));
    return ctx->backend->expand(ctx, &sv, block == MXFA_BLOCK_ROW ? 32 : 1, block == MXFA_BLOCK_COL ? 32 : 1, &ov);
}
