/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MXFP8 attention forward: the float64 truth against a naive softmax in the
 * test; each model's error against the truth inside the bands of
 * docs/NUMERICS.md on normal and heavy-tailed data over several seeds;
 * bit-for-bit invariants (jagged equals one by one, GQA equals repeated
 * heads, determinism); causal correctness by perturbation, and the measured
 * leak of the plain causal variant; edge cases (empty and one-token
 * sequences, ragged lengths, fully masked rows, NaN and Inf inputs, bad
 * shapes); and one tile's O and LSE rebuilt from public primitives in the
 * contract's order, bit for bit.
 */
#include <math.h>

#include "attn_util.h"
#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ctx;

/* fill [tokens, heads, d] with N(0, 1), channel `outlier` of every head
 * multiplied by `mult` (heavy-tailed keys) */
static float *randn(int64_t tokens, int64_t heads, int64_t d, int outlier, float mult)
{
    float *x = malloc((size_t)(tokens * heads * d) * sizeof *x);
    for (int64_t i = 0; i < tokens * heads * d; i++)
        x[i] = (float)gauss() * ((outlier >= 0 && i % d == outlier) ? mult : 1.0f);
    return x;
}

static mxfa_status attn(const mxfa_attn_params *p, float *q, float *k, float *v, int64_t tq, int64_t tk, int64_t hq,
                        int64_t hkv, int64_t d, const int32_t *cq, const int32_t *ck, int batch, float *o, float *lse)
{
    mxfa_tensor Q = t3(q, MXFA_F32, tq, hq, d), K = t3(k, MXFA_F32, tk, hkv, d), V = t3(v, MXFA_F32, tk, hkv, d);
    mxfa_tensor O = t3(o, MXFA_F32, tq, hq, d), L = t2(lse, MXFA_F32, tq, hq);
    return mxfa_attn_fwd(ctx, p, &Q, &K, &V, cq, ck, batch, &O, lse ? &L : NULL);
}

/* ---- 1. the float64 truth against a naive softmax(Q K^T) V ---- */
static void check_truth(void)
{
    const int64_t S = 70, H = 2, D = 64;
    float *q = randn(S, H, D, -1, 1), *k = randn(S, H, D, -1, 1), *v = randn(S, H, D, -1, 1);
    double *o = malloc((size_t)(S * H * D) * sizeof *o), *l = malloc((size_t)(S * H) * sizeof *l);
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    int good = 1;
    for (int causal = 0; causal < 2; causal++) {
        p.causal = causal ? MXFA_CAUSAL : MXFA_CAUSAL_NONE;
        mxfa_tensor Q = t3(q, MXFA_F32, S, H, D), K = t3(k, MXFA_F32, S, H, D), V = t3(v, MXFA_F32, S, H, D);
        mxfa_tensor O = t3(o, MXFA_F64, S, H, D), L = t2(l, MXFA_F64, S, H);
        good &= mxfa_attn_fwd_f64(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O, &L) == MXFA_OK;
        double worst = 0;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                /* naive: no max subtraction, plain exp, sums in index order */
                double w[70], den = 0;
                for (int64_t j = 0; j < S; j++) {
                    double dot = 0;
                    for (int64_t e = 0; e < D; e++)
                        dot += (double)q[(i * H + h) * D + e] * k[(j * H + h) * D + e];
                    w[j] = (causal && j > i) ? 0 : exp(dot / 8.0);
                    den += w[j];
                }
                for (int64_t e = 0; e < D; e++) {
                    double num = 0;
                    for (int64_t j = 0; j < S; j++)
                        num += w[j] * v[(j * H + h) * D + e];
                    double ref = num / den, got = o[(i * H + h) * D + e];
                    worst = fmax(worst, fabs(got - ref) / fmax(fabs(ref), 1e-3));
                }
                worst = fmax(worst, fabs(l[i * H + h] - log(den)) / fabs(log(den)));
            }
        ok(good && worst < 1e-12, "%s: the float64 path agrees with a naive softmax(QK^T)V to %.2g (< 1e-12)",
           causal ? "causal" : "non-causal", worst);
    }
    free(q), free(k), free(v), free(o), free(l);
}

/* ---- 2. error bands against the truth ---- */
typedef struct band {
    double o_lo, o_hi, lse_hi;
} band;

static void check_bands(void)
{
    /* docs/NUMERICS.md section 6 justifies these bands */
    static const band normal = {0.03, 0.08, 5e-3}, outlier = {0.06, 0.20, 5e-2};
    const int64_t S = 192, H = 2;
    static const int64_t dims[3] = {64, 128, 256};
    for (int di = 0; di < 3; di++) {
        int64_t D = dims[di], s = di == 0 ? S : 130;
        for (int data = 0; data < 2; data++)
            for (int seed = 0; seed < (di == 0 ? 3 : 1); seed++) {
                rng_state = 1000 + 17 * seed + 100 * di;
                float *q = randn(s, H, D, -1, 1), *k = randn(s, H, D, data ? 5 : -1, 20), *v = randn(s, H, D, -1, 1);
                float *o = malloc((size_t)(s * H * D) * sizeof *o), *l = malloc((size_t)(s * H) * sizeof *l);
                double *o64 = malloc((size_t)(s * H * D) * sizeof *o64), *l64 = malloc((size_t)(s * H) * sizeof *l64);
                mxfa_attn_params p;
                mxfa_attn_params_default(&p);
                mxfa_tensor Q = t3(q, MXFA_F32, s, H, D), K = t3(k, MXFA_F32, s, H, D), V = t3(v, MXFA_F32, s, H, D);
                mxfa_tensor O = t3(o, MXFA_F32, s, H, D), L = t2(l, MXFA_F32, s, H);
                mxfa_tensor O64 = t3(o64, MXFA_F64, s, H, D), L64 = t2(l64, MXFA_F64, s, H);
                mxfa_attn_fwd_f64(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O64, &L64);
                const band *b = data ? &outlier : &normal;
                for (int m = 0; m < 4; m++) {
                    p.model = (mxfa_model)m;
                    p.p_scale = (seed & 1) ? MXFA_P_DYNAMIC : MXFA_P_CONST;
                    mxfa_metrics mo, ml;
                    int good = mxfa_attn_fwd(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O, &L) == MXFA_OK &&
                               mxfa_compare(&O, &O64, &mo) == MXFA_OK && mxfa_compare(&L, &L64, &ml) == MXFA_OK;
                    ok(good && mo.rel_l2 >= b->o_lo && mo.rel_l2 <= b->o_hi && ml.rel_l2 <= b->lse_hi,
                       "D=%lld %s seed %d %s P %s: rel L2 of O %.4f in [%.2f, %.2f], of LSE %.2e <= %.0e",
                       (long long)D, data ? "outlier K" : "normal", seed, mxfa_model_name((mxfa_model)m),
                       mxfa_p_scale_name(p.p_scale), mo.rel_l2, b->o_lo, b->o_hi, ml.rel_l2, b->lse_hi);
                }
                free(q), free(k), free(v), free(o), free(l), free(o64), free(l64);
            }
    }
}

/* ---- 3. invariants ---- */
static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static void check_invariants(void)
{
    const int64_t H = 2, D = 64;
    static const int32_t lens_q[4] = {37, 0, 130, 1}, lens_k[4] = {50, 3, 130, 0};
    int32_t cq[5] = {0}, ck[5] = {0};
    for (int i = 0; i < 4; i++) {
        cq[i + 1] = cq[i] + lens_q[i];
        ck[i + 1] = ck[i] + lens_k[i];
    }
    float *q = randn(cq[4], H, D, -1, 1), *k = randn(ck[4], H, D, 3, 8), *v = randn(ck[4], H, D, -1, 1);
    float *o = malloc((size_t)(cq[4] * H * D) * sizeof *o), *l = malloc((size_t)(cq[4] * H) * sizeof *l);
    float *o1 = malloc((size_t)(cq[4] * H * D) * sizeof *o1), *l1 = malloc((size_t)(cq[4] * H) * sizeof *l1);
    for (int causal = 0; causal < 3; causal++)
        for (int m = 0; m < 4; m++) {
            mxfa_attn_params p;
            mxfa_attn_params_default(&p);
            p.model = (mxfa_model)m;
            p.causal = (mxfa_causal)causal;
            p.p_scale = m & 1 ? MXFA_P_DYNAMIC : MXFA_P_CONST;
            int good = attn(&p, q, k, v, cq[4], ck[4], H, H, D, cq, ck, 4, o, l) == MXFA_OK;
            for (int b = 0; b < 4 && good; b++) {
                if (lens_q[b] == 0)
                    continue;
                mxfa_status st;
                if (lens_k[b] == 0) { /* a dense call needs tokens: an empty key set means O = 0, LSE = -Inf */
                    for (int64_t i = 0; i < (int64_t)lens_q[b] * H * D; i++)
                        good &= o[(int64_t)cq[b] * H * D + i] == 0.0f;
                    for (int64_t i = 0; i < (int64_t)lens_q[b] * H; i++)
                        good &= l[(int64_t)cq[b] * H + i] == -INFINITY;
                    continue;
                }
                st = attn(&p, q + (int64_t)cq[b] * H * D, k + (int64_t)ck[b] * H * D, v + (int64_t)ck[b] * H * D,
                          lens_q[b], lens_k[b], H, H, D, NULL, NULL, 1, o1, l1);
                good &= st == MXFA_OK && same_bits(o + (int64_t)cq[b] * H * D, o1, (int64_t)lens_q[b] * H * D) &&
                        same_bits(l + (int64_t)cq[b] * H, l1, (int64_t)lens_q[b] * H);
            }
            ok(good, "%s, %s: a jagged batch (lengths 37/50, 0/3, 130/130, 1/0) equals its sequences one by one",
               mxfa_model_name((mxfa_model)m), causal == 0 ? "non-causal" : causal == 1 ? "causal" : "plain causal");
        }
    /* GQA: 4 query heads on 2 key/value heads equals K and V with each head repeated */
    {
        const int64_t S = 90, HQ = 4, HKV = 2;
        float *q4 = randn(S, HQ, D, -1, 1), *k2 = randn(S, HKV, D, -1, 1), *v2 = randn(S, HKV, D, -1, 1);
        float *k4 = malloc((size_t)(S * HQ * D) * sizeof *k4), *v4 = malloc((size_t)(S * HQ * D) * sizeof *v4);
        for (int64_t t = 0; t < S; t++)
            for (int64_t h = 0; h < HQ; h++)
                for (int64_t e = 0; e < D; e++) {
                    k4[(t * HQ + h) * D + e] = k2[(t * HKV + h / 2) * D + e];
                    v4[(t * HQ + h) * D + e] = v2[(t * HKV + h / 2) * D + e];
                }
        float *oa = malloc((size_t)(S * HQ * D) * sizeof *oa), *ob = malloc((size_t)(S * HQ * D) * sizeof *ob);
        float *la = malloc((size_t)(S * HQ) * sizeof *la), *lb = malloc((size_t)(S * HQ) * sizeof *lb);
        mxfa_attn_params p;
        mxfa_attn_params_default(&p);
        p.causal = MXFA_CAUSAL;
        int good = attn(&p, q4, k2, v2, S, S, HQ, HKV, D, NULL, NULL, 1, oa, la) == MXFA_OK &&
                   attn(&p, q4, k4, v4, S, S, HQ, HQ, D, NULL, NULL, 1, ob, lb) == MXFA_OK &&
                   same_bits(oa, ob, S * HQ * D) && same_bits(la, lb, S * HQ);
        ok(good, "GQA (4 query heads on 2) equals the same K and V heads repeated, bit for bit");
        /* the same bits on every run */
        good = attn(&p, q4, k2, v2, S, S, HQ, HKV, D, NULL, NULL, 1, ob, lb) == MXFA_OK && same_bits(oa, ob, S * HQ * D) &&
               same_bits(la, lb, S * HQ);
        ok(good, "a second run gives the same bits");
        free(q4), free(k2), free(v2), free(k4), free(v4), free(oa), free(ob), free(la), free(lb);
    }
    free(q), free(k), free(v), free(o), free(l), free(o1), free(l1);
}

/* ---- 4. causal: no future leakage, and the leak of the plain variant ---- */
static void check_causal(void)
{
    const int64_t S = 200, H = 1, D = 64;
    float *q = randn(S, H, D, -1, 1), *k = randn(S, H, D, -1, 1), *v = randn(S, H, D, -1, 1);
    float *k2 = malloc((size_t)(S * D) * sizeof *k2), *v2 = malloc((size_t)(S * D) * sizeof *v2);
    float *oa = malloc((size_t)(S * D) * sizeof *oa), *ob = malloc((size_t)(S * D) * sizeof *ob);
    float *la = malloc((size_t)S * sizeof *la), *lb = malloc((size_t)S * sizeof *lb);
    static const int64_t cut[] = {5, 31, 32, 63, 100, 128};
    double leak = 0;
    for (int plain = 0; plain < 2; plain++)
        for (int m = 0; m < (plain ? 1 : 4); m++)
            for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
                int64_t i = cut[c];
                mxfa_attn_params p;
                mxfa_attn_params_default(&p);
                p.model = (mxfa_model)m;
                p.causal = plain ? MXFA_CAUSAL_PLAIN : MXFA_CAUSAL;
                p.p_scale = c & 1 ? MXFA_P_DYNAMIC : MXFA_P_CONST;
                memcpy(k2, k, (size_t)(S * D) * sizeof *k2);
                memcpy(v2, v, (size_t)(S * D) * sizeof *v2);
                for (int64_t j = (i + 1) * D; j < S * D; j++) { /* the future, made much larger */
                    k2[j] = (float)gauss() * 4;
                    v2[j] = (float)gauss() * 50;
                }
                int good = attn(&p, q, k, v, S, S, H, H, D, NULL, NULL, 1, oa, la) == MXFA_OK &&
                           attn(&p, q, k2, v2, S, S, H, H, D, NULL, NULL, 1, ob, lb) == MXFA_OK;
                int same = good && same_bits(oa, ob, (i + 1) * D) && same_bits(la, lb, i + 1);
                if (plain) {
                    for (int64_t e = 0; e < (i + 1) * D; e++)
                        leak = fmax(leak, fabs((double)oa[e] - ob[e]));
                } else {
                    ok(same, "%s, leak-free causal: changing K and V after key %lld leaves O and LSE of queries "
                             "0..%lld bit-identical",
                       mxfa_model_name((mxfa_model)m), (long long)i, (long long)i);
                }
            }
    /* the plain variant leaks through V's block scales: measured, not zero */
    ok(leak > 0, "plain causal: future keys change earlier outputs through V's block scales (max |dO| %.3g)", leak);
    free(q), free(k), free(v), free(k2), free(v2), free(oa), free(ob), free(la), free(lb);
}

/* ---- 5. edge cases ---- */
static void check_edges(void)
{
    const int64_t H = 2, D = 128;
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    /* more queries than keys, causal bottom-right: the first 40 queries see nothing */
    {
        const int64_t SQ = 100, SK = 60;
        float *q = randn(SQ, H, D, -1, 1), *k = randn(SK, H, D, -1, 1), *v = randn(SK, H, D, -1, 1);
        float *o = malloc((size_t)(SQ * H * D) * sizeof *o), *l = malloc((size_t)(SQ * H) * sizeof *l);
        p.causal = MXFA_CAUSAL;
        int good = attn(&p, q, k, v, SQ, SK, H, H, D, NULL, NULL, 1, o, l) == MXFA_OK;
        int masked_ok = 1, rest_ok = 1;
        for (int64_t i = 0; i < SQ; i++)
            for (int64_t h = 0; h < H; h++) {
                float lv = l[i * H + h];
                for (int64_t e = 0; e < D; e++) {
                    float ov = o[(i * H + h) * D + e];
                    if (i < SQ - SK)
                        masked_ok &= ov == 0.0f;
                    else
                        rest_ok &= isfinite(ov);
                }
                if (i < SQ - SK)
                    masked_ok &= lv == -INFINITY;
                else
                    rest_ok &= isfinite(lv);
            }
        ok(good && masked_ok && rest_ok, "fully masked rows give O = 0 and LSE = -Inf, the others are finite");
        /* NaN and Inf inputs: rows that touch them go NaN, nothing crashes, other heads stay finite */
        q[5 * H * D + 3] = NAN;      /* query 5, head 0 */
        k[50 * H * D + H * D - 1] = INFINITY; /* key 50, head 1 */
        p.causal = MXFA_CAUSAL_NONE;
        good = attn(&p, q, k, v, SQ, SK, H, H, D, NULL, NULL, 1, o, l) == MXFA_OK;
        ok(good && isnan(o[(5 * H + 0) * D]) && isnan(l[5 * H]) && isfinite(o[(6 * H + 0) * D]) &&
               isfinite(l[6 * H]),
           "a NaN in Q makes that query's O and LSE NaN; the next query is finite");
        int head1_nan = 0;
        for (int64_t i = 0; i < SQ; i++)
            head1_nan += isnan(o[(i * H + 1) * D]);
        ok(good && head1_nan > 0 && isfinite(o[(6 * H + 0) * D]),
           "an Inf in K propagates as NaN to the queries of its head (%d of %lld), never crashes", head1_nan,
           (long long)SQ);
        /* Inf - Inf in x - m makes the processor's own NaN (0xFFC00000 on
         * x86); what the call returns is the canonical one */
        int64_t nans = 0, odd = 0;
        for (int64_t i = 0; i < SQ * H * (D + 1); i++) {
            const float x = i < SQ * H * D ? o[i] : l[i - SQ * H * D];
            uint32_t u;
            memcpy(&u, &x, 4);
            nans += isnan(x);
            odd += isnan(x) && u != 0x7FFFFFFFu;
        }
        ok(good && nans > 0 && odd == 0, "every NaN in O and LSE is 0x7FFFFFFF (%lld NaNs, %lld others)",
           (long long)nans, (long long)odd);
        free(q), free(k), free(v), free(o), free(l);
    }
    /* one token each, and bf16 output */
    {
        float *q = randn(1, 1, 64, -1, 1), *k = randn(1, 1, 64, -1, 1), *v = randn(1, 1, 64, -1, 1), o[64], l;
        p.causal = MXFA_CAUSAL;
        int good = attn(&p, q, k, v, 1, 1, 1, 1, 64, NULL, NULL, 1, o, &l) == MXFA_OK;
        /* one key: softmax weight 1, O = V dequantized through P = 1 */
        double maxrel = 0;
        for (int e = 0; e < 64; e++)
            maxrel = fmax(maxrel, fabs(o[e] - v[e]) / fmax(fabs(v[e]), 1e-2));
        ok(good && maxrel < 0.07 && fabs(l - (double)o[0] * 0) >= 0, "a single query and key: O is V to E4M3 precision (%.3f)",
           maxrel);
        uint16_t ob[64];
        mxfa_tensor Q = t3(q, MXFA_F32, 1, 1, 64), K = t3(k, MXFA_F32, 1, 1, 64), V = t3(v, MXFA_F32, 1, 1, 64);
        mxfa_tensor O = t3(ob, MXFA_BF16, 1, 1, 64);
        good = mxfa_attn_fwd(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O, NULL) == MXFA_OK;
        int same = 1;
        for (int e = 0; e < 64; e++)
            same &= ob[e] == mxfa_f32_to_bf16(o[e]);
        ok(good && same, "bf16 output is the fp32 output rounded to nearest even");
        free(q), free(k), free(v);
    }
    /* bad arguments: a clear error, outputs untouched */
    {
        float q[4 * 3 * 64], k[4 * 2 * 64], v[4 * 2 * 64], o[4 * 3 * 64], l[12];
        memset(q, 0, sizeof q), memset(k, 0, sizeof k), memset(v, 0, sizeof v);
        memset(o, 0x5A, sizeof o);
        mxfa_tensor Q = t3(q, MXFA_F32, 4, 3, 64), K = t3(k, MXFA_F32, 4, 2, 64), V = t3(v, MXFA_F32, 4, 2, 64);
        mxfa_tensor O = t3(o, MXFA_F32, 4, 3, 64), L = t2(l, MXFA_F32, 4, 3);
        ok(mxfa_attn_fwd(ctx, NULL, &Q, &K, &V, NULL, NULL, 1, &O, &L) == MXFA_ERR_SHAPE,
           "3 query heads on 2 key heads: %s", mxfa_last_error(ctx));
        mxfa_tensor Q2 = t3(q, MXFA_F32, 4, 2, 96), K2 = t3(k, MXFA_F32, 4, 2, 96), V2 = t3(v, MXFA_F32, 4, 2, 96);
        mxfa_tensor O2 = t3(o, MXFA_F32, 4, 2, 96);
        ok(mxfa_attn_fwd(ctx, NULL, &Q2, &K2, &V2, NULL, NULL, 1, &O2, NULL) == MXFA_ERR_UNSUPPORTED,
           "D = 96: %s", mxfa_last_error(ctx));
        mxfa_tensor Q3 = t3(q, MXFA_F32, 4, 2, 64), V3 = t3(v, MXFA_F32, 3, 2, 64), O3 = t3(o, MXFA_F32, 4, 2, 64);
        ok(mxfa_attn_fwd(ctx, NULL, &Q3, &K, &V3, NULL, NULL, 1, &O3, NULL) == MXFA_ERR_SHAPE,
           "V with fewer tokens than K: %s", mxfa_last_error(ctx));
        int32_t cq[3] = {0, 2, 3}, ck[3] = {0, 2, 4};
        ok(mxfa_attn_fwd(ctx, NULL, &Q3, &K, &V, cq, ck, 2, &O3, NULL) == MXFA_ERR_SHAPE,
           "cu_seqlens_q not ending at the token count: %s", mxfa_last_error(ctx));
        int32_t cd[3] = {0, 3, 2};
        ok(mxfa_attn_fwd(ctx, NULL, &Q3, &K, &V, cd, ck, 2, &O3, NULL) == MXFA_ERR_INVALID,
           "decreasing cu_seqlens: %s", mxfa_last_error(ctx));
        ok(mxfa_attn_fwd(ctx, NULL, &Q3, &K, &V, cq, NULL, 2, &O3, NULL) == MXFA_ERR_NULL,
           "only one of the cu_seqlens: %s", mxfa_last_error(ctx));
        mxfa_tensor Oq = t3(q, MXFA_F32, 4, 2, 64);
        ok(mxfa_attn_fwd(ctx, NULL, &Q3, &K, &V, NULL, NULL, 1, &Oq, NULL) == MXFA_ERR_ALIAS, "O over Q: %s",
           mxfa_last_error(ctx));
        mxfa_attn_params bad;
        mxfa_attn_params_default(&bad);
        bad.block_n = 48;
        ok(mxfa_attn_fwd(ctx, &bad, &Q3, &K, &V, NULL, NULL, 1, &O3, NULL) == MXFA_ERR_INVALID, "a 48-key tile: %s",
           mxfa_last_error(ctx));
        int untouched = 1;
        for (size_t i = 0; i < sizeof o / 4; i++)
            untouched &= bits_of(o[i]) == 0x5A5A5A5A;
        ok(untouched, "refused calls leave O untouched");
    }
}

/* ---- 6. the forward rebuilt from public primitives ---- */

/* x as an MXFP8 matrix [rows, cols] in `block` blocks, rceil; the codes and
 * scales in one allocation, returned */
static uint8_t *quant(const float *x, int64_t rows, int64_t cols, mxfa_block block, mxfa_mx *out)
{
    const int64_t sr = block == MXFA_BLOCK_COL ? rows / 32 : rows, sc = block == MXFA_BLOCK_COL ? cols : cols / 32;
    uint8_t *mem = malloc((size_t)(rows * cols + sr * sc));
    mxfa_tensor xt = mxfa_tensor_2d((void *)x, MXFA_F32, rows, cols);
    *out = (mxfa_mx){mxfa_tensor_2d(mem, MXFA_E4M3, rows, cols), mxfa_tensor_2d(mem + rows * cols, MXFA_E8M0, sr, sc),
                     block, MXFA_LAYOUT_COMPACT};
    if (mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, out) != MXFA_OK)
        diag("quantize: %s", mxfa_last_error(ctx));
    return mem;
}

/* One query tile against one key tile (S = 128, D = 64), no mask, sm100,
 * const P: O and LSE of one head rebuilt from mxfa_quantize,
 * mxfa_transpose, mxfa_gemm, mxfa_f32_to_f16, mxfa_exp2_f16 and mxfa_log2
 * in the order of docs/NUMERICS.md section 6, against mxfa_attn_fwd bit for
 * bit. */
/* a + b rounded to f16, through the library's conversions (a and b f16
 * values: their fp32 sum, rounded once more, is the exact sum rounded once) */
static float f16_sum(float a, float b)
{
    return mxfa_f16_to_f32(mxfa_f32_to_f16(a + b));
}

static void check_rebuild(void)
{
    enum { S = 128, D = 64 };
    float *q = randn(S, 1, D, -1, 1.0f), *k = randn(S, 1, D, 5, 8.0f), *v = randn(S, 1, D, -1, 1.0f);
    float *o = malloc(S * D * sizeof *o), *lse = malloc(S * sizeof *lse);
    mxfa_attn_params ap;
    mxfa_attn_params_default(&ap); /* sm100, rceil, const P, no mask, 128 x 128 tiles */
    int good = attn(&ap, q, k, v, S, S, 1, 1, D, NULL, NULL, 1, o, lse) == MXFA_OK;
    /* Q and K in row blocks along D, V in blocks along the keys, as V^T in
     * row blocks: the B operand of O = P V */
    mxfa_mx qm, km, vm, vt;
    uint8_t *mq = quant(q, S, D, MXFA_BLOCK_ROW, &qm), *mk = quant(k, S, D, MXFA_BLOCK_ROW, &km);
    uint8_t *mv = quant(v, S, D, MXFA_BLOCK_COL, &vm), *mvt = malloc(S * D + D * (S / 32));
    vt = (mxfa_mx){mxfa_tensor_2d(mvt, MXFA_E4M3, D, S), mxfa_tensor_2d(mvt + S * D, MXFA_E8M0, D, S / 32),
                   MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
    good &= mxfa_transpose(ctx, &vm, &vt) == MXFA_OK;
    float *sc = malloc(S * S * sizeof *sc), *ov = malloc(S * D * sizeof *ov);
    mxfa_tensor st = mxfa_tensor_2d(sc, MXFA_F32, S, S), ot = mxfa_tensor_2d(ov, MXFA_F32, S, D);
    good &= mxfa_gemm(ctx, &qm, &km, NULL, MXFA_MODEL_SM100, &st) == MXFA_OK; /* S = Q K^T from +0 */
    /* P and its row sum, a row at a time: P = 256 E(RN_f16(min(fma(S, c, b),
     * 0))), b = 2^-11 - m; partial k takes, block of 32 keys by block, the f16
     * sum (P0 + P1) + (P2 + P3) of the block's keys k, k + 8, k + 16, k + 24 */
    const float c = mxfa_attn_softmax_scale(&ap, D) * f32_of(0x3FB8AA3Bu); /* fl(scale fl(log2 e)) */
    uint8_t *pd = malloc(S * S), *ps = malloc(S * (S / 32));
    memset(ps, 0x77, S * (S / 32)); /* const P: the scale 2^-8 */
    float m[S], l[S];
    for (int i = 0; i < S; i++) {
        m[i] = -INFINITY;
        for (int j = 0; j < S; j++)
            m[i] = fmaxf(m[i], sc[i * S + j] * c);
        const float b = 0x1p-11f - m[i];
        float part[8] = {0}, pr[S];
        for (int j = 0; j < S; j++) {
            float w = fmaf(sc[i * S + j], c, b);
            pr[j] = 256.0f * mxfa_f16_to_f32(mxfa_exp2_f16(mxfa_f32_to_f16(w > 0.0f ? 0.0f : w)));
            pd[i * S + j] = mxfa_f32_to_e4m3(pr[j], MXFA_SATFINITE);
        }
        for (int b0 = 0; b0 < S; b0 += 32)
            for (int k = 0; k < 8; k++) {
                const float *x = &pr[b0 + k];
                part[k] += f16_sum(f16_sum(x[0], x[8]), f16_sum(x[16], x[24]));
            }
        l[i] = (((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]))) * 0x1p-8f;
    }
    mxfa_mx pm = {mxfa_tensor_2d(pd, MXFA_E4M3, S, S), mxfa_tensor_2d(ps, MXFA_E8M0, S, S / 32), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    good &= mxfa_gemm(ctx, &pm, &vt, NULL, MXFA_MODEL_SM100, &ot) == MXFA_OK; /* O = P V from +0 */
    int match = good;
    for (int i = 0; i < S && match; i++) {
        match = bits_of((m[i] + mxfa_log2(l[i])) * f32_of(0x3F317218u)) == bits_of(lse[i]); /* fl(ln 2) */
        for (int e = 0; e < D && match; e++)
            match = bits_of(ov[i * D + e] / l[i]) == bits_of(o[i * D + e]);
    }
    ok(match, "O and LSE rebuilt from public primitives (the f16 exponential, the eight partial sums of f16 block sums, const P, "
              "the products under sm100) equal mxfa_attn_fwd bit for bit");
    free(q), free(k), free(v), free(o), free(lse), free(mq), free(mk), free(mv), free(mvt), free(sc), free(ov);
    free(pd), free(ps);
}

int main(void)
{
    rng_seed_from_env(20261129);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    check_truth();
    check_bands();
    check_invariants();
    check_causal();
    check_edges();
    check_rebuild();
    mxfa_close(ctx);
    return done_testing();
}
