/* SPDX-License-Identifier: BSD-3-Clause */
/* t-cuda: attention backward under the Hopper models, composed and fused. */
#include <math.h>

#include "harness.h"

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
enum { ANY, FUSED_BF16, FUSED_FP8 };

/* `only` narrows the draws to what a fused kernel takes: sm90-bf16's, or
 * sm90-fp8's (D = 64 and 128). */
static int bwd_case_of(int only, int trial, int device, char *what, size_t what_len)
{
    static const int64_t dims[3] = {64, 128, 256};
    const int64_t drawn = dims[rng_below(3)], d = only == FUSED_FP8 && drawn == 256 ? 128 : drawn;
    const int batch = 1 + (int)rng_below(3);
    const int hkv = 1 + (int)rng_below(2), group = 1 + (int)rng_below(3);
    const int64_t hq = hkv * group;
    int32_t cq[4] = {0}, ck[4] = {0};
    /* (the fused kernel's cases sometimes longer: a query tile's dQ chained
     * through several key tiles' items, on other CTAs) */
    draw_seqlens(batch, only && rng_below(3) == 0 ? 900 : 300, cq, ck);
    const int64_t tq = cq[batch], tk = ck[batch];
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.model = rng_below(4) == 0 ? MXFA_MODEL_SM90_BF16 : MXFA_MODEL_SM90_FP8;
    p.preset = (mxfa_preset)rng_below(4);
    p.p_scale = rng_below(2) ? MXFA_P_DYNAMIC : MXFA_P_CONST;
    p.causal = (mxfa_causal)rng_below(3); /* none, leak-free, plain */
    if (rng_below(4) == 0 && !only)
        p.block_m = 32 * (1 + (int)rng_below(8)), p.block_n = 32 * (1 + (int)rng_below(8));
    int ctas = 0; /* a cap on the fused kernel's grid: several items a CTA */
    if (only) {
        p.model = only == FUSED_FP8 ? MXFA_MODEL_SM90_FP8 : MXFA_MODEL_SM90_BF16;
        ctas = rng_below(2) ? 1 + (int)rng_below(3) : 0;
    }
    if (ctas) {
        char cap[16];
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
    for (int i = 0; i < (only ? 3 : 2); i++) {
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
    if (good && only && !(same(&gq[1], &gq[2]) && same(&gk[1], &gk[2]) && same(&gv[1], &gv[2]))) {
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

int bwd_case(int trial, int device, char *what, size_t what_len)
{
    return bwd_case_of(ANY, trial, device, what, what_len);
}

int bwd_fused_bf16_case(int trial, int device, char *what, size_t what_len)
{
    return bwd_case_of(FUSED_BF16, trial, device, what, what_len);
}

int bwd_fused_fp8_case(int trial, int device, char *what, size_t what_len)
{
    return bwd_case_of(FUSED_FP8, trial, device, what, what_len);
}
