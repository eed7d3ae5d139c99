/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block quantization: the published contract vectors for every preset, and
 * every preset x format x block shape against a slow reference quantizer
 * written here (double arithmetic, the host's fp32 multiply, table-based
 * rounding from slowfp8.h) on seeded random matrices of odd sizes with
 * subnormals, huge values, ties, zeros, NaN and Inf; bf16 input; strided
 * and transposed input views.
 */
#include <float.h>

#include "mxfa.h"
#include "slowfp8.h"
#include "contract.h"
#include "tap.h"

static mxfa_ctx *ctx;
static slow_fmt fmt_e4m3, fmt_e5m2;

/* ---- the slow reference of one block ---- */
static void slow_quantize_block(const slow_fmt *f, mxfa_preset preset, const float *x, int n, uint8_t *scale,
                                uint8_t *q)
{
    double amax = 0;
    int has_nan = 0, has_inf = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i])) {
            has_nan = 1;
            continue;
        }
        if (isinf(x[i]))
            has_inf = 1;
        if (fabs((double)x[i]) > amax)
            amax = fabs((double)x[i]);
    }
    int poison = 0, ties_away = preset == MXFA_PRESET_MICROXCALING;
    uint8_t s = 0;
    if (preset == MXFA_PRESET_RCEIL || preset == MXFA_PRESET_TORCHAO_RCEIL) {
        if (preset == MXFA_PRESET_TORCHAO_RCEIL && (has_nan || has_inf)) {
            poison = 1;
        } else if (has_inf) {
            s = 0xFE;
        } else {
            volatile float r = (float)(1.0 / f->max_value); /* fl(1/max), by the host */
            volatile float p = (float)amax * r;              /* an fp32 multiply, by the host */
            s = slow_e8m0((double)p, 1, preset == MXFA_PRESET_RCEIL);
        }
    } else { /* ocp, microxcaling */
        if (has_nan || has_inf) {
            poison = 1;
        } else if (amax > 0) {
            int e;
            frexp(amax, &e); /* amax = m * 2^e, m in [0.5, 1) */
            int k = e - 1 - f->emax;
            k = k < -127 ? -127 : k > 127 ? 127 : k;
            s = (uint8_t)(k + 127);
        }
    }
    if (poison)
        s = 0xFF;
    *scale = s;
    for (int i = 0; i < n; i++)
        q[i] = poison ? 0x7F : slow_encode(f, ldexp((double)x[i], 127 - s), ties_away, 1);
}

/* The slow reference of a whole matrix x [rows, cols] (row-major floats). */
static void slow_quantize(const slow_fmt *f, mxfa_preset preset, mxfa_block block, const float *x, int64_t rows,
                          int64_t cols, uint8_t *data, uint8_t *scales, int64_t scols)
{
    int64_t br = block == MXFA_BLOCK_ROW ? 1 : 32, bc = block == MXFA_BLOCK_COL ? 1 : 32;
    for (int64_t r0 = 0; r0 < rows; r0 += br)
        for (int64_t c0 = 0; c0 < cols; c0 += bc) {
            float v[1024];
            uint8_t q[1024], s;
            int n = 0;
            for (int64_t r = r0; r < r0 + br && r < rows; r++)
                for (int64_t c = c0; c < c0 + bc && c < cols; c++)
                    v[n++] = x[r * cols + c];
            slow_quantize_block(f, preset, v, n, &s, q);
            scales[(r0 / br) * scols + c0 / bc] = s;
            n = 0;
            for (int64_t r = r0; r < r0 + br && r < rows; r++)
                for (int64_t c = c0; c < c0 + bc && c < cols; c++)
                    data[r * cols + c] = q[n++];
        }
}

/* ---- contract vectors (tests/data/contract_e4m3.txt) ---- */
static void check_contract_vectors(void)
{
    contract_vec vectors[64];
    int nv = contract_load(vectors, 64);
    ok(nv >= 15, "read %d contract vectors", nv);
    for (int v = 0; v < nv; v++) {
        const contract_vec *t = &vectors[v];
        for (int p = 0; p < 4; p++) {
            float x[32];
            uint8_t data[32], scale = 0xAA;
            x[0] = f32_of(t->first);
            for (int i = 1; i < 32; i++)
                x[i] = f32_of(t->rest);
            mxfa_tensor xt = mxfa_tensor_2d(x, MXFA_F32, 1, 32);
            mxfa_mx out = {mxfa_tensor_2d(data, MXFA_E4M3, 1, 32), mxfa_tensor_2d(&scale, MXFA_E8M0, 1, 1),
                           MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
            mxfa_status st = mxfa_quantize(ctx, &xt, (mxfa_preset)p, &out);
            int good = st == MXFA_OK && scale == t->scale[p] && data[0] == t->elem0[p];
            for (int i = 1; i < 32; i++)
                good = good && data[i] == t->elem_rest[p];
            if (!ok(good, "contract %s under %s: (0x%02X, 0x%02X, 0x%02X)", t->name, mxfa_preset_name((mxfa_preset)p),
                    t->scale[p], t->elem0[p], t->elem_rest[p]))
                diag("got status %d scale 0x%02X elements 0x%02X 0x%02X", st, scale, data[0], data[1]);
        }
    }
}

/* ---- random matrices ---- */
static float random_element(const slow_fmt *f)
{
    uint32_t kind = rng_below(1000);
    float sign = (rng_next() & 1) ? -1.0f : 1.0f;
    if (kind < 2)
        return NAN;
    if (kind < 4)
        return sign * INFINITY;
    if (kind < 40)
        return 0.0f * sign;
    if (kind < 60) /* fp32 subnormals */
        return f32_of((uint32_t)(rng_next() & 0x807FFFFF));
    if (kind < 80) /* near FLT_MAX */
        return sign * f32_of(0x7F000000u | (uint32_t)(rng_next() & 0x7FFFFF));
    if (kind < 200) { /* exact ties: a midpoint of two FP8 values, scaled */
        unsigned k = rng_below(f->max_code);
        double mid = (f->value[k] + f->value[k + 1]) / 2;
        return sign * (float)ldexp(mid, (int)rng_below(40) - 20);
    }
    /* wide exponent spread */
    return sign * (float)ldexp(1.0 + (double)rng_below(1u << 23) / (1u << 23), (int)rng_below(60) - 30);
}

static int compare_random(const char *label, mxfa_preset preset, mxfa_dtype format, mxfa_block block,
                          int64_t rows, int64_t cols, int use_bf16, int layout_kind)
{
    const slow_fmt *f = format == MXFA_E4M3 ? &fmt_e4m3 : &fmt_e5m2;
    int64_t srows, scols, n = rows * cols;
    mxfa_scales_shape(block, rows, cols, &srows, &scols);
    float *x = malloc((size_t)n * sizeof *x);
    uint16_t *xh = malloc((size_t)n * sizeof *xh);
    /* a strided or transposed home for x: 3 spare columns, or column-major */
    float *home = malloc((size_t)(rows * (cols + 3)) * sizeof *home);
    uint8_t *d = malloc((size_t)n), *s = malloc((size_t)(srows * scols));
    uint8_t *rd = malloc((size_t)n), *rs = malloc((size_t)(srows * scols));
    for (int64_t i = 0; i < n; i++) {
        x[i] = random_element(f);
        if (use_bf16) { /* the reference sees the exactly widened bf16 value */
            xh[i] = (uint16_t)(bits_of(x[i]) >> 16);
            x[i] = f32_of((uint32_t)xh[i] << 16);
        }
    }
    mxfa_tensor xt = mxfa_tensor_2d(use_bf16 ? (void *)xh : (void *)x, use_bf16 ? MXFA_BF16 : MXFA_F32, rows, cols);
    if (layout_kind == 1) { /* row stride cols + 3 */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                home[r * (cols + 3) + c] = x[r * cols + c];
        xt = mxfa_tensor_2d(home, MXFA_F32, rows, cols);
        xt.stride[0] = cols + 3;
    } else if (layout_kind == 2) { /* column-major: strides [1, rows] */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                home[c * rows + r] = x[r * cols + c];
        xt = mxfa_tensor_2d(home, MXFA_F32, rows, cols);
        xt.stride[0] = 1;
        xt.stride[1] = rows;
    }
    mxfa_mx out = {mxfa_tensor_2d(d, format, rows, cols), mxfa_tensor_2d(s, MXFA_E8M0, srows, scols), block,
                   MXFA_LAYOUT_COMPACT};
    mxfa_status st = mxfa_quantize(ctx, &xt, preset, &out);
    slow_quantize(f, preset, block, x, rows, cols, rd, rs, scols);
    int good = st == MXFA_OK && memcmp(d, rd, (size_t)n) == 0 && memcmp(s, rs, (size_t)(srows * scols)) == 0;
    if (!good) {
        diag("%s: status %d (%s)", label, st, mxfa_last_error(ctx));
        for (int64_t i = 0, shown = 0; i < n && shown < 4; i++)
            if (d[i] != rd[i]) {
                diag("  element %lld: x = %a got 0x%02X want 0x%02X", (long long)i, (double)x[i], d[i], rd[i]);
                shown++;
            }
        for (int64_t i = 0, shown = 0; i < srows * scols && shown < 4; i++)
            if (s[i] != rs[i]) {
                diag("  scale %lld: got 0x%02X want 0x%02X", (long long)i, s[i], rs[i]);
                shown++;
            }
    }
    free(x); free(xh); free(home); free(d); free(s); free(rd); free(rs);
    return good;
}

int main(void)
{
    rng_seed_from_env(20261129);
    slow_fmt_init(&fmt_e4m3, 1);
    slow_fmt_init(&fmt_e5m2, 0);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    check_contract_vectors();

    static const int64_t sizes[][2] = {{1, 1}, {1, 32}, {3, 33}, {37, 70}, {64, 64}, {65, 97}, {96, 200}, {129, 31}};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    for (int p = 0; p < 4; p++)
        for (int fm = 0; fm < 2; fm++)
            for (int b = 0; b < 3; b++) {
                int good = 1;
                long long elems = 0;
                char label[128];
                for (int rep = 0; rep < 3; rep++)
                    for (int i = 0; i < nsizes; i++) {
                        snprintf(label, sizeof label, "%s %s %s %lldx%lld", mxfa_preset_name((mxfa_preset)p),
                                 fm ? "e5m2" : "e4m3", mxfa_block_name((mxfa_block)b), (long long)sizes[i][0],
                                 (long long)sizes[i][1]);
                        good &= compare_random(label, (mxfa_preset)p, fm ? MXFA_E5M2 : MXFA_E4M3, (mxfa_block)b,
                                               sizes[i][0], sizes[i][1], 0, 0);
                        elems += sizes[i][0] * sizes[i][1];
                    }
                ok(good, "%s %s %s: %lld random elements in %d matrices match the slow reference",
                   mxfa_preset_name((mxfa_preset)p), fm ? "e5m2" : "e4m3", mxfa_block_name((mxfa_block)b), elems,
                   3 * nsizes);
            }
    for (int b = 0; b < 3; b++) {
        ok(compare_random("bf16 input", MXFA_PRESET_RCEIL, MXFA_E4M3, (mxfa_block)b, 67, 45, 1, 0),
           "%s blocks: bf16 input quantizes as its exact fp32 widening", mxfa_block_name((mxfa_block)b));
        ok(compare_random("row-strided input", MXFA_PRESET_OCP, MXFA_E4M3, (mxfa_block)b, 67, 45, 0, 1),
           "%s blocks: a row-strided input view gives the same bytes", mxfa_block_name((mxfa_block)b));
        ok(compare_random("column-major input", MXFA_PRESET_RCEIL, MXFA_E5M2, (mxfa_block)b, 45, 67, 0, 2),
           "%s blocks: a column-major input view gives the same bytes", mxfa_block_name((mxfa_block)b));
    }

    /* Dequantization is exact: element * 2^(scale-127), against the reference decode. */
    {
        int64_t rows = 70, cols = 45, srows, scols;
        mxfa_scales_shape(MXFA_BLOCK_ROW, rows, cols, &srows, &scols);
        uint8_t d[70 * 45], s[70 * 2];
        float y[70 * 45];
        uint16_t yh[70 * 45];
        for (int i = 0; i < rows * cols; i++)
            d[i] = (uint8_t)rng_next();
        for (int i = 0; i < srows * scols; i++)
            s[i] = (uint8_t)rng_next();
        int good = 1;
        for (int fm = 0; fm < 2; fm++) {
            const slow_fmt *f = fm ? &fmt_e5m2 : &fmt_e4m3;
            mxfa_mx in = {mxfa_tensor_2d(d, fm ? MXFA_E5M2 : MXFA_E4M3, rows, cols),
                          mxfa_tensor_2d(s, MXFA_E8M0, srows, scols), MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
            mxfa_tensor yt = mxfa_tensor_2d(y, MXFA_F32, rows, cols), yht = mxfa_tensor_2d(yh, MXFA_BF16, rows, cols);
            good &= mxfa_dequantize(ctx, &in, &yt) == MXFA_OK && mxfa_dequantize(ctx, &in, &yht) == MXFA_OK;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++) {
                    uint8_t sc = s[r * scols + c / 32];
                    double want = sc == 0xFF ? NAN : ldexp(slow_decode(f, d[r * cols + c]), sc - 127);
                    if (!isnan(want) && fabs(want) > FLT_MAX)
                        want = copysign(INFINITY, want);
                    float got = y[r * cols + c];
                    float goth = f32_of((uint32_t)yh[r * cols + c] << 16);
                    /* bf16: nearest even of the exact value; it is exact when within
                     * bf16's normal range, rounded below 2^-126 */
                    double wanth = want;
                    if (!isnan(want) && fabs(want) < 0x1p-126) {
                        double q = ldexp(1.0, -133); /* bf16 subnormal quantum */
                        double t = want / q, fl = floor(t), fr = t - fl;
                        wanth = (fr > 0.5 || (fr == 0.5 && fmod(fl, 2) != 0)) ? (fl + 1) * q : fl * q;
                    }
                    if (isnan(want) ? !(isnan(got) && isnan(goth))
                                    : ((double)got != want || (double)goth != wanth)) {
                        if (good)
                            diag("dequantize %s code 0x%02X scale 0x%02X: got %a / bf16 %a want %a / %a",
                                 fm ? "e5m2" : "e4m3", d[r * cols + c], sc, (double)got, (double)goth, want, wanth);
                        good = 0;
                    }
                }
        }
        ok(good, "dequantize (fp32 and bf16 outputs) of random codes and scales is the exact value, rounded once");
    }
    mxfa_close(ctx);
    return done_testing();
}
