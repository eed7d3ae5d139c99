/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cuda backend against ref, byte for byte: quantization of every block
 * shape, preset, element format and source dtype on random sizes (ragged
 * ones included), on contiguous, padded and transposed views, with NaN,
 * Inf, zeros, subnormals, huge values and rounding ties in the data;
 * dequantization to f32 and bf16; jagged quantization; the layouts
 * (transpose, square-scale expansion, swizzle, unswizzle, jagged scatter
 * and gather); the block-scaled product under sm90-fp8 and sm90-bf16 (every pairing of
 * E4M3 and E5M2, scales near 1, anywhere and NaN, C absent, separate or
 * D itself); attention forward and backward against the cpu backend.
 * Each case runs once on device memory and once on host
 * memory (which the backend stages through the device). Every output
 * buffer, including the bytes between strided elements, must match.
 * Reports SKIP where no usable cuda backend is built.
 *
 * MXFA_TCUDA_ONLY=TEXT runs only the groups of cases whose name holds TEXT
 * (the others are reported as skipped), for a device run with one purpose;
 * the groups share one random stream, so a narrowed run draws other cases
 * than the whole one.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"
#include "draws.h"

static mxfa_ctx *ref, *gpu, *cpu;
static int gpu_arch; /* 10 * major + minor */

/* Whether MXFA_TCUDA_ONLY leaves the group `name`; if not, its skip. */
static int wanted(const char *name)
{
    const char *only = getenv("MXFA_TCUDA_ONLY");
    if (!only || !*only || strstr(name, only))
        return 1;
    char why[256];
    snprintf(why, sizeof why, "%s: not in MXFA_TCUDA_ONLY=%s", name, only);
    skip(why);
    return 0;
}

/* ---- buffers that live on the host, and on the device for device runs ---- */

typedef struct buf {
    uint8_t *host;
    void *dev;
    size_t bytes;
} buf;

static buf buf_new(size_t bytes, int fill)
{
    buf b = {malloc(bytes), NULL, bytes};
    if (!b.host) {
        printf("Bail out! out of memory\n");
        exit(1);
    }
    memset(b.host, fill, bytes);
    return b;
}

/* The pointer to hand the library: the device copy for device runs. */
static void *where(buf *b, int device)
{
    if (!device)
        return b->host;
    if (!b->dev && (mxfa_device_alloc(gpu, b->bytes, &b->dev) != MXFA_OK ||
                    mxfa_memcpy(gpu, b->dev, b->host, b->bytes) != MXFA_OK)) {
        printf("Bail out! device memory: %s\n", mxfa_last_error(gpu));
        exit(1);
    }
    return b->dev;
}

/* The host copy of what the device holds. */
static void fetch(buf *b)
{
    if (b->dev && mxfa_memcpy(gpu, b->host, b->dev, b->bytes) != MXFA_OK) {
        printf("Bail out! copy back: %s\n", mxfa_last_error(gpu));
        exit(1);
    }
}

static void buf_free(buf *b)
{
    if (b->dev)
        mxfa_device_free(gpu, b->dev);
    free(b->host);
}

static mxfa_tensor t2(buf *b, int device, mxfa_dtype dt, int64_t rows, int64_t cols, int64_t rs, int64_t cs)
{
    mxfa_tensor t = {where(b, device), dt, device ? MXFA_MEM_DEVICE : MXFA_MEM_HOST, 2, {rows, cols}, {rs, cs}};
    return t;
}

/* ---- data ---- */

static uint32_t special_f32(void)
{
    uint32_t u = rng_below(100), sign = rng_below(2) << 31, mant = (uint32_t)rng_next() & 0x7FFFFFu;
    if (u < 60) /* ordinary magnitudes over a wide range */
        return sign | (uint32_t)(110 + rng_below(30)) << 23 | mant;
    if (u < 70) /* ties for both formats: the first dropped bit set, the rest clear */
        return sign | (uint32_t)(115 + rng_below(20)) << 23 | (rng_below(8) << 20) | (rng_below(2) ? 1u << 19 : 1u << 20);
    if (u < 76)
        return sign; /* +-0 */
    if (u < 82)
        return sign | (mant >> rng_below(20)); /* subnormal */
    if (u < 86)
        return sign | 0x7F800000u | (mant | 1u); /* NaN */
    if (u < 89)
        return sign | 0x7F800000u; /* Inf */
    if (u < 95)
        return sign | (uint32_t)(200 + rng_below(55)) << 23 | mant; /* huge */
    return sign | (uint32_t)(1 + rng_below(30)) << 23 | mant; /* tiny normal */
}

/* Fill x's elements; a block-sized stretch is sometimes all zeros or
 * special. */
static void fill_source(buf *b, mxfa_dtype dt, size_t n)
{
    int calm = rng_below(4) == 0; /* no NaN or Inf: the poisoning presets then quantize */
    for (size_t i = 0; i < n; i++) {
        uint32_t v = special_f32();
        if (calm && (v & 0x7F800000u) == 0x7F800000u)
            v &= 0x3FFFFFFFu;
        if (dt == MXFA_BF16) {
            uint16_t h = (uint16_t)(v >> 16);
            memcpy(b->host + 2 * i, &h, 2);
        } else {
            memcpy(b->host + 4 * i, &v, 4);
        }
    }
}

static int same(const buf *a, const buf *b)
{
    return a->bytes == b->bytes && memcmp(a->host, b->host, a->bytes) == 0;
}

static int64_t rand_dim(void)
{
    uint32_t k = rng_below(4);
    return k == 0 ? 32 * (int64_t)(1 + rng_below(6)) : k == 1 ? 1 + rng_below(8) : 1 + rng_below(200);
}

/* ---- quantization ---- */

typedef struct layout2 {
    int64_t rs, cs;  /* strides of the view (elements) */
    size_t elements; /* the buffer */
} layout2;

/* A [rows, cols] view: contiguous, with padded rows, or the transpose of a
 * [cols, rows] buffer. */
static layout2 pick_layout(int64_t rows, int64_t cols, int kind)
{
    if (kind == 1) {
        int64_t pad = 1 + rng_below(9);
        return (layout2){cols + pad, 1, (size_t)(rows * (cols + pad))};
    }
    if (kind == 2)
        return (layout2){1, rows, (size_t)(rows * cols)};
    return (layout2){cols, 1, (size_t)(rows * cols)};
}

static int quantize_case(int trial, int device, char *what, size_t what_len)
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

static int jagged_case(int trial, int device, char *what, size_t what_len)
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

static int layout_case(int trial, int device, char *what, size_t what_len)
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

static int wide_layout_case(int trial, int device, char *what, size_t what_len)
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

/* ---- attention forward ---- */

static mxfa_tensor t3(buf *b, int device, mxfa_dtype dt, int64_t n0, int64_t n1, int64_t n2)
{
    mxfa_tensor t = {where(b, device), dt, device ? MXFA_MEM_DEVICE : MXFA_MEM_HOST, 3, {n0, n1, n2},
                     {n1 * n2, n2, 1}};
    return t;
}

/* Gaussian values times 2^mag, a channel of K sometimes twenty times larger
 * (the case that spreads a block's values over many binades). */
static void fill_normal(buf *b, mxfa_dtype dt, int64_t rows, int64_t cols, int loud_channel, int mag)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float v = ldexpf((float)gauss() * (c == loud_channel ? 20.0f : 1.0f), mag);
            uint32_t u;
            memcpy(&u, &v, 4);
            if (dt == MXFA_BF16) {
                uint16_t h = mxfa_f32_to_bf16(v);
                memcpy(b->host + 2 * (r * cols + c), &h, 2);
            } else {
                memcpy(b->host + 4 * (r * cols + c), &u, 4);
            }
        }
}

/* How Q, K and V lie in memory: packed [tokens][H][D], heads padded by 32
 * elements (the kernel quantizes a head at a time, without the wide row
 * path), or head-major [H][tokens][D]. */
enum { PACKED, PADDED, HEAD_MAJOR };

static size_t view_elems(int layout, int64_t n0, int64_t n1, int64_t d)
{
    return (size_t)(n0 * n1 * (layout == PADDED ? d + 32 : d));
}

static mxfa_tensor t3_layout(buf *b, int device, mxfa_dtype dt, int layout, int64_t n0, int64_t n1, int64_t d)
{
    mxfa_tensor t = t3(b, device, dt, n0, n1, d);
    if (layout == PADDED)
        t.stride[0] = n1 * (d + 32), t.stride[1] = d + 32;
    else if (layout == HEAD_MAJOR)
        t.stride[0] = d, t.stride[1] = n0 * d;
    return t;
}

/* Element (token, head, column) of a view of that layout times 2^e, or set
 * to v when e is 0. */
static void poke(buf *b, mxfa_dtype dt, const mxfa_tensor *t, int64_t tok, int64_t h, int64_t c, int e, float v)
{
    const size_t at = (size_t)(tok * t->stride[0] + h * t->stride[1] + c * t->stride[2]);
    float x;
    if (dt == MXFA_BF16) {
        uint16_t u;
        memcpy(&u, b->host + 2 * at, 2);
        x = mxfa_bf16_to_f32(u);
        x = e ? ldexpf(x, e) : v;
        u = mxfa_f32_to_bf16(x);
        memcpy(b->host + 2 * at, &u, 2);
    } else {
        memcpy(&x, b->host + 4 * at, 4);
        x = e ? ldexpf(x, e) : v;
        memcpy(b->host + 4 * at, &x, 4);
    }
}

/* cu_seqlens of a jagged batch of up to three sequences: query lengths up
 * to `most` (now and then 0), key lengths the same as the queries' a third
 * of the time, else drawn alike; an all-empty side gets one token. */
static void draw_seqlens(int batch, uint32_t most, int32_t cq[4], int32_t ck[4])
{
    for (int b = 1; b <= batch; b++) {
        int32_t lq = rng_below(6) == 0 ? 0 : 1 + (int32_t)rng_below(most);
        int32_t lk = rng_below(3) == 0 ? lq : (rng_below(6) == 0 ? 0 : 1 + (int32_t)rng_below(most));
        cq[b] = cq[b - 1] + lq;
        ck[b] = ck[b - 1] + lk;
    }
    if (cq[batch] == 0)
        cq[batch] = 1;
    if (ck[batch] == 0)
        ck[batch] = 1;
}

/* The forward pass under sm90-fp8 (D = 64, 128 and 256, the kernel's
 * 128 x 128 geometry): jagged batches with empty and ragged sequences, GQA,
 * no mask, the leak-free causal mask and the plain one,
 * const and dynamic P, every preset, fp32 and bf16 in and out, three
 * layouts in memory, tiny magnitudes everywhere or in part (so that some
 * tiles take the general promotion and others the bare fma), NaN and Inf
 * inputs, and now and then sequences of up to 1000 tokens; O and LSE byte for byte against the cpu backend, which
 * tests/t-cpu holds to ref bit for bit under every model (ref's exact
 * emulation would take minutes at these sizes). */
static int attn_case_under(mxfa_model model, int trial, int device, char *what, size_t what_len)
{
    static const int64_t dims[3] = {64, 128, 256};
    const int bf16_model = model == MXFA_MODEL_SM90_BF16;
    const int64_t d = dims[rng_below(3)];
    const int longer = rng_below(10) == 0; /* one sequence of up to 1000 tokens: more key tiles than stages */
    const int batch = longer ? 1 : 1 + (int)rng_below(3);
    const int hkv = 1 + (int)rng_below(2), group = 1 + (int)rng_below(3);
    const uint32_t most = longer ? 1000 : 300;
    const int64_t hq = hkv * group;
    int32_t cq[4] = {0}, ck[4] = {0};
    draw_seqlens(batch, most, cq, ck);
    const int64_t tq = cq[batch], tk = ck[batch];
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.model = model;
    p.preset = (mxfa_preset)rng_below(4);
    p.p_scale = rng_below(2) ? MXFA_P_DYNAMIC : MXFA_P_CONST;
    p.causal = (mxfa_causal)rng_below(3); /* none, leak-free, plain */
    if (bf16_model)
        p.block_n = rng_below(2) ? 64 : 128; /* the kernel takes the call's key tile */
    /* a NaN or Inf in V among the last keys of the first sequence, under a
     * causal mask: in the tiles where rows skip blocks of keys (the
     * reference skips them; the kernel must not let 0 x Inf through) */
    const int v_late = bf16_model && p.causal != MXFA_CAUSAL_NONE && rng_below(4) == 0 && ck[1] > 0;
    /* Q, K and V each fp32 or bf16, most often all the same */
    const mxfa_dtype in = rng_below(2) ? MXFA_BF16 : MXFA_F32, out = rng_below(2) ? MXFA_BF16 : MXFA_F32;
    const int mixed = rng_below(4) == 0;
    const mxfa_dtype kin = mixed && rng_below(2) ? (in == MXFA_BF16 ? MXFA_F32 : MXFA_BF16) : in;
    const mxfa_dtype vin = mixed && rng_below(2) ? (in == MXFA_BF16 ? MXFA_F32 : MXFA_BF16) : in;
    const int loud = rng_below(3) == 0 ? (int)rng_below((uint32_t)d) : -1;
    /* far: Q and K near 2^-64 and V near 2^-112, so that the products of
     * their scales (and V's with P's 2^-8) fall below the normal range,
     * where the kernel leaves its bare fma for the general promotion: 1 all
     * of them, 2 all of Q and only KV head 0's first 100 tokens of K and V */
    const int far = rng_below(3) == 0 ? 1 + (int)rng_below(2) : 0;
    const int layout = (int)rng_below(3);
    /* special: a NaN, +Inf or -Inf in Q, K or V */
    const int special = rng_below(6) == 0 ? 1 + (int)rng_below(3) : 0;
    snprintf(what, what_len,
             "trial %d: %s, D %lld, key tile %d, %d sequences q (%d, %d, %d) k (%d, %d, %d), Hq %lld, Hkv %d, %s, %s P, %s, "
             "%s/%s/%s in%s%s%s%s, %s out, %s memory",
             trial, mxfa_model_name(model), (long long)d, p.block_n, batch, cq[1] - cq[0], cq[2] - cq[1],
             cq[3] - cq[2], ck[1] - ck[0], ck[2] - ck[1], ck[3] - ck[2],
             (long long)hq, hkv, p.causal == MXFA_CAUSAL ? "causal" : p.causal ? "causal-plain" : "no mask",
             p.p_scale ? "dynamic" : "const",
             mxfa_preset_name(p.preset), mxfa_dtype_name(in), mxfa_dtype_name(kin), mxfa_dtype_name(vin),
             far == 1 ? " (tiny)" : far == 2 ? " (tiny in part)" : "",
             layout == PADDED ? " padded heads" : layout == HEAD_MAJOR ? " head-major" : "",
             special ? " with a NaN or Inf" : "", v_late ? " with an Inf in V's last keys" : "", mxfa_dtype_name(out),
             device ? "device" : "host");
    const size_t os = mxfa_dtype_size(out);
    const int64_t dq = (int64_t)view_elems(layout, tq, hq, d) / (tq * hq);
    const int64_t dk = (int64_t)view_elems(layout, tk, hkv, d) / (tk * hkv);
    buf q = buf_new(view_elems(layout, tq, hq, d) * mxfa_dtype_size(in), 0),
        k = buf_new(view_elems(layout, tk, hkv, d) * mxfa_dtype_size(kin), 0),
        v = buf_new(view_elems(layout, tk, hkv, d) * mxfa_dtype_size(vin), 0);
    /* rows of dq (dk) values: the loud channel is a column of every head
     * in the packed and head-major layouts */
    fill_normal(&q, in, tq * hq, dq, -1, far ? -64 : 0);
    fill_normal(&k, kin, tk * hkv, dk, loud, far == 1 ? -64 : 0);
    fill_normal(&v, vin, tk * hkv, dk, -1, far == 1 ? -112 : 0);
    {
        const mxfa_tensor kv = t3_layout(&k, 0, kin, layout, tk, hkv, d);
        const mxfa_tensor vv = t3_layout(&v, 0, vin, layout, tk, hkv, d);
        for (int64_t tok = 0; far == 2 && tok < tk && tok < 100; tok++)
            for (int64_t c = 0; c < d; c++) {
                poke(&k, kin, &kv, tok, 0, c, -64, 0.0f);
                poke(&v, vin, &vv, tok, 0, c, -112, 0.0f);
            }
        if (special) {
            const float sv = special == 1 ? NAN : special == 2 ? INFINITY : -INFINITY;
            const int which = (int)rng_below(3);
            buf *sb = which == 0 ? &q : which == 1 ? &k : &v;
            const mxfa_dtype sdt = which == 0 ? in : which == 1 ? kin : vin;
            const int64_t n0 = which == 0 ? tq : tk, n1 = which == 0 ? hq : hkv;
            const mxfa_tensor st = t3_layout(sb, 0, sdt, layout, n0, n1, d);
            poke(sb, sdt, &st, (int64_t)rng_below((uint32_t)n0), (int64_t)rng_below((uint32_t)n1),
                 (int64_t)rng_below((uint32_t)d), 0, sv);
        }
        if (v_late) {
            const int32_t lk = ck[1], back = lk < 96 ? lk : 96;
            poke(&v, vin, &vv, lk - 1 - (int64_t)rng_below((uint32_t)back), (int64_t)rng_below((uint32_t)hkv),
                 (int64_t)rng_below((uint32_t)d), 0, rng_below(2) ? INFINITY : NAN);
        }
    }
    buf o[2] = {buf_new((size_t)(tq * hq * d) * os, 0xA5), buf_new((size_t)(tq * hq * d) * os, 0xA5)};
    buf lse[2] = {buf_new((size_t)(tq * hq) * 4, 0xA5), buf_new((size_t)(tq * hq) * 4, 0xA5)};
    mxfa_ctx *ctx[2] = {cpu, gpu};
    mxfa_status st[2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_tensor qt = t3_layout(&q, dev, in, layout, tq, hq, d), kt = t3_layout(&k, dev, kin, layout, tk, hkv, d),
                    vt = t3_layout(&v, dev, vin, layout, tk, hkv, d);
        mxfa_tensor ot = t3(&o[i], dev, out, tq, hq, d), lt = t2(&lse[i], dev, MXFA_F32, tq, hq, hq, 1);
        st[i] = mxfa_attn_fwd(ctx[i], &p, &qt, &kt, &vt, cq, ck, batch, &ot, &lt);
    }
    fetch(&o[1]), fetch(&lse[1]);
    int good = st[0] == MXFA_OK && st[1] == MXFA_OK;
    if (!good)
        snprintf(what + strlen(what), what_len - strlen(what), "; %s", mxfa_last_error(st[1] ? gpu : cpu));
    const int o_ok = same(&o[0], &o[1]), l_ok = same(&lse[0], &lse[1]);
    if (good && !(o_ok && l_ok)) {
        int64_t first = -1, lfirst = -1;
        for (size_t i = 0; i < o[0].bytes && first < 0; i++)
            if (o[0].host[i] != o[1].host[i])
                first = (int64_t)(i / os);
        for (size_t i = 0; i < lse[0].bytes && lfirst < 0; i++)
            if (lse[0].host[i] != lse[1].host[i])
                lfirst = (int64_t)(i / 4);
        uint32_t ov[2] = {0, 0}, lv[2] = {0, 0};
        for (int i = 0; i < 2; i++) {
            if (first >= 0)
                memcpy(&ov[i], o[i].host + first * os, os);
            if (lfirst >= 0)
                memcpy(&lv[i], lse[i].host + lfirst * 4, 4);
        }
        snprintf(what + strlen(what), what_len - strlen(what),
                 "; differ:%s%s (first O element %lld: token %lld, head %lld, column %lld: cpu %08x, cuda %08x; "
                 "first LSE %lld: cpu %08x, cuda %08x)",
                 o_ok ? "" : " O", l_ok ? "" : " LSE", (long long)first, (long long)(first / (hq * d)),
                 (long long)(first / d % hq), (long long)(first % d), ov[0], ov[1], (long long)lfirst, lv[0], lv[1]);
    }
    good &= o_ok && l_ok;
    buf_free(&q), buf_free(&k), buf_free(&v);
    for (int i = 0; i < 2; i++)
        buf_free(&o[i]), buf_free(&lse[i]);
    return good;
}

static int attn_case(int trial, int device, char *what, size_t what_len)
{
    return attn_case_under(MXFA_MODEL_SM90_FP8, trial, device, what, what_len);
}

/* The same under sm90-bf16, whose fused kernel takes key tiles of 64 or 128
 * (the call's block_n). */
static int attn_bf16_case(int trial, int device, char *what, size_t what_len)
{
    return attn_case_under(MXFA_MODEL_SM90_BF16, trial, device, what, what_len);
}

/* A row whose scores are all -Inf in the first key tiles (Q's first row 2^100
 * in column 0, every one of the first 128 keys -2^100 there: the products
 * overflow) and finite after them, with a NaN or an Inf in V among those
 * first keys: the reference skips the row's first tiles, so V's NaN or Inf
 * must not reach its O (0 x Inf is NaN), and its O is that of the later
 * keys alone. The other rows are Gaussian, some with scores near +-2^100.
 * Under both Hopper models, every preset, const and dynamic P, D = 64,
 * 128 and 256, key tiles of 64 and 128; O and LSE byte for byte against the
 * cpu backend. */
static int attn_unseen_case(int trial, int device, char *what, size_t what_len)
{
    static const int64_t dims[3] = {64, 128, 256};
    const int64_t d = dims[rng_below(3)], tq = 1 + rng_below(200), tk = 129 + rng_below(300);
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.model = rng_below(2) ? MXFA_MODEL_SM90_BF16 : MXFA_MODEL_SM90_FP8;
    p.preset = (mxfa_preset)rng_below(4);
    p.p_scale = rng_below(2) ? MXFA_P_DYNAMIC : MXFA_P_CONST;
    p.causal = MXFA_CAUSAL_NONE;
    if (p.model == MXFA_MODEL_SM90_BF16)
        p.block_n = rng_below(2) ? 64 : 128;
    const mxfa_dtype in = rng_below(2) ? MXFA_BF16 : MXFA_F32, out = rng_below(2) ? MXFA_BF16 : MXFA_F32;
    const float bad = rng_below(2) ? INFINITY : NAN;
    snprintf(what, what_len,
             "trial %d: %s, D %lld, key tile %d, %lld queries, %lld keys, %s, %s P, %s in V, %s in, %s out, %s memory",
             trial, mxfa_model_name(p.model), (long long)d, p.block_n, (long long)tq, (long long)tk,
             mxfa_preset_name(p.preset), p.p_scale ? "dynamic" : "const", isnan(bad) ? "a NaN" : "an Inf",
             mxfa_dtype_name(in), mxfa_dtype_name(out), device ? "device" : "host");
    const size_t es = mxfa_dtype_size(in), os = mxfa_dtype_size(out);
    buf q = buf_new((size_t)(tq * d) * es, 0), k = buf_new((size_t)(tk * d) * es, 0),
        v = buf_new((size_t)(tk * d) * es, 0);
    fill_normal(&q, in, tq, d, -1, 0);
    fill_normal(&k, in, tk, d, -1, 0);
    fill_normal(&v, in, tk, d, -1, 0);
    {
        const mxfa_tensor qv = t3(&q, 0, in, tq, 1, d), kv = t3(&k, 0, in, tk, 1, d), vv = t3(&v, 0, in, tk, 1, d);
        for (int64_t c = 0; c < d; c++)
            poke(&q, in, &qv, 0, 0, c, 0, c == 0 ? 0x1p100f : 0.0f);
        for (int64_t j = 0; j < 128; j++)
            poke(&k, in, &kv, j, 0, 0, 0, -0x1p100f);
        poke(&v, in, &vv, (int64_t)rng_below(128), 0, (int64_t)rng_below((uint32_t)d), 0, bad);
    }
    const int32_t cq[2] = {0, (int32_t)tq}, ck[2] = {0, (int32_t)tk};
    buf o[2] = {buf_new((size_t)(tq * d) * os, 0xA5), buf_new((size_t)(tq * d) * os, 0xA5)};
    buf lse[2] = {buf_new((size_t)tq * 4, 0xA5), buf_new((size_t)tq * 4, 0xA5)};
    mxfa_ctx *ctx[2] = {cpu, gpu};
    int good = 1;
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_tensor qt = t3(&q, dev, in, tq, 1, d), kt = t3(&k, dev, in, tk, 1, d), vt = t3(&v, dev, in, tk, 1, d);
        mxfa_tensor ot = t3(&o[i], dev, out, tq, 1, d), lt = t2(&lse[i], dev, MXFA_F32, tq, 1, 1, 1);
        good &= mxfa_attn_fwd(ctx[i], &p, &qt, &kt, &vt, cq, ck, 1, &ot, &lt) == MXFA_OK;
    }
    fetch(&o[1]), fetch(&lse[1]);
    if (!good)
        snprintf(what + strlen(what), what_len - strlen(what), "; %s", mxfa_last_error(gpu));
    /* the first row's O, as the reference has it, is finite */
    int finite = 1;
    for (int64_t c = 0; c < d; c++) {
        float x;
        if (out == MXFA_BF16) {
            uint16_t u;
            memcpy(&u, o[0].host + 2 * c, 2);
            x = mxfa_bf16_to_f32(u);
        } else {
            memcpy(&x, o[0].host + 4 * c, 4);
        }
        finite &= isfinite(x) != 0;
    }
    const int o_ok = same(&o[0], &o[1]), l_ok = same(&lse[0], &lse[1]);
    if (good && !(o_ok && l_ok && finite))
        snprintf(what + strlen(what), what_len - strlen(what), ";%s%s%s",
                 finite ? "" : " the cpu backend's O of row 0 is not finite;", o_ok ? "" : " O differs",
                 l_ok ? "" : " LSE differs");
    good &= o_ok && l_ok && finite;
    buf_free(&q), buf_free(&k), buf_free(&v);
    for (int i = 0; i < 2; i++)
        buf_free(&o[i]), buf_free(&lse[i]);
    return good;
}

/* ---- attention backward ---- */

/* The backward pass under sm90-fp8 and sm90-bf16: D = 64, 128 and 256, the
 * 128 x 128 geometry and now and then another one (the causal mask's
 * skipped tiles and diagonal blocks move with it), jagged batches with
 * empty and ragged sequences, GQA, no mask, the leak-free causal mask and
 * the plain one, const and dynamic P,
 * every preset, fp32 and bf16 in and out, three layouts of Q, K, V and dO,
 * tiny magnitudes (the general promotion), and a NaN or an infinity in K,
 * V or dO (a NaN in a tile the reference skips must not reach the chain).
 * O and LSE come from the cpu backend's forward pass; dQ, dK and dV byte
 * for byte against the cpu backend's, which t-cpu holds to ref. */
/* bwd_case draws only what a fused kernel takes: 1 sm90-bf16's, 2 sm90-fp8's
 * (D = 64 and 128) */
static int bwd_fused_only;

static int bwd_case(int trial, int device, char *what, size_t what_len)
{
    static const int64_t dims[3] = {64, 128, 256};
    const int64_t drawn = dims[rng_below(3)], d = bwd_fused_only == 2 && drawn == 256 ? 128 : drawn;
    const int batch = 1 + (int)rng_below(3);
    const int hkv = 1 + (int)rng_below(2), group = 1 + (int)rng_below(3);
    const int64_t hq = hkv * group;
    int32_t cq[4] = {0}, ck[4] = {0};
    /* (the fused kernel's cases sometimes longer: a query tile's dQ chained
     * through several key tiles' items, on other CTAs) */
    draw_seqlens(batch, bwd_fused_only && rng_below(3) == 0 ? 900 : 300, cq, ck);
    const int64_t tq = cq[batch], tk = ck[batch];
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.model = rng_below(4) == 0 ? MXFA_MODEL_SM90_BF16 : MXFA_MODEL_SM90_FP8;
    p.preset = (mxfa_preset)rng_below(4);
    p.p_scale = rng_below(2) ? MXFA_P_DYNAMIC : MXFA_P_CONST;
    p.causal = (mxfa_causal)rng_below(3); /* none, leak-free, plain */
    if (rng_below(4) == 0 && !bwd_fused_only)
        p.block_m = 32 * (1 + (int)rng_below(8)), p.block_n = 32 * (1 + (int)rng_below(8));
    int ctas = 0; /* a cap on the fused kernel's grid: several items a CTA */
    if (bwd_fused_only) {
        p.model = bwd_fused_only == 2 ? MXFA_MODEL_SM90_FP8 : MXFA_MODEL_SM90_BF16;
        ctas = rng_below(2) ? 1 + (int)rng_below(3) : 0;
    }
    if (ctas) {
        char cap[8];
        snprintf(cap, sizeof cap, "%d", ctas);
        setenv("MXFA_BWD_MAX_CTAS", cap, 1);
    } else {
        unsetenv("MXFA_BWD_MAX_CTAS");
    }
    const mxfa_dtype in = rng_below(2) ? MXFA_BF16 : MXFA_F32, out = rng_below(2) ? MXFA_BF16 : MXFA_F32;
    const int far = rng_below(5) == 0;
    const int layout = (int)rng_below(3);
    const int special = rng_below(5) == 0 ? 1 + (int)rng_below(3) : 0;
    snprintf(what, what_len,
             "trial %d: D %lld, %d sequences q (%d, %d, %d) k (%d, %d, %d), Hq %lld, Hkv %d, %s, %s, %s P, %s, "
             "geometry %d x %d, %s in%s%s%s, %s out, %s memory",
             trial, (long long)d, batch, cq[1] - cq[0], cq[2] - cq[1], cq[3] - cq[2], ck[1] - ck[0], ck[2] - ck[1],
             ck[3] - ck[2], (long long)hq, hkv, mxfa_model_name(p.model),
             p.causal == MXFA_CAUSAL ? "causal" : p.causal ? "causal-plain" : "no mask",
             p.p_scale ? "dynamic" : "const", mxfa_preset_name(p.preset), p.block_m, p.block_n, mxfa_dtype_name(in),
             far ? " (tiny)" : "", layout == PADDED ? " padded heads" : layout == HEAD_MAJOR ? " head-major" : "",
             special ? " with a NaN or Inf" : "", mxfa_dtype_name(out), device ? "device" : "host");
    if (ctas)
        snprintf(what + strlen(what), what_len - strlen(what), ", %d CTAs", ctas);
    const size_t is = mxfa_dtype_size(in), os = mxfa_dtype_size(out);
    const int64_t dq_cols = (int64_t)view_elems(layout, tq, hq, d) / (tq * hq);
    const int64_t dk_cols = (int64_t)view_elems(layout, tk, hkv, d) / (tk * hkv);
    buf q = buf_new(view_elems(layout, tq, hq, d) * is, 0), k = buf_new(view_elems(layout, tk, hkv, d) * is, 0),
        v = buf_new(view_elems(layout, tk, hkv, d) * is, 0), g = buf_new(view_elems(layout, tq, hq, d) * is, 0);
    fill_normal(&q, in, tq * hq, dq_cols, -1, far ? -64 : 0);
    fill_normal(&k, in, tk * hkv, dk_cols, rng_below(3) == 0 ? (int)rng_below((uint32_t)d) : -1, far ? -64 : 0);
    fill_normal(&v, in, tk * hkv, dk_cols, -1, far ? -112 : 0);
    fill_normal(&g, in, tq * hq, dq_cols, -1, far ? -40 : 0);
    if (special) {
        const float sv = special == 1 ? NAN : special == 2 ? INFINITY : -INFINITY;
        const int which = (int)rng_below(4);
        buf *sb = which == 0 ? &g : which == 1 ? &k : which == 2 ? &v : &q;
        const int64_t n0 = which % 3 == 0 ? tq : tk, n1 = which % 3 == 0 ? hq : hkv;
        const mxfa_tensor st = t3_layout(sb, 0, in, layout, n0, n1, d);
        poke(sb, in, &st, (int64_t)rng_below((uint32_t)n0), (int64_t)rng_below((uint32_t)n1),
             (int64_t)rng_below((uint32_t)d), 0, sv);
    }
    /* O and LSE of the forward pass (on the cpu backend, for both runs) */
    buf o = buf_new((size_t)(tq * hq * d) * is, 0), lse = buf_new((size_t)(tq * hq) * 4, 0);
    {
        mxfa_tensor qt = t3_layout(&q, 0, in, layout, tq, hq, d), kt = t3_layout(&k, 0, in, layout, tk, hkv, d),
                    vt = t3_layout(&v, 0, in, layout, tk, hkv, d), ot = t3(&o, 0, in, tq, hq, d),
                    lt = t2(&lse, 0, MXFA_F32, tq, hq, hq, 1);
        if (mxfa_attn_fwd(cpu, &p, &qt, &kt, &vt, cq, ck, batch, &ot, &lt) != MXFA_OK) {
            snprintf(what + strlen(what), what_len - strlen(what), "; forward: %s", mxfa_last_error(cpu));
            buf_free(&q), buf_free(&k), buf_free(&v), buf_free(&g), buf_free(&o), buf_free(&lse);
            return 0;
        }
    }
    if (special && rng_below(4) == 0) /* and a row's LSE NaN or -Inf (a row that sees no key) */
        ((float *)lse.host)[rng_below((uint32_t)(tq * hq))] = special == 1 ? NAN : -INFINITY;
    buf gq[3], gk[3], gv[3];
    for (int i = 0; i < 3; i++) {
        gq[i] = buf_new((size_t)(tq * hq * d) * os, 0xA5);
        gk[i] = buf_new((size_t)(tk * hkv * d) * os, 0xA5);
        gv[i] = buf_new((size_t)(tk * hkv * d) * os, 0xA5);
    }
    /* the fused cases run the GPU twice: every byte the same */
    mxfa_ctx *ctx[3] = {cpu, gpu, gpu};
    mxfa_status st[3] = {MXFA_OK, MXFA_OK, MXFA_OK};
    for (int i = 0; i < (bwd_fused_only ? 3 : 2); i++) {
        if (i == 2) { /* the second GPU run on another grid: 2 CTAs, or uncapped after a cap */
            if (ctas)
                unsetenv("MXFA_BWD_MAX_CTAS");
            else
                setenv("MXFA_BWD_MAX_CTAS", "2", 1);
        }
        const int dev = i && device;
        mxfa_tensor qt = t3_layout(&q, dev, in, layout, tq, hq, d), kt = t3_layout(&k, dev, in, layout, tk, hkv, d),
                    vt = t3_layout(&v, dev, in, layout, tk, hkv, d), gt = t3_layout(&g, dev, in, layout, tq, hq, d);
        mxfa_tensor ot = t3(&o, dev, in, tq, hq, d), lt = t2(&lse, dev, MXFA_F32, tq, hq, hq, 1);
        mxfa_tensor dqt = t3(&gq[i], dev, out, tq, hq, d), dkt = t3(&gk[i], dev, out, tk, hkv, d),
                    dvt = t3(&gv[i], dev, out, tk, hkv, d);
        st[i] = mxfa_attn_bwd(ctx[i], &p, &qt, &kt, &vt, &ot, &gt, &lt, cq, ck, batch, &dqt, &dkt, &dvt);
    }
    fetch(&gq[1]), fetch(&gk[1]), fetch(&gv[1]);
    fetch(&gq[2]), fetch(&gk[2]), fetch(&gv[2]);
    int good = st[0] == MXFA_OK && st[1] == MXFA_OK && st[2] == MXFA_OK;
    if (!good)
        snprintf(what + strlen(what), what_len - strlen(what), "; %s", mxfa_last_error(st[0] ? cpu : gpu));
    if (good && bwd_fused_only && !(same(&gq[1], &gq[2]) && same(&gk[1], &gk[2]) && same(&gv[1], &gv[2]))) {
        snprintf(what + strlen(what), what_len - strlen(what), "; two runs of the same call on different grids differ");
        good = 0;
    }
    const buf *pairs[3][2] = {{&gq[0], &gq[1]}, {&gk[0], &gk[1]}, {&gv[0], &gv[1]}};
    static const char *const names[3] = {"dQ", "dK", "dV"};
    for (int w = 0; w < 3 && good; w++) {
        if (same(pairs[w][0], pairs[w][1]))
            continue;
        size_t first = 0;
        while (pairs[w][0]->host[first] == pairs[w][1]->host[first])
            first++;
        const int64_t el = (int64_t)(first / os), heads = w == 0 ? hq : hkv;
        uint32_t x[2] = {0, 0};
        for (int i = 0; i < 2; i++)
            memcpy(&x[i], pairs[w][i]->host + (size_t)el * os, os);
        snprintf(what + strlen(what), what_len - strlen(what),
                 "; %s differs (first at token %lld, head %lld, column %lld: cpu %08x, cuda %08x)", names[w],
                 (long long)(el / (heads * d)), (long long)(el / d % heads), (long long)(el % d), x[0], x[1]);
        good = 0;
    }
    buf_free(&q), buf_free(&k), buf_free(&v), buf_free(&g), buf_free(&o), buf_free(&lse);
    for (int i = 0; i < 3; i++)
        buf_free(&gq[i]), buf_free(&gk[i]), buf_free(&gv[i]);
    return good;
}

/* ---- the block-scaled product under sm90-fp8 ---- */

static int64_t gemm_dim(int64_t hi)
{
    return rng_below(3) == 0 ? 1 + rng_below(40) : 1 + rng_below((uint32_t)hi);
}

static int gemm_case(int trial, int device, char *what, size_t what_len)
{
    const int64_t M = gemm_dim(300), N = gemm_dim(300);
    const int64_t K = rng_below(3) == 0 ? 1 + rng_below(70) : rng_below(2) ? 32 * (1 + rng_below(24)) : 1 + rng_below(800);
    const int64_t nkb = (K + 31) / 32;
    const mxfa_dtype fa = rng_below(2) ? MXFA_E5M2 : MXFA_E4M3, fb = rng_below(2) ? MXFA_E5M2 : MXFA_E4M3;
    const int calm = rng_below(4) != 0, mode = (int)rng_below(3), cmode = (int)rng_below(3); /* C: none, own, D */
    const mxfa_model model = rng_below(2) ? MXFA_MODEL_SM90_BF16 : MXFA_MODEL_SM90_FP8;
    const layout2 al = pick_layout(M, K, (int)rng_below(3)), bl = pick_layout(N, K, (int)rng_below(3));
    const layout2 dl = pick_layout(M, N, (int)rng_below(2));
    snprintf(what, what_len, "trial %d: %s, M %lld N %lld K %lld, %s x %s, scales %s, C %s, A strides (%lld, %lld), "
             "B strides (%lld, %lld), %s memory", trial, mxfa_model_name(model), (long long)M, (long long)N, (long long)K,
             mxfa_dtype_name(fa), mxfa_dtype_name(fb), mode == 0 ? "near 1" : mode == 1 ? "anywhere" : "with NaN",
             cmode == 0 ? "none" : cmode == 1 ? "separate" : "is D", (long long)al.rs, (long long)al.cs,
             (long long)bl.rs, (long long)bl.cs, device ? "device" : "host");
    buf a = buf_new(al.elements, 0), b = buf_new(bl.elements, 0);
    buf sa = buf_new((size_t)(M * nkb), 0), sb = buf_new((size_t)(N * nkb), 0);
    buf c = buf_new(dl.elements * 4, 0);
    for (size_t i = 0; i < al.elements; i++)
        a.host[i] = draw_fp8_code(&rng_state, fa, calm);
    for (size_t i = 0; i < bl.elements; i++)
        b.host[i] = draw_fp8_code(&rng_state, fb, calm);
    for (size_t i = 0; i < sa.bytes; i++)
        sa.host[i] = draw_scale_code(&rng_state, mode);
    for (size_t i = 0; i < sb.bytes; i++)
        sb.host[i] = draw_scale_code(&rng_state, mode);
    for (size_t i = 0; i < dl.elements; i++) {
        uint32_t v = special_f32();
        if (calm && (v & 0x7F800000u) == 0x7F800000u)
            v &= 0x3FFFFFFFu;
        memcpy(c.host + 4 * i, &v, 4);
    }
    buf d[2] = {buf_new(dl.elements * 4, 0xA5), buf_new(dl.elements * 4, 0xA5)};
    if (cmode == 2)
        for (int i = 0; i < 2; i++)
            memcpy(d[i].host, c.host, c.bytes);
    mxfa_ctx *ctx[2] = {ref, gpu};
    mxfa_status st[2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_mx A = {t2(&a, dev, fa, M, K, al.rs, al.cs), t2(&sa, dev, MXFA_E8M0, M, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {t2(&b, dev, fb, N, K, bl.rs, bl.cs), t2(&sb, dev, MXFA_E8M0, N, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = t2(&d[i], dev, MXFA_F32, M, N, dl.rs, dl.cs);
        mxfa_tensor C = cmode == 1 ? t2(&c, dev, MXFA_F32, M, N, dl.rs, dl.cs) : D;
        st[i] = mxfa_gemm(ctx[i], &A, &B, cmode ? &C : NULL, model, &D);
        if (st[i] != MXFA_OK)
            snprintf(what + strlen(what), what_len - strlen(what), "; %s: %s", i ? "cuda" : "ref",
                     mxfa_last_error(ctx[i]));
    }
    fetch(&d[1]);
    int good = st[0] == MXFA_OK && st[1] == MXFA_OK && same(&d[0], &d[1]);
    if (!good && st[0] == MXFA_OK && st[1] == MXFA_OK)
        for (size_t i = 0; i < dl.elements; i++)
            if (memcmp(d[0].host + 4 * i, d[1].host + 4 * i, 4)) {
                uint32_t x, y;
                memcpy(&x, d[0].host + 4 * i, 4), memcpy(&y, d[1].host + 4 * i, 4);
                snprintf(what + strlen(what), what_len - strlen(what), "; first difference at element %zu: ref "
                         "%08x, cuda %08x", i, (unsigned)x, (unsigned)y);
                break;
            }
    buf_free(&a), buf_free(&b), buf_free(&sa), buf_free(&sb), buf_free(&c);
    buf_free(&d[0]), buf_free(&d[1]);
    return good;
}

/* Whether the device runs the sm90-fp8 product: a one-element product
 * either runs or is refused for want of a Hopper GPU. */
static int gpu_is_hopper(void)
{
    uint8_t a[32] = {0x38}, s[1] = {127};
    float d[1] = {0};
    mxfa_mx A = {mxfa_tensor_2d(a, MXFA_E4M3, 1, 32), mxfa_tensor_2d(s, MXFA_E8M0, 1, 1), MXFA_BLOCK_ROW,
                 MXFA_LAYOUT_COMPACT};
    mxfa_tensor D = mxfa_tensor_2d(d, MXFA_F32, 1, 1);
    mxfa_status st = mxfa_gemm(gpu, &A, &A, NULL, MXFA_MODEL_SM90_FP8, &D);
    if (st == MXFA_ERR_UNSUPPORTED && strstr(mxfa_last_error(gpu), "Hopper"))
        return 0;
    ok(st == MXFA_OK && d[0] == 1.0f, "a one-element product on the GPU: 1 * 1 = %g (%s)", (double)d[0],
       st == MXFA_OK ? "ok" : mxfa_last_error(gpu));
    return 1;
}

/* Many tiles, many turns of the kernel's ring of stages and a ragged K:
 * against the cpu backend, which t-cpu holds to ref's bits,
 * because ref would take minutes here. */
static void big_gemm(mxfa_model model)
{
    char name[64];
    snprintf(name, sizeof name, "gemm %s 700 x 900 x 2085", mxfa_model_name(model));
    if (!wanted(name))
        return;
    const int64_t M = 700, N = 900, K = 2085, nkb = (K + 31) / 32;
    buf a = buf_new((size_t)(M * K), 0), b = buf_new((size_t)(N * K), 0);
    buf sa = buf_new((size_t)(M * nkb), 0), sb = buf_new((size_t)(N * nkb), 0);
    buf d[2] = {buf_new((size_t)(M * N) * 4, 0), buf_new((size_t)(M * N) * 4, 0)};
    for (size_t i = 0; i < a.bytes; i++)
        a.host[i] = draw_fp8_code(&rng_state, MXFA_E4M3, 1);
    for (size_t i = 0; i < b.bytes; i++)
        b.host[i] = draw_fp8_code(&rng_state, MXFA_E4M3, 1);
    for (size_t i = 0; i < sa.bytes; i++)
        sa.host[i] = draw_scale_code(&rng_state, 0);
    for (size_t i = 0; i < sb.bytes; i++)
        sb.host[i] = draw_scale_code(&rng_state, 0);
    mxfa_ctx *ctx[2] = {cpu, gpu};
    int good = 1;
    for (int i = 0; i < 2; i++) {
        mxfa_mx A = {t2(&a, i, MXFA_E4M3, M, K, K, 1), t2(&sa, i, MXFA_E8M0, M, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {t2(&b, i, MXFA_E4M3, N, K, K, 1), t2(&sb, i, MXFA_E8M0, N, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = t2(&d[i], i, MXFA_F32, M, N, N, 1);
        if (mxfa_gemm(ctx[i], &A, &B, NULL, model, &D) != MXFA_OK) {
            diag("%s: %s", i ? "cuda" : "cpu", mxfa_last_error(ctx[i]));
            good = 0;
        }
    }
    fetch(&d[1]);
    ok(good && same(&d[0], &d[1]), "gemm %s %lld x %lld x %lld in device memory: every bit as the cpu backend's",
       mxfa_model_name(model), (long long)M, (long long)N, (long long)K);
    buf_free(&a), buf_free(&b), buf_free(&sa), buf_free(&sb), buf_free(&d[0]), buf_free(&d[1]);
}

typedef int (*case_fn)(int trial, int device, char *what, size_t what_len);

static void run_cases_against(const char *name, case_fn f, int n, const char *against)
{
    char what[1024];
    int failed = 0;
    if (!wanted(name))
        return;
    for (int t = 0; t < n; t++)
        for (int device = 0; device < 2; device++)
            if (!f(t, device, what, sizeof what) && failed++ < 5)
                diag("%s", what);
    ok(failed == 0, "%s: %d random cases on device and host memory, every byte as %s (%d differ)", name, 2 * n,
       against, failed);
}

static void run_cases(const char *name, case_fn f, int n)
{
    run_cases_against(name, f, n, "ref's");
}

int main(void)
{
    char why[512];
    if (!mxfa_backend_usable("cuda", why, sizeof why))
        skip_all(why);
    rng_seed_from_env(11);
    if (!ok(mxfa_open(&ref, "ref") == MXFA_OK && mxfa_open(&gpu, "cuda") == MXFA_OK && mxfa_open(&cpu, "cpu") == MXFA_OK,
            "open ref, cpu and cuda"))
        return done_testing();
    char gpu_name[256] = "";
    const mxfa_status info = mxfa_device_info(gpu, &gpu_arch, gpu_name, sizeof gpu_name);
    ok(info == MXFA_OK && (gpu_arch == 90 || gpu_arch == 100) && gpu_name[0],
       "the device: %s, compute capability %d.%d", gpu_name, gpu_arch / 10, gpu_arch % 10);
    run_cases("quantize and dequantize", quantize_case, 400);
    run_cases("jagged quantize, scatter and gather", jagged_case, 100);
    run_cases("transpose, expand, swizzle and unswizzle", layout_case, 100);
    run_cases("wide swizzle, unswizzle, scatter, gather and transposes", wide_layout_case, 40);
    if (gpu_is_hopper()) {
        run_cases("gemm under sm90-fp8 and sm90-bf16", gemm_case, 80);
        run_cases_against("attention forward under sm90-fp8 (D = 64, 128, 256)", attn_case, 40, "the cpu backend's");
        run_cases_against("attention forward under sm90-bf16 (D = 64, 128, 256; key tiles of 64 and 128)", attn_bf16_case, 60,
                          "the cpu backend's");
        run_cases_against("attention forward, a row whose first tiles' scores are all -Inf and a NaN or Inf in "
                          "their V (the reference skips those tiles for that row)", attn_unseen_case, 12,
                          "the cpu backend's");
        setenv("MXFA_BWD_COMPOSED", "1", 1); /* the composition under both models */
        run_cases_against("attention backward under sm90-fp8 and sm90-bf16 (D = 64, 128, 256)", bwd_case, 40,
                          "the cpu backend's");
        /* the passes a long sequence takes, one query tile each: dV's and
         * dK's chains carried from pass to pass */
        setenv("MXFA_BWD_PASS_TILES", "1", 1);
        run_cases_against("attention backward composed in passes of one query tile", bwd_case, 30,
                          "the cpu backend's");
        unsetenv("MXFA_BWD_PASS_TILES");
        unsetenv("MXFA_BWD_COMPOSED");
        bwd_fused_only = 1;
        setenv("MXFA_BWD_FUSED", "1", 1); /* each of these calls must take the fused kernel */
        run_cases_against("attention backward under sm90-bf16, the fused kernel's cases (D = 64, 128, 256; every mask)",
                          bwd_case, 60, "the cpu backend's (and two runs on different grids, every byte the same)");
        bwd_fused_only = 2;
        run_cases_against("attention backward under sm90-fp8, the fused kernel's cases (D = 64, 128; every mask)",
                          bwd_case, 60, "the cpu backend's (and two runs on different grids, every byte the same)");
        bwd_fused_only = 0;
        unsetenv("MXFA_BWD_MAX_CTAS");
        unsetenv("MXFA_BWD_FUSED");
        big_gemm(MXFA_MODEL_SM90_FP8);
        big_gemm(MXFA_MODEL_SM90_BF16);
    } else {
        skip("gemm under sm90-fp8 and sm90-bf16: the device is not a Hopper GPU");
    }

    /* a large aligned matrix: the vector path of row blocks */
    {
        const int64_t rows = 512, cols = 4096;
        buf x = buf_new((size_t)(rows * cols) * 4, 0);
        fill_source(&x, MXFA_F32, (size_t)(rows * cols));
        buf d[2] = {buf_new((size_t)(rows * cols), 0), buf_new((size_t)(rows * cols), 0)};
        buf s[2] = {buf_new((size_t)(rows * cols / 32), 0), buf_new((size_t)(rows * cols / 32), 0)};
        int good = 1;
        for (int p = 0; p < 4; p++) {
            mxfa_ctx *ctx[2] = {ref, gpu};
            for (int i = 0; i < 2; i++) {
                mxfa_tensor xt = t2(&x, i, MXFA_F32, rows, cols, cols, 1);
                mxfa_mx q = {t2(&d[i], i, MXFA_E4M3, rows, cols, cols, 1),
                             t2(&s[i], i, MXFA_E8M0, rows, cols / 32, cols / 32, 1), MXFA_BLOCK_ROW,
                             MXFA_LAYOUT_COMPACT};
                good &= mxfa_quantize(ctx[i], &xt, (mxfa_preset)p, &q) == MXFA_OK;
            }
            fetch(&d[1]), fetch(&s[1]);
            good &= same(&d[0], &d[1]) && same(&s[0], &s[1]);
        }
        ok(good, "a 512 x 4096 f32 matrix in row blocks, every preset: every byte as ref's");
        buf_free(&x);
        for (int i = 0; i < 2; i++)
            buf_free(&d[i]), buf_free(&s[i]);
    }

    /* mxfa_scratch_peak: a call on host memory stages its tensors through the
     * device's scratch, all held at once, so the mark after it is at least
     * their bytes; a mark reset with no call since reads 0 */
    {
        const int64_t rows = 256, cols = 4096;
        float *hx = malloc((size_t)(rows * cols) * 4);
        uint8_t *hc = malloc((size_t)(rows * cols)), *hs = malloc((size_t)(rows * cols / 32));
        size_t after = 0, idle = 1;
        int good = hx && hc && hs && mxfa_synchronize(gpu) == MXFA_OK && mxfa_scratch_peak(gpu, &after, 1) == MXFA_OK;
        if (good) {
            for (int64_t i = 0; i < rows * cols; i++)
                hx[i] = (float)(i % 97) - 48.0f;
            mxfa_tensor xt = mxfa_tensor_2d(hx, MXFA_F32, rows, cols);
            mxfa_mx q = {mxfa_tensor_2d(hc, MXFA_E4M3, rows, cols), mxfa_tensor_2d(hs, MXFA_E8M0, rows, cols / 32),
                         MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
            good = mxfa_quantize(gpu, &xt, MXFA_PRESET_RCEIL, &q) == MXFA_OK && mxfa_synchronize(gpu) == MXFA_OK &&
                   mxfa_scratch_peak(gpu, &after, 1) == MXFA_OK && mxfa_scratch_peak(gpu, &idle, 0) == MXFA_OK;
        }
        const size_t staged = (size_t)(rows * cols) * 5 + (size_t)(rows * cols / 32);
        ok(good && after >= staged && idle == 0,
           "mxfa_scratch_peak: a quantization on host memory held at least its %zu staged bytes (%zu), none since "
           "the reset (%zu)", staged, after, idle);
        free(hx), free(hc), free(hs);
    }

    /* the contract on this backend */
    {
        float h[64] = {0};
        uint8_t c[64], sc[2];
        mxfa_tensor xt = mxfa_tensor_2d(h, MXFA_F32, 1, 64);
        mxfa_mx q = {mxfa_tensor_2d(c, MXFA_E4M3, 1, 64), mxfa_tensor_2d(sc, MXFA_E8M0, 1, 2), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        q.data.memory = MXFA_MEM_DEVICE; /* a lie: host memory */
        mxfa_status st = mxfa_quantize(gpu, &xt, MXFA_PRESET_RCEIL, &q);
        ok(st == MXFA_ERR_INVALID && strstr(mxfa_last_error(gpu), "device"),
           "host memory declared as device memory -> %s (%s)", mxfa_strerror(st), mxfa_last_error(gpu));
        uint8_t a[64] = {0}, sa[2] = {127, 127};
        float dd[1] = {1.0f};
        mxfa_mx A = {mxfa_tensor_2d(a, MXFA_E4M3, 1, 64), mxfa_tensor_2d(sa, MXFA_E8M0, 1, 2), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = mxfa_tensor_2d(dd, MXFA_F32, 1, 1);
        st = mxfa_gemm(gpu, &A, &A, NULL, MXFA_MODEL_IDEAL, &D);
        ok(st == MXFA_ERR_UNSUPPORTED && dd[0] == 1.0f, "a model the backend does not compute is refused: %s",
           mxfa_last_error(gpu));
        if (gpu_arch != 100) {
            st = mxfa_gemm(gpu, &A, &A, NULL, MXFA_MODEL_SM100, &D);
            ok(st == MXFA_ERR_UNSUPPORTED && dd[0] == 1.0f && strstr(mxfa_last_error(gpu), "Blackwell"),
               "the sm100 product on a GPU of compute capability %d.%d is refused: %s", gpu_arch / 10, gpu_arch % 10,
               mxfa_last_error(gpu));
        }
        uint16_t h16[16] = {0};
        mxfa_tensor H = mxfa_tensor_2d(h16, MXFA_BF16, 1, 16);
        st = mxfa_mma_chain(gpu, MXFA_INSTR_SM90_WGMMA_BF16, &H, &H, NULL, &D);
        ok(st == MXFA_ERR_UNSUPPORTED && dd[0] == 1.0f, "what the backend does not do yet is refused: %s",
           mxfa_last_error(gpu));
        /* attention under a model the kernel does not compute: refused, O untouched */
        buf x3 = buf_new(256 * 4, 0), o3 = buf_new(256 * 4, 0xA5), o3_before = buf_new(256 * 4, 0xA5);
        mxfa_attn_params ap;
        mxfa_attn_params_default(&ap);
        ap.model = MXFA_MODEL_IDEAL;
        const int32_t cu1[2] = {0, 1};
        mxfa_tensor xq = t3(&x3, 0, MXFA_F32, 1, 1, 256), xo = t3(&o3, 0, MXFA_F32, 1, 1, 256);
        st = mxfa_attn_fwd(gpu, &ap, &xq, &xq, &xq, cu1, cu1, 1, &xo, NULL);
        ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "sm90-fp8"),
           "attention under ideal is refused and O untouched: %s", mxfa_last_error(gpu));
        /* the sm100 kernel runs on Blackwell only */
        ap.model = MXFA_MODEL_SM100;
        if (gpu_arch != 100) {
            st = mxfa_attn_fwd(gpu, &ap, &xq, &xq, &xq, cu1, cu1, 1, &xo, NULL);
            ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "Blackwell") &&
                   (gpu_arch != 90 || strstr(mxfa_last_error(gpu), "sm90-bf16")),
               "attention under sm100 on a GPU of compute capability %d.%d is refused (on Hopper naming sm90-bf16) "
               "and O untouched: %s", gpu_arch / 10, gpu_arch % 10, mxfa_last_error(gpu));
        }
        /* the backward pass under a model it does not compute: refused, dQ untouched */
        float lse1[1] = {0.0f};
        mxfa_tensor xl = mxfa_tensor_2d(lse1, MXFA_F32, 1, 1);
        buf k3 = buf_new(256 * 4, 0xA5), v3 = buf_new(256 * 4, 0xA5);
        mxfa_tensor xk = t3(&k3, 0, MXFA_F32, 1, 1, 256), xv = t3(&v3, 0, MXFA_F32, 1, 1, 256);
        ap.model = MXFA_MODEL_IDEAL;
        st = mxfa_attn_bwd(gpu, &ap, &xq, &xq, &xq, &xq, &xq, &xl, cu1, cu1, 1, &xo, &xk, &xv);
        ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "ideal"),
           "attention backward under ideal is refused and dQ untouched: %s", mxfa_last_error(gpu));
        if (gpu_arch != 100) {
            ap.model = MXFA_MODEL_SM100;
            st = mxfa_attn_bwd(gpu, &ap, &xq, &xq, &xq, &xq, &xq, &xl, cu1, cu1, 1, &xo, &xk, &xv);
            ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "Blackwell"),
               "attention backward under sm100 on a GPU of compute capability %d.%d is refused and dQ untouched: %s",
               gpu_arch / 10, gpu_arch % 10, mxfa_last_error(gpu));
        }
        buf_free(&k3), buf_free(&v3);
        buf_free(&x3), buf_free(&o3), buf_free(&o3_before);
        ok(mxfa_synchronize(gpu) == MXFA_OK, "the stream ends without an error");
    }
    mxfa_close(ref);
    mxfa_close(cpu);
    mxfa_close(gpu);
    return done_testing();
}
