/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every numerics model, and the two Hopper instructions, against the slow
 * independent reference of slowmma.h on seeded random cases: at least 10^6
 * dot products per model, with rows drawn from several generators
 * (uniform codes, narrow and wide exponent spreads, exact cancellation,
 * subnormals, zeros, rare NaN and Inf), random scales including the
 * extremes, and random accumulators including zeros, subnormals and
 * specials. Set MXFA_MMA_CASES to change the count.
 */
#include "mxfa.h"
#include "slowmma.h"
#include "tap.h"

#define M 24
#define N 24
#define KMAX 64

static mxfa_ctx *ctx;

static int code_field(int e4m3, unsigned code)
{
    return e4m3 ? (code >> 3) & 0xF : (code >> 2) & 0x1F;
}

/* One row of FP8 codes from a randomly chosen generator. */
static void gen_fp8_row(uint8_t *row, int k, int e4m3, const uint8_t *pair_src)
{
    unsigned kind = rng_below(8);
    unsigned fmax = e4m3 ? 15 : 30, mbits = e4m3 ? 3 : 2;
    unsigned center = 1 + rng_below(fmax), width = rng_below(fmax + 1);
    for (int i = 0; i < k; i++) {
        unsigned c;
        switch (kind) {
        case 0: /* uniform codes */
            c = rng_below(256);
            break;
        case 1: /* narrow or wide spread around a centre */
        case 2: {
            int f = (int)center - (int)width / 2 + (int)rng_below(width + 1);
            f = f < 0 ? 0 : f > (int)fmax ? (int)fmax : f;
            c = ((unsigned)f << mbits) | rng_below(1u << mbits) | (rng_below(2) << 7);
            break;
        }
        case 3: /* subnormals and tiny normals */
            c = rng_below(2) ? rng_below(1u << mbits) : (1u << mbits) | rng_below(1u << mbits);
            c |= rng_below(2) << 7;
            break;
        case 4: /* mostly zeros, a few large values */
            c = rng_below(4) ? (rng_below(2) << 7) : ((fmax - rng_below(3)) << mbits) | rng_below(1u << mbits);
            break;
        case 5: /* cancellation: the negation of another row's value */
            c = pair_src ? pair_src[i] ^ 0x80 : rng_below(256);
            if (rng_below(8) == 0)
                c = rng_below(256); /* and a few leftovers */
            break;
        default: /* one big value and many small ones */
            c = i == (int)(rng_below(k)) ? ((fmax << mbits) | rng_below(1u << mbits))
                                           : ((rng_below(fmax / 2 + 1)) << mbits) | rng_below(1u << mbits);
            c |= rng_below(2) << 7;
            break;
        }
        /* NaN (and E5M2 Inf) only rarely, so that most cases are finite */
        int special = e4m3 ? (c & 0x7F) == 0x7F : code_field(0, c) == 31;
        if (special && rng_below(16) != 0)
            c &= e4m3 ? 0xF7 : 0xBF;
        row[i] = (uint8_t)c;
    }
}

static uint16_t gen_bf16(unsigned kind)
{
    uint16_t sign = (uint16_t)(rng_below(2) << 15);
    switch (kind) {
    case 0: { /* any finite, rarely special */
        uint16_t h = (uint16_t)rng_next();
        if (((h >> 7) & 0xFF) == 0xFF && rng_below(16) != 0)
            h &= 0xBFFF;
        return h;
    }
    case 1: /* near 1 */
        return sign | (uint16_t)((120 + rng_below(16)) << 7) | (uint16_t)rng_below(128);
    case 2: /* subnormal or zero */
        return sign | (uint16_t)(rng_below(2) ? rng_below(128) : 0);
    default: /* spread of 40 binades */
        return sign | (uint16_t)((107 + rng_below(40)) << 7) | (uint16_t)rng_below(128);
    }
}

static uint32_t gen_acc(void)
{
    unsigned kind = rng_below(16);
    uint32_t sign = (uint32_t)rng_below(2) << 31;
    if (kind == 0)
        return sign;                                      /* +-0 */
    if (kind == 1)
        return sign | (uint32_t)(rng_next() & 0x7FFFFF); /* subnormal */
    if (kind == 2)
        return (uint32_t)rng_next(); /* anything, specials included */
    return sign | (uint32_t)((100 + rng_below(60)) << 23) | (uint32_t)(rng_next() & 0x7FFFFF);
}

static uint8_t gen_scale(void)
{
    unsigned kind = rng_below(32);
    if (kind == 0)
        return (uint8_t)rng_below(256); /* anything, 0xFF (NaN) included */
    if (kind == 1)
        return rng_below(2) ? 0x00 : 0xFE;
    return (uint8_t)(117 + rng_below(21));
}

static sval decode_fp8(int e4m3, uint8_t c)
{
    return e4m3 ? slow_e4m3(c) : slow_e5m2(c);
}

/* bf16 nearest even of code * 2^(s - 127), through doubles (exact there) */
static sval widen_ref(int e4m3, uint8_t code, uint8_t s)
{
    if (s == 0xFF)
        return slow_bf16(0x7FC0);
    sval v = decode_fp8(e4m3, code);
    if (v.cls != SV_FINITE)
        return slow_bf16(v.cls == SV_ZERO ? (uint16_t)(v.neg << 15) : v.cls == SV_INF ? (uint16_t)((v.neg << 15) | 0x7F80) : 0x7FC0);
    int lo = bn_top(&v.mag) - 23;
    double m = ldexp((double)bn_get_bits(&v.mag, lo, 24), lo - BN_LSB); /* exact: at most 4 bits */
    double x = ldexp(m, (int)s - 127);
    int e;
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    int qe = (e - 1 < -126 ? -126 : e - 1) - 7;
    double q = ldexp(x, -qe), fl = floor(q), fr = q - fl;
    if (fr > 0.5 || (fr == 0.5 && fmod(fl, 2.0) != 0))
        fl += 1;
    double r = ldexp(fl, qe);
    float f = r >= 0x1p128 ? INFINITY : (float)r; /* exact: r is a bf16 value */
    uint16_t h = (uint16_t)(bits_of(f) >> 16) | (uint16_t)(v.neg << 15);
    return slow_bf16(h);
}

static uint32_t ref_gemm_element(mxfa_model model, int e4a, int e4b, const uint8_t *a, const uint8_t *sa,
                                 const uint8_t *b, const uint8_t *sb, int K, uint32_t acc)
{
    static const slow_step exact = {-1, -1, 1, -100000, 0}, sm100 = {25, 24, 1, -133, 1}, fp8 = {13, 14, 1, -133, 1},
                           bf16 = {25, 24, 1, -133, 1};
    sval t[33];
    for (int k0 = 0; k0 < K; k0 += 32) {
        int kend = k0 + 32 < K ? k0 + 32 : K, blk = k0 / 32;
        int nan_scale = sa[blk] == 0xFF || sb[blk] == 0xFF, s = (int)sa[blk] + (int)sb[blk] - 254;
        int n = 0;
        if (model == MXFA_MODEL_SM90_BF16) {
            for (int g = k0; g < kend; g += 16) {
                n = 0;
                for (int k = g; k < g + 16 && k < kend; k++) {
                    sval x = widen_ref(e4a, a[k], sa[blk]), y = widen_ref(e4b, b[k], sb[blk]);
                    t[n++] = slow_mul(&x, &y, 0);
                }
                t[n++] = slow_f32(acc);
                acc = slow_fused(&bf16, t, n, NULL);
            }
            continue;
        }
        for (int k = k0; k < kend; k++) {
            sval x = decode_fp8(e4a, a[k]), y = decode_fp8(e4b, b[k]);
            t[n] = slow_mul(&x, &y, model == MXFA_MODEL_SM100 ? s : 0);
            if (nan_scale && model == MXFA_MODEL_SM100)
                t[n].cls = SV_NAN;
            n++;
        }
        if (model == MXFA_MODEL_SM100) {
            t[n++] = slow_f32(acc);
            acc = slow_fused(&sm100, t, n, NULL);
        } else {
            sval partial;
            if (model == MXFA_MODEL_IDEAL) {
                slow_fused(&exact, t, n, &partial);
            } else {
                uint32_t p = slow_fused(&fp8, t, n, NULL);
                partial = slow_f32(p);
            }
            if (nan_scale)
                partial.cls = SV_NAN;
            acc = slow_promote(&partial, s, acc);
        }
    }
    return acc;
}

static int64_t cases_wanted(void)
{
    const char *s = getenv("MXFA_MMA_CASES");
    return s && *s ? strtoll(s, NULL, 10) : 1000000;
}

static void check_model(mxfa_model model)
{
    static uint8_t a[M * KMAX], b[N * KMAX], sa[M * 4], sb[N * 4];
    static uint32_t c[M * N], d[M * N];
    int64_t want = cases_wanted(), done = 0, bad = 0, shown = 0;
    while (done < want) {
        int K = (int)(rng_below(4) == 0 ? 1 + rng_below(KMAX) : 32 * (1 + rng_below(KMAX / 32)));
        int e4a = (int)rng_below(4) != 0, e4b = (int)rng_below(4) != 0;
        int nb = (K + 31) / 32;
        for (int i = 0; i < M; i++)
            gen_fp8_row(a + i * K, K, e4a, NULL);
        for (int j = 0; j < N; j++)
            gen_fp8_row(b + j * K, K, e4b, (j > 0 && e4b == e4a) ? a + (j % M) * K : NULL);
        for (int i = 0; i < M * nb; i++)
            sa[i] = gen_scale();
        for (int j = 0; j < N * nb; j++)
            sb[j] = gen_scale();
        for (int i = 0; i < M * N; i++)
            c[i] = gen_acc();
        int use_c = rng_below(8) != 0;
        mxfa_mx am = {mxfa_tensor_2d(a, e4a ? MXFA_E4M3 : MXFA_E5M2, M, K), mxfa_tensor_2d(sa, MXFA_E8M0, M, nb),
                      MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
        mxfa_mx bm = {mxfa_tensor_2d(b, e4b ? MXFA_E4M3 : MXFA_E5M2, N, K), mxfa_tensor_2d(sb, MXFA_E8M0, N, nb),
                      MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
        mxfa_tensor ct = mxfa_tensor_2d(c, MXFA_F32, M, N), dt = mxfa_tensor_2d(d, MXFA_F32, M, N);
        if (mxfa_gemm(ctx, &am, &bm, use_c ? &ct : NULL, model, &dt) != MXFA_OK) {
            diag("gemm failed: %s", mxfa_last_error(ctx));
            bad++;
            break;
        }
#pragma omp parallel for schedule(dynamic) reduction(+ : bad)
        for (int ij = 0; ij < M * N; ij++) {
            int i = ij / N, j = ij % N;
            uint32_t want_bits = ref_gemm_element(model, e4a, e4b, a + i * K, sa + i * nb, b + j * K, sb + j * nb, K,
                                                  use_c ? c[ij] : 0);
            if (d[ij] != want_bits) {
#pragma omp critical
                if (shown++ < 6)
                    diag("%s K=%d %s x %s row %d col %d: got 0x%08X want 0x%08X (C 0x%08X)", mxfa_model_name(model), K,
                         e4a ? "e4m3" : "e5m2", e4b ? "e4m3" : "e5m2", i, j, d[ij], want_bits, use_c ? c[ij] : 0);
                bad++;
            }
        }
        done += M * N;
    }
    ok(bad == 0, "%s: %lld random dot products match the slow exact reference", mxfa_model_name(model),
       (long long)done);
}

static void check_instr(mxfa_instr instr)
{
    static uint8_t a8[M * KMAX], b8[N * KMAX];
    static uint16_t ah[M * KMAX], bh[N * KMAX];
    static uint32_t c[M * N], d[M * N];
    const slow_step fp8 = {13, 14, 1, -133, 1}, bf16 = {25, 24, 1, -133, 1};
    int ik = mxfa_instr_k(instr), is_bf16 = instr == MXFA_INSTR_SM90_WGMMA_BF16;
    int64_t want = cases_wanted(), done = 0, bad = 0, shown = 0;
    while (done < want) {
        int K = ik * (1 + (int)rng_below(KMAX / ik));
        int e4a = (int)rng_below(4) != 0, e4b = (int)rng_below(4) != 0;
        for (int i = 0; i < M; i++) {
            unsigned kind = rng_below(4);
            for (int k = 0; k < K; k++)
                ah[i * K + k] = gen_bf16(kind);
            gen_fp8_row(a8 + i * K, K, e4a, NULL);
        }
        for (int j = 0; j < N; j++) {
            unsigned kind = rng_below(4);
            for (int k = 0; k < K; k++)
                bh[j * K + k] = (j > 0 && rng_below(4) == 0) ? ah[(j % M) * K + k] ^ 0x8000 : gen_bf16(kind);
            gen_fp8_row(b8 + j * K, K, e4b, (j > 0 && e4b == e4a) ? a8 + (j % M) * K : NULL);
        }
        for (int i = 0; i < M * N; i++)
            c[i] = gen_acc();
        mxfa_tensor at = is_bf16 ? mxfa_tensor_2d(ah, MXFA_BF16, M, K) : mxfa_tensor_2d(a8, e4a ? MXFA_E4M3 : MXFA_E5M2, M, K);
        mxfa_tensor bt = is_bf16 ? mxfa_tensor_2d(bh, MXFA_BF16, N, K) : mxfa_tensor_2d(b8, e4b ? MXFA_E4M3 : MXFA_E5M2, N, K);
        mxfa_tensor ct = mxfa_tensor_2d(c, MXFA_F32, M, N), dt = mxfa_tensor_2d(d, MXFA_F32, M, N);
        if (mxfa_mma_chain(ctx, instr, &at, &bt, &ct, &dt) != MXFA_OK) {
            diag("mma_chain failed: %s", mxfa_last_error(ctx));
            bad++;
            break;
        }
#pragma omp parallel for schedule(dynamic) reduction(+ : bad)
        for (int ij = 0; ij < M * N; ij++) {
            int i = ij / N, j = ij % N;
            {
                uint32_t acc = c[i * N + j];
                sval t[33];
                for (int k0 = 0; k0 < K; k0 += ik) {
                    int n = 0;
                    for (int k = k0; k < k0 + ik; k++) {
                        sval x = is_bf16 ? slow_bf16(ah[i * K + k]) : decode_fp8(e4a, a8[i * K + k]);
                        sval y = is_bf16 ? slow_bf16(bh[j * K + k]) : decode_fp8(e4b, b8[j * K + k]);
                        t[n++] = slow_mul(&x, &y, 0);
                    }
                    t[n++] = slow_f32(acc);
                    acc = slow_fused(is_bf16 ? &bf16 : &fp8, t, n, NULL);
                }
                if (d[i * N + j] != acc) {
#pragma omp critical
                    if (shown++ < 6)
                        diag("instr %s K=%d row %d col %d: got 0x%08X want 0x%08X", is_bf16 ? "bf16" : "fp8", K, i, j,
                             d[i * N + j], acc);
                    bad++;
                }
            }
        }
        done += M * N;
    }
    ok(bad == 0, "wgmma %s chains: %lld random cases match the slow exact reference", is_bf16 ? "bf16 k16" : "fp8 k32",
       (long long)done);
}

int main(void)
{
    rng_seed_from_env(20261129);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    for (int m = 0; m < 4; m++)
        check_model((mxfa_model)m);
    check_instr(MXFA_INSTR_SM90_WGMMA_FP8);
    check_instr(MXFA_INSTR_SM90_WGMMA_BF16);
    mxfa_close(ctx);
    return done_testing();
}
