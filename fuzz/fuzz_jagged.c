/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jagged batches: the offset helpers against their definitions, jagged
 * quantization on ref and cpu (same status, same bytes), and the scatter of
 * compact jagged scales into the padded swizzled layout and back, with
 * cu_seqlens chosen by the fuzzer (not starting at zero, decreasing, not
 * matching the tokens, empty sequences).
 */
#include <stdio.h>

#include "fuzz.h"

static mxfa_ctx *ref, *cpu;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_jagged: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ref && (mxfa_open(&ref, "ref") != MXFA_OK || mxfa_open(&cpu, "cpu") != MXFA_OK))
        fail("cannot open the backends");
    fuzz_in in = {data, size};
    int batch = take8(&in) % 7 - (take8(&in) == 1); /* -1 .. 6 */
    int32_t cu[8] = {0};
    int valid = batch > 0;
    cu[0] = take8(&in) == 2 ? 1 : 0;
    valid &= cu[0] == 0;
    for (int i = 1; i <= batch && i < 8; i++) {
        cu[i] = cu[i - 1] + (int32_t)(take8(&in) % 70) - (take8(&in) == 3 ? 1 : 0);
        valid &= cu[i] >= cu[i - 1];
    }
    /* the offset helpers against their definitions */
    int64_t sf[8], rows32 = -1;
    mxfa_status s1 = mxfa_jagged_sf_offsets(cu, batch, sf), s2 = mxfa_jagged_scale_rows(cu, batch, &rows32);
    if ((s1 == MXFA_OK) != valid || (s2 == MXFA_OK) != valid)
        fail("the offset helpers accept exactly the valid cu_seqlens");
    if (!valid)
        return 0;
    int64_t want = 0, total = cu[batch];
    for (int i = 0; i < batch; i++) {
        int64_t len = (int64_t)cu[i + 1] - cu[i];
        if (sf[i + 1] - sf[i] != (len + 127) / 128 * 128)
            fail("cu_seqlens_sf steps by each length rounded up to 128");
        want += (len + 31) / 32;
    }
    if (sf[0] != 0 || rows32 != want)
        fail("the scale rows are the sum of ceil(len / 32)");
    if (total == 0)
        return 0;
    /* jagged quantization on both backends */
    int64_t cols = take8(&in) % 80 + 1, xb, db, sb;
    mxfa_block block = (mxfa_block)(take8(&in) % 3);
    mxfa_preset preset = (mxfa_preset)(take8(&in) % 4);
    int64_t sr = block == MXFA_BLOCK_ROW ? total : rows32, sc = block == MXFA_BLOCK_COL ? cols : (cols + 31) / 32;
    int64_t tokens = total + (take8(&in) == 4); /* sometimes not matching cu_seqlens */
    mxfa_tensor x = take_tensor(&in, MXFA_F32, tokens, cols, 0, &xb);
    mxfa_tensor d[2], s[2];
    d[0] = take_tensor(&in, MXFA_E4M3, tokens, cols, 1, &db);
    s[0] = take_tensor(&in, MXFA_E8M0, sr, sc, 1, &sb);
    if (xb == -2 || db == -2 || sb == -2)
        goto done;
    tame_floats(&x, xb);
    d[1] = d[0], s[1] = s[0];
    d[1].data = malloc(db > 0 ? (size_t)db : 1), s[1].data = malloc(sb > 0 ? (size_t)sb : 1);
    memcpy(d[1].data, d[0].data, db > 0 ? (size_t)db : 1), memcpy(s[1].data, s[0].data, sb > 0 ? (size_t)sb : 1);
    mxfa_status q[2];
    mxfa_ctx *ctx[2] = {ref, cpu};
    for (int i = 0; i < 2; i++) {
        mxfa_mx mx = {d[i], s[i], block, MXFA_LAYOUT_COMPACT};
        q[i] = mxfa_quantize_jagged(ctx[i], &x, cu, batch, preset, &mx);
    }
    if (q[0] != q[1])
        fail("ref and cpu disagree on the status");
    if ((db > 0 && memcmp(d[0].data, d[1].data, (size_t)db)) || (sb > 0 && memcmp(s[0].data, s[1].data, (size_t)sb)))
        fail("ref and cpu wrote different bytes");
    /* scatter into the swizzled layout and gather back */
    if (q[0] == MXFA_OK && block != MXFA_BLOCK_SQUARE && sb > 0) {
        int64_t r = block == MXFA_BLOCK_ROW ? sf[batch] : x.shape[1];
        int64_t c = block == MXFA_BLOCK_ROW ? (x.shape[1] + 31) / 32 : sf[batch] / 32;
        int64_t wr = (r + 127) / 128 * 128, wc = (c + 3) / 4 * 4;
        if (wr > 0 && wc > 0 && wr * wc <= (1 << 20)) {
            uint8_t *w = malloc((size_t)(wr * wc)), *back = malloc((size_t)sb);
            memcpy(back, s[0].data, (size_t)sb); /* the bytes between strided elements compare equal */
            mxfa_tensor tw = mxfa_tensor_2d(w, MXFA_E8M0, wr, wc), tb = s[0];
            tb.data = back;
            if (mxfa_scales_scatter(cpu, &s[0], cu, batch, block, x.shape[1], &tw) != MXFA_OK ||
                mxfa_scales_gather(ref, &tw, cu, batch, block, x.shape[1], &tb) != MXFA_OK ||
                memcmp(back, s[0].data, (size_t)sb))
                fail("scatter then gather is not the identity");
            free(w), free(back);
        }
    }
    free(d[1].data), free(s[1].data);
done:
    free(x.data), free(d[0].data), free(s[0].data);
    return 0;
}
