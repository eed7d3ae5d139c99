/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The layout conversions through the public API, against their definitions
 * written out here: mxfa_transpose (every pair of block shapes, formats and
 * strided descriptors), mxfa_scales_expand_square, and mxfa_scales_swizzle
 * and mxfa_scales_unswizzle on compact and swizzled buffers the fuzzer
 * describes. A refused call must carry a message and leave its outputs as
 * they were; an accepted one must write exactly what the definition says,
 * and ref and cpu must agree.
 */
#include <stdio.h>

#include "fuzz.h"

static mxfa_ctx *ref, *cpu;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_layout: %s\n", what);
    abort();
}

static uint8_t at(const mxfa_tensor *t, int64_t r, int64_t c)
{
    int64_t rs = t->stride[0], cs = t->stride[1];
    if (rs == 0 && cs == 0)
        rs = t->shape[1], cs = 1;
    return ((const uint8_t *)t->data)[r * rs + c * cs];
}

/* The scale index of element (r, c) under a block shape. */
static void scale_index(mxfa_block block, int64_t r, int64_t c, int64_t *sr, int64_t *sc)
{
    *sr = block == MXFA_BLOCK_ROW ? r : r / 32;
    *sc = block == MXFA_BLOCK_COL ? c : c / 32;
}

/* The swizzled byte of index (r, c): 128 x 4 atoms in row-major order,
 * (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4 inside an atom. */
static int64_t swizzled_byte(int64_t r, int64_t c, int64_t sw_cols)
{
    return ((r / 128) * (sw_cols / 4) + c / 4) * 512 + (r % 32) * 16 + (r % 128) / 32 * 4 + c % 4;
}

/* A second output like o for the cpu backend: same layout, same bytes. */
static mxfa_tensor second(const mxfa_tensor *o, int64_t bytes)
{
    mxfa_tensor u = *o;
    size_t n = bytes > 0 ? (size_t)bytes : 1;
    u.data = malloc(n);
    memset(u.data, 0xA5, n);
    return u;
}

/* The contract common to every call: a refusal has a message and leaves
 * the outputs alone; ref and cpu agree on the status and the bytes. */
static void check_pair(const char *what, const mxfa_status st[2], mxfa_tensor o0[2], int64_t b0, mxfa_tensor o1[2],
                       int64_t b1)
{
    mxfa_ctx *ctx[2] = {ref, cpu};
    for (int i = 0; i < 2; i++)
        if (st[i] != MXFA_OK &&
            (!mxfa_last_error(ctx[i])[0] || !untouched(&o0[i], b0) || (o1 && !untouched(&o1[i], b1)))) {
            fprintf(stderr, "%s: ", what);
            fail("a refusal without a message, or with an output written");
        }
    if (st[0] != st[1]) {
        fprintf(stderr, "%s: ", what);
        fail("ref and cpu disagree on the status");
    }
    if (st[0] == MXFA_OK && ((b0 > 0 && memcmp(o0[0].data, o0[1].data, (size_t)b0)) ||
                             (o1 && b1 > 0 && memcmp(o1[0].data, o1[1].data, (size_t)b1)))) {
        fprintf(stderr, "%s: ", what);
        fail("ref and cpu wrote different bytes");
    }
}

static void transpose(fuzz_in *in, int64_t rows, int64_t cols)
{
    mxfa_block bi = (mxfa_block)(take8(in) % 4), bo = (mxfa_block)(take8(in) % 4); /* 3: not a block */
    mxfa_dtype fi = take8(in) & 1 ? MXFA_E5M2 : MXFA_E4M3;
    mxfa_dtype fo = take8(in) == 1 ? (fi == MXFA_E4M3 ? MXFA_E5M2 : MXFA_E4M3) : fi;
    int64_t sr = 1, sc = 1, tr = 1, tc = 1;
    if (mxfa_scales_shape(bi, rows, cols, &sr, &sc) != MXFA_OK)
        sr = sc = 1;
    if (mxfa_scales_shape(bo, cols, rows, &tr, &tc) != MXFA_OK)
        tr = tc = 1;
    int64_t b[4];
    mxfa_tensor xd = take_tensor(in, fi, rows, cols, 0, &b[0]), xs = take_tensor(in, MXFA_E8M0, sr, sc, 0, &b[1]);
    mxfa_tensor od[2], os[2];
    od[0] = take_tensor(in, fo, cols, rows, 1, &b[2]);
    os[0] = take_tensor(in, MXFA_E8M0, tr, tc, 1, &b[3]);
    if (b[0] == -2 || b[1] == -2 || b[2] == -2 || b[3] == -2)
        goto done;
    od[1] = second(&od[0], b[2]), os[1] = second(&os[0], b[3]);
    mxfa_mx x = {xd, xs, bi, MXFA_LAYOUT_COMPACT};
    mxfa_ctx *ctx[2] = {ref, cpu};
    mxfa_status st[2];
    for (int i = 0; i < 2; i++) {
        mxfa_mx t = {od[i], os[i], bo, MXFA_LAYOUT_COMPACT};
        st[i] = mxfa_transpose(ctx[i], &x, &t);
    }
    check_pair("transpose", st, od, b[2], os, b[3]);
    int exact = (bi == MXFA_BLOCK_SQUARE && bo == MXFA_BLOCK_SQUARE) ||
                (bi == MXFA_BLOCK_ROW && bo == MXFA_BLOCK_COL) || (bi == MXFA_BLOCK_COL && bo == MXFA_BLOCK_ROW);
    if (st[0] == MXFA_OK && (!exact || fo != fi))
        fail("transpose: a pair of blocks or formats without an exact transpose was accepted");
    if (st[0] == MXFA_OK) /* every element and its scale, at the shape accepted */
        for (int64_t r = 0; r < xd.shape[0]; r++)
            for (int64_t c = 0; c < xd.shape[1]; c++) {
                int64_t ir, ic, jr, jc;
                scale_index(bi, r, c, &ir, &ic);
                scale_index(bo, c, r, &jr, &jc);
                if (at(&od[0], c, r) != at(&xd, r, c) || at(&os[0], jr, jc) != at(&xs, ir, ic))
                    fail("transpose: an element or its scale is not where the definition puts it");
            }
    free(od[1].data), free(os[1].data);
done:
    free(xd.data), free(xs.data), free(od[0].data), free(os[0].data);
}

static void expand_square(fuzz_in *in, int64_t rows, int64_t cols)
{
    mxfa_block block = (mxfa_block)(take8(in) % 4); /* square and 3: refused */
    int64_t sr = 1, sc = 1, b[2];
    if (mxfa_scales_shape(block, rows, cols, &sr, &sc) != MXFA_OK)
        sr = sc = 1;
    mxfa_tensor sq = take_tensor(in, MXFA_E8M0, (rows + 31) / 32, (cols + 31) / 32, 0, &b[0]);
    mxfa_tensor o[2];
    o[0] = take_tensor(in, MXFA_E8M0, sr, sc, 1, &b[1]);
    if (b[0] == -2 || b[1] == -2)
        goto done;
    o[1] = second(&o[0], b[1]);
    mxfa_status st[2] = {mxfa_scales_expand_square(ref, &sq, rows, cols, block, &o[0]),
                         mxfa_scales_expand_square(cpu, &sq, rows, cols, block, &o[1])};
    check_pair("expand_square", st, o, b[1], NULL, 0);
    if (st[0] == MXFA_OK && block != MXFA_BLOCK_ROW && block != MXFA_BLOCK_COL)
        fail("expand_square: a block shape other than row or col was accepted");
    if (st[0] == MXFA_OK)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                int64_t ir, ic;
                scale_index(block, r, c, &ir, &ic);
                if (at(&o[0], ir, ic) != at(&sq, r / 32, c / 32))
                    fail("expand_square: a scale differs from its square block's");
            }
    free(o[1].data);
done:
    free(sq.data), free(o[0].data);
}

/* The index space of the swizzled layout: the compact scales for row
 * blocks, their transpose for col blocks. */
static uint8_t index_at(const mxfa_tensor *compact, mxfa_block block, int64_t r, int64_t c)
{
    return block == MXFA_BLOCK_COL ? at(compact, c, r) : at(compact, r, c);
}

static void swizzle(fuzz_in *in, int64_t rows, int64_t cols)
{
    mxfa_block block = (mxfa_block)(take8(in) % 4); /* square and 3: refused */
    int unswizzle = take8(in) & 1;
    int64_t sr = 1, sc = 1, wr = 128, wc = 4, b[2];
    if (mxfa_scales_shape(block, rows, cols, &sr, &sc) != MXFA_OK)
        sr = sc = 1;
    if (mxfa_swizzled_shape(block, rows, cols, &wr, &wc) != MXFA_OK)
        wr = 128, wc = 4;
    /* the index space as the swizzled layout sees it */
    int64_t ir = block == MXFA_BLOCK_COL ? sc : sr, ic = block == MXFA_BLOCK_COL ? sr : sc;
    mxfa_tensor src = unswizzle ? take_tensor(in, MXFA_E8M0, wr, wc, 0, &b[0])
                                : take_tensor(in, MXFA_E8M0, sr, sc, 0, &b[0]);
    mxfa_tensor o[2];
    o[0] = unswizzle ? take_tensor(in, MXFA_E8M0, sr, sc, 1, &b[1]) : take_tensor(in, MXFA_E8M0, wr, wc, 1, &b[1]);
    if (b[0] == -2 || b[1] == -2)
        goto done;
    o[1] = second(&o[0], b[1]);
    mxfa_status st[2];
    if (unswizzle) {
        st[0] = mxfa_scales_unswizzle(ref, &src, block, rows, cols, &o[0]);
        st[1] = mxfa_scales_unswizzle(cpu, &src, block, rows, cols, &o[1]);
    } else {
        st[0] = mxfa_scales_swizzle(ref, &src, block, rows, cols, &o[0]);
        st[1] = mxfa_scales_swizzle(cpu, &src, block, rows, cols, &o[1]);
    }
    check_pair(unswizzle ? "unswizzle" : "swizzle", st, o, b[1], NULL, 0);
    if (st[0] == MXFA_OK && block != MXFA_BLOCK_ROW && block != MXFA_BLOCK_COL)
        fail("swizzle: a block shape other than row or col was accepted");
    if (st[0] != MXFA_OK)
        goto out;
    const mxfa_tensor *sw = unswizzle ? &src : &o[0], *compact = unswizzle ? &o[0] : &src;
    const uint8_t *bytes = sw->data;
    for (int64_t r = 0; r < (unswizzle ? ir : sw->shape[0]); r++)
        for (int64_t c = 0; c < (unswizzle ? ic : sw->shape[1]); c++) {
            uint8_t want = r < ir && c < ic ? index_at(compact, block, r, c) : 0; /* padding: zero */
            if (bytes[swizzled_byte(r, c, sw->shape[1])] != want)
                fail(unswizzle ? "unswizzle: a scale is not the swizzled byte the definition names"
                               : "swizzle: a byte differs from the definition");
        }
out:
    free(o[1].data);
done:
    free(src.data), free(o[0].data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ref && (mxfa_open(&ref, "ref") != MXFA_OK || mxfa_open(&cpu, "cpu") != MXFA_OK))
        fail("cannot open the backends");
    fuzz_in in = {data, size};
    uint8_t op = take8(&in) % 3;
    int64_t rows = take8(&in) % 150 + 1, cols = take8(&in) % 150 + 1;
    if (op == 0)
        transpose(&in, rows, cols);
    else if (op == 1)
        expand_square(&in, rows, cols);
    else
        swizzle(&in, rows, cols);
    return 0;
}
