/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MXFP8 attention backward: the float64 gradients against central finite
 * differences of the float64 forward pass; each model's error against them
 * inside the bands of docs/NUMERICS.md; bit-for-bit invariants (jagged one
 * by one, GQA equals repeated heads summed in head order, determinism);
 * causal leak-freedom by perturbation and the plain variant's leak; the
 * square-block reuse, shown by rebuilding dQ, dK and dV bit for bit from
 * public primitives with dS^T taken as mxfa_transpose of dS's payload; edge
 * cases.
 */
#include <math.h>

#include "attn_util.h"
#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ctx;

/* N(0,1) values rounded to multiples of 2^-10 (so that +-2^-12 is exact);
 * channel `outlier` of each head times `mult` */
static float *randn(int64_t tokens, int64_t heads, int64_t d, int outlier, float mult)
{
    float *x = malloc((size_t)(tokens * heads * d) * sizeof *x);
    for (int64_t i = 0; i < tokens * heads * d; i++)
        x[i] = (float)(nearbyint(gauss() * 1024) / 1024) * ((outlier >= 0 && i % d == outlier) ? mult : 1.0f);
    return x;
}

typedef struct prob {
    int64_t tq, tk, hq, hkv, d;
    float *q, *k, *v, *dout, *o, *lse, *dq, *dk, *dv;
} prob;

static prob make(int64_t tq, int64_t tk, int64_t hq, int64_t hkv, int64_t d, int outlier)
{
    prob p = {tq, tk, hq, hkv, d, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    p.q = randn(tq, hq, d, -1, 1);
    p.k = randn(tk, hkv, d, outlier, 20);
    p.v = randn(tk, hkv, d, -1, 1);
    p.dout = randn(tq, hq, d, -1, 1);
    p.o = malloc((size_t)(tq * hq * d) * sizeof(float));
    p.lse = malloc((size_t)(tq * hq) * sizeof(float));
    p.dq = malloc((size_t)(tq * hq * d) * sizeof(float));
    p.dk = malloc((size_t)(tk * hkv * d) * sizeof(float));
    p.dv = malloc((size_t)(tk * hkv * d) * sizeof(float));
    return p;
}

static void unmake(prob *p)
{
    free(p->q), free(p->k), free(p->v), free(p->dout), free(p->o), free(p->lse), free(p->dq), free(p->dk), free(p->dv);
}

/* forward then backward; returns the status of the first failure */
static mxfa_status run(const mxfa_attn_params *ap, prob *p, const int32_t *cq, const int32_t *ck, int batch)
{
    mxfa_tensor Q = t3(p->q, MXFA_F32, p->tq, p->hq, p->d), K = t3(p->k, MXFA_F32, p->tk, p->hkv, p->d);
    mxfa_tensor V = t3(p->v, MXFA_F32, p->tk, p->hkv, p->d), O = t3(p->o, MXFA_F32, p->tq, p->hq, p->d);
    mxfa_tensor DO = t3(p->dout, MXFA_F32, p->tq, p->hq, p->d), L = t2(p->lse, MXFA_F32, p->tq, p->hq);
    mxfa_tensor DQ = t3(p->dq, MXFA_F32, p->tq, p->hq, p->d), DK = t3(p->dk, MXFA_F32, p->tk, p->hkv, p->d);
    mxfa_tensor DV = t3(p->dv, MXFA_F32, p->tk, p->hkv, p->d);
    mxfa_status st = mxfa_attn_fwd(ctx, ap, &Q, &K, &V, cq, ck, batch, &O, &L);
    if (st == MXFA_OK)
        st = mxfa_attn_bwd(ctx, ap, &Q, &K, &V, &O, &DO, &L, cq, ck, batch, &DQ, &DK, &DV);
    if (st != MXFA_OK)
        diag("attention: %s", mxfa_last_error(ctx));
    return st;
}

/* ---- 1. float64 gradients against finite differences ---- */
static double loss_f64(const mxfa_attn_params *ap, prob *p)
{
    double *o = malloc((size_t)(p->tq * p->hq * p->d) * sizeof *o), l = 0;
    mxfa_tensor Q = t3(p->q, MXFA_F32, p->tq, p->hq, p->d), K = t3(p->k, MXFA_F32, p->tk, p->hkv, p->d);
    mxfa_tensor V = t3(p->v, MXFA_F32, p->tk, p->hkv, p->d), O = t3(o, MXFA_F64, p->tq, p->hq, p->d);
    mxfa_attn_fwd_f64(ctx, ap, &Q, &K, &V, NULL, NULL, 1, &O, NULL);
    for (int64_t i = 0; i < p->tq * p->hq * p->d; i++)
        l += o[i] * p->dout[i];
    free(o);
    return l;
}

static void check_finite_differences(void)
{
    for (int causal = 0; causal < 2; causal++) {
        prob p = make(9, 11, 2, 1, 64, -1);
        mxfa_attn_params ap;
        mxfa_attn_params_default(&ap);
        ap.causal = causal ? MXFA_CAUSAL : MXFA_CAUSAL_NONE;
        double *gq = malloc((size_t)(p.tq * p.hq * p.d) * sizeof *gq);
        double *gk = malloc((size_t)(p.tk * p.hkv * p.d) * sizeof *gk);
        double *gv = malloc((size_t)(p.tk * p.hkv * p.d) * sizeof *gv);
        mxfa_tensor Q = t3(p.q, MXFA_F32, p.tq, p.hq, p.d), K = t3(p.k, MXFA_F32, p.tk, p.hkv, p.d);
        mxfa_tensor V = t3(p.v, MXFA_F32, p.tk, p.hkv, p.d), DO = t3(p.dout, MXFA_F32, p.tq, p.hq, p.d);
        mxfa_tensor GQ = t3(gq, MXFA_F64, p.tq, p.hq, p.d), GK = t3(gk, MXFA_F64, p.tk, p.hkv, p.d);
        mxfa_tensor GV = t3(gv, MXFA_F64, p.tk, p.hkv, p.d);
        int good = mxfa_attn_bwd_f64(ctx, &ap, &Q, &K, &V, &DO, NULL, NULL, 1, &GQ, &GK, &GV) == MXFA_OK;
        const float h = 0x1p-12f;
        double num = 0, den = 0;
        for (int which = 0; which < 3; which++) {
            float *x = which == 0 ? p.q : which == 1 ? p.k : p.v;
            double *g = which == 0 ? gq : which == 1 ? gk : gv;
            int64_t n = which == 0 ? p.tq * p.hq * p.d : p.tk * p.hkv * p.d;
            for (int s = 0; s < 40; s++) {
                int64_t i = (int64_t)rng_below((uint32_t)n);
                float x0 = x[i];
                x[i] = x0 + h;
                double lp = loss_f64(&ap, &p);
                x[i] = x0 - h;
                double lm = loss_f64(&ap, &p);
                x[i] = x0;
                double fd = (lp - lm) / (2.0 * (double)h);
                num += (fd - g[i]) * (fd - g[i]);
                den += g[i] * g[i];
            }
        }
        double rel = sqrt(num / den);
        ok(good && rel < 1e-6, "%s: float64 gradients of Q, K, V (GQA 2 on 1) match central differences: "
                               "relative error %.2g < 1e-6", causal ? "causal" : "non-causal", rel);
        free(gq), free(gk), free(gv);
        unmake(&p);
    }
}

/* ---- 2. bands ---- */
static void check_bands(void)
{
    /* docs/NUMERICS.md section 7 justifies these */
    static const double normal[2] = {0.03, 0.10}, outlier[2] = {0.08, 0.30};
    static const int64_t dims[3] = {64, 128, 256};
    for (int di = 0; di < 3; di++)
        for (int data = 0; data < 2; data++)
            for (int seed = 0; seed < (di == 0 ? 2 : 1); seed++) {
                rng_state = 500 + 13 * seed + 77 * di + 1000 * data;
                int64_t s = di == 0 ? 128 : 64, d = dims[di];
                prob p = make(s, s, 2, 2, d, data ? 5 : -1);
                double *gq = malloc((size_t)(s * 2 * d) * sizeof *gq), *gk = malloc((size_t)(s * 2 * d) * sizeof *gk);
                double *gv = malloc((size_t)(s * 2 * d) * sizeof *gv);
                mxfa_attn_params ap;
                mxfa_attn_params_default(&ap);
                mxfa_tensor Q = t3(p.q, MXFA_F32, s, 2, d), K = t3(p.k, MXFA_F32, s, 2, d), V = t3(p.v, MXFA_F32, s, 2, d);
                mxfa_tensor DO = t3(p.dout, MXFA_F32, s, 2, d);
                mxfa_tensor GQ = t3(gq, MXFA_F64, s, 2, d), GK = t3(gk, MXFA_F64, s, 2, d), GV = t3(gv, MXFA_F64, s, 2, d);
                mxfa_attn_bwd_f64(ctx, &ap, &Q, &K, &V, &DO, NULL, NULL, 1, &GQ, &GK, &GV);
                const double *b = data ? outlier : normal;
                for (int m = 0; m < 4; m++) {
                    ap.model = (mxfa_model)m;
                    ap.p_scale = seed ? MXFA_P_DYNAMIC : MXFA_P_CONST;
                    mxfa_tensor DQ = t3(p.dq, MXFA_F32, s, 2, d), DK = t3(p.dk, MXFA_F32, s, 2, d);
                    mxfa_tensor DV = t3(p.dv, MXFA_F32, s, 2, d);
                    mxfa_metrics mq, mk, mv;
                    int good = run(&ap, &p, NULL, NULL, 1) == MXFA_OK && mxfa_compare(&DQ, &GQ, &mq) == MXFA_OK &&
                               mxfa_compare(&DK, &GK, &mk) == MXFA_OK && mxfa_compare(&DV, &GV, &mv) == MXFA_OK;
                    double lo = b[0], hi = b[1];
                    ok(good && mq.rel_l2 >= lo && mq.rel_l2 <= hi && mk.rel_l2 >= lo && mk.rel_l2 <= hi &&
                           mv.rel_l2 >= lo * 0.6 && mv.rel_l2 <= hi,
                       "D=%lld %s seed %d %s P %s: rel L2 dQ %.4f dK %.4f dV %.4f in [%.2f, %.2f]", (long long)d,
                       data ? "outlier K" : "normal", seed, mxfa_model_name((mxfa_model)m), mxfa_p_scale_name(ap.p_scale),
                       mq.rel_l2, mk.rel_l2, mv.rel_l2, lo, hi);
                }
                free(gq), free(gk), free(gv);
                unmake(&p);
            }
}

/* ---- 3. invariants ---- */
static int same(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static void check_invariants(void)
{
    const int64_t H = 2, D = 64;
    static const int32_t lq[3] = {37, 0, 70}, lk[3] = {50, 5, 70};
    int32_t cq[4] = {0}, ck[4] = {0};
    for (int i = 0; i < 3; i++) {
        cq[i + 1] = cq[i] + lq[i];
        ck[i + 1] = ck[i] + lk[i];
    }
    for (int causal = 0; causal < 2; causal++) {
        mxfa_attn_params ap;
        mxfa_attn_params_default(&ap);
        ap.causal = causal ? MXFA_CAUSAL : MXFA_CAUSAL_NONE;
        ap.model = causal ? MXFA_MODEL_SM90_FP8 : MXFA_MODEL_SM100;
        prob all = make(cq[3], ck[3], H, H, D, -1);
        int good = run(&ap, &all, cq, ck, 3) == MXFA_OK;
        for (int b = 0; b < 3 && good; b++) {
            prob one = make(lq[b] ? lq[b] : 1, lk[b], H, H, D, -1);
            if (lq[b] == 0) { /* no queries: the keys get zero gradients */
                for (int64_t x = 0; x < (int64_t)lk[b] * H * D; x++)
                    good &= all.dk[(int64_t)ck[b] * H * D + x] == 0.0f && all.dv[(int64_t)ck[b] * H * D + x] == 0.0f;
                unmake(&one);
                continue;
            }
            memcpy(one.q, all.q + (int64_t)cq[b] * H * D, (size_t)(lq[b] * H * D) * sizeof(float));
            memcpy(one.dout, all.dout + (int64_t)cq[b] * H * D, (size_t)(lq[b] * H * D) * sizeof(float));
            memcpy(one.k, all.k + (int64_t)ck[b] * H * D, (size_t)(lk[b] * H * D) * sizeof(float));
            memcpy(one.v, all.v + (int64_t)ck[b] * H * D, (size_t)(lk[b] * H * D) * sizeof(float));
            good &= run(&ap, &one, NULL, NULL, 1) == MXFA_OK &&
                    same(one.dq, all.dq + (int64_t)cq[b] * H * D, (int64_t)lq[b] * H * D) &&
                    same(one.dk, all.dk + (int64_t)ck[b] * H * D, (int64_t)lk[b] * H * D) &&
                    same(one.dv, all.dv + (int64_t)ck[b] * H * D, (int64_t)lk[b] * H * D);
            unmake(&one);
        }
        ok(good, "%s: a jagged batch (37/50, 0/5, 70/70) gives the gradients of its sequences run one by one",
           causal ? "causal sm90-fp8" : "sm100");
        unmake(&all);
    }
    /* GQA: 4 query heads on 2 equals repeated K, V heads with the per-head dK
     * and dV summed in increasing head order (fp32) */
    {
        const int64_t S = 75, HQ = 4, HKV = 2;
        mxfa_attn_params ap;
        mxfa_attn_params_default(&ap);
        ap.causal = MXFA_CAUSAL;
        prob g = make(S, S, HQ, HKV, D, -1), r = make(S, S, HQ, HQ, D, -1);
        memcpy(r.q, g.q, (size_t)(S * HQ * D) * sizeof(float));
        memcpy(r.dout, g.dout, (size_t)(S * HQ * D) * sizeof(float));
        for (int64_t t = 0; t < S; t++)
            for (int64_t h = 0; h < HQ; h++)
                for (int64_t e = 0; e < D; e++) {
                    r.k[(t * HQ + h) * D + e] = g.k[(t * HKV + h / 2) * D + e];
                    r.v[(t * HQ + h) * D + e] = g.v[(t * HKV + h / 2) * D + e];
                }
        int good = run(&ap, &g, NULL, NULL, 1) == MXFA_OK && run(&ap, &r, NULL, NULL, 1) == MXFA_OK &&
                   same(g.dq, r.dq, S * HQ * D);
        for (int64_t t = 0; t < S && good; t++)
            for (int64_t kv = 0; kv < HKV; kv++)
                for (int64_t e = 0; e < D; e++) {
                    float sk = r.dk[(t * HQ + 2 * kv) * D + e] + r.dk[(t * HQ + 2 * kv + 1) * D + e];
                    float sv = r.dv[(t * HQ + 2 * kv) * D + e] + r.dv[(t * HQ + 2 * kv + 1) * D + e];
                    good &= bits_of(sk) == bits_of(g.dk[(t * HKV + kv) * D + e]) &&
                            bits_of(sv) == bits_of(g.dv[(t * HKV + kv) * D + e]);
                }
        ok(good, "GQA (4 on 2): dQ equals repeated heads; dK, dV equal their per-head sums in head order");
        /* the same bits twice */
        float *dq0 = malloc((size_t)(S * HQ * D) * sizeof *dq0), *dk0 = malloc((size_t)(S * HKV * D) * sizeof *dk0);
        memcpy(dq0, g.dq, (size_t)(S * HQ * D) * sizeof *dq0);
        memcpy(dk0, g.dk, (size_t)(S * HKV * D) * sizeof *dk0);
        ok(run(&ap, &g, NULL, NULL, 1) == MXFA_OK && same(dq0, g.dq, S * HQ * D) && same(dk0, g.dk, S * HKV * D),
           "a second run gives the same bits");
        free(dq0), free(dk0);
        unmake(&g), unmake(&r);
    }
}

/* ---- 4. causal ---- */
static void check_causal(void)
{
    const int64_t S = 160, D = 64;
    static const int64_t cut[] = {5, 31, 32, 100, 127};
    prob a = make(S, S, 1, 1, D, -1), b = make(S, S, 1, 1, D, -1);
    memcpy(b.q, a.q, (size_t)(S * D) * sizeof(float));
    memcpy(b.dout, a.dout, (size_t)(S * D) * sizeof(float));
    double leak = 0;
    for (int plain = 0; plain < 2; plain++)
        for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
            int64_t i = cut[c];
            mxfa_attn_params ap;
            mxfa_attn_params_default(&ap);
            ap.causal = plain ? MXFA_CAUSAL_PLAIN : MXFA_CAUSAL;
            ap.model = (mxfa_model)(c % 4);
            ap.p_scale = c & 1 ? MXFA_P_DYNAMIC : MXFA_P_CONST;
            memcpy(b.k, a.k, (size_t)(S * D) * sizeof(float));
            memcpy(b.v, a.v, (size_t)(S * D) * sizeof(float));
            for (int64_t x = (i + 1) * D; x < S * D; x++) {
                b.k[x] = (float)gauss() * 4;
                b.v[x] = (float)gauss() * 50;
            }
            int good = run(&ap, &a, NULL, NULL, 1) == MXFA_OK && run(&ap, &b, NULL, NULL, 1) == MXFA_OK;
            if (plain) {
                for (int64_t x = 0; x < (i + 1) * D; x++)
                    leak = fmax(leak, fabs((double)a.dq[x] - b.dq[x]));
            } else {
                ok(good && same(a.dq, b.dq, (i + 1) * D),
                   "%s, leak-free causal: changing K and V after key %lld leaves dQ of queries 0..%lld bit-identical",
                   mxfa_model_name(ap.model), (long long)i, (long long)i);
            }
        }
    ok(leak > 0, "plain causal: future keys change earlier queries' dQ (max |d dQ| %.3g)", leak);
    unmake(&a), unmake(&b);
}

/* ---- 5. the square-block reuse, rebuilt from public primitives ---- */
static uint8_t *quant_sq(const float *x, int64_t rows, int64_t cols, int64_t ld, mxfa_mx *out)
{
    int64_t sr = (rows + 31) / 32, sc = (cols + 31) / 32;
    uint8_t *mem = malloc((size_t)(rows * cols + sr * sc));
    mxfa_tensor xt = mxfa_tensor_2d((void *)x, MXFA_F32, rows, cols);
    xt.stride[0] = ld;
    mxfa_mx m = {mxfa_tensor_2d(mem, MXFA_E4M3, rows, cols), mxfa_tensor_2d(mem + rows * cols, MXFA_E8M0, sr, sc),
                 MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
    mxfa_quantize(ctx, &xt, MXFA_PRESET_RCEIL, &m);
    *out = m;
    return mem;
}

/* A square-quantized matrix as the row-blocked operand of a product. */
static mxfa_mx as_rows(const mxfa_mx *sq, uint8_t **scales)
{
    int64_t rows = sq->data.shape[0], cols = sq->data.shape[1], nb = (cols + 31) / 32;
    *scales = malloc((size_t)(rows * nb));
    mxfa_tensor st = mxfa_tensor_2d(*scales, MXFA_E8M0, rows, nb);
    mxfa_scales_expand_square(ctx, &sq->scales, rows, cols, MXFA_BLOCK_ROW, &st);
    mxfa_mx r = {sq->data, st, MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
    return r;
}

static uint8_t *transposed(const mxfa_mx *sq, mxfa_mx *out)
{
    int64_t rows = sq->data.shape[0], cols = sq->data.shape[1], sr = sq->scales.shape[0], sc = sq->scales.shape[1];
    uint8_t *mem = malloc((size_t)(rows * cols + sr * sc));
    mxfa_mx t = {mxfa_tensor_2d(mem, sq->data.dtype, cols, rows), mxfa_tensor_2d(mem + rows * cols, MXFA_E8M0, sc, sr),
                 MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
    if (mxfa_transpose(ctx, sq, &t) != MXFA_OK)
        diag("transpose: %s", mxfa_last_error(ctx));
    *out = t;
    return mem;
}

static void check_square_reuse(void)
{
    /* one tile (S <= 128), non-causal, sm100, const P: the backward of one
     * head rebuilt step by step from mxfa_quantize, mxfa_gemm, mxfa_exp2_f16 and
     * mxfa_transpose */
    const int64_t S = 96, D = 64;
    prob p = make(S, S, 1, 1, D, -1);
    mxfa_attn_params ap;
    mxfa_attn_params_default(&ap);
    int good = run(&ap, &p, NULL, NULL, 1) == MXFA_OK;
    const float scale = ap.softmax_scale > 0 ? ap.softmax_scale : 0.125f, log2e = f32_of(0x3FB8AA3Bu);
    mxfa_mx q, k, dout, vrow, qr, kr, dor, kt, qt, dot_;
    uint8_t *mq = quant_sq(p.q, S, D, D, &q), *mk = quant_sq(p.k, S, D, D, &k), *mo = quant_sq(p.dout, S, D, D, &dout);
    uint8_t *sq1, *sq2, *sq3;
    qr = as_rows(&q, &sq1), kr = as_rows(&k, &sq2), dor = as_rows(&dout, &sq3);
    uint8_t *mkt = transposed(&k, &kt), *mqt = transposed(&q, &qt), *mot = transposed(&dout, &dot_);
    uint8_t *skt, *sqt, *sot;
    mxfa_mx ktr = as_rows(&kt, &skt), qtr = as_rows(&qt, &sqt), dotr = as_rows(&dot_, &sot);
    /* V with row blocks along D */
    uint8_t *vd = malloc((size_t)(S * D)), *vs = malloc((size_t)(S * 2));
    {
        mxfa_tensor vt = mxfa_tensor_2d(p.v, MXFA_F32, S, D);
        vrow = (mxfa_mx){mxfa_tensor_2d(vd, MXFA_E4M3, S, D), mxfa_tensor_2d(vs, MXFA_E8M0, S, 2), MXFA_BLOCK_ROW,
                         MXFA_LAYOUT_COMPACT};
        mxfa_quantize(ctx, &vt, MXFA_PRESET_RCEIL, &vrow);
    }
    float *s = malloc((size_t)(S * S) * sizeof *s), *pf = malloc((size_t)(S * S) * sizeof *pf);
    float *dp = malloc((size_t)(S * S) * sizeof *dp), *ds = malloc((size_t)(S * S) * sizeof *ds);
    mxfa_tensor st = mxfa_tensor_2d(s, MXFA_F32, S, S), dpt = mxfa_tensor_2d(dp, MXFA_F32, S, S);
    good &= mxfa_gemm(ctx, &qr, &kr, NULL, MXFA_MODEL_SM100, &st) == MXFA_OK;         /* S = Q K^T */
    good &= mxfa_gemm(ctx, &dor, &vrow, NULL, MXFA_MODEL_SM100, &dpt) == MXFA_OK;     /* dP = dO V^T */
    /* P (fp32) and its const quantization: E4M3(P * 256) under 2^-8, square */
    uint8_t *pd = malloc((size_t)(S * S)), ps[9];
    memset(ps, 0x77, sizeof ps);
    for (int64_t i = 0; i < S; i++) {
        float delta = 0.0f, b = 0x1p-11f - p.lse[i] * log2e;
        for (int64_t e = 0; e < D; e++)
            delta += p.dout[i * D + e] * p.o[i * D + e];
        for (int64_t j = 0; j < S; j++) {
            float w = fmaf(s[i * S + j], scale * log2e, b); /* one rounding */
            pf[i * S + j] = mxfa_f16_to_f32(mxfa_exp2_f16(mxfa_f32_to_f16(w > 0.0f ? 0.0f : w)));
            pd[i * S + j] = mxfa_f32_to_e4m3(pf[i * S + j] * 256.0f, MXFA_SATFINITE);
            ds[i * S + j] = pf[i * S + j] * (dp[i * S + j] - delta);
        }
    }
    mxfa_mx pq = {mxfa_tensor_2d(pd, MXFA_E4M3, S, S), mxfa_tensor_2d(ps, MXFA_E8M0, 3, 3), MXFA_BLOCK_SQUARE,
                  MXFA_LAYOUT_COMPACT};
    mxfa_mx dsq, pqt, dsqt;
    uint8_t *mds = quant_sq(ds, S, S, S, &dsq);
    uint8_t *mpt = transposed(&pq, &pqt), *mdst = transposed(&dsq, &dsqt); /* the same payloads, transposed */
    uint8_t *s4, *s5, *s6;
    mxfa_mx dsr = as_rows(&dsq, &s4), dstr = as_rows(&dsqt, &s5), ptr = as_rows(&pqt, &s6);
    float *gq = malloc((size_t)(S * D) * sizeof *gq), *gk = malloc((size_t)(S * D) * sizeof *gk);
    float *gv = malloc((size_t)(S * D) * sizeof *gv);
    mxfa_tensor gqt = mxfa_tensor_2d(gq, MXFA_F32, S, D), gkt = mxfa_tensor_2d(gk, MXFA_F32, S, D);
    mxfa_tensor gvt = mxfa_tensor_2d(gv, MXFA_F32, S, D);
    good &= mxfa_gemm(ctx, &dsr, &ktr, NULL, MXFA_MODEL_SM100, &gqt) == MXFA_OK;  /* dQ = dS K */
    good &= mxfa_gemm(ctx, &dstr, &qtr, NULL, MXFA_MODEL_SM100, &gkt) == MXFA_OK; /* dK = dS^T Q */
    good &= mxfa_gemm(ctx, &ptr, &dotr, NULL, MXFA_MODEL_SM100, &gvt) == MXFA_OK; /* dV = P^T dO */
    int match = good;
    for (int64_t x = 0; x < S * D && match; x++)
        match = bits_of(gq[x] * scale) == bits_of(p.dq[x]) && bits_of(gk[x] * scale) == bits_of(p.dk[x]) &&
                bits_of(gv[x]) == bits_of(p.dv[x]);
    ok(match, "dQ, dK and dV rebuilt from public primitives with dS^T and P^T as mxfa_transpose of the dS and P "
              "payloads equal mxfa_attn_bwd bit for bit: one square payload serves both products");
    free(mq), free(mk), free(mo), free(sq1), free(sq2), free(sq3), free(mkt), free(mqt), free(mot);
    free(skt), free(sqt), free(sot), free(vd), free(vs), free(s), free(pf), free(dp), free(ds), free(pd);
    free(mds), free(mpt), free(mdst), free(s4), free(s5), free(s6), free(gq), free(gk), free(gv);
    unmake(&p);
}

/* ---- 6. edge cases ---- */
static void check_edges(void)
{
    mxfa_attn_params ap;
    mxfa_attn_params_default(&ap);
    ap.causal = MXFA_CAUSAL;
    /* 50 queries on 20 keys, causal bottom-right: the first 30 see nothing: dQ = 0 */
    prob p = make(50, 20, 2, 2, 128, -1);
    int good = run(&ap, &p, NULL, NULL, 1) == MXFA_OK;
    int zeros = 1, finite = 1;
    for (int64_t x = 0; x < 50 * 2 * 128; x++) {
        if (x < 30 * 2 * 128)
            zeros &= p.dq[x] == 0.0f;
        else
            finite &= isfinite(p.dq[x]);
    }
    for (int64_t x = 0; x < 20 * 2 * 128; x++)
        finite &= isfinite(p.dk[x]) && isfinite(p.dv[x]);
    ok(good && zeros && finite, "queries that see no key get dQ = 0; all other gradients are finite");
    /* a NaN in dO: that query's dQ and the keys it sees go NaN, nothing crashes */
    p.dout[(40 * 2 + 0) * 128 + 7] = NAN;
    good = run(&ap, &p, NULL, NULL, 1) == MXFA_OK;
    ok(good && isnan(p.dq[(40 * 2 + 0) * 128]) && isfinite(p.dq[(41 * 2 + 0) * 128]) && isfinite(p.dq[(40 * 2 + 1) * 128]),
       "a NaN in dO makes that query's dQ NaN; its neighbours and the other head stay finite");
    unmake(&p);
    /* bf16 gradients are the fp32 ones rounded to nearest even */
    {
        prob g = make(40, 40, 2, 1, 64, -1);
        mxfa_attn_params bp;
        mxfa_attn_params_default(&bp);
        int good2 = run(&bp, &g, NULL, NULL, 1) == MXFA_OK;
        uint16_t *hq = malloc((size_t)(40 * 2 * 64) * 2), *hk = malloc((size_t)(40 * 64) * 2), *hv = malloc((size_t)(40 * 64) * 2);
        mxfa_tensor Q = t3(g.q, MXFA_F32, 40, 2, 64), K = t3(g.k, MXFA_F32, 40, 1, 64), V = t3(g.v, MXFA_F32, 40, 1, 64);
        mxfa_tensor O = t3(g.o, MXFA_F32, 40, 2, 64), DO = t3(g.dout, MXFA_F32, 40, 2, 64), L = t2(g.lse, MXFA_F32, 40, 2);
        mxfa_tensor DQ = t3(hq, MXFA_BF16, 40, 2, 64), DK = t3(hk, MXFA_BF16, 40, 1, 64), DV = t3(hv, MXFA_BF16, 40, 1, 64);
        good2 &= mxfa_attn_bwd(ctx, &bp, &Q, &K, &V, &O, &DO, &L, NULL, NULL, 1, &DQ, &DK, &DV) == MXFA_OK;
        for (int64_t x = 0; x < 40 * 2 * 64 && good2; x++)
            good2 = hq[x] == mxfa_f32_to_bf16(g.dq[x]);
        for (int64_t x = 0; x < 40 * 64 && good2; x++)
            good2 = hk[x] == mxfa_f32_to_bf16(g.dk[x]) && hv[x] == mxfa_f32_to_bf16(g.dv[x]);
        ok(good2, "bf16 gradients (GQA 2 on 1) are the fp32 gradients rounded to nearest even");
        free(hq), free(hk), free(hv);
        unmake(&g);
    }
    /* bad arguments */
    prob b = make(8, 8, 2, 2, 64, -1);
    mxfa_tensor Q = t3(b.q, MXFA_F32, 8, 2, 64), K = t3(b.k, MXFA_F32, 8, 2, 64), V = t3(b.v, MXFA_F32, 8, 2, 64);
    mxfa_tensor O = t3(b.o, MXFA_F32, 8, 2, 64), DO = t3(b.dout, MXFA_F32, 8, 2, 64), L = t2(b.lse, MXFA_F32, 8, 2);
    mxfa_tensor DQ = t3(b.dq, MXFA_F32, 8, 2, 64), DK = t3(b.dk, MXFA_F32, 8, 2, 64), DV = t3(b.dv, MXFA_F32, 8, 2, 64);
    mxfa_tensor Lbad = t2(b.lse, MXFA_F32, 8, 1), DQo = t3(b.dout, MXFA_F32, 8, 2, 64);
    ok(mxfa_attn_bwd(ctx, NULL, &Q, &K, &V, &O, &DO, &Lbad, NULL, NULL, 1, &DQ, &DK, &DV) == MXFA_ERR_SHAPE,
       "LSE of the wrong shape: %s", mxfa_last_error(ctx));
    ok(mxfa_attn_bwd(ctx, NULL, &Q, &K, &V, &O, &DO, &L, NULL, NULL, 1, &DQo, &DK, &DV) == MXFA_ERR_ALIAS,
       "dQ over dO: %s", mxfa_last_error(ctx));
    ok(mxfa_attn_bwd(ctx, NULL, &Q, &K, &V, &O, NULL, &L, NULL, NULL, 1, &DQ, &DK, &DV) == MXFA_ERR_NULL,
       "no dO: %s", mxfa_last_error(ctx));
    unmake(&b);
}

/* ---- 7. dK and dV as MXFP8 square blocks ---- */
static void check_mx_outputs(void)
{
    const int64_t H = 2, D = 64;
    static const int32_t cq[3] = {0, 40, 90}, ck[3] = {0, 45, 115}; /* key lengths 45 and 70 */
    prob p = make(90, 115, H, H, D, -1);
    mxfa_attn_params ap;
    mxfa_attn_params_default(&ap);
    ap.causal = MXFA_CAUSAL;
    int good = run(&ap, &p, cq, ck, 2) == MXFA_OK;
    const int64_t nblk = 2 + 3; /* ceil(45/32) + ceil(70/32) */
    uint8_t *kd = malloc((size_t)(115 * H * D)), *vd = malloc((size_t)(115 * H * D));
    uint8_t *ks = malloc((size_t)(nblk * H * 2)), *vs = malloc((size_t)(nblk * H * 2));
    float *dq2 = malloc((size_t)(90 * H * D) * sizeof *dq2);
    mxfa_tensor Q = t3(p.q, MXFA_F32, 90, H, D), K = t3(p.k, MXFA_F32, 115, H, D), V = t3(p.v, MXFA_F32, 115, H, D);
    mxfa_tensor O = t3(p.o, MXFA_F32, 90, H, D), DO = t3(p.dout, MXFA_F32, 90, H, D), L = t2(p.lse, MXFA_F32, 90, H);
    mxfa_tensor DQ = t3(dq2, MXFA_F32, 90, H, D);
    mxfa_mx dk = {t3(kd, MXFA_E4M3, 115, H, D), t3(ks, MXFA_E8M0, nblk, H, 2), MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
    mxfa_mx dv = {t3(vd, MXFA_E4M3, 115, H, D), t3(vs, MXFA_E8M0, nblk, H, 2), MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
    good &= mxfa_attn_bwd_mx(ctx, &ap, &Q, &K, &V, &O, &DO, &L, cq, ck, 2, &DQ, &dk, &dv) == MXFA_OK;
    if (!good)
        diag("%s", mxfa_last_error(ctx));
    good &= memcmp(dq2, p.dq, (size_t)(90 * H * D) * sizeof *dq2) == 0;
    /* each (sequence, head) slice equals the square quantization of the fp32 gradient */
    int64_t blk0 = 0;
    for (int b = 0; b < 2 && good; b++) {
        int64_t len = ck[b + 1] - ck[b], nb = (len + 31) / 32;
        for (int64_t g = 0; g < H; g++)
            for (int i = 0; i < 2; i++) {
                const float *src = (i ? p.dv : p.dk) + (ck[b] * H + g) * D;
                mxfa_tensor x = mxfa_tensor_2d((void *)src, MXFA_F32, len, D);
                x.stride[0] = H * D;
                uint8_t dd[70 * 64], ss[3 * 2];
                mxfa_mx m = {mxfa_tensor_2d(dd, MXFA_E4M3, len, D), mxfa_tensor_2d(ss, MXFA_E8M0, nb, 2),
                             MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
                good &= mxfa_quantize(ctx, &x, MXFA_PRESET_RCEIL, &m) == MXFA_OK;
                const uint8_t *od = (i ? vd : kd), *os = (i ? vs : ks);
                for (int64_t t = 0; t < len; t++)
                    good &= memcmp(dd + t * D, od + ((ck[b] + t) * H + g) * D, D) == 0;
                for (int64_t r = 0; r < nb; r++)
                    good &= memcmp(ss + r * 2, os + ((blk0 + r) * H + g) * 2, 2) == 0;
            }
        blk0 += nb;
    }
    ok(good, "mxfa_attn_bwd_mx returns dK and dV as square MXFP8 per sequence and head, equal to quantizing the "
             "fp32 gradients; dQ unchanged");
    free(kd), free(vd), free(ks), free(vs), free(dq2);
    unmake(&p);
}

int main(void)
{
    rng_seed_from_env(20261129);
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    check_finite_differences();
    check_bands();
    check_invariants();
    check_causal();
    check_square_reuse();
    check_edges();
    check_mx_outputs();
    mxfa_close(ctx);
    return done_testing();
}
