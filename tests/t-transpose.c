/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Square blocks are transpose-invariant: quantizing X^T gives exactly the
 * transposed payload and scales of quantizing X, and mxfa_transpose turns
 * one into the other without the source. Row blocks of X are col blocks of
 * X^T (same bytes, transposed), but X^T in row blocks needs the source: the
 * API refuses with MXFA_ERR_NEEDS_SOURCE and leaves the output alone.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ctx;

static void random_matrix(float *x, int64_t n)
{
    /* signed values over 2^-20 .. 2^20, with some zeros */
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_below(50) == 0 ? 0.0f : (float)ldexp((double)(int32_t)rng_next(), (int)rng_below(40) - 51);
}

/* Quantize x [rows, cols] with block; data and scales malloc'ed. */
static mxfa_mx quantize(const float *x, int64_t rows, int64_t cols, mxfa_block block, mxfa_preset preset)
{
    int64_t sr, sc;
    mxfa_scales_shape(block, rows, cols, &sr, &sc);
    mxfa_mx q = {mxfa_tensor_2d(malloc((size_t)(rows * cols)), MXFA_E4M3, rows, cols),
                 mxfa_tensor_2d(malloc((size_t)(sr * sc)), MXFA_E8M0, sr, sc), block, MXFA_LAYOUT_COMPACT};
    mxfa_tensor xt = mxfa_tensor_2d((void *)x, MXFA_F32, rows, cols);
    if (mxfa_quantize(ctx, &xt, preset, &q) != MXFA_OK)
        printf("Bail out! quantize: %s\n", mxfa_last_error(ctx));
    return q;
}

static void free_mx(mxfa_mx *q)
{
    free(q->data.data);
    free(q->scales.data);
}

static size_t nbytes(const mxfa_tensor *t)
{
    return (size_t)(t->shape[0] * t->shape[1]);
}

static int same(const mxfa_mx *a, const mxfa_mx *b)
{
    return nbytes(&a->data) == nbytes(&b->data) && nbytes(&a->scales) == nbytes(&b->scales) &&
           a->scales.shape[0] == b->scales.shape[0] &&
           memcmp(a->data.data, b->data.data, nbytes(&a->data)) == 0 &&
           memcmp(a->scales.data, b->scales.data, nbytes(&a->scales)) == 0;
}

int main(void)
{
    rng_seed_from_env(20261129);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    static const int64_t sizes[][2] = {{1, 1}, {31, 33}, {37, 70}, {64, 64}, {65, 97}, {129, 31}, {200, 3}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t rows = sizes[i][0], cols = sizes[i][1];
        float *x = malloc((size_t)(rows * cols) * sizeof *x), *xt = malloc((size_t)(rows * cols) * sizeof *xt);
        random_matrix(x, rows * cols);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                xt[c * rows + r] = x[r * cols + c];
        for (int p = 0; p < 4; p++) {
            /* quantize(X^T) == transpose(quantize(X)), byte for byte, for square blocks */
            mxfa_mx qx = quantize(x, rows, cols, MXFA_BLOCK_SQUARE, (mxfa_preset)p);
            mxfa_mx qxt = quantize(xt, cols, rows, MXFA_BLOCK_SQUARE, (mxfa_preset)p);
            int invariant = 1;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++)
                    invariant &= ((uint8_t *)qx.data.data)[r * cols + c] == ((uint8_t *)qxt.data.data)[c * rows + r];
            int64_t sr = qx.scales.shape[0], sc = qx.scales.shape[1];
            for (int64_t r = 0; r < sr; r++)
                for (int64_t c = 0; c < sc; c++)
                    invariant &= ((uint8_t *)qx.scales.data)[r * sc + c] == ((uint8_t *)qxt.scales.data)[c * sr + r];
            ok(invariant, "%lldx%lld %s: quantizing X^T in square blocks gives the transposed bytes of X's",
               (long long)rows, (long long)cols, mxfa_preset_name((mxfa_preset)p));
            mxfa_mx out = quantize(xt, cols, rows, MXFA_BLOCK_SQUARE, (mxfa_preset)p);
            memset(out.data.data, 0xA5, nbytes(&out.data));
            memset(out.scales.data, 0xA5, nbytes(&out.scales));
            ok(mxfa_transpose(ctx, &qx, &out) == MXFA_OK && same(&out, &qxt),
               "%lldx%lld %s: mxfa_transpose(square) equals quantizing X^T", (long long)rows, (long long)cols,
               mxfa_preset_name((mxfa_preset)p));
            free_mx(&qx);
            free_mx(&qxt);
            free_mx(&out);
        }
        /* row blocks of X are col blocks of X^T */
        mxfa_mx qrow = quantize(x, rows, cols, MXFA_BLOCK_ROW, MXFA_PRESET_RCEIL);
        mxfa_mx qcol_t = quantize(xt, cols, rows, MXFA_BLOCK_COL, MXFA_PRESET_RCEIL);
        mxfa_mx out = quantize(xt, cols, rows, MXFA_BLOCK_COL, MXFA_PRESET_RCEIL);
        memset(out.data.data, 0, nbytes(&out.data));
        ok(mxfa_transpose(ctx, &qrow, &out) == MXFA_OK && same(&out, &qcol_t),
           "%lldx%lld: X in row blocks transposes exactly into X^T in col blocks", (long long)rows, (long long)cols);
        /* ... but not into X^T in row blocks */
        mxfa_mx bad = quantize(xt, cols, rows, MXFA_BLOCK_ROW, MXFA_PRESET_RCEIL);
        memset(bad.data.data, 0x5A, nbytes(&bad.data));
        memset(bad.scales.data, 0x5A, nbytes(&bad.scales));
        mxfa_status st = mxfa_transpose(ctx, &qrow, &bad);
        int untouched = 1;
        for (size_t k = 0; k < nbytes(&bad.data); k++)
            untouched &= ((uint8_t *)bad.data.data)[k] == 0x5A;
        for (size_t k = 0; k < nbytes(&bad.scales); k++)
            untouched &= ((uint8_t *)bad.scales.data)[k] == 0x5A;
        ok(st == MXFA_ERR_NEEDS_SOURCE && untouched && strstr(mxfa_last_error(ctx), "high-precision"),
           "%lldx%lld: row -> row transpose is refused (needs the source), output untouched", (long long)rows,
           (long long)cols);
        if (i == 2)
            diag("the message: %s", mxfa_last_error(ctx));
        free_mx(&qrow);
        free_mx(&qcol_t);
        free_mx(&out);
        free_mx(&bad);

        /* square scales expanded to row or col scales dequantize to the same values */
        mxfa_mx qs = quantize(x, rows, cols, MXFA_BLOCK_SQUARE, MXFA_PRESET_OCP);
        float *y1 = malloc((size_t)(rows * cols) * sizeof *y1), *y2 = malloc((size_t)(rows * cols) * sizeof *y2);
        mxfa_tensor t1 = mxfa_tensor_2d(y1, MXFA_F32, rows, cols), t2 = mxfa_tensor_2d(y2, MXFA_F32, rows, cols);
        int agree = mxfa_dequantize(ctx, &qs, &t1) == MXFA_OK;
        for (int b = 0; b < 2; b++) {
            int64_t er, ec;
            mxfa_scales_shape((mxfa_block)b, rows, cols, &er, &ec);
            uint8_t *e = malloc((size_t)(er * ec));
            mxfa_tensor et = mxfa_tensor_2d(e, MXFA_E8M0, er, ec);
            mxfa_mx as = {qs.data, et, (mxfa_block)b, MXFA_LAYOUT_COMPACT};
            agree &= mxfa_scales_expand_square(ctx, &qs.scales, rows, cols, (mxfa_block)b, &et) == MXFA_OK &&
                     mxfa_dequantize(ctx, &as, &t2) == MXFA_OK &&
                     memcmp(y1, y2, (size_t)(rows * cols) * sizeof *y1) == 0;
            free(e);
        }
        ok(agree, "%lldx%lld: square scales expanded to row and col scales dequantize identically", (long long)rows,
           (long long)cols);
        free(y1);
        free(y2);
        free_mx(&qs);
        free(x);
        free(xt);
    }
    mxfa_close(ctx);
    return done_testing();
}
