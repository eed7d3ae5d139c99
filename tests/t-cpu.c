/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cpu backend against ref, bit for bit: quantization (every block
 * shape, preset and element format, dense and jagged), dequantization, the
 * products under every model (odd sizes, both element formats, with and
 * without C, wide scale spreads, NaN and Inf), raw instruction chains, and
 * attention forward and backward (every model, P mode, causal mode and
 * head dim, jagged GQA batches, odd tiles). Every ref result is compared
 * with the cpu backend on each instruction set this CPU runs (scalar, avx2,
 * avx512, forced through MXFA_CPU_ISA) at 1 and 2 threads. Also: the scale
 * rules over every binade of the amax, and every backend's results with
 * the caller running under round toward zero, flush-to-zero and
 * denormals-are-zero against the default environment's.
 */
#include "config.h"

#include <fenv.h>
#include <math.h>
#ifdef MXFA_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "attn_util.h"
#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ref;

/* The cpu configurations: an instruction set and a thread count each. */
#define NCONF 6
static mxfa_ctx *cpus[NCONF];
static int conf_threads[NCONF];
static const char *conf_name[NCONF];
static int nconf;

static mxfa_ctx *use(int c)
{
#ifdef MXFA_HAVE_OPENMP
    omp_set_num_threads(conf_threads[c]);
#endif
    return cpus[c];
}

static int same(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

/* Data with the features that exercise the fast paths' limits: normal
 * values with row and column magnitudes spread over many binades, exact
 * zeros, and (when `specials`) NaN, Inf, fp32 subnormals and huge values. */
static float *data(int64_t n, int64_t cols, int specials)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) {
        double g = gauss();
        int64_t r = i / cols, c = i % cols;
        g *= ldexp(1.0, (int)((r * 7 + c * 3) % 13) - 6);
        uint64_t u = rng_next() % 1000;
        if (u < 20)
            g = 0;
        else if (u < 30)
            g *= 1e-6;
        if (specials && u >= 990) {
            static const float sp[] = {NAN, INFINITY, -INFINITY, 1e-40f, -3e-39f, 3e38f, 65504.f, 1e-30f, 448.f, 464.f};
            g = sp[u - 990];
        }
        x[i] = (float)g;
    }
    return x;
}

/* ---- quantization and dequantization ---- */
static void check_quantize(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {37, 101}, {64, 256}, {130, 33}, {96, 64}};
    int bad = 0, cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t R = shapes[s][0], C = shapes[s][1];
        float *x = data(R * C, C, 1);
        uint16_t *xb = malloc((size_t)(R * C) * 2);
        for (int64_t i = 0; i < R * C; i++)
            xb[i] = mxfa_f32_to_bf16(x[i]);
        for (int blk = 0; blk < 3; blk++)
            for (int preset = 0; preset < 4; preset++)
                for (int fmt = 0; fmt < 2; fmt++)
                    for (int bf = 0; bf < 2; bf++) {
                        int64_t sr, sc;
                        mxfa_scales_shape((mxfa_block)blk, R, C, &sr, &sc);
                        uint8_t *d[2], *sf[2];
                        float *back[2];
                        for (int b = 0; b < 2; b++) {
                            d[b] = NULL;
                            sf[b] = NULL;
                            back[b] = NULL;
                        }
                        for (int cfg = 0; cfg <= nconf; cfg++) {
                            int side = cfg > 0;
                            free(d[side]), free(sf[side]), free(back[side]);
                            d[side] = malloc((size_t)(R * C));
                            sf[side] = malloc((size_t)(sr * sc));
                            back[side] = malloc((size_t)(R * C) * 4);
                            mxfa_tensor X = mxfa_tensor_2d(bf ? (void *)xb : (void *)x, bf ? MXFA_BF16 : MXFA_F32, R, C);
                            mxfa_mx m = {mxfa_tensor_2d(d[side], fmt ? MXFA_E5M2 : MXFA_E4M3, R, C),
                                         mxfa_tensor_2d(sf[side], MXFA_E8M0, sr, sc), (mxfa_block)blk, MXFA_LAYOUT_COMPACT};
                            mxfa_tensor O = mxfa_tensor_2d(back[side], MXFA_F32, R, C);
                            mxfa_ctx *c = cfg ? use(cfg - 1) : ref;
                            if (mxfa_quantize(c, &X, (mxfa_preset)preset, &m) != MXFA_OK ||
                                mxfa_dequantize(c, &m, &O) != MXFA_OK)
                                bad++;
                            if (!cfg)
                                continue;
                            cases++;
                            if (!same(d[0], d[1], (size_t)(R * C)) || !same(sf[0], sf[1], (size_t)(sr * sc)) ||
                                !same(back[0], back[1], (size_t)(R * C) * 4)) {
                                if (bad < 5)
                                    diag("quantize %lldx%lld block %d preset %d fmt %d bf16 %d differs on %s",
                                         (long long)R, (long long)C, blk, preset, fmt, bf, conf_name[cfg - 1]);
                                bad++;
                            }
                        }
                        for (int b = 0; b < 2; b++)
                            free(d[b]), free(sf[b]), free(back[b]);
                    }
        free(x);
        free(xb);
    }
    ok(bad == 0, "quantize and dequantize: %d cases (5 shapes x 3 blocks x 4 presets x 2 formats x f32/bf16 x %d configurations) equal ref",
       cases, nconf);

    /* jagged: col and square blocks restart at every sequence */
    const int32_t cu[] = {0, 5, 5, 70, 133};
    int64_t R = 133, C = 96, srows;
    float *x_data = data(R * C, C, 1);
    mxfa_jagged_scale_rows(cu, 4, &srows);
    bad = 0;
    for (int blk = 1; blk < 3; blk++)
        for (int preset = 0; preset < 4; preset++) {
            int64_t sc = blk == 1 ? C : 3;
            uint8_t *d[2], *sf[2];
            for (int b = 0; b < 2; b++) {
                d[b] = malloc((size_t)(R * C));
                sf[b] = malloc((size_t)(srows * sc));
            }
            for (int b = 0; b <= nconf; b++) {
                int x = b > 0;
                mxfa_tensor X = mxfa_tensor_2d(x_data, MXFA_F32, R, C);
                mxfa_mx m = {mxfa_tensor_2d(d[x], MXFA_E4M3, R, C), mxfa_tensor_2d(sf[x], MXFA_E8M0, srows, sc),
                             (mxfa_block)blk, MXFA_LAYOUT_COMPACT};
                if (mxfa_quantize_jagged(b ? use(b - 1) : ref, &X, cu, 4, (mxfa_preset)preset, &m) != MXFA_OK)
                    bad++;
                if (b)
                    bad += !same(d[0], d[1], (size_t)(R * C)) || !same(sf[0], sf[1], (size_t)(srows * sc));
            }
            for (int b = 0; b < 2; b++)
                free(d[b]), free(sf[b]);
        }
    ok(bad == 0, "jagged col and square quantization (lengths 5, 0, 65, 63) equals ref");
    free(x_data);
}

/*
 * The scale rules over every binade of the amax: one block per (fp32
 * exponent field, significand), the significands at and beside the places
 * where a rule's scale steps (the start of a binade for ocp, 1.75 = 448 and
 * 57344 over their binade for rceil) and random ones, every other element
 * a random fraction of the amax. Row blocks of the [blocks, 32] matrix and
 * col blocks of its transpose, every preset and format.
 */
static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_scale_rules(void)
{
    static const uint32_t sig[] = {0, 1, 2, 0x3FFFFF, 0x400000, 0x5FFFFE, 0x5FFFFF, 0x600000, 0x600001, 0x600002,
                                   0x7FFFFE, 0x7FFFFF};
    const int nsig = (int)(sizeof sig / sizeof sig[0]) + 4;
    const int64_t nb = 255 * nsig;
    float *x = malloc((size_t)(nb * 32) * 4), *xt = malloc((size_t)(nb * 32) * 4);
    for (int64_t b = 0; b < nb; b++) {
        uint32_t f = (uint32_t)(b / nsig), j = (uint32_t)(b % nsig);
        uint32_t m = j < sizeof sig / sizeof sig[0] ? sig[j] : (uint32_t)(rng_next() & 0x7FFFFF);
        float amax = float_of_bits(f << 23 | m);
        for (int i = 0; i < 32; i++) {
            float v = i == (int)(b % 32) ? amax : amax * (float)((double)(rng_next() % 1000) / 1000.0);
            x[b * 32 + i] = rng_next() & 1 ? -v : v;
            xt[(int64_t)i * nb + b] = x[b * 32 + i];
        }
    }
    uint8_t *d[2], *s[2];
    for (int side = 0; side < 2; side++) {
        d[side] = malloc((size_t)(nb * 32));
        s[side] = malloc((size_t)nb);
    }
    int bad = 0, cases = 0;
    for (int blk = 0; blk < 2; blk++)
        for (int preset = 0; preset < 4; preset++)
            for (int fmt = 0; fmt < 2; fmt++)
                for (int cfg = 0; cfg <= nconf; cfg++) {
                    int side = cfg > 0;
                    mxfa_dtype dt = fmt ? MXFA_E5M2 : MXFA_E4M3;
                    mxfa_tensor X = blk ? mxfa_tensor_2d(xt, MXFA_F32, 32, nb) : mxfa_tensor_2d(x, MXFA_F32, nb, 32);
                    mxfa_mx m = {blk ? mxfa_tensor_2d(d[side], dt, 32, nb) : mxfa_tensor_2d(d[side], dt, nb, 32),
                                 blk ? mxfa_tensor_2d(s[side], MXFA_E8M0, 1, nb) : mxfa_tensor_2d(s[side], MXFA_E8M0, nb, 1),
                                 blk ? MXFA_BLOCK_COL : MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
                    if (mxfa_quantize(cfg ? use(cfg - 1) : ref, &X, (mxfa_preset)preset, &m) != MXFA_OK)
                        bad++;
                    if (!cfg)
                        continue;
                    cases++;
                    if (!same(d[0], d[1], (size_t)(nb * 32)) || !same(s[0], s[1], (size_t)nb)) {
                        if (bad < 5)
                            diag("scale rule sweep: %s blocks preset %d fmt %d differs on %s", blk ? "col" : "row",
                                 preset, fmt, conf_name[cfg - 1]);
                        bad++;
                    }
                }
    ok(bad == 0, "scale rules over every amax binade: %lld blocks x row/col x 4 presets x 2 formats x %d configurations equal ref",
       (long long)nb, nconf);
    for (int side = 0; side < 2; side++)
        free(d[side]), free(s[side]);
    free(x), free(xt);
}

/* ---- products ---- */
static void quantize_rows(mxfa_ctx *c, const float *x, int64_t R, int64_t K, mxfa_dtype fmt, uint8_t *d, uint8_t *s,
                          mxfa_mx *m)
{
    mxfa_tensor X = mxfa_tensor_2d((void *)x, MXFA_F32, R, K);
    *m = (mxfa_mx){mxfa_tensor_2d(d, fmt, R, K), mxfa_tensor_2d(s, MXFA_E8M0, R, (K + 31) / 32), MXFA_BLOCK_ROW,
                   MXFA_LAYOUT_COMPACT};
    mxfa_quantize(c, &X, MXFA_PRESET_RCEIL, m);
}

/* mxfa_gemm (C optional) on ref and on every cpu configuration: the
 * number of calls that fail or differ from ref's bytes, the configurations
 * compared added to *cases, and the first that differs in *first. */
static int gemm_vs_ref(const mxfa_mx *A, const mxfa_mx *B, const float *c, int64_t M, int64_t N, mxfa_model model,
                       int *cases, const char **first)
{
    float *d[2] = {malloc((size_t)(M * N) * 4), malloc((size_t)(M * N) * 4)};
    int bad = 0;
    *first = NULL;
    for (int cfg = 0; cfg <= nconf; cfg++) {
        mxfa_tensor C = mxfa_tensor_2d((void *)c, MXFA_F32, M, N), D = mxfa_tensor_2d(d[cfg > 0], MXFA_F32, M, N);
        if (mxfa_gemm(cfg ? use(cfg - 1) : ref, A, B, c ? &C : NULL, model, &D) != MXFA_OK)
            bad++;
        if (!cfg)
            continue;
        (*cases)++;
        if (!same(d[0], d[1], (size_t)(M * N) * 4)) {
            if (!*first)
                *first = conf_name[cfg - 1];
            bad++;
        }
    }
    free(d[0]), free(d[1]);
    return bad;
}

static void check_gemm(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {37, 45, 100}, {64, 64, 256}, {5, 130, 64}, {33, 31, 33}};
    int bad = 0, cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], kb = (K + 31) / 32;
        for (int specials = 0; specials < 2; specials++) {
            float *a = data(M * K, K, specials), *b = data(N * K, K, specials), *c = data(M * N, N, specials);
            for (int fa = 0; fa < 2; fa++)
                for (int fb = 0; fb < 2; fb++) {
                    uint8_t *ad = malloc((size_t)(M * K)), *as = malloc((size_t)(M * kb));
                    uint8_t *bd = malloc((size_t)(N * K)), *bs = malloc((size_t)(N * kb));
                    mxfa_mx A, B;
                    quantize_rows(ref, a, M, K, fa ? MXFA_E5M2 : MXFA_E4M3, ad, as, &A);
                    quantize_rows(ref, b, N, K, fb ? MXFA_E5M2 : MXFA_E4M3, bd, bs, &B);
                    if (specials) /* scales far apart, and a NaN scale */
                        for (int64_t i = 0; i < M * kb; i++)
                            as[i] = (uint8_t)(i % 17 == 3 ? 0xFF : (as[i] + i * 37) % 255);
                    for (int model = 0; model < 4; model++)
                        for (int withc = 0; withc < 2; withc++) {
                            const char *first;
                            int n = gemm_vs_ref(&A, &B, withc ? c : NULL, M, N, (mxfa_model)model, &cases, &first);
                            if (n && bad < 5)
                                diag("gemm %lldx%lldx%lld model %d formats %d%d C %d specials %d differs on %s",
                                     (long long)M, (long long)N, (long long)K, model, fa, fb, withc, specials,
                                     first ? first : "(a call failed)");
                            bad += n;
                        }
                    free(ad), free(as), free(bd), free(bs);
                }
            free(a), free(b), free(c);
        }
    }
    ok(bad == 0, "gemm: %d cases (5 shapes x 4 models x 4 format pairs x C or not x plain/special data x %d configurations) equal ref",
       cases, nconf);

    /* raw instruction chains */
    bad = 0;
    for (int instr = 0; instr < 2; instr++) {
        int64_t M = 19, N = 7, K = instr ? 48 : 64;
        uint8_t *a = malloc((size_t)(M * K) * 2), *b = malloc((size_t)(N * K) * 2);
        for (int64_t i = 0; i < M * K * 2; i++)
            a[i] = (uint8_t)rng_next();
        for (int64_t i = 0; i < N * K * 2; i++)
            b[i] = (uint8_t)rng_next();
        float *c = data(M * N, N, 0), *d[2] = {malloc((size_t)(M * N) * 4), malloc((size_t)(M * N) * 4)};
        mxfa_dtype dt = instr ? MXFA_BF16 : MXFA_E4M3;
        for (int x = 0; x <= nconf; x++) {
            mxfa_tensor A = mxfa_tensor_2d(a, dt, M, K), B = mxfa_tensor_2d(b, dt, N, K);
            mxfa_tensor C = mxfa_tensor_2d(c, MXFA_F32, M, N), D = mxfa_tensor_2d(d[x > 0], MXFA_F32, M, N);
            bad += mxfa_mma_chain(x ? use(x - 1) : ref, (mxfa_instr)instr, &A, &B, &C, &D) != MXFA_OK;
            if (x)
                bad += !same(d[0], d[1], (size_t)(M * N) * 4);
        }
        free(a), free(b), free(c), free(d[0]), free(d[1]);
    }
    ok(bad == 0, "instruction chains (wgmma fp8 and bf16, random codes) equal ref");
}

/*
 * The edges of the fast combine: block scales that put the sums just below
 * and just above the fp32 normal range (subnormal results must go to the
 * reference; overflowing ones too), accumulators so small (down to fp32
 * subnormals) that the group's grid lies above all their bits, rows of A
 * that are all zero (no products: the accumulator alone sets the grid),
 * and accumulators far larger than the products.
 */
static void check_gemm_ranges(void)
{
    const int64_t M = 37, N = 45, K = 96, kb = K / 32;
    static const int shift[] = {-66, -62, -58, 56, 60, 64}; /* added to each operand's scales */
    static const int cexp[] = {-140, -126, -110, -100, 40};   /* the accumulators' magnitudes */
    int bad = 0, cases = 0;
    float *a = data(M * K, K, 0), *b = data(N * K, K, 0), *c = malloc((size_t)(M * N) * 4);
    for (int64_t r = 0; r < M; r += 5) /* every fifth row of A zero */
        for (int64_t k = 0; k < K; k++)
            a[r * K + k] = 0.0f;
    uint8_t *ad = malloc((size_t)(M * K)), *as = malloc((size_t)(M * kb)), *bd = malloc((size_t)(N * K));
    uint8_t *bs = malloc((size_t)(N * kb)), *as0 = malloc((size_t)(M * kb)), *bs0 = malloc((size_t)(N * kb));
    mxfa_mx A, B;
    quantize_rows(ref, a, M, K, MXFA_E4M3, ad, as0, &A);
    quantize_rows(ref, b, N, K, MXFA_E4M3, bd, bs0, &B);
    A.scales.data = as;
    B.scales.data = bs;
    for (size_t si = 0; si < sizeof shift / sizeof shift[0]; si++)
        for (size_t ci = 0; ci < sizeof cexp / sizeof cexp[0]; ci++) {
            for (int64_t i = 0; i < M * kb; i++)
                as[i] = (uint8_t)(as0[i] + shift[si] < 1 ? 1 : as0[i] + shift[si] > 254 ? 254 : as0[i] + shift[si]);
            for (int64_t i = 0; i < N * kb; i++)
                bs[i] = (uint8_t)(bs0[i] + shift[si] < 1 ? 1 : bs0[i] + shift[si] > 254 ? 254 : bs0[i] + shift[si]);
            for (int64_t i = 0; i < M * N; i++)
                c[i] = (float)ldexp(gauss(), cexp[ci] + (int)(i % 7));
            for (int model = 0; model < 4; model++) {
                const char *first;
                int n = gemm_vs_ref(&A, &B, c, M, N, (mxfa_model)model, &cases, &first);
                if (n && bad < 5)
                    diag("gemm ranges: scale shift %d, C ~2^%d, model %d differs on %s", shift[si], cexp[ci], model,
                         first ? first : "(a call failed)");
                bad += n;
            }
        }
    ok(bad == 0, "gemm at the edges of the fp32 range: %d cases (6 scale shifts x 5 accumulator sizes x 4 models x %d "
                 "configurations) equal ref", cases, nconf);
    free(a), free(b), free(c), free(ad), free(as), free(bd), free(bs), free(as0), free(bs0);
}

/*
 * Random finite codes in every format pair, a quarter of them the largest
 * finite value and a quarter the smallest subnormal: the products of one group
 * then span up to 63 binades (E5M2 subnormals against its largest values),
 * past the 46 over which the truncation step may take the sum of its
 * uncut products from the dot's double sum; such columns must take the
 * dense truncated sums.
 */
static uint8_t extreme_code(int e5m2)
{
    uint8_t sign = (uint8_t)(rng_below(2) << 7);
    switch (rng_below(4)) {
    case 0: return (uint8_t)(sign | (e5m2 ? 0x7B : 0x7E)); /* the largest finite */
    case 1: return (uint8_t)(sign | 1);                     /* the smallest subnormal */
    default: /* any finite code (NaN and Inf are other tests' business) */
        for (;;) {
            uint8_t c = (uint8_t)rng_below(256);
            if ((c & 0x7F) < (e5m2 ? 0x7C : 0x7F))
                return c;
        }
    }
}

static void check_gemm_codes(void)
{
    const int64_t M = 21, N = 64, K = 96, kb = K / 32;
    int bad = 0, cases = 0;
    float *a = data(M * K, K, 0), *b = data(N * K, K, 0), *c = data(M * N, N, 0);
    uint8_t *ad = malloc((size_t)(M * K)), *as = malloc((size_t)(M * kb));
    uint8_t *bd = malloc((size_t)(N * K)), *bs = malloc((size_t)(N * kb));
    for (int fa = 0; fa < 2; fa++)
        for (int fb = 0; fb < 2; fb++) {
            mxfa_mx A, B;
            quantize_rows(ref, a, M, K, fa ? MXFA_E5M2 : MXFA_E4M3, ad, as, &A);
            quantize_rows(ref, b, N, K, fb ? MXFA_E5M2 : MXFA_E4M3, bd, bs, &B);
            for (int64_t i = 0; i < M * K; i++)
                ad[i] = extreme_code(fa);
            for (int64_t i = 0; i < N * K; i++)
                bd[i] = extreme_code(fb);
            for (int64_t i = 0; i < M * kb; i++)
                as[i] = (uint8_t)(120 + rng_below(15));
            for (int64_t i = 0; i < N * kb; i++)
                bs[i] = (uint8_t)(120 + rng_below(15));
            /* A row 0 by B column 0, last group (where no later group's
             * grid can hide the difference): the smallest product, then
             * two of the largest that cancel. The dot's double sum loses the
             * small one and ends at zero; cut to the grid the small one is
             * zero too, but only the dense truncated sums see that: the sum
             * of the others is not S less the small one. */
            static const uint8_t a0[2][3] = {{0x01, 0x7E, 0xFE}, {0x01, 0x7B, 0xFB}};
            static const uint8_t b0[2][3] = {{0x01, 0x7E, 0x7E}, {0x01, 0x7B, 0x7B}};
            for (int k = 0; k < 32; k++) {
                ad[64 + k] = k < 3 ? a0[fa][k] : 0;
                bd[64 + k] = k < 3 ? b0[fb][k] : 0;
            }
            for (int64_t j = 1; j < 32; j++) /* no small B in those k: only the first can be cut */
                bd[j * K + 65] = bd[j * K + 66] = b0[fb][1];
            for (int model = 0; model < 4; model++)
                for (int withc = 0; withc < 2; withc++) {
                    const char *first;
                    int n = gemm_vs_ref(&A, &B, withc ? c : NULL, M, N, (mxfa_model)model, &cases, &first);
                    if (n && bad < 5)
                        diag("gemm on random codes: formats %d%d model %d C %d differs on %s", fa, fb, model, withc,
                             first ? first : "(a call failed)");
                    bad += n;
                }
        }
    ok(bad == 0, "gemm on random and extreme codes: %d cases (4 format pairs x 4 models x C or not x %d configurations) "
                 "equal ref", cases, nconf);
    free(a), free(b), free(c), free(ad), free(as), free(bd), free(bs);
}

/* ---- attention ---- */
typedef struct attn_case {
    int batch;
    int32_t cq[4], ck[4];
    int64_t hq, hkv, d;
    int bm, bn;
} attn_case;

static float *randn3(int64_t n, int outlier, int64_t d)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)gauss() * (outlier && i % d == 5 ? 20.0f : 1.0f);
    return x;
}

static int run_attn(const attn_case *ac, const mxfa_attn_params *p, int backward, int outlier)
{
    int64_t tq = ac->cq[ac->batch], tk = ac->ck[ac->batch], hq = ac->hq, hkv = ac->hkv, d = ac->d;
    float *q = randn3(tq * hq * d, 0, d), *k = randn3(tk * hkv * d, outlier, d), *v = randn3(tk * hkv * d, 0, d);
    float *dout = randn3(tq * hq * d, 0, d);
    if (outlier == 2) { /* NaN and infinities in every input: blocks that only the reference takes */
        q[7] = NAN, q[3 * d + 40] = INFINITY;
        k[2 * d + 1] = NAN, k[40 * d + 9] = -INFINITY;
        v[11 * d + 2] = NAN, v[50 * d + 3] = INFINITY;
        dout[5] = -INFINITY, dout[20 * d + 33] = NAN;
    }
    size_t nq = (size_t)(tq * hq * d) * 4, nk = (size_t)(tk * hkv * d) * 4;
    float *o[2], *lse[2], *dq[2], *dk[2], *dv[2];
    int good = 1;
    for (int x = 0; x < 2; x++)
        o[x] = malloc(nq), lse[x] = malloc((size_t)(tq * hq) * 4), dq[x] = malloc(nq), dk[x] = malloc(nk), dv[x] = malloc(nk);
    for (int b = 0; b <= nconf; b++) {
        int x = b > 0;
        mxfa_ctx *c = b ? use(b - 1) : ref;
        mxfa_tensor Q = t3(q, MXFA_F32, tq, hq, d), K = t3(k, MXFA_F32, tk, hkv, d), V = t3(v, MXFA_F32, tk, hkv, d);
        mxfa_tensor O = t3(o[x], MXFA_F32, tq, hq, d), L = t2(lse[x], MXFA_F32, tq, hq);
        good &= mxfa_attn_fwd(c, p, &Q, &K, &V, ac->cq, ac->ck, ac->batch, &O, &L) == MXFA_OK;
        if (backward) {
            /* both backends from the same forward outputs */
            mxfa_tensor O0 = t3(o[0], MXFA_F32, tq, hq, d), L0 = t2(lse[0], MXFA_F32, tq, hq);
            mxfa_tensor DO = t3(dout, MXFA_F32, tq, hq, d), DQ = t3(dq[x], MXFA_F32, tq, hq, d);
            mxfa_tensor DK = t3(dk[x], MXFA_F32, tk, hkv, d), DV = t3(dv[x], MXFA_F32, tk, hkv, d);
            good &= mxfa_attn_bwd(c, p, &Q, &K, &V, &O0, &DO, &L0, ac->cq, ac->ck, ac->batch, &DQ, &DK, &DV) == MXFA_OK;
        }
        if (!b)
            continue;
        int same_out = same(o[0], o[1], nq) && same(lse[0], lse[1], (size_t)(tq * hq) * 4);
        if (backward)
            same_out &= same(dq[0], dq[1], nq) && same(dk[0], dk[1], nk) && same(dv[0], dv[1], nk);
        if (!same_out)
            diag("differs on %s", conf_name[b - 1]);
        good &= same_out;
    }
    for (int x = 0; x < 2; x++)
        free(o[x]), free(lse[x]), free(dq[x]), free(dk[x]), free(dv[x]);
    free(q), free(k), free(v), free(dout);
    return good;
}

static void check_attn(int backward)
{
    static const attn_case cases[] = {
        {1, {0, 100}, {0, 100}, 2, 2, 64, 64, 64},
        {3, {0, 33, 33, 100}, {0, 50, 51, 140}, 4, 2, 128, 64, 96},
        {1, {0, 64}, {0, 97}, 1, 1, 256, 32, 64},
        {2, {0, 1, 70}, {0, 1, 69}, 3, 1, 64, 32, 32},
        /* query tiles taller than a key tile and than D (the backward
         * pass's scratch once held max(BN, D) rows of scales) */
        {1, {0, 200}, {0, 200}, 1, 1, 64, 256, 32},
    };
    const char *what = backward ? "backward" : "forward";
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const attn_case *ac = &cases[ci];
        int bad = 0, n = 0;
        int setting = 0;
        for (int model = 0; model < 4; model++)
            for (int pm = 0; pm < 2; pm++)
                for (int causal = 0; causal < 3; causal++) {
                    /* every setting on the first case, a third of them (in turn) on the others */
                    if (ci > 0 && setting++ % 3 != (int)ci % 3)
                        continue;
                    mxfa_attn_params p;
                    mxfa_attn_params_default(&p);
                    p.model = (mxfa_model)model;
                    p.p_scale = (mxfa_p_scale)pm;
                    p.causal = (mxfa_causal)causal;
                    p.block_m = ac->bm;
                    p.block_n = ac->bn;
                    p.preset = (mxfa_preset)((model + causal) % 4);
                    n++;
                    if (!run_attn(ac, &p, backward, (model + pm) & 1)) {
                        if (bad < 3)
                            diag("%s case %zu model %d p %d causal %d differs", what, ci, model, pm, causal);
                        bad++;
                    }
                }
        ok(bad == 0, "attention %s, batch %d, heads %lld/%lld, D %lld, tiles %dx%d: %d settings x %d configurations equal ref",
           what, ac->batch, (long long)ac->hq, (long long)ac->hkv, (long long)ac->d, ac->bm, ac->bn, n, nconf);
    }
    /* the first case again with NaN and Inf among the inputs */
    int bad = 0, n = 0;
    for (int model = 0; model < 4; model++)
        for (int causal = 0; causal < 3; causal++) {
            mxfa_attn_params p;
            mxfa_attn_params_default(&p);
            p.model = (mxfa_model)model;
            p.p_scale = (mxfa_p_scale)(causal & 1);
            p.causal = (mxfa_causal)causal;
            p.block_m = p.block_n = 64;
            n++;
            if (!run_attn(&cases[0], &p, backward, 2)) {
                if (bad < 3)
                    diag("%s with NaN and Inf inputs, model %d causal %d differs", what, model, causal);
                bad++;
            }
        }
    ok(bad == 0, "attention %s with NaN and Inf in Q, K, V%s: %d settings x %d configurations equal ref", what,
       backward ? " and dO" : "", n, nconf);
}

/* ---- the caller's floating-point environment ---- */

/* Round toward zero, and where the CPU has them flush-to-zero and
 * denormals-are-zero, on this thread and every thread of the OpenMP pool
 * (on = 0 restores the default). */
static void caller_fpenv(int on)
{
#pragma omp parallel num_threads(4)
    {
        fesetround(on ? FE_TOWARDZERO : FE_TONEAREST);
#if defined(__SSE2__)
        _mm_setcsr(on ? _mm_getcsr() | 0x8040u : _mm_getcsr() & ~0x8040u);
#endif
    }
    fesetround(on ? FE_TOWARDZERO : FE_TONEAREST);
#if defined(__SSE2__)
    _mm_setcsr(on ? _mm_getcsr() | 0x8040u : _mm_getcsr() & ~0x8040u);
#endif
}

/* Products under every model (subnormal accumulators among C) and
 * attention forward and backward into one buffer. */
typedef struct fpenv_case {
    mxfa_mx a, b;
    float *c, *q, *k, *v, *dout;
} fpenv_case;

enum { FE_M = 37, FE_N = 45, FE_K = 100, FE_T = 100, FE_H = 2, FE_D = 64 };
#define FE_OUT (4 * FE_M * FE_N + 4 * FE_T * FE_H * FE_D + FE_T * FE_H)

static int fpenv_run(mxfa_ctx *c, const fpenv_case *fc, float *out)
{
    int good = 1;
    for (int model = 0; model < 4; model++) {
        mxfa_tensor C = mxfa_tensor_2d(fc->c, MXFA_F32, FE_M, FE_N), D = mxfa_tensor_2d(out, MXFA_F32, FE_M, FE_N);
        good &= mxfa_gemm(c, &fc->a, &fc->b, &C, (mxfa_model)model, &D) == MXFA_OK;
        out += FE_M * FE_N;
    }
    const int64_t n = FE_T * FE_H * FE_D;
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.causal = MXFA_CAUSAL;
    p.block_m = p.block_n = 32;
    mxfa_tensor Q = t3(fc->q, MXFA_F32, FE_T, FE_H, FE_D), K = t3(fc->k, MXFA_F32, FE_T, FE_H, FE_D);
    mxfa_tensor V = t3(fc->v, MXFA_F32, FE_T, FE_H, FE_D), DO = t3(fc->dout, MXFA_F32, FE_T, FE_H, FE_D);
    mxfa_tensor O = t3(out, MXFA_F32, FE_T, FE_H, FE_D), L = t2(out + n, MXFA_F32, FE_T, FE_H);
    mxfa_tensor DQ = t3(out + n + FE_T * FE_H, MXFA_F32, FE_T, FE_H, FE_D);
    mxfa_tensor DK = t3(out + 2 * n + FE_T * FE_H, MXFA_F32, FE_T, FE_H, FE_D);
    mxfa_tensor DV = t3(out + 3 * n + FE_T * FE_H, MXFA_F32, FE_T, FE_H, FE_D);
    good &= mxfa_attn_fwd(c, &p, &Q, &K, &V, NULL, NULL, 1, &O, &L) == MXFA_OK;
    good &= mxfa_attn_bwd(c, &p, &Q, &K, &V, &O, &DO, &L, NULL, NULL, 1, &DQ, &DK, &DV) == MXFA_OK;
    return good;
}

static void check_fpenv(void)
{
    fpenv_case fc;
    uint8_t *ad = malloc(FE_M * FE_K), *as = malloc(FE_M * 4), *bd = malloc(FE_N * FE_K), *bs = malloc(FE_N * 4);
    float *a = data(FE_M * FE_K, FE_K, 1), *b = data(FE_N * FE_K, FE_K, 1);
    quantize_rows(ref, a, FE_M, FE_K, MXFA_E4M3, ad, as, &fc.a);
    quantize_rows(ref, b, FE_N, FE_K, MXFA_E4M3, bd, bs, &fc.b);
    fc.c = data(FE_M * FE_N, FE_N, 1);
    for (int i = 0; i < FE_M * FE_N; i += 7) /* plenty of subnormal accumulators */
        fc.c[i] = (float)(ldexp(1.0, -140) * (i % 5 - 2));
    fc.q = randn3(FE_T * FE_H * FE_D, 0, FE_D);
    fc.k = randn3(FE_T * FE_H * FE_D, 1, FE_D);
    fc.v = randn3(FE_T * FE_H * FE_D, 0, FE_D);
    fc.dout = randn3(FE_T * FE_H * FE_D, 0, FE_D);
    float *want = malloc(FE_OUT * sizeof *want), *got = malloc(FE_OUT * sizeof *got);
    memset(want, 0, FE_OUT * sizeof *want);
    int bad = !fpenv_run(ref, &fc, want); /* in the default environment */
    caller_fpenv(1);
    for (int cfg = 0; cfg <= nconf; cfg++) {
        memset(got, 0, FE_OUT * sizeof *got);
        if (!fpenv_run(cfg ? use(cfg - 1) : ref, &fc, got) || !same(want, got, FE_OUT * sizeof *got)) {
            int64_t i = 0;
            while (i < FE_OUT && !memcmp(&want[i], &got[i], sizeof *got))
                i++;
            diag("under the caller's environment, %s differs from the default environment's results (first at %lld "
                 "of %d: %a, not %a)",
                 cfg ? conf_name[cfg - 1] : "ref", (long long)i, FE_OUT, i < FE_OUT ? got[i] : 0.0, i < FE_OUT ? want[i] : 0.0);
            bad++;
        }
    }
    caller_fpenv(0);
    ok(bad == 0, "round toward zero, flush-to-zero and denormals-are-zero set by the caller on every thread: ref and "
                 "%d cpu configurations still give the default environment's bits", nconf);
    free(ad), free(as), free(bd), free(bs), free(a), free(b);
    free(fc.c), free(fc.q), free(fc.k), free(fc.v), free(fc.dout), free(want), free(got);
}

int main(void)
{
    rng_seed_from_env(606);
    if (mxfa_open(&ref, "ref") != MXFA_OK) {
        printf("Bail out! cannot open the ref backend: %s\n", mxfa_last_error(NULL));
        return 1;
    }
    static const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        setenv("MXFA_CPU_ISA", isas[i], 1);
        mxfa_ctx *c;
        if (mxfa_open(&c, "cpu") != MXFA_OK) {
            ok(1, "# SKIP %s: %s", isas[i], mxfa_last_error(NULL));
            continue;
        }
        ok(strcmp(mxfa_cpu_isa(c), isas[i]) == 0, "MXFA_CPU_ISA=%s selects %s", isas[i], mxfa_cpu_isa(c));
        for (int t = 1; t <= 2; t++) {
            cpus[nconf] = c;
            conf_threads[nconf] = t;
            conf_name[nconf] = t == 1 ? (i == 0 ? "scalar/1" : i == 1 ? "avx2/1" : "avx512/1") : (i == 0 ? "scalar/2" : i == 1 ? "avx2/2" : "avx512/2");
            diag("configuration %d: %s, %d thread%s", nconf, isas[i], t, t == 1 ? "" : "s");
            nconf++;
        }
    }
    unsetenv("MXFA_CPU_ISA");
    setenv("MXFA_CPU_ISA", "no-such-isa", 1);
    mxfa_ctx *none;
    ok(mxfa_open(&none, "cpu") == MXFA_ERR_NO_BACKEND && strstr(mxfa_last_error(NULL), "no-such-isa"),
       "an unknown MXFA_CPU_ISA is an error that names it: %s", mxfa_last_error(NULL));
    unsetenv("MXFA_CPU_ISA");
    check_quantize();
    check_scale_rules();
    check_gemm();
    check_gemm_ranges();
    check_gemm_codes();
    check_attn(0);
    check_attn(1);
    check_fpenv();
    mxfa_close(ref);
    for (int c = 0; c < nconf; c += 2)
        mxfa_close(cpus[c]);
    return done_testing();
}
