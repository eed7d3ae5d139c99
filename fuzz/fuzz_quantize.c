/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Quantization, dequantization and the scale layouts through the public
 * API, with shapes, strides, blocks, presets, formats and data from the
 * fuzzer: the ref and cpu backends must agree on the status and on every
 * output byte (an output left as it was on failure), and a swizzle must
 * unswizzle back to the compact scales.
 */
#include <stdio.h>

#include "fuzz.h"

static mxfa_ctx *ref, *cpu;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_quantize: %s\n", what);
    abort();
}

static void *copy(const void *p, int64_t bytes)
{
    size_t n = bytes > 0 ? (size_t)bytes : 1;
    void *q = malloc(n);
    if (!q)
        fail("out of memory");
    memcpy(q, p, n);
    return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ref && (mxfa_open(&ref, "ref") != MXFA_OK || mxfa_open(&cpu, "cpu") != MXFA_OK))
        fail("cannot open the backends");
    fuzz_in in = {data, size};
    int64_t rows = take8(&in) % 70 + 1, cols = take8(&in) % 100 + 1;
    mxfa_block block = (mxfa_block)(take8(&in) % 4); /* 3: not a block */
    mxfa_preset preset = (mxfa_preset)(take8(&in) % 5);
    mxfa_dtype fmt = take8(&in) & 1 ? MXFA_E5M2 : MXFA_E4M3, src = take8(&in) & 1 ? MXFA_BF16 : MXFA_F32;
    int64_t sr = 1, sc = 1;
    if (mxfa_scales_shape(block, rows, cols, &sr, &sc) != MXFA_OK)
        sr = sc = 1;
    int64_t xb, db, sb, ob;
    mxfa_tensor x = take_tensor(&in, src, rows, cols, 0, &xb);
    mxfa_tensor d[2], s[2], o[2];
    d[0] = take_tensor(&in, fmt, rows, cols, 1, &db);
    s[0] = take_tensor(&in, MXFA_E8M0, sr, sc, 1, &sb);
    o[0] = take_tensor(&in, src, rows, cols, 1, &ob);
    if (xb == -2 || db == -2 || sb == -2 || ob == -2)
        goto done;
    /* the cpu backend's outputs: the same layout, the same initial bytes */
    d[1] = d[0], s[1] = s[0], o[1] = o[0];
    d[1].data = copy(d[0].data, db), s[1].data = copy(s[0].data, sb), o[1].data = copy(o[0].data, ob);
    mxfa_ctx *ctx[2] = {ref, cpu};
    mxfa_status q[2], dq[2];
    for (int i = 0; i < 2; i++) {
        mxfa_mx mx = {d[i], s[i], block, MXFA_LAYOUT_COMPACT};
        q[i] = mxfa_quantize(ctx[i], &x, preset, &mx);
        dq[i] = q[i] == MXFA_OK ? mxfa_dequantize(ctx[i], &mx, &o[i]) : MXFA_OK;
    }
    if (q[0] != q[1] || dq[0] != dq[1])
        fail("ref and cpu disagree on a status");
    if ((db > 0 && memcmp(d[0].data, d[1].data, (size_t)db)) || (sb > 0 && memcmp(s[0].data, s[1].data, (size_t)sb)) ||
        (ob > 0 && memcmp(o[0].data, o[1].data, (size_t)ob)))
        fail("ref and cpu wrote different bytes");
    if (q[0] != MXFA_OK && db > 0)
        for (int64_t i = 0; i < db; i++)
            if (((uint8_t *)d[0].data)[i] != 0xA5)
                fail("a failed quantization wrote its output");
    /* the swizzled layout round trip, for row and col blocks */
    if (q[0] == MXFA_OK && (block == MXFA_BLOCK_ROW || block == MXFA_BLOCK_COL) && sb > 0) {
        int64_t wr, wc;
        rows = x.shape[0], cols = x.shape[1]; /* what was quantized (a hostile size may have matched) */
        if (mxfa_swizzled_shape(block, rows, cols, &wr, &wc) == MXFA_OK && wr * wc <= (1 << 20)) {
            /* back starts as a copy, so that the bytes between strided
             * elements compare equal */
            uint8_t *w = malloc((size_t)(wr * wc)), *back = copy(s[0].data, sb);
            mxfa_tensor tw = mxfa_tensor_2d(w, MXFA_E8M0, wr, wc), tb = s[0];
            tb.data = back;
            if (mxfa_scales_swizzle(cpu, &s[0], block, rows, cols, &tw) != MXFA_OK ||
                mxfa_scales_unswizzle(ref, &tw, block, rows, cols, &tb) != MXFA_OK ||
                memcmp(back, s[0].data, (size_t)sb))
                fail("swizzle then unswizzle is not the identity");
            free(w), free(back);
        }
    }
    free(d[1].data), free(s[1].data), free(o[1].data);
done:
    free(x.data), free(d[0].data), free(s[0].data), free(o[0].data);
    return 0;
}
