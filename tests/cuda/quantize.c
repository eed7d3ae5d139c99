/* SPDX-License-Identifier: BSD-3-Clause */
/* t-cuda: quantization, dequantization, jagged quantization and the layouts. */
#include <math.h>

#include "harness.h"

int quantize_case(int trial, int device, char *what, size_t what_len)
{
    const int64_t rows = rand_dim(), cols = rand_dim();
    const mxfa_block block = (mxfa_block)rng_below(3);
    const mxfa_preset preset = (mxfa_preset)rng_below(4);
    const mxfa_dtype fmt = rng_below(2) ? MXFA_E5M2 : MXFA_E4M3, src = rng_below(2) ? MXFA_BF16 : MXFA_F32;
    const layout2 xl = pick_layout(rows, cols, (int)rng_below(3)), dl = pick_layout(rows, cols, (int)rng_below(2));
    int64_t sr, sc;
    mxfa_scales_shape(block, rows, cols, &sr, &sc);
    snprintf(what, what_len, "trial %d: [%lld, %lld] %s %s %s from %s, x strides (%lld, %lld), %s memory", trial,
             (long long)rows, (long long)cols, mxfa_block_name(block), mxfa_preset_name(preset),
             mxfa_dtype_name(fmt), mxfa_dtype_name(src), (long long)xl.rs, (long long)xl.cs,
             device ? "device" : "host");
    const size_t es = mxfa_dtype_size(src);
    buf x = buf_new(xl.elements * es, 0);
    fill_source(&x, src, xl.elements);
    buf d[2] = {buf_new(dl.elements, 0xA5), buf_new(dl.elements, 0xA5)};
    buf s[2] = {buf_new((size_t)(sr * sc), 0xA5), buf_new((size_t)(sr * sc), 0xA5)};
    buf o[2] = {buf_new(dl.elements * 4, 0xA5), buf_new(dl.elements * 4, 0xA5)};
    mxfa_ctx *ctx[2] = {ref, gpu};
    mxfa_status st[2], dst[2];
    const mxfa_dtype odt = rng_below(2) ? MXFA_BF16 : MXFA_F32;
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_tensor xt = t2(&x, dev, src, rows, cols, xl.rs, xl.cs);
        mxfa_mx q = {t2(&d[i], dev, fmt, rows, cols, dl.rs, dl.cs), t2(&s[i], dev, MXFA_E8M0, sr, sc, sc, 1), block,
                     MXFA_LAYOUT_COMPACT};
        st[i] = mxfa_quantize(ctx[i], &xt, preset, &q);
        /* dequantize ref's codes on both, so that a quantization mismatch
         * does not hide a dequantization one (ref has run: where() copies
         * its final bytes to the device) */
        mxfa_mx in = {t2(&d[0], dev, fmt, rows, cols, dl.rs, dl.cs), t2(&s[0], dev, MXFA_E8M0, sr, sc, sc, 1), block,
                      MXFA_LAYOUT_COMPACT};
        mxfa_tensor ot = t2(&o[i], dev, odt, rows, cols, dl.rs, dl.cs);
        dst[i] = mxfa_dequantize(ctx[i], &in, &ot);
        if (st[i] != MXFA_OK || dst[i] != MXFA_OK)
            snprintf(what + strlen(what), what_len - strlen(what), "; %s: %s", i ? "cuda" : "ref",
                     mxfa_last_error(ctx[i]));
    }
    fetch(&d[1]), fetch(&s[1]), fetch(&o[1]);
    int good = st[0] == MXFA_OK && st[1] == MXFA_OK && dst[0] == MXFA_OK && dst[1] == MXFA_OK && same(&d[0], &d[1]) &&
               same(&s[0], &s[1]) && same(&o[0], &o[1]);
    if (!good && st[0] == MXFA_OK && st[1] == MXFA_OK)
        snprintf(what + strlen(what), what_len - strlen(what), "; codes %s, scales %s, dequantized %s",
                 same(&d[0], &d[1]) ? "same" : "DIFFER", same(&s[0], &s[1]) ? "same" : "DIFFER",
                 same(&o[0], &o[1]) ? "same" : "DIFFER");
    buf_free(&x);
    for (int i = 0; i < 2; i++)
        buf_free(&d[i]), buf_free(&s[i]), buf_free(&o[i]);
    return good;
}

/* ---- jagged quantization, scatter and gather ---- */

int jagged_case(int trial, int device, char *what, size_t what_len)
{
    int batch = 1 + (int)rng_below(4);
    int32_t cu[5] = {0};
    for (int b = 1; b <= batch; b++)
        cu[b] = cu[b - 1] + (rng_below(5) == 0 ? 0 : (int32_t)rand_dim());
    if (cu[batch] == 0)
        cu[batch] = 1 + (int32_t)rng_below(40);
    const int64_t rows = cu[batch], cols = rand_dim();
    const mxfa_block block = rng_below(2) ? MXFA_BLOCK_COL : MXFA_BLOCK_SQUARE;
    const mxfa_preset preset = (mxfa_preset)rng_below(4);
    snprintf(what, what_len, "trial %d: %d sequences (%d, %d, %d, %d) x %lld columns, %s blocks, %s, %s memory",
             trial, batch, cu[1], cu[2], cu[3], cu[4], (long long)cols, mxfa_block_name(block),
             mxfa_preset_name(preset), device ? "device" : "host");
    int64_t sr;
    mxfa_jagged_scale_rows(cu, batch, &sr);
    const int64_t sc = block == MXFA_BLOCK_COL ? cols : (cols + 31) / 32;
    buf x = buf_new((size_t)(rows * cols) * 4, 0);
    fill_source(&x, MXFA_F32, (size_t)(rows * cols));
    buf d[2] = {buf_new((size_t)(rows * cols), 0xA5), buf_new((size_t)(rows * cols), 0xA5)};
    buf s[2] = {buf_new((size_t)(sr * sc), 0xA5), buf_new((size_t)(sr * sc), 0xA5)};
    mxfa_ctx *ctx[2] = {ref, gpu};
    mxfa_status st[2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_tensor xt = t2(&x, dev, MXFA_F32, rows, cols, cols, 1);
        mxfa_mx q = {t2(&d[i], dev, MXFA_E4M3, rows, cols, cols, 1), t2(&s[i], dev, MXFA_E8M0, sr, sc, sc, 1), block,
                     MXFA_LAYOUT_COMPACT};
        st[i] = mxfa_quantize_jagged(ctx[i], &xt, cu, batch, preset, &q);
    }
    fetch(&d[1]), fetch(&s[1]);
    int good = st[0] == MXFA_OK && st[1] == MXFA_OK && same(&d[0], &d[1]) && same(&s[0], &s[1]);

    /* the scales of row or col blocks of the same batch, scattered into the
     * swizzled layout and gathered back */
    const mxfa_block lb = rng_below(2) ? MXFA_BLOCK_ROW : MXFA_BLOCK_COL;
    int64_t cr = lb == MXFA_BLOCK_ROW ? rows : sr, cc = lb == MXFA_BLOCK_ROW ? (cols + 31) / 32 : cols;
    int64_t off[5];
    mxfa_jagged_sf_offsets(cu, batch, off);
    int64_t ir = lb == MXFA_BLOCK_ROW ? off[batch] : cols, ic = lb == MXFA_BLOCK_ROW ? cc : off[batch] / 32;
    int64_t wr = (ir + 127) / 128 * 128, wc = (ic + 3) / 4 * 4;
    buf compact = buf_new((size_t)(cr * cc), 0);
    for (size_t i = 0; i < compact.bytes; i++)
        compact.host[i] = (uint8_t)rng_below(256);
    buf w[2] = {buf_new((size_t)(wr * wc), 0xA5), buf_new((size_t)(wr * wc), 0xA5)};
    buf back[2] = {buf_new(compact.bytes, 0xA5), buf_new(compact.bytes, 0xA5)};
    mxfa_status sw[2], ga[2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_tensor ct = t2(&compact, dev, MXFA_E8M0, cr, cc, cc, 1), wt = t2(&w[i], dev, MXFA_E8M0, wr, wc, wc, 1);
        mxfa_tensor bt = t2(&back[i], dev, MXFA_E8M0, cr, cc, cc, 1);
        sw[i] = mxfa_scales_scatter(ctx[i], &ct, cu, batch, lb, cols, &wt);
        ga[i] = mxfa_scales_gather(ctx[i], &wt, cu, batch, lb, cols, &bt);
    }
    fetch(&w[1]), fetch(&back[1]);
    int layout_good = sw[0] == MXFA_OK && sw[1] == MXFA_OK && ga[0] == MXFA_OK && ga[1] == MXFA_OK &&
                      same(&w[0], &w[1]) && same(&back[0], &back[1]) && same(&back[0], &compact);
    if (!layout_good)
        snprintf(what + strlen(what), what_len - strlen(what), "; scatter/gather of %s scales: %s", mxfa_block_name(lb),
                 sw[1] != MXFA_OK || ga[1] != MXFA_OK ? mxfa_last_error(gpu) : "bytes differ");
    if (!good)
        snprintf(what + strlen(what), what_len - strlen(what), "; quantize_jagged: %s",
                 st[1] != MXFA_OK ? mxfa_last_error(gpu) : "bytes differ");
    buf_free(&x), buf_free(&compact);
    for (int i = 0; i < 2; i++)
        buf_free(&d[i]), buf_free(&s[i]), buf_free(&w[i]), buf_free(&back[i]);
    return good && layout_good;
}

/* ---- transpose, expansion, swizzle ---- */

int layout_case(int trial, int device, char *what, size_t what_len)
{
    const int64_t rows = rand_dim(), cols = rand_dim();
    static const mxfa_block from[3] = {MXFA_BLOCK_ROW, MXFA_BLOCK_COL, MXFA_BLOCK_SQUARE},
                            to[3] = {MXFA_BLOCK_COL, MXFA_BLOCK_ROW, MXFA_BLOCK_SQUARE};
    const int k = (int)rng_below(3);
    snprintf(what, what_len, "trial %d: [%lld, %lld], transpose %s -> %s, %s memory", trial, (long long)rows,
             (long long)cols, mxfa_block_name(from[k]), mxfa_block_name(to[k]), device ? "device" : "host");
    int64_t sr, sc, tr, tc;
    mxfa_scales_shape(from[k], rows, cols, &sr, &sc);
    mxfa_scales_shape(to[k], cols, rows, &tr, &tc);
    buf xd = buf_new((size_t)(rows * cols), 0), xs = buf_new((size_t)(sr * sc), 0);
    for (size_t i = 0; i < xd.bytes; i++)
        xd.host[i] = (uint8_t)rng_below(256);
    for (size_t i = 0; i < xs.bytes; i++)
        xs.host[i] = (uint8_t)rng_below(256);
    buf td[2] = {buf_new(xd.bytes, 0xA5), buf_new(xd.bytes, 0xA5)};
    buf ts[2] = {buf_new((size_t)(tr * tc), 0xA5), buf_new((size_t)(tr * tc), 0xA5)};
    /* square scales expanded to row scales, and row scales swizzled */
    int64_t qr = (rows + 31) / 32, qc = (cols + 31) / 32, wr, wc;
    mxfa_swizzled_shape(MXFA_BLOCK_ROW, rows, cols, &wr, &wc);
    buf sq = buf_new((size_t)(qr * qc), 0);
    for (size_t i = 0; i < sq.bytes; i++)
        sq.host[i] = (uint8_t)rng_below(256);
    buf ex[2] = {buf_new((size_t)(rows * qc), 0xA5), buf_new((size_t)(rows * qc), 0xA5)};
    buf w[2] = {buf_new((size_t)(wr * wc), 0xA5), buf_new((size_t)(wr * wc), 0xA5)};
    buf un[2] = {buf_new((size_t)(rows * qc), 0xA5), buf_new((size_t)(rows * qc), 0xA5)};
    mxfa_ctx *ctx[2] = {ref, gpu};
    mxfa_status st[4][2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_mx in = {t2(&xd, dev, MXFA_E4M3, rows, cols, cols, 1), t2(&xs, dev, MXFA_E8M0, sr, sc, sc, 1), from[k],
                      MXFA_LAYOUT_COMPACT};
        mxfa_mx out = {t2(&td[i], dev, MXFA_E4M3, cols, rows, rows, 1), t2(&ts[i], dev, MXFA_E8M0, tr, tc, tc, 1),
                       to[k], MXFA_LAYOUT_COMPACT};
        st[0][i] = mxfa_transpose(ctx[i], &in, &out);
        mxfa_tensor sqt = t2(&sq, dev, MXFA_E8M0, qr, qc, qc, 1), ext = t2(&ex[i], dev, MXFA_E8M0, rows, qc, qc, 1);
        st[1][i] = mxfa_scales_expand_square(ctx[i], &sqt, rows, cols, MXFA_BLOCK_ROW, &ext);
        mxfa_tensor wt = t2(&w[i], dev, MXFA_E8M0, wr, wc, wc, 1), unt = t2(&un[i], dev, MXFA_E8M0, rows, qc, qc, 1);
        st[2][i] = mxfa_scales_swizzle(ctx[i], &ext, MXFA_BLOCK_ROW, rows, cols, &wt);
        st[3][i] = mxfa_scales_unswizzle(ctx[i], &wt, MXFA_BLOCK_ROW, rows, cols, &unt);
    }
    fetch(&td[1]), fetch(&ts[1]), fetch(&ex[1]), fetch(&w[1]), fetch(&un[1]);
    int good = 1;
    for (int j = 0; j < 4; j++)
        good &= st[j][0] == MXFA_OK && st[j][1] == MXFA_OK;
    if (!good)
        snprintf(what + strlen(what), what_len - strlen(what), "; %s", mxfa_last_error(gpu));
    good &= same(&td[0], &td[1]) && same(&ts[0], &ts[1]) && same(&ex[0], &ex[1]) && same(&w[0], &w[1]) &&
            same(&un[0], &un[1]) && same(&un[0], &ex[0]);
    buf_free(&xd), buf_free(&xs), buf_free(&sq);
    for (int i = 0; i < 2; i++)
        buf_free(&td[i]), buf_free(&ts[i]), buf_free(&ex[i]), buf_free(&w[i]), buf_free(&un[i]);
    return good;
}

/* Wide scale matrices and larger transposes: the tiled kernels' paths (whole
 * tiles of 128 scale columns or of 64 x 128 bytes, 16-byte aligned rows) as
 * well as their edges, against ref. */
static int64_t wide_dim(int64_t hi, int aligned)
{
    int64_t d = 1 + (int64_t)rng_below((uint32_t)hi);
    return aligned ? (d + 15) / 16 * 16 : d;
}

int wide_layout_case(int trial, int device, char *what, size_t what_len)
{
    const int aligned = rng_below(3) != 0;
    const int64_t rows = wide_dim(400, aligned), cols = 32 * wide_dim(300, aligned) - (aligned ? 0 : rng_below(32));
    const int64_t sc = (cols + 31) / 32;
    int batch = 1 + (int)rng_below(4);
    int32_t cu[5] = {0};
    for (int b = 1; b <= batch; b++)
        cu[b] = cu[b - 1] + (rng_below(5) == 0 ? 0 : (int32_t)rng_below(300));
    if (cu[batch] == 0)
        cu[batch] = 1;
    const int64_t jr = cu[batch];
    snprintf(what, what_len,
             "trial %d: [%lld, %lld] (%lld scale columns), jagged %d sequences (%d, %d, %d, %d), %s memory", trial,
             (long long)rows, (long long)cols, (long long)sc, batch, cu[1], cu[2], cu[3], cu[4],
             device ? "device" : "host");
    int64_t wr, wc, off[5];
    mxfa_swizzled_shape(MXFA_BLOCK_ROW, rows, cols, &wr, &wc);
    mxfa_jagged_sf_offsets(cu, batch, off);
    const int64_t jwr = (off[batch] + 127) / 128 * 128, jwc = (sc + 3) / 4 * 4;
    buf xs = buf_new((size_t)(rows * sc), 0), js = buf_new((size_t)(jr * sc), 0), xd = buf_new((size_t)(rows * cols), 0);
    buf *fill[3] = {&xs, &js, &xd};
    for (int f = 0; f < 3; f++)
        for (size_t i = 0; i < fill[f]->bytes; i++)
            fill[f]->host[i] = (uint8_t)rng_below(256);
    int64_t tr, tc;
    mxfa_scales_shape(MXFA_BLOCK_COL, cols, rows, &tr, &tc);
    buf w[2], un[2], jw[2], jun[2], td[2], ts[2];
    for (int i = 0; i < 2; i++) {
        w[i] = buf_new((size_t)(wr * wc), 0xA5), un[i] = buf_new(xs.bytes, 0xA5);
        jw[i] = buf_new((size_t)(jwr * jwc), 0xA5), jun[i] = buf_new(js.bytes, 0xA5);
        td[i] = buf_new(xd.bytes, 0xA5), ts[i] = buf_new((size_t)(tr * tc), 0xA5);
    }
    mxfa_ctx *ctx[2] = {ref, gpu};
    mxfa_status st[5][2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_tensor xt = t2(&xs, dev, MXFA_E8M0, rows, sc, sc, 1), wt = t2(&w[i], dev, MXFA_E8M0, wr, wc, wc, 1),
                    ut = t2(&un[i], dev, MXFA_E8M0, rows, sc, sc, 1);
        st[0][i] = mxfa_scales_swizzle(ctx[i], &xt, MXFA_BLOCK_ROW, rows, cols, &wt);
        st[1][i] = mxfa_scales_unswizzle(ctx[i], &wt, MXFA_BLOCK_ROW, rows, cols, &ut);
        mxfa_tensor jt = t2(&js, dev, MXFA_E8M0, jr, sc, sc, 1), jwt = t2(&jw[i], dev, MXFA_E8M0, jwr, jwc, jwc, 1),
                    jut = t2(&jun[i], dev, MXFA_E8M0, jr, sc, sc, 1);
        st[2][i] = mxfa_scales_scatter(ctx[i], &jt, cu, batch, MXFA_BLOCK_ROW, cols, &jwt);
        st[3][i] = mxfa_scales_gather(ctx[i], &jwt, cu, batch, MXFA_BLOCK_ROW, cols, &jut);
        mxfa_mx in = {t2(&xd, dev, MXFA_E4M3, rows, cols, cols, 1), t2(&xs, dev, MXFA_E8M0, rows, sc, sc, 1),
                      MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
        mxfa_mx out = {t2(&td[i], dev, MXFA_E4M3, cols, rows, rows, 1), t2(&ts[i], dev, MXFA_E8M0, tr, tc, tc, 1),
                       MXFA_BLOCK_COL, MXFA_LAYOUT_COMPACT};
        st[4][i] = mxfa_transpose(ctx[i], &in, &out);
    }
    int good = 1;
    for (int j = 0; j < 5; j++)
        good &= st[j][0] == MXFA_OK && st[j][1] == MXFA_OK;
    if (!good)
        snprintf(what + strlen(what), what_len - strlen(what), "; %s", mxfa_last_error(gpu));
    fetch(&w[1]), fetch(&un[1]), fetch(&jw[1]), fetch(&jun[1]), fetch(&td[1]), fetch(&ts[1]);
    const int sw_ok = same(&w[0], &w[1]) && same(&un[0], &un[1]) && same(&un[0], &xs);
    const int jag_ok = same(&jw[0], &jw[1]) && same(&jun[0], &jun[1]) && same(&jun[0], &js);
    const int tr_ok = same(&td[0], &td[1]) && same(&ts[0], &ts[1]);
    if (good && !(sw_ok && jag_ok && tr_ok))
        snprintf(what + strlen(what), what_len - strlen(what), "; bytes differ in:%s%s%s", sw_ok ? "" : " swizzle",
                 jag_ok ? "" : " scatter/gather", tr_ok ? "" : " transpose");
    good &= sw_ok && jag_ok && tr_ok;
    buf_free(&xs), buf_free(&js), buf_free(&xd);
    for (int i = 0; i < 2; i++)
        buf_free(&w[i]), buf_free(&un[i]), buf_free(&jw[i]), buf_free(&jun[i]), buf_free(&td[i]), buf_free(&ts[i]);
    return good;
}
