/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jagged (variable-length) batches: 128-aligned scale offsets, jagged
 * quantization (blocks restart at every sequence, and equal quantizing each
 * sequence alone), and scatter into / gather from the padded swizzled
 * layout for sequence lengths 1, 31, 32, 127, 128, 129, 257 and 1000 alone
 * and in mixed batches, with zero-length sequences too.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ctx;

static int64_t round128(int64_t n)
{
    return (n + 127) / 128 * 128;
}

/* The atom offset of index (r, c), restated from the definition. */
static int64_t atom_offset(int64_t r, int64_t c, int64_t sw_cols)
{
    return ((r / 128) * (sw_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

static int check_batch(const char *label, const int32_t *lens, int batch, int64_t cols)
{
    int32_t cu[64];
    int64_t sf[64];
    cu[0] = 0;
    for (int i = 0; i < batch; i++)
        cu[i + 1] = cu[i] + lens[i];
    int64_t total = cu[batch];
    int good = mxfa_jagged_sf_offsets(cu, batch, sf) == MXFA_OK;
    int64_t expect = 0;
    for (int i = 0; i <= batch && good; i++) {
        good &= sf[i] == expect;
        if (i < batch)
            expect += round128(lens[i]);
    }
    ok(good, "%s: cu_seqlens_sf are the 128-aligned starts", label);

    float *x = malloc((size_t)(total * cols) * sizeof *x);
    for (int64_t k = 0; k < total * cols; k++)
        x[k] = (float)ldexp((double)(int32_t)rng_next(), (int)rng_below(40) - 50);
    mxfa_tensor xt = mxfa_tensor_2d(x, MXFA_F32, total, cols);

    for (int b = 0; b < 2; b++) {
        mxfa_block block = (mxfa_block)b;
        /* jagged quantization; blocks restart at each sequence */
        int64_t srows = total, scols = (cols + 31) / 32;
        if (block == MXFA_BLOCK_COL) {
            mxfa_jagged_scale_rows(cu, batch, &srows);
            scols = cols;
        }
        uint8_t *data = malloc((size_t)(total * cols)), *scales = malloc((size_t)(srows * scols));
        mxfa_mx q = {mxfa_tensor_2d(data, MXFA_E4M3, total, cols), mxfa_tensor_2d(scales, MXFA_E8M0, srows, scols),
                     block, MXFA_LAYOUT_COMPACT};
        int qgood = mxfa_quantize_jagged(ctx, &xt, cu, batch, MXFA_PRESET_RCEIL, &q) == MXFA_OK;
        /* ... equals quantizing each sequence on its own */
        int64_t srow0 = 0;
        for (int i = 0; i < batch && qgood; i++) {
            if (lens[i] == 0)
                continue;
            int64_t sr, sc;
            mxfa_scales_shape(block, lens[i], cols, &sr, &sc);
            uint8_t *d1 = malloc((size_t)(lens[i] * cols)), *s1 = malloc((size_t)(sr * sc));
            mxfa_tensor xi = mxfa_tensor_2d(x + (int64_t)cu[i] * cols, MXFA_F32, lens[i], cols);
            mxfa_mx qi = {mxfa_tensor_2d(d1, MXFA_E4M3, lens[i], cols), mxfa_tensor_2d(s1, MXFA_E8M0, sr, sc), block,
                          MXFA_LAYOUT_COMPACT};
            qgood &= mxfa_quantize(ctx, &xi, MXFA_PRESET_RCEIL, &qi) == MXFA_OK &&
                     memcmp(d1, data + (int64_t)cu[i] * cols, (size_t)(lens[i] * cols)) == 0 &&
                     memcmp(s1, scales + (block == MXFA_BLOCK_ROW ? cu[i] : srow0) * scols, (size_t)(sr * sc)) == 0;
            srow0 += sr;
            free(d1);
            free(s1);
        }
        ok(qgood, "%s: jagged %s quantization equals quantizing each sequence alone", label, mxfa_block_name(block));

        /* scatter into the padded swizzled layout */
        int64_t ir = block == MXFA_BLOCK_ROW ? sf[batch] : cols;
        int64_t ic = block == MXFA_BLOCK_ROW ? scols : sf[batch] / 32;
        int64_t swr = round128(ir), swc = (ic + 3) / 4 * 4;
        uint8_t *sw = malloc((size_t)(swr * swc)), *back = malloc((size_t)(srows * scols));
        memset(sw, 0xEE, (size_t)(swr * swc));
        memset(back, 0, (size_t)(srows * scols));
        for (int64_t k = 0; k < srows * scols; k++)
            scales[k] |= 1; /* never 0, so padding shows */
        mxfa_tensor swt = mxfa_tensor_2d(sw, MXFA_E8M0, swr, swc);
        mxfa_tensor bt = mxfa_tensor_2d(back, MXFA_E8M0, srows, scols);
        int sgood = mxfa_scales_scatter(ctx, &q.scales, cu, batch, block, cols, &swt) == MXFA_OK;
        if (!sgood)
            diag("%s", mxfa_last_error(ctx));
        /* every scale at its place: sequence i, its row (or block) k, from sf[i] */
        int64_t placed = 0, blk0 = 0;
        for (int i = 0; i < batch && sgood; i++) {
            int64_t nk = block == MXFA_BLOCK_ROW ? lens[i] : (lens[i] + 31) / 32;
            for (int64_t k = 0; k < nk; k++)
                for (int64_t j = 0; j < scols; j++) {
                    uint8_t want = block == MXFA_BLOCK_ROW ? scales[(cu[i] + k) * scols + j] : scales[(blk0 + k) * scols + j];
                    int64_t off = block == MXFA_BLOCK_ROW ? atom_offset(sf[i] + k, j, swc)
                                                          : atom_offset(j, sf[i] / 32 + k, swc);
                    placed += sw[off] == want;
                }
            blk0 += nk;
        }
        int64_t nonzero = 0;
        for (int64_t k = 0; k < swr * swc; k++)
            nonzero += sw[k] != 0;
        sgood = sgood && placed == srows * scols && nonzero == srows * scols;
        ok(sgood, "%s: %s scatter puts every scale at its 128-aligned place, padding zero", label,
           mxfa_block_name(block));
        ok(mxfa_scales_gather(ctx, &swt, cu, batch, block, cols, &bt) == MXFA_OK &&
               memcmp(back, scales, (size_t)(srows * scols)) == 0,
           "%s: %s gather returns the compact scales exactly", label, mxfa_block_name(block));
        free(data);
        free(scales);
        free(sw);
        free(back);
    }
    free(x);
    return 1;
}

int main(void)
{
    rng_seed_from_env(20261129);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    static const int32_t lens[] = {1, 31, 32, 127, 128, 129, 257, 1000};
    char label[64];
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        snprintf(label, sizeof label, "length %d", (int)lens[i]);
        check_batch(label, &lens[i], 1, 64);
    }
    check_batch("mixed batch of all lengths", lens, 8, 96);
    static const int32_t mixed2[] = {129, 0, 1, 1000, 0, 31, 257, 32, 127, 128};
    check_batch("mixed batch with empty sequences, 45 columns", mixed2, 10, 45);
    int32_t many[40];
    for (int i = 0; i < 40; i++)
        many[i] = (int32_t)rng_below(300);
    check_batch("40 random lengths", many, 40, 33);
    mxfa_close(ctx);
    return done_testing();
}
