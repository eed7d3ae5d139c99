/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The swizzled scale layout: offsets of known entries worked out by hand
 * from the atom definition, an independent restatement of the formula on
 * every index, padding written as zero, and round trips for row and col
 * blocks of odd sizes.
 */
#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ctx;

/* The definition, restated: 128x4 atoms of 512 bytes, row-major; inside,
 * 32 groups of 16 bytes, one per r % 32, holding 4 rows of 4 bytes each. */
static int64_t expect_offset(int64_t r, int64_t c, int64_t sw_cols)
{
    int64_t atoms_per_row = sw_cols / 4;
    int64_t atom_base = ((r / 128) * atoms_per_row + (c / 4)) * 512;
    int64_t rr = r % 128, cc = c % 4;
    return atom_base + (rr % 32) * 16 + (rr / 32) * 4 + cc;
}

int main(void)
{
    rng_seed_from_env(20261129);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    /* By hand, for an index space 8 columns wide (2 atoms per atom row). */
    ok(mxfa_swizzle_offset(0, 0, 8) == 0, "(0,0) -> 0");
    ok(mxfa_swizzle_offset(0, 3, 8) == 3, "(0,3) -> 3");
    ok(mxfa_swizzle_offset(1, 0, 8) == 16, "(1,0) -> 16: the next row of a 32-row group is 16 bytes on");
    ok(mxfa_swizzle_offset(32, 0, 8) == 4, "(32,0) -> 4: rows 32 apart share a 16-byte group");
    ok(mxfa_swizzle_offset(97, 2, 8) == 1 * 16 + 3 * 4 + 2, "(97,2) -> 30");
    ok(mxfa_swizzle_offset(127, 3, 8) == 511, "(127,3) -> 511: the last byte of the first atom");
    ok(mxfa_swizzle_offset(0, 4, 8) == 512, "(0,4) -> 512: the second atom of the first atom row");
    ok(mxfa_swizzle_offset(128, 0, 8) == 1024, "(128,0) -> 1024: the second atom row starts after two atoms");
    ok(mxfa_swizzle_offset(130, 5, 8) == 1536 + 2 * 16 + 1, "(130,5) -> 1569");

    int64_t bad = 0;
    for (int64_t r = 0; r < 384; r++)
        for (int64_t c = 0; c < 12; c++)
            bad += mxfa_swizzle_offset(r, c, 12) != expect_offset(r, c, 12);
    ok(bad == 0, "every index of a 384x12 space matches the definition");

    static const int64_t sizes[][2] = {{1, 1}, {1, 32}, {31, 33}, {127, 129}, {128, 128}, {129, 100}, {300, 257}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int b = 0; b < 2; b++) {
            int64_t rows = sizes[i][0], cols = sizes[i][1], sr, sc, swr, swc;
            mxfa_block block = (mxfa_block)b;
            mxfa_scales_shape(block, rows, cols, &sr, &sc);
            mxfa_swizzled_shape(block, rows, cols, &swr, &swc);
            /* index space: compact for row, transposed compact for col */
            int64_t ir = block == MXFA_BLOCK_ROW ? sr : sc, ic = block == MXFA_BLOCK_ROW ? sc : sr;
            uint8_t *compact = malloc((size_t)(sr * sc)), *back = malloc((size_t)(sr * sc));
            uint8_t *sw = malloc((size_t)(swr * swc));
            for (int64_t k = 0; k < sr * sc; k++)
                compact[k] = (uint8_t)(1 + rng_below(254)); /* never 0, so padding shows */
            memset(sw, 0xEE, (size_t)(swr * swc));
            memset(back, 0, (size_t)(sr * sc));
            mxfa_tensor ct = mxfa_tensor_2d(compact, MXFA_E8M0, sr, sc), bt = mxfa_tensor_2d(back, MXFA_E8M0, sr, sc);
            mxfa_tensor st = mxfa_tensor_2d(sw, MXFA_E8M0, swr, swc);
            int good = swr == ((ir + 127) / 128) * 128 && swc == ((ic + 3) / 4) * 4 &&
                       mxfa_scales_swizzle(ctx, &ct, block, rows, cols, &st) == MXFA_OK;
            int64_t placed = 0, zeros = 0;
            for (int64_t r = 0; r < swr && good; r++)
                for (int64_t c = 0; c < swc; c++) {
                    uint8_t v = sw[expect_offset(r, c, swc)];
                    if (r < ir && c < ic) {
                        uint8_t want = block == MXFA_BLOCK_ROW ? compact[r * sc + c] : compact[c * sc + r];
                        placed += v == want;
                    } else {
                        zeros += v == 0;
                    }
                }
            good = good && placed == ir * ic && zeros == swr * swc - ir * ic;
            good = good && mxfa_scales_unswizzle(ctx, &st, block, rows, cols, &bt) == MXFA_OK &&
                   memcmp(compact, back, (size_t)(sr * sc)) == 0;
            ok(good, "%s scales of %lldx%lld: every entry at its atom offset, padding zero, round trip exact",
               mxfa_block_name(block), (long long)rows, (long long)cols);
            free(compact);
            free(back);
            free(sw);
        }
    mxfa_close(ctx);
    return done_testing();
}
