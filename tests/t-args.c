/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bad-input contract: every entry point checks its arguments and fails
 * with the specific status and a message, leaving every output byte as it
 * was (the outputs are filled with a sentinel and checked after each call).
 */
#include "mxfa.h"
#include "tap.h"

#define R 40
#define C 70
#define SENT 0xA5

static mxfa_ctx *ctx;
static float x[R * C];
static uint8_t data[R * C], scales[R * 3], sw[128 * 4 * 2];
static float yout[R * C];

static void reset(void)
{
    memset(data, SENT, sizeof data);
    memset(scales, SENT, sizeof scales);
    memset(sw, SENT, sizeof sw);
    memset(yout, SENT, sizeof yout);
}

static int untouched(void)
{
    for (size_t i = 0; i < sizeof data; i++)
        if (data[i] != SENT)
            return 0;
    for (size_t i = 0; i < sizeof scales; i++)
        if (scales[i] != SENT)
            return 0;
    for (size_t i = 0; i < sizeof sw; i++)
        if (sw[i] != SENT)
            return 0;
    const uint8_t *y = (const uint8_t *)yout;
    for (size_t i = 0; i < sizeof yout; i++)
        if (y[i] != SENT)
            return 0;
    return 1;
}

static void expect(mxfa_status got, mxfa_status want, const mxfa_ctx *c, const char *what)
{
    const char *msg = mxfa_last_error(c);
    if (!ok(got == want && msg[0] != '\0' && untouched(), "%s -> %s", what, mxfa_strerror(want)))
        diag("got status %d (%s), message '%s', outputs %s", got, mxfa_strerror(got), msg,
             untouched() ? "untouched" : "CHANGED");
    else
        diag("  message: %s", msg);
    reset();
}

static mxfa_mx good_out(void)
{
    mxfa_mx q = {mxfa_tensor_2d(data, MXFA_E4M3, R, C), mxfa_tensor_2d(scales, MXFA_E8M0, R, 3), MXFA_BLOCK_ROW,
                 MXFA_LAYOUT_COMPACT};
    return q;
}

int main(void)
{
    mxfa_ctx *none = (mxfa_ctx *)0x1;
    reset();
    for (int i = 0; i < R * C; i++)
        x[i] = (float)i;
    ok(mxfa_open(&ctx, "ref") == MXFA_OK, "open ref");

    /* contexts */
    expect(mxfa_open(NULL, "ref"), MXFA_ERR_NULL, NULL, "mxfa_open(NULL)");
    expect(mxfa_open(&none, "bogus"), MXFA_ERR_INVALID, NULL, "an unknown backend name");
    ok(none == (mxfa_ctx *)0x1, "a failed open leaves *ctx alone");
    if (!mxfa_backend_usable("cuda", NULL, 0))
        expect(mxfa_open(&none, "cuda"), MXFA_ERR_NO_BACKEND, NULL, "cuda when it is not usable (no fallback)");
    if (!mxfa_backend_usable("cpu", NULL, 0))
        expect(mxfa_open(&none, "cpu"), MXFA_ERR_NO_BACKEND, NULL, "cpu when it is not built (no fallback)");

    mxfa_tensor xt = mxfa_tensor_2d(x, MXFA_F32, R, C), t;
    mxfa_mx q = good_out();
    expect(mxfa_quantize(NULL, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_NULL, NULL, "quantize: ctx NULL");
    expect(mxfa_quantize(ctx, NULL, MXFA_PRESET_RCEIL, &q), MXFA_ERR_NULL, ctx, "quantize: x NULL");
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, NULL), MXFA_ERR_NULL, ctx, "quantize: out NULL");
    t = xt; t.data = NULL;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_NULL, ctx, "quantize: x->data NULL");
    q = good_out(); q.data.data = NULL;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_NULL, ctx, "quantize: out->data.data NULL");
    q = good_out(); q.scales.data = NULL;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_NULL, ctx, "quantize: out->scales.data NULL");
    q = good_out();
    t = xt; t.shape[0] = 0;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize: zero rows");
    t = xt; t.shape[1] = -5;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize: negative cols");
    t = xt; t.ndim = 3; t.shape[2] = 1;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize: a 3-D input");
    t = xt; t.shape[0] = INT64_C(1) << 40; t.shape[1] = INT64_C(1) << 40; t.stride[0] = t.stride[1] = 0;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_OVERFLOW, ctx, "quantize: rows * cols overflows");
    t = xt; t.shape[0] = 2; t.stride[0] = INT64_MAX / 2;
    q.data.shape[0] = 2; q.scales.shape[0] = 2;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_OVERFLOW, ctx, "quantize: a stride whose byte offset overflows");
    q = good_out();
    t = xt; t.stride[1] = -1;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize: a negative stride");
    t = xt; t.dtype = MXFA_E4M3;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize: fp8 input");
    t = xt; t.dtype = (mxfa_dtype)77;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize: an unknown dtype");
    t = xt; t.memory = MXFA_MEM_DEVICE;
    expect(mxfa_quantize(ctx, &t, MXFA_PRESET_RCEIL, &q), MXFA_ERR_UNSUPPORTED, ctx, "quantize: device memory on ref");
    expect(mxfa_quantize(ctx, &xt, (mxfa_preset)9, &q), MXFA_ERR_INVALID, ctx, "quantize: an unknown preset");
    q.block = (mxfa_block)5;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize: an unknown block shape");
    q = good_out(); q.layout = MXFA_LAYOUT_SWIZZLED;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_UNSUPPORTED, ctx, "quantize: swizzled output scales");
    q = good_out(); q.data.dtype = MXFA_F32;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize: fp32 output data");
    q = good_out(); q.scales.dtype = MXFA_E4M3;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize: scales not E8M0");
    q = good_out(); q.data.shape[1] = C - 1;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize: data shape differs from x");
    q = good_out(); q.scales.shape[1] = 2;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize: scales of the wrong shape");
    q = good_out(); q.block = MXFA_BLOCK_SQUARE;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize: row-shaped scales for square blocks");
    q = good_out(); q.scales.data = data + 10;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_ALIAS, ctx, "quantize: scales inside data");
    q = good_out(); q.data.stride[0] = 1; q.data.stride[1] = 1;
    expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_ALIAS, ctx, "quantize: an output whose strides overlap itself");
    {
        /* an output over the input: x's bytes must stay as they were too */
        float xcopy[R * C];
        memcpy(xcopy, x, sizeof x);
        q = good_out(); q.data.data = x;
        expect(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q), MXFA_ERR_ALIAS, ctx, "quantize: data over the input");
        ok(memcmp(xcopy, x, sizeof x) == 0, "the input is untouched too");
    }

    /* jagged */
    int32_t cu_good[3] = {0, 15, R}, cu_bad0[3] = {1, 15, R}, cu_dec[3] = {0, 30, 20}, cu_short[3] = {0, 15, R - 1};
    q = good_out();
    expect(mxfa_quantize_jagged(ctx, &xt, NULL, 2, MXFA_PRESET_RCEIL, &q), MXFA_ERR_NULL, ctx, "quantize_jagged: cu_seqlens NULL");
    expect(mxfa_quantize_jagged(ctx, &xt, cu_good, 0, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize_jagged: batch 0");
    expect(mxfa_quantize_jagged(ctx, &xt, cu_bad0, 2, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize_jagged: cu_seqlens[0] != 0");
    expect(mxfa_quantize_jagged(ctx, &xt, cu_dec, 2, MXFA_PRESET_RCEIL, &q), MXFA_ERR_INVALID, ctx, "quantize_jagged: decreasing cu_seqlens");
    expect(mxfa_quantize_jagged(ctx, &xt, cu_short, 2, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize_jagged: cu_seqlens not matching the tokens");
    q.block = MXFA_BLOCK_COL; q.scales = mxfa_tensor_2d(scales, MXFA_E8M0, 2, C); /* needs 1 + 1 = 2 rows: fine */
    q.scales.shape[0] = 1;
    expect(mxfa_quantize_jagged(ctx, &xt, cu_good, 2, MXFA_PRESET_RCEIL, &q), MXFA_ERR_SHAPE, ctx, "quantize_jagged: col scales without a row per sequence block");
    int64_t sfo[3];
    expect(mxfa_jagged_sf_offsets(cu_dec, 2, sfo), MXFA_ERR_INVALID, NULL, "jagged_sf_offsets: decreasing cu_seqlens");
    expect(mxfa_jagged_sf_offsets(cu_good, 2, NULL), MXFA_ERR_NULL, NULL, "jagged_sf_offsets: output NULL");

    /* dequantize */
    q = good_out();
    memset(data, 0x38, sizeof data);
    memset(scales, 0x7F, sizeof scales);
    mxfa_tensor yt = mxfa_tensor_2d(yout, MXFA_F32, R, C);
    q.layout = MXFA_LAYOUT_SWIZZLED;
    memset(yout, SENT, sizeof yout);
    {
        /* data and scales hold valid input here; only yout must stay */
        mxfa_status st = mxfa_dequantize(ctx, &q, &yt);
        const uint8_t *yb = (const uint8_t *)yout;
        int same = 1;
        for (size_t i = 0; i < sizeof yout; i++)
            same &= yb[i] == SENT;
        ok(st == MXFA_ERR_UNSUPPORTED && same, "dequantize: swizzled scales -> %s, output untouched",
           mxfa_strerror(MXFA_ERR_UNSUPPORTED));
        q.layout = MXFA_LAYOUT_COMPACT;
        yt.dtype = MXFA_E5M2;
        st = mxfa_dequantize(ctx, &q, &yt);
        same = 1;
        for (size_t i = 0; i < sizeof yout; i++)
            same &= yb[i] == SENT;
        ok(st == MXFA_ERR_INVALID && same, "dequantize: an fp8 output -> invalid, output untouched");
        yt = mxfa_tensor_2d(yout, MXFA_F32, R, C - 1);
        st = mxfa_dequantize(ctx, &q, &yt);
        ok(st == MXFA_ERR_SHAPE, "dequantize: output shape differs -> shape error");
    }
    reset();

    /* layouts */
    mxfa_tensor ct = mxfa_tensor_2d(scales, MXFA_E8M0, R, 3), swt = mxfa_tensor_2d(sw, MXFA_E8M0, 128, 4);
    expect(mxfa_scales_swizzle(ctx, &ct, MXFA_BLOCK_SQUARE, R, C, &swt), MXFA_ERR_UNSUPPORTED, ctx, "swizzle: square scales");
    swt.shape[0] = 64;
    expect(mxfa_scales_swizzle(ctx, &ct, MXFA_BLOCK_ROW, R, C, &swt), MXFA_ERR_SHAPE, ctx, "swizzle: an unpadded swizzled buffer");
    swt = mxfa_tensor_2d(sw, MXFA_E8M0, 128, 4); swt.stride[0] = 8;
    expect(mxfa_scales_swizzle(ctx, &ct, MXFA_BLOCK_ROW, R, C, &swt), MXFA_ERR_INVALID, ctx, "swizzle: a strided swizzled buffer");
    swt = mxfa_tensor_2d(sw, MXFA_E8M0, 128, 4);
    expect(mxfa_scales_swizzle(ctx, &ct, MXFA_BLOCK_ROW, R, 0, &swt), MXFA_ERR_SHAPE, ctx, "swizzle: zero columns");
    expect(mxfa_scales_scatter(ctx, &ct, cu_dec, 2, MXFA_BLOCK_ROW, C, &swt), MXFA_ERR_INVALID, ctx, "scatter: decreasing cu_seqlens");
    expect(mxfa_scales_scatter(ctx, &ct, cu_good, 2, MXFA_BLOCK_ROW, C, &swt), MXFA_ERR_SHAPE, ctx, "scatter: a swizzled buffer too small for two sequences");
    expect(mxfa_scales_scatter(ctx, &ct, cu_good, 2, MXFA_BLOCK_SQUARE, C, &swt), MXFA_ERR_INVALID, ctx, "scatter: square blocks");
    int64_t a, b;
    expect(mxfa_scales_shape(MXFA_BLOCK_ROW, 0, 5, &a, &b), MXFA_ERR_SHAPE, NULL, "scales_shape: zero rows");
    expect(mxfa_swizzled_shape(MXFA_BLOCK_ROW, INT64_MAX, 64, &a, &b), MXFA_ERR_OVERFLOW, NULL, "swizzled_shape: rows overflow when padded");
    expect(mxfa_scales_expand_square(ctx, &ct, R, C, MXFA_BLOCK_SQUARE, &ct), MXFA_ERR_INVALID, ctx, "expand_square: to square");

    /* names */
    mxfa_preset p;
    mxfa_block bl;
    mxfa_layout lay;
    mxfa_dtype fmt;
    expect(mxfa_preset_parse("ceil", &p), MXFA_ERR_INVALID, NULL, "preset_parse: an unknown preset");
    expect(mxfa_block_parse("diag", &bl), MXFA_ERR_INVALID, NULL, "block_parse: an unknown block");
    expect(mxfa_layout_parse("tiled", &lay), MXFA_ERR_INVALID, NULL, "layout_parse: an unknown layout");
    expect(mxfa_format_parse("e3m4", &fmt), MXFA_ERR_INVALID, NULL, "format_parse: an unknown format");

    /* transpose */
    {
        static uint8_t td[C * R], ts[3 * R];
        q = good_out();
        memset(data, 0x38, sizeof data), memset(scales, 0x7F, sizeof scales);
        mxfa_mx t_out = {mxfa_tensor_2d(td, MXFA_E4M3, C, R), mxfa_tensor_2d(ts, MXFA_E8M0, 3, R), MXFA_BLOCK_COL,
                         MXFA_LAYOUT_COMPACT};
        mxfa_mx t_good = t_out;
#define EXPECT_T(call, want, what) EXPECT_T_IN(ctx, call, want, what)
#define EXPECT_T_IN(c, call, want, what)                                                                             \
    do {                                                                                                       \
        memset(td, SENT, sizeof td), memset(ts, SENT, sizeof ts);                                              \
        mxfa_status st_ = (call);                                                                              \
        int same_ = 1;                                                                                         \
        for (size_t i_ = 0; i_ < sizeof td; i_++)                                                              \
            same_ &= td[i_] == SENT;                                                                           \
        for (size_t i_ = 0; i_ < sizeof ts; i_++)                                                              \
            same_ &= ts[i_] == SENT;                                                                           \
        if (!ok(st_ == (want) && same_ && (st_ == MXFA_OK || mxfa_last_error(c)[0]), "transpose: %s -> %s",  \
                what, mxfa_strerror(want)))                                                                    \
            diag("got %s (%s), output %s", mxfa_strerror(st_), mxfa_last_error(c), same_ ? "untouched" : "WRITTEN"); \
    } while (0)
        ok(mxfa_transpose(ctx, &q, &t_out) == MXFA_OK, "transpose: the unbroken call succeeds");
        EXPECT_T_IN(NULL, mxfa_transpose(NULL, &q, &t_out), MXFA_ERR_NULL, "ctx NULL");
        EXPECT_T(mxfa_transpose(ctx, NULL, &t_out), MXFA_ERR_NULL, "in NULL");
        EXPECT_T(mxfa_transpose(ctx, &q, NULL), MXFA_ERR_NULL, "out NULL");
        t_out.block = MXFA_BLOCK_ROW;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_NEEDS_SOURCE, "row blocks to row blocks of X^T");
        t_out = t_good, t_out.block = (mxfa_block)9;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_INVALID, "an unknown block shape");
        t_out = t_good, t_out.layout = MXFA_LAYOUT_SWIZZLED;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_UNSUPPORTED, "swizzled output scales");
        t_out = t_good, t_out.data.shape[0] = C - 1;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_SHAPE, "output data not [cols, rows]");
        t_out = t_good, t_out.data.dtype = MXFA_E5M2;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_INVALID, "an output format other than the input's");
        t_out = t_good, t_out.scales.shape[1] = 3;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_SHAPE, "output scales of the wrong shape");
        t_out = t_good, t_out.scales.data = td + 5;
        EXPECT_T(mxfa_transpose(ctx, &q, &t_out), MXFA_ERR_ALIAS, "output scales inside the output data");
        t_out = t_good;
        mxfa_mx over = t_good;
        over.data.data = data; /* X^T's codes over X's */
        mxfa_status st = mxfa_transpose(ctx, &q, &over);
        ok(st == MXFA_ERR_ALIAS && data[0] == 0x38 && data[R * C - 1] == 0x38, "transpose: output over the input -> %s, input untouched",
           mxfa_strerror(MXFA_ERR_ALIAS));
#undef EXPECT_T
#undef EXPECT_T_IN
        reset();
    }

    /* scale layouts: expand, unswizzle, gather, shapes and offsets */
    {
        mxfa_tensor sq = mxfa_tensor_2d(sw, MXFA_E8M0, 2, 3), rowsc = mxfa_tensor_2d(scales, MXFA_E8M0, R, 3);
        memset(sw, 0x7F, 6);
        ok(mxfa_scales_expand_square(ctx, &sq, R, C, MXFA_BLOCK_ROW, &rowsc) == MXFA_OK,
           "expand_square: the unbroken call succeeds");
        reset();
        memset(sw, 0x7F, 6);
        uint8_t sw_before[sizeof sw];
        memcpy(sw_before, sw, sizeof sw);
        mxfa_status st = mxfa_scales_expand_square(ctx, &sq, 0, C, MXFA_BLOCK_ROW, &rowsc);
        ok(st == MXFA_ERR_SHAPE && !memcmp(sw, sw_before, sizeof sw) && scales[0] == SENT,
           "expand_square: zero rows -> %s", mxfa_strerror(MXFA_ERR_SHAPE));
        sq.shape[1] = 2;
        st = mxfa_scales_expand_square(ctx, &sq, R, C, MXFA_BLOCK_ROW, &rowsc);
        ok(st == MXFA_ERR_SHAPE && scales[0] == SENT, "expand_square: square scales of the wrong shape -> %s",
           mxfa_strerror(MXFA_ERR_SHAPE));
        sq.shape[1] = 3, rowsc.data = sw + 2;
        st = mxfa_scales_expand_square(ctx, &sq, R, C, MXFA_BLOCK_ROW, &rowsc);
        ok(st == MXFA_ERR_ALIAS && !memcmp(sw, sw_before, sizeof sw), "expand_square: out over the square scales -> %s",
           mxfa_strerror(MXFA_ERR_ALIAS));
        st = mxfa_scales_expand_square(ctx, NULL, R, C, MXFA_BLOCK_ROW, &rowsc);
        ok(st == MXFA_ERR_NULL, "expand_square: square_scales NULL -> %s", mxfa_strerror(MXFA_ERR_NULL));
        reset();

        mxfa_tensor swt2 = mxfa_tensor_2d(sw, MXFA_E8M0, 128, 4), cpt = mxfa_tensor_2d(scales, MXFA_E8M0, R, 3);
        memset(sw, 0, sizeof sw);
        ok(mxfa_scales_unswizzle(ctx, &swt2, MXFA_BLOCK_ROW, R, C, &cpt) == MXFA_OK,
           "unswizzle: the unbroken call succeeds");
        memset(scales, SENT, sizeof scales), memset(data, SENT, sizeof data), memset(yout, SENT, sizeof yout);
        memset(sw, SENT, sizeof sw);
        expect(mxfa_scales_unswizzle(ctx, NULL, MXFA_BLOCK_ROW, R, C, &cpt), MXFA_ERR_NULL, ctx,
               "unswizzle: swizzled NULL");
        expect(mxfa_scales_unswizzle(ctx, &swt2, MXFA_BLOCK_SQUARE, R, C, &cpt), MXFA_ERR_UNSUPPORTED, ctx,
               "unswizzle: square scales");
        cpt.shape[1] = 2;
        expect(mxfa_scales_unswizzle(ctx, &swt2, MXFA_BLOCK_ROW, R, C, &cpt), MXFA_ERR_SHAPE, ctx,
               "unswizzle: compact scales of the wrong shape");
        cpt.shape[1] = 3;
        expect(mxfa_scales_unswizzle(ctx, &swt2, MXFA_BLOCK_ROW, -R, C, &cpt), MXFA_ERR_SHAPE, ctx,
               "unswizzle: negative rows");
        expect(mxfa_scales_gather(ctx, &swt2, cu_dec, 2, MXFA_BLOCK_ROW, C, &cpt), MXFA_ERR_INVALID, ctx,
               "gather: decreasing cu_seqlens");
        expect(mxfa_scales_gather(ctx, &swt2, NULL, 2, MXFA_BLOCK_ROW, C, &cpt), MXFA_ERR_NULL, ctx,
               "gather: cu_seqlens NULL");
        expect(mxfa_scales_gather(ctx, &swt2, cu_good, 2, MXFA_BLOCK_ROW, C, &cpt), MXFA_ERR_SHAPE, ctx,
               "gather: a swizzled buffer too small for two sequences");

        int64_t rows_out = -7;
        expect(mxfa_jagged_scale_rows(cu_good, 2, NULL), MXFA_ERR_NULL, NULL, "jagged_scale_rows: output NULL");
        expect(mxfa_jagged_scale_rows(cu_dec, 2, &rows_out), MXFA_ERR_INVALID, NULL,
               "jagged_scale_rows: decreasing cu_seqlens");
        expect(mxfa_jagged_scale_rows(cu_good, 0, &rows_out), MXFA_ERR_SHAPE, NULL, "jagged_scale_rows: batch 0");
        ok(rows_out == -7, "jagged_scale_rows: refused calls leave the output alone");

        int64_t sr_ = -1, sc_ = -1;
        expect(mxfa_scales_shape(MXFA_BLOCK_ROW, 4, 4, NULL, &sc_), MXFA_ERR_NULL, NULL, "scales_shape: NULL output");
        expect(mxfa_scales_shape((mxfa_block)3, 4, 4, &sr_, &sc_), MXFA_ERR_INVALID, NULL,
               "scales_shape: an unknown block shape");
        ok(sr_ == -1 && sc_ == -1, "scales_shape: refused calls leave the outputs alone");
        ok(mxfa_scales_shape(MXFA_BLOCK_SQUARE, INT64_MAX, INT64_MAX, &sr_, &sc_) == MXFA_OK &&
               sr_ == INT64_MAX / 32 + 1 && sc_ == INT64_MAX / 32 + 1,
           "scales_shape: ceil(INT64_MAX / 32) without overflow");

        ok(mxfa_swizzle_offset(-1, 0, 4) == -1 && mxfa_swizzle_offset(0, -1, 4) == -1 &&
               mxfa_swizzle_offset(0, 0, 6) == -1 && mxfa_swizzle_offset(0, 0, 0) == -1 &&
               mxfa_swizzle_offset(0, 4, 4) == -1 && mxfa_swizzle_offset(INT64_MAX, 0, INT64_C(1) << 40) == -1,
           "swizzle_offset: -1 for negative indices, bad widths, columns past the width and overflow");
        ok(mxfa_swizzle_offset(130, 5, 8) == (1 * 2 + 1) * 512 + 2 * 16 + 0 * 4 + 1 &&
               mxfa_swizzle_offset(INT64_C(1) << 40, 3, 4) == (INT64_C(1) << 33) * 512 + 3,
           "swizzle_offset: the atom formula, also at 2^40 rows");
    }

    /* compare */
    {
        float a1[6] = {1, 2, 3, 4, 5, 6}, b1[6] = {1, 2, 3, 4, 5, 7};
        mxfa_tensor ta = mxfa_tensor_2d(a1, MXFA_F32, 2, 3), tb = mxfa_tensor_2d(b1, MXFA_F32, 2, 3);
        mxfa_metrics m, m0;
        memset(&m, SENT, sizeof m), memcpy(&m0, &m, sizeof m);
        expect(mxfa_compare(NULL, &tb, &m), MXFA_ERR_NULL, NULL, "compare: out NULL");
        expect(mxfa_compare(&ta, &tb, NULL), MXFA_ERR_NULL, NULL, "compare: metrics NULL");
        tb.shape[1] = 2;
        expect(mxfa_compare(&ta, &tb, &m), MXFA_ERR_SHAPE, NULL, "compare: shapes differ");
        tb.shape[1] = 3, tb.ndim = 0;
        expect(mxfa_compare(&ta, &tb, &m), MXFA_ERR_SHAPE, NULL, "compare: ref with zero dimensions");
        tb.ndim = 2, ta.dtype = MXFA_E4M3;
        expect(mxfa_compare(&ta, &tb, &m), MXFA_ERR_INVALID, NULL, "compare: fp8 out");
        ta.dtype = MXFA_F32, ta.memory = MXFA_MEM_DEVICE;
        expect(mxfa_compare(&ta, &tb, &m), MXFA_ERR_UNSUPPORTED, NULL, "compare: device memory");
        ok(!memcmp(&m, &m0, sizeof m), "compare: refused calls leave the metrics alone");
    }

    /* contexts and names */
    {
        mxfa_ctx *c2 = NULL;
        ok(mxfa_open(&c2, NULL) == MXFA_OK && c2, "open: a NULL backend name means auto");
        mxfa_close(c2);
        char why[8];
        memset(why, SENT, sizeof why);
        ok(!mxfa_backend_usable(NULL, why, sizeof why) && why[sizeof why - 1] == '\0' && strlen(why) == 7,
           "backend_usable: NULL name -> 0, the reason cut to the buffer");
        memset(why, SENT, sizeof why);
        ok(!mxfa_backend_usable("nope", why, 0) && (uint8_t)why[0] == SENT,
           "backend_usable: a zero-length buffer is not written");
        /* streams and device memory on a backend without a device */
        void *dptr = (void *)0x1;
        char bytes[16] = "abcdefghijklmno", copy[16];
        expect(mxfa_set_stream(NULL, NULL), MXFA_ERR_NULL, NULL, "set_stream: ctx NULL");
        ok(mxfa_set_stream(ctx, (void *)0x10) == MXFA_OK && mxfa_get_stream(ctx) == (void *)0x10 &&
               mxfa_set_stream(ctx, NULL) == MXFA_OK,
           "set_stream: kept (and ignored) by the ref backend");
        expect(mxfa_device_alloc(ctx, 64, &dptr), MXFA_ERR_UNSUPPORTED, ctx, "device_alloc on the ref backend");
        ok(dptr == (void *)0x1, "device_alloc: a refusal leaves *ptr alone");
        expect(mxfa_device_alloc(ctx, 0, &dptr), MXFA_ERR_SHAPE, ctx, "device_alloc: zero bytes");
        expect(mxfa_device_alloc(ctx, 64, NULL), MXFA_ERR_NULL, ctx, "device_alloc: ptr NULL");
        expect(mxfa_memcpy(ctx, bytes + 4, bytes, 8), MXFA_ERR_ALIAS, ctx, "memcpy: overlapping buffers");
        ok(strcmp(bytes, "abcdefghijklmno") == 0, "memcpy: a refused copy writes nothing");
        expect(mxfa_memcpy(ctx, NULL, bytes, 8), MXFA_ERR_NULL, ctx, "memcpy: dst NULL");
        ok(mxfa_memcpy(ctx, copy, bytes, 16) == MXFA_OK && memcmp(copy, bytes, 16) == 0,
           "memcpy: host to host on the ref backend");
        ok(mxfa_synchronize(ctx) == MXFA_OK && mxfa_device_free(ctx, NULL) == MXFA_OK,
           "synchronize and device_free(NULL): nothing to do");
        mxfa_model mo = (mxfa_model)42;
        mxfa_p_scale ps = (mxfa_p_scale)42;
        expect(mxfa_model_parse("sm80", &mo), MXFA_ERR_INVALID, NULL, "model_parse: an unknown model");
        expect(mxfa_p_scale_parse("static", &ps), MXFA_ERR_INVALID, NULL, "p_scale_parse: an unknown P scaling");
        expect(mxfa_model_parse(NULL, &mo), MXFA_ERR_NULL, NULL, "model_parse: name NULL");
        expect(mxfa_model_parse("sm100", NULL), MXFA_ERR_NULL, NULL, "model_parse: output NULL");
        expect(mxfa_block_parse("row", NULL), MXFA_ERR_NULL, NULL, "block_parse: output NULL");
        expect(mxfa_preset_parse("ocp", NULL), MXFA_ERR_NULL, NULL, "preset_parse: output NULL");
        expect(mxfa_layout_parse("compact", NULL), MXFA_ERR_NULL, NULL, "layout_parse: output NULL");
        expect(mxfa_format_parse("e4m3", NULL), MXFA_ERR_NULL, NULL, "format_parse: output NULL");
        expect(mxfa_p_scale_parse("const", NULL), MXFA_ERR_NULL, NULL, "p_scale_parse: output NULL");
        ok(mo == (mxfa_model)42 && ps == (mxfa_p_scale)42, "parse: refused calls leave the output alone");
        ok(strcmp(mxfa_strerror((mxfa_status)99), "") != 0 && mxfa_dtype_size((mxfa_dtype)99) == 0 &&
               strcmp(mxfa_model_name((mxfa_model)-1), "unknown") == 0 &&
               strcmp(mxfa_dtype_name((mxfa_dtype)99), "unknown") == 0,
           "names and sizes of unknown values: a sentence, 0 and 'unknown', never NULL");
    }

    /* a good call after all that works, and clears the message */
    q = good_out();
    ok(mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &q) == MXFA_OK && mxfa_last_error(ctx)[0] == '\0',
       "a valid call succeeds afterwards and clears the last error");
    mxfa_close(ctx);
    mxfa_close(NULL); /* a no-op; a crash here fails the plan */
    return done_testing();
}
