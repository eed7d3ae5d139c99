/* SPDX-License-Identifier: BSD-3-Clause */
/* Entry points for scale-factor layouts: the swizzled 128x4 atoms and the
 * jagged (variable-length) batches with 128-aligned scale offsets. */
#include <stdlib.h>

#include "internal.h"

MXFA_API int64_t mxfa_swizzle_offset(int64_t r, int64_t c, int64_t sw_cols)
{
    if (r < 0 || c < 0 || sw_cols <= 0 || sw_cols % 4 != 0 || c >= sw_cols)
        return -1;
    int64_t atom, off;
    /* the byte of the atom's first row, exact when it fits */
    if (!mxfa_mul_ok(r / 128, sw_cols / 4, &atom) || !mxfa_add_ok(atom, c / 4, &atom) ||
        !mxfa_mul_ok(atom, 512, &off))
        return -1;
    return off + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4; /* < off + 512: atom * 512 is a multiple of 512 */
}

/* The index space of the scales of [rows, cols] quantized with block. */
static mxfa_status index_space(mxfa_ctx *ctx, mxfa_block block, int64_t rows, int64_t cols,
                               int64_t *ir, int64_t *ic)
{
    if (block == MXFA_BLOCK_SQUARE)
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED,
                         "square scales have no swizzled layout of their own: expand them to row or col "
                         "scales first (mxfa_scales_expand_square)");
    if (block != MXFA_BLOCK_ROW && block != MXFA_BLOCK_COL)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "unknown block shape %d", (int)block);
    if (rows <= 0 || cols <= 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "sizes must be positive, got [%lld, %lld]", (long long)rows,
                         (long long)cols);
    int64_t sr, sc;
    mxfa_scales_shape(block, rows, cols, &sr, &sc);
    *ir = block == MXFA_BLOCK_ROW ? sr : sc;
    *ic = block == MXFA_BLOCK_ROW ? sc : sr;
    return MXFA_OK;
}

static mxfa_status padded(mxfa_ctx *ctx, int64_t ir, int64_t ic, int64_t *sw_rows, int64_t *sw_cols)
{
    int64_t bytes;
    if (ir > INT64_MAX - 127 || ic > INT64_MAX - 3)
        return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "swizzled scale matrix size overflows");
    *sw_rows = round_up(ir, 128);
    *sw_cols = round_up(ic, 4);
    if (!mxfa_mul_ok(*sw_rows, *sw_cols, &bytes))
        return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "swizzled scale matrix [%lld, %lld] overflows",
                         (long long)*sw_rows, (long long)*sw_cols);
    return MXFA_OK;
}

MXFA_API mxfa_status mxfa_swizzled_shape(mxfa_block block, int64_t rows, int64_t cols, int64_t *sw_rows,
                                         int64_t *sw_cols)
{
    mxfa_clear_error(NULL);
    if (!sw_rows || !sw_cols)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_swizzled_shape: NULL output");
    int64_t ir, ic;
    CHECK(index_space(NULL, block, rows, cols, &ir, &ic));
    return padded(NULL, ir, ic, sw_rows, sw_cols);
}

/* A swizzled buffer must be exactly [sw_rows, sw_cols] contiguous bytes. */
static mxfa_status check_swizzled(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t, int64_t sw_rows,
                                  int64_t sw_cols, int is_output, mxfa_view *v)
{
    CHECK(mxfa_check_matrix(ctx, what, t, DT(MXFA_E8M0), sw_rows, sw_cols, is_output, v));
    if (v->rs != sw_cols || v->cs != 1)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: a swizzled scale buffer must be contiguous", what);
    return MXFA_OK;
}

static mxfa_status swizzle_common(mxfa_ctx *ctx, const char *fn, const mxfa_tensor *compact,
                                  const mxfa_tensor *swizzled, mxfa_block block, int64_t rows, int64_t cols,
                                  int to_swizzled)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "%s: ctx is NULL", fn);
    mxfa_clear_error(ctx);
    int64_t ir, ic, swr, swc, sr, sc;
    CHECK(index_space(ctx, block, rows, cols, &ir, &ic));
    CHECK(padded(ctx, ir, ic, &swr, &swc));
    mxfa_scales_shape(block, rows, cols, &sr, &sc);
    mxfa_view cv, sv;
    CHECK(mxfa_check_matrix(ctx, to_swizzled ? "compact" : "compact (output)", compact, DT(MXFA_E8M0), sr, sc,
                            !to_swizzled, &cv));
    CHECK(check_swizzled(ctx, to_swizzled ? "swizzled (output)" : "swizzled", swizzled, swr, swc, to_swizzled,
                         &sv));
    CHECK(mxfa_check_disjoint(ctx, "compact", &cv, "swizzled", &sv));
    mxfa_view index = block == MXFA_BLOCK_ROW ? cv : view_transposed(cv);
    if (to_swizzled)
        return ctx->backend->swizzle(ctx, &index, 0, NULL, 0, sv.base, swr, swc);
    return ctx->backend->unswizzle(ctx, sv.base, swr, swc, 0, NULL, 0, &index);
}

MXFA_API mxfa_status mxfa_scales_swizzle(mxfa_ctx *ctx, const mxfa_tensor *compact, mxfa_block block,
                                         int64_t rows, int64_t cols, mxfa_tensor *swizzled)
{
    return swizzle_common(ctx, "mxfa_scales_swizzle", compact, swizzled, block, rows, cols, 1);
}

MXFA_API mxfa_status mxfa_scales_unswizzle(mxfa_ctx *ctx, const mxfa_tensor *swizzled, mxfa_block block,
                                           int64_t rows, int64_t cols, mxfa_tensor *compact)
{
    return swizzle_common(ctx, "mxfa_scales_unswizzle", compact, swizzled, block, rows, cols, 0);
}

MXFA_API mxfa_status mxfa_jagged_sf_offsets(const int32_t *cu_seqlens, int batch, int64_t *cu_seqlens_sf)
{
    mxfa_clear_error(NULL);
    if (!cu_seqlens_sf)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_jagged_sf_offsets: cu_seqlens_sf is NULL");
    CHECK(mxfa_check_cu_seqlens(NULL, cu_seqlens, batch, -1));
    cu_seqlens_sf[0] = 0;
    for (int i = 0; i < batch; i++)
        cu_seqlens_sf[i + 1] = cu_seqlens_sf[i] + round_up((int64_t)cu_seqlens[i + 1] - cu_seqlens[i], 128);
    return MXFA_OK;
}

static mxfa_status jagged_common(mxfa_ctx *ctx, const char *fn, const mxfa_tensor *compact,
                                 const mxfa_tensor *swizzled, const int32_t *cu_seqlens, int batch,
                                 mxfa_block block, int64_t cols, int to_swizzled)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "%s: ctx is NULL", fn);
    mxfa_clear_error(ctx);
    CHECK(mxfa_check_cu_seqlens(ctx, cu_seqlens, batch, -1));
    if (block != MXFA_BLOCK_ROW && block != MXFA_BLOCK_COL)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: block must be row or col, got %s", fn,
                         mxfa_block_name(block));
    if (cols <= 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: cols must be positive, got %lld", fn, (long long)cols);
    if (cu_seqlens[batch] == 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: the batch holds no tokens", fn);
    mxfa_segment *segs = malloc((size_t)batch * sizeof *segs);
    if (!segs)
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "%s: cannot allocate %d segments", fn, batch);
    /* Sequence i: its compact rows (row) or block rows (col), and where they
     * start in the padded index space (cu_seqlens_sf[i], in blocks for col). */
    int64_t src = 0, dst = 0;
    for (int i = 0; i < batch; i++) {
        int64_t len = (int64_t)cu_seqlens[i + 1] - cu_seqlens[i];
        segs[i].src = src;
        segs[i].dst = block == MXFA_BLOCK_ROW ? dst : dst / 32;
        segs[i].count = block == MXFA_BLOCK_ROW ? len : ceil_div(len, 32);
        src += segs[i].count;
        dst += round_up(len, 128);
    }
    int64_t sr = src, sc = block == MXFA_BLOCK_ROW ? ceil_div(cols, 32) : cols;
    int64_t ir = block == MXFA_BLOCK_ROW ? dst : cols, ic = block == MXFA_BLOCK_ROW ? sc : dst / 32;
    int64_t swr, swc;
    mxfa_view cv, sv;
    mxfa_status st = padded(ctx, ir, ic, &swr, &swc);
    if (st == MXFA_OK)
        st = mxfa_check_matrix(ctx, to_swizzled ? "compact" : "compact (output)", compact, DT(MXFA_E8M0), sr, sc,
                               !to_swizzled, &cv);
    if (st == MXFA_OK)
        st = check_swizzled(ctx, to_swizzled ? "swizzled (output)" : "swizzled", swizzled, swr, swc,
                            to_swizzled, &sv);
    if (st == MXFA_OK)
        st = mxfa_check_disjoint(ctx, "compact", &cv, "swizzled", &sv);
    if (st == MXFA_OK) {
        int axis = block == MXFA_BLOCK_ROW ? 0 : 1;
        mxfa_view index = block == MXFA_BLOCK_ROW ? cv : view_transposed(cv);
        st = to_swizzled ? ctx->backend->swizzle(ctx, &index, axis, segs, batch, sv.base, swr, swc)
                         : ctx->backend->unswizzle(ctx, sv.base, swr, swc, axis, segs, batch, &index);
    }
    free(segs);
    return st;
}

MXFA_API mxfa_status mxfa_scales_scatter(mxfa_ctx *ctx, const mxfa_tensor *compact, const int32_t *cu_seqlens,
                                         int batch, mxfa_block block, int64_t cols, mxfa_tensor *swizzled)
{
    return jagged_common(ctx, "mxfa_scales_scatter", compact, swizzled, cu_seqlens, batch, block, cols, 1);
}

MXFA_API mxfa_status mxfa_scales_gather(mxfa_ctx *ctx, const mxfa_tensor *swizzled, const int32_t *cu_seqlens,
                                        int batch, mxfa_block block, int64_t cols, mxfa_tensor *compact)
{
    return jagged_common(ctx, "mxfa_scales_gather", compact, swizzled, cu_seqlens, batch, block, cols, 0);
}
