/* SPDX-License-Identifier: BSD-3-Clause */
/* t-cuda: attention forward under the Hopper models. */
#include <math.h>

#include "harness.h"

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

int attn_case(int trial, int device, char *what, size_t what_len)
{
    return attn_case_under(MXFA_MODEL_SM90_FP8, trial, device, what, what_len);
}

/* The same under sm90-bf16, whose fused kernel takes key tiles of 64 or 128
 * (the call's block_n). */
int attn_bf16_case(int trial, int device, char *what, size_t what_len)
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
int attn_unseen_case(int trial, int device, char *what, size_t what_len)
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
