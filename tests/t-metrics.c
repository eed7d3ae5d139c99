/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa_compare's contract: the metrics of finite pairs as their
 * definitions give them (computed here by hand), equal non-finite pairs
 * skipped, and no score at all (NaN metrics, never 0 or +Inf) where a
 * value is NaN or infinite against a reference that differs, or where
 * nothing finite is left to measure; and the case that motivates it,
 * attention on inputs so large that O overflows to NaN while the float64
 * truth stays finite.
 */
#include "mxfa.h"
#include "tap.h"

static mxfa_tensor vec(void *data, mxfa_dtype dt, int64_t n)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 1, {n}, {1}};
    return t;
}

static int no_score(const mxfa_metrics *m)
{
    return isnan(m->rel_l2) && isnan(m->max_abs) && isnan(m->cosine) && isnan(m->sqnr_db);
}

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-14 * fabs(want);
}

static void check_finite(void)
{
    float out[4] = {1, 2, 3, 4};
    double ref[4] = {1, 2, 3, 5};
    mxfa_tensor a = vec(out, MXFA_F32, 4), b = vec(ref, MXFA_F64, 4);
    mxfa_metrics m;
    /* |e|^2 = 1, |ref|^2 = 39, |out|^2 = 30, <out, ref> = 34 */
    mxfa_status st = mxfa_compare(&a, &b, &m);
    ok(st == MXFA_OK && close_to(m.rel_l2, 1 / sqrt(39.0)) && m.max_abs == 1 &&
           close_to(m.cosine, 34 / sqrt(30.0 * 39.0)) && close_to(m.sqnr_db, 10 * log10(39.0)) && m.count == 4 &&
           m.skipped == 0 && m.mismatched_nonfinite == 0,
       "finite pairs: rel_l2 %.6f, max_abs %g, cosine %.6f, SQNR %.4f dB as the definitions give them", m.rel_l2,
       m.max_abs, m.cosine, m.sqnr_db);
    ref[3] = 4;
    st = mxfa_compare(&a, &b, &m);
    ok(st == MXFA_OK && m.rel_l2 == 0 && m.max_abs == 0 && m.cosine == 1 &&
           isinf(m.sqnr_db) && m.sqnr_db > 0 && m.count == 4,
       "equal finite values: the perfect score (rel_l2 0, SQNR +Inf)");
}

/* The fourth pair (x, r) after three finite ones, 1 2 4 against 1 2 3. */
static mxfa_metrics with_fourth(float x, double r)
{
    float out[4] = {1, 2, 4, x};
    double ref[4] = {1, 2, 3, r};
    mxfa_tensor a = vec(out, MXFA_F32, 4), b = vec(ref, MXFA_F64, 4);
    mxfa_metrics m;
    memset(&m, 0, sizeof m);
    if (mxfa_compare(&a, &b, &m) != MXFA_OK)
        m.count = -1;
    return m;
}

static void check_nonfinite(void)
{
    static const struct {
        float x;
        double r;
        const char *what;
    } differ[] = {
        {NAN, 5, "NaN where the reference is 5"},
        {INFINITY, 5, "+Inf where the reference is 5"},
        {-INFINITY, -1e300, "-Inf where the reference is -1e300"},
        {5, NAN, "5 where the reference is NaN"},
        {5, -INFINITY, "5 where the reference is -Inf"},
        {INFINITY, -INFINITY, "+Inf where the reference is -Inf"},
        {NAN, INFINITY, "NaN where the reference is +Inf"},
    };
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        mxfa_metrics m = with_fourth(differ[i].x, differ[i].r);
        ok(no_score(&m) && m.mismatched_nonfinite == 1 && m.count == 3 && m.skipped == 0,
           "%s: no score (rel_l2 %g, SQNR %g), 1 mismatched non-finite pair, 3 measured", differ[i].what, m.rel_l2,
           m.sqnr_db);
    }
    /* 1 2 4 against 1 2 3: |e|^2 = 1, |ref|^2 = 14 */
    static const struct {
        float x;
        double r;
        const char *what;
    } equal[] = {{NAN, NAN, "NaN against NaN"}, {-INFINITY, -INFINITY, "-Inf against -Inf"},
                 {INFINITY, INFINITY, "+Inf against +Inf"}};
    for (size_t i = 0; i < sizeof equal / sizeof equal[0]; i++) {
        mxfa_metrics m = with_fourth(equal[i].x, equal[i].r);
        ok(close_to(m.rel_l2, 1 / sqrt(14.0)) && close_to(m.sqnr_db, 10 * log10(14.0)) && m.max_abs == 1 &&
               m.skipped == 1 && m.count == 3 && m.mismatched_nonfinite == 0,
           "%s is skipped: the other three pairs measured (rel_l2 %.6f)", equal[i].what, m.rel_l2);
    }
    float out[3] = {NAN, -INFINITY, NAN};
    double ref[3] = {NAN, -INFINITY, NAN};
    mxfa_tensor a = vec(out, MXFA_F32, 3), b = vec(ref, MXFA_F64, 3);
    mxfa_metrics m;
    mxfa_status st = mxfa_compare(&a, &b, &m);
    ok(st == MXFA_OK && no_score(&m) && m.count == 0 && m.skipped == 3,
       "nothing finite to measure: no score, not a perfect one (SQNR %g)", m.sqnr_db);
    uint16_t bf[2] = {0x3F80, 0x7FC0}; /* 1.0, NaN */
    double r2[2] = {1, 1};
    a = vec(bf, MXFA_BF16, 2), b = vec(r2, MXFA_F64, 2);
    st = mxfa_compare(&a, &b, &m);
    ok(st == MXFA_OK && no_score(&m) && m.mismatched_nonfinite == 1 && m.count == 1,
       "a bf16 NaN against a finite reference: no score");
}

/* Q, K and V standard normal times 1e30: the float32 scores overflow, O is
 * NaN, and the float64 truth is finite. Every such value is counted, and
 * the metrics are no score. */
static void check_attention_overflow(void)
{
    enum { S = 64, H = 2, D = 64, N = S * H * D };
    static float q[N], k[N], v[N], o[N], lse[S * H];
    static double o64[N], lse64[S * H];
    for (int i = 0; i < N; i++) {
        q[i] = (float)ldexp((double)(int32_t)rng_next(), -31) * 1e30f;
        k[i] = (float)ldexp((double)(int32_t)rng_next(), -31) * 1e30f;
        v[i] = (float)ldexp((double)(int32_t)rng_next(), -31) * 1e30f;
    }
    mxfa_ctx *ctx = NULL;
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    mxfa_tensor Q = {q, MXFA_F32, MXFA_MEM_HOST, 3, {S, H, D}, {0}}, K = Q, V = Q;
    K.data = k, V.data = v;
    mxfa_tensor O = {o, MXFA_F32, MXFA_MEM_HOST, 3, {S, H, D}, {0}};
    mxfa_tensor O64 = {o64, MXFA_F64, MXFA_MEM_HOST, 3, {S, H, D}, {0}};
    mxfa_tensor L = {lse, MXFA_F32, MXFA_MEM_HOST, 2, {S, H}, {0}};
    mxfa_tensor L64 = {lse64, MXFA_F64, MXFA_MEM_HOST, 2, {S, H}, {0}};
    mxfa_metrics m = {0};
    int ran = mxfa_open(&ctx, "ref") == MXFA_OK && mxfa_attn_fwd(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O, &L) == MXFA_OK &&
              mxfa_attn_fwd_f64(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O64, &L64) == MXFA_OK &&
              mxfa_compare(&O, &O64, &m) == MXFA_OK;
    int64_t bad = 0, truth_finite = 0;
    for (int i = 0; i < N; i++) {
        truth_finite += isfinite(o64[i]) != 0;
        bad += !isfinite(o[i]) && isfinite(o64[i]);
    }
    if (!ok(ran && truth_finite == N && bad > 0 && m.mismatched_nonfinite == bad && m.count == N - bad &&
                no_score(&m),
            "inputs x1e30: %lld of %d values of O are NaN/Inf where the truth is finite, all counted (%lld), "
            "no score (rel_l2 %g, SQNR %g)",
            (long long)bad, N, (long long)m.mismatched_nonfinite, m.rel_l2, m.sqnr_db))
        diag("%s", mxfa_last_error(ctx));
    mxfa_close(ctx);
}

int main(void)
{
    check_finite();
    check_nonfinite();
    check_attention_overflow();
    return done_testing();
}
