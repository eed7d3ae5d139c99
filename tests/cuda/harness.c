/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every family of t-cuda's cases shares: the three backends, the
 * buffers that live on the host and, for device runs, on the device, and
 * the data the cases draw. Every draw comes from tap.h's one generator, so
 * the families draw in the order main() calls them.
 */
#include <math.h>

#include "harness.h"

mxfa_ctx *ref, *gpu, *cpu;
int gpu_arch;

/* Whether MXFA_TCUDA_ONLY leaves the group `name`; if not, its skip. */
int wanted(const char *name)
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

buf buf_new(size_t bytes, int fill)
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
void *where(buf *b, int device)
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
void fetch(buf *b)
{
    if (b->dev && mxfa_memcpy(gpu, b->host, b->dev, b->bytes) != MXFA_OK) {
        printf("Bail out! copy back: %s\n", mxfa_last_error(gpu));
        exit(1);
    }
}

void buf_free(buf *b)
{
    if (b->dev)
        mxfa_device_free(gpu, b->dev);
    free(b->host);
}

mxfa_tensor t2(buf *b, int device, mxfa_dtype dt, int64_t rows, int64_t cols, int64_t rs, int64_t cs)
{
    mxfa_tensor t = {where(b, device), dt, device ? MXFA_MEM_DEVICE : MXFA_MEM_HOST, 2, {rows, cols}, {rs, cs}};
    return t;
}

/* ---- data ---- */

uint32_t special_f32(void)
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
void fill_source(buf *b, mxfa_dtype dt, size_t n)
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

int same(const buf *a, const buf *b)
{
    return a->bytes == b->bytes && memcmp(a->host, b->host, a->bytes) == 0;
}

int64_t rand_dim(void)
{
    uint32_t k = rng_below(4);
    return k == 0 ? 32 * (int64_t)(1 + rng_below(6)) : k == 1 ? 1 + rng_below(8) : 1 + rng_below(200);
}


/* A [rows, cols] view: contiguous, with padded rows, or the transpose of a
 * [cols, rows] buffer. */
layout2 pick_layout(int64_t rows, int64_t cols, int kind)
{
    if (kind == 1) {
        int64_t pad = 1 + rng_below(9);
        return (layout2){cols + pad, 1, (size_t)(rows * (cols + pad))};
    }
    if (kind == 2)
        return (layout2){1, rows, (size_t)(rows * cols)};
    return (layout2){cols, 1, (size_t)(rows * cols)};
}

/* ---- attention data ---- */

mxfa_tensor t3(buf *b, int device, mxfa_dtype dt, int64_t n0, int64_t n1, int64_t n2)
{
    mxfa_tensor t = {where(b, device), dt, device ? MXFA_MEM_DEVICE : MXFA_MEM_HOST, 3, {n0, n1, n2},
                     {n1 * n2, n2, 1}};
    return t;
}

/* Gaussian values times 2^mag, a channel of K sometimes twenty times larger
 * (the case that spreads a block's values over many binades). */
void fill_normal(buf *b, mxfa_dtype dt, int64_t rows, int64_t cols, int loud_channel, int mag)
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

size_t view_elems(int layout, int64_t n0, int64_t n1, int64_t d)
{
    return (size_t)(n0 * n1 * (layout == PADDED ? d + 32 : d));
}

mxfa_tensor t3_layout(buf *b, int device, mxfa_dtype dt, int layout, int64_t n0, int64_t n1, int64_t d)
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
void poke(buf *b, mxfa_dtype dt, const mxfa_tensor *t, int64_t tok, int64_t h, int64_t c, int e, float v)
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
void draw_seqlens(int batch, uint32_t most, int32_t cq[4], int32_t ck[4])
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
