/* SPDX-License-Identifier: BSD-3-Clause */
/* Entry points for attention: argument checking, defaults, and dispatch to
 * the backend (or to the float64 truth). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

MXFA_API void mxfa_attn_params_default(mxfa_attn_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->model = MXFA_MODEL_SM100;
    p->preset = MXFA_PRESET_RCEIL;
    p->p_scale = MXFA_P_CONST;
    p->causal = MXFA_CAUSAL_NONE;
    p->softmax_scale = 0.0f;
    p->block_m = 128;
    p->block_n = 128;
}

MXFA_API float mxfa_attn_softmax_scale(const mxfa_attn_params *p, int64_t head_dim)
{
    if (p && p->softmax_scale != 0.0f)
        return p->softmax_scale;
    return head_dim > 0 ? (float)(1.0 / sqrt((double)head_dim)) : NAN;
}

/* Check everything; on success *r holds complete parameters (defaults filled
 * in) and cu_q/cu_k point at valid offsets (dense ones in dense_q/dense_k). */
static mxfa_status check_attn(mxfa_ctx *ctx, const char *fn, const mxfa_attn_params *p, const mxfa_tensor *q,
                              const mxfa_tensor *k, const mxfa_tensor *v, const int32_t **cu_q, const int32_t **cu_k,
                              int batch, mxfa_tensor *o, mxfa_tensor *lse, int truth, mxfa_attn_params *r,
                              int32_t dense_q[2], int32_t dense_k[2], mxfa_view_nd views[5])
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "%s: ctx is NULL", fn);
    mxfa_clear_error(ctx);
    if (p)
        *r = *p;
    else
        mxfa_attn_params_default(r);
    if ((unsigned)r->model >= MXFA_MODEL_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown model %d", fn, (int)r->model);
    if ((unsigned)r->preset >= MXFA_PRESET_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown preset %d", fn, (int)r->preset);
    if ((unsigned)r->p_scale >= MXFA_P_SCALE_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown P scaling %d", fn, (int)r->p_scale);
    if ((unsigned)r->causal >= MXFA_CAUSAL_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown causal mode %d", fn, (int)r->causal);
    if (!(r->softmax_scale >= 0.0f) || isinf(r->softmax_scale))
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: softmax_scale must be finite and positive (0 for D^-1/2)", fn);
    if (r->block_m == 0)
        r->block_m = 128;
    if (r->block_n == 0)
        r->block_n = 128;
    if (r->block_m < 32 || r->block_m > 1024 || r->block_m % 32 || r->block_n < 32 || r->block_n > 1024 ||
        r->block_n % 32)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: tile sizes must be multiples of 32 from 32 to 1024, got %d x %d",
                         fn, r->block_m, r->block_n);

    const unsigned in_types = DT(MXFA_F32) | DT(MXFA_BF16);
    mxfa_view_nd *qv = &views[0], *kv = &views[1], *vv = &views[2], *ov = &views[3], *lv = &views[4];
    CHECK(mxfa_check_tensor(ctx, "q", q, in_types, 3, NULL, 0, qv));
    int64_t tq = qv->shape[0], hq = qv->shape[1], d = qv->shape[2];
    if (d != 64 && d != 128 && d != 256)
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED, "%s: head dimension %lld is not supported (64, 128 or 256)", fn,
                         (long long)d);
    const int64_t kshape[3] = {-1, -1, d};
    CHECK(mxfa_check_tensor(ctx, "k", k, in_types, 3, kshape, 0, kv));
    int64_t tk = kv->shape[0], hkv = kv->shape[1];
    const int64_t vshape[3] = {tk, hkv, d};
    CHECK(mxfa_check_tensor(ctx, "v", v, in_types, 3, vshape, 0, vv));
    if (hq % hkv != 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: %lld query heads are not a multiple of %lld key/value heads", fn,
                         (long long)hq, (long long)hkv);
    if (tq > INT32_MAX || tk > INT32_MAX)
        return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "%s: more than 2^31 - 1 tokens", fn);
    const int64_t oshape[3] = {tq, hq, d}, lshape[2] = {tq, hq};
    unsigned out_types = truth ? DT(MXFA_F64) : DT(MXFA_F32) | DT(MXFA_BF16);
    if (o) { /* the forward pass's outputs */
        CHECK(mxfa_check_tensor(ctx, "o", o, out_types, 3, oshape, 1, ov));
        if (lse)
            CHECK(mxfa_check_tensor(ctx, "lse", lse, truth ? DT(MXFA_F64) : DT(MXFA_F32), 2, lshape, 1, lv));
        for (int i = 0; i < 3; i++) {
            static const char *const names[3] = {"q", "k", "v"};
            CHECK(mxfa_check_disjoint_nd(ctx, "o", ov, names[i], &views[i]));
            if (lse)
                CHECK(mxfa_check_disjoint_nd(ctx, "lse", lv, names[i], &views[i]));
        }
        if (lse)
            CHECK(mxfa_check_disjoint_nd(ctx, "o", ov, "lse", lv));
    }

    if (!*cu_q != !*cu_k)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s: give both cu_seqlens_q and cu_seqlens_k, or neither", fn);
    if (!*cu_q) {
        if (batch != 1 && batch != 0)
            return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: without cu_seqlens the batch is one sequence (batch %d)", fn,
                             batch);
        dense_q[0] = dense_k[0] = 0;
        dense_q[1] = (int32_t)tq;
        dense_k[1] = (int32_t)tk;
        *cu_q = dense_q;
        *cu_k = dense_k;
    } else {
        char why[MXFA_ERRMSG_LEN];
        for (int i = 0; i < 2; i++) {
            mxfa_status st = mxfa_check_cu_seqlens(ctx, i ? *cu_k : *cu_q, batch, i ? tk : tq);
            if (st != MXFA_OK) {
                memcpy(why, ctx->error, sizeof why);
                return mxfa_fail(ctx, st, "%s: cu_seqlens_%s: %s", fn, i ? "k" : "q", why);
            }
        }
    }
    r->softmax_scale = mxfa_attn_softmax_scale(r, d);
    return MXFA_OK;
}

/* The forward pass: on the context's backend, or (truth) the float64
 * reference of the same algorithm. */
static mxfa_status attn_fwd_in_env(mxfa_ctx *ctx, const char *fn, int truth, const mxfa_attn_params *p,
                                   const mxfa_tensor *q, const mxfa_tensor *k, const mxfa_tensor *v,
                                   const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch, mxfa_tensor *o,
                                   mxfa_tensor *lse)
{
    mxfa_attn_params r;
    int32_t dq[2], dk[2];
    mxfa_view_nd views[5];
    if (ctx && !o)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s: o is NULL", fn);
    CHECK(check_attn(ctx, fn, p, q, k, v, &cu_seqlens_q, &cu_seqlens_k, batch, o, lse, truth, &r, dq, dk, views));
    if (cu_seqlens_q == dq)
        batch = 1;
    return (truth ? mxfa_truth_attn_fwd : ctx->backend->attn_fwd)(ctx, &r, &views[0], &views[1], &views[2],
                                                                  cu_seqlens_q, cu_seqlens_k, batch, &views[3],
                                                                  lse ? &views[4] : NULL);
}

MXFA_API mxfa_status mxfa_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                   const mxfa_tensor *k, const mxfa_tensor *v, const int32_t *cu_seqlens_q,
                                   const int32_t *cu_seqlens_k, int batch, mxfa_tensor *o, mxfa_tensor *lse)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(
        attn_fwd_in_env(ctx, "mxfa_attn_fwd", 0, p, q, k, v, cu_seqlens_q, cu_seqlens_k, batch, o, lse));
}

MXFA_API mxfa_status mxfa_attn_fwd_f64(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                       const mxfa_tensor *k, const mxfa_tensor *v, const int32_t *cu_seqlens_q,
                                       const int32_t *cu_seqlens_k, int batch, mxfa_tensor *o, mxfa_tensor *lse)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(
        attn_fwd_in_env(ctx, "mxfa_attn_fwd_f64", 1, p, q, k, v, cu_seqlens_q, cu_seqlens_k, batch, o, lse));
}

/* The backward pass's own tensors: dO (and O, LSE unless truth) as inputs,
 * dQ, dK, dV as outputs, none overlapping another. */
static mxfa_status check_bwd(mxfa_ctx *ctx, const mxfa_view_nd *in, const mxfa_tensor *o, const mxfa_tensor *dout,
                             const mxfa_tensor *lse, mxfa_tensor *dq, mxfa_tensor *dk, mxfa_tensor *dv, int truth,
                             mxfa_view_nd ex[6])
{
    const int64_t tq = in[0].shape[0], hq = in[0].shape[1], d = in[0].shape[2], tk = in[1].shape[0],
                  hkv = in[1].shape[1];
    const int64_t qshape[3] = {tq, hq, d}, kshape[3] = {tk, hkv, d}, lshape[2] = {tq, hq};
    const unsigned in_types = DT(MXFA_F32) | DT(MXFA_BF16), out_types = truth ? DT(MXFA_F64) : in_types;
    /* ex: 0 o, 1 dout, 2 lse, 3 dq, 4 dk, 5 dv */
    CHECK(mxfa_check_tensor(ctx, "dout", dout, in_types, 3, qshape, 0, &ex[1]));
    if (!truth) {
        CHECK(mxfa_check_tensor(ctx, "o", o, in_types, 3, qshape, 0, &ex[0]));
        CHECK(mxfa_check_tensor(ctx, "lse", lse, DT(MXFA_F32), 2, lshape, 0, &ex[2]));
    }
    CHECK(mxfa_check_tensor(ctx, "dq", dq, out_types, 3, qshape, 1, &ex[3]));
    CHECK(mxfa_check_tensor(ctx, "dk", dk, out_types, 3, kshape, 1, &ex[4]));
    CHECK(mxfa_check_tensor(ctx, "dv", dv, out_types, 3, kshape, 1, &ex[5]));
    static const char *const in_names[6] = {"q", "k", "v", "o", "dout", "lse"};
    static const char *const out_names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 6; j++) {
            const mxfa_view_nd *x = j < 3 ? &in[j] : &ex[j - 3];
            if (truth && (j == 3 || j == 5))
                continue;
            CHECK(mxfa_check_disjoint_nd(ctx, out_names[i], &ex[3 + i], in_names[j], x));
        }
        for (int j = i + 1; j < 3; j++)
            CHECK(mxfa_check_disjoint_nd(ctx, out_names[i], &ex[3 + i], out_names[j], &ex[3 + j]));
    }
    return MXFA_OK;
}

static mxfa_status attn_bwd_in_env(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                   const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *o,
                                   const mxfa_tensor *dout, const mxfa_tensor *lse, const int32_t *cu_seqlens_q,
                                   const int32_t *cu_seqlens_k, int batch, mxfa_tensor *dq, mxfa_tensor *dk,
                                   mxfa_tensor *dv)
{
    mxfa_attn_params r;
    int32_t dqo[2], dko[2];
    mxfa_view_nd views[5], ex[6];
    CHECK(check_attn(ctx, "mxfa_attn_bwd", p, q, k, v, &cu_seqlens_q, &cu_seqlens_k, batch, NULL, NULL, 0, &r, dqo,
                     dko, views));
    CHECK(check_bwd(ctx, views, o, dout, lse, dq, dk, dv, 0, ex));
    if (cu_seqlens_q == dqo)
        batch = 1;
    return ctx->backend->attn_bwd(ctx, &r, &views[0], &views[1], &views[2], &ex[0], &ex[1], &ex[2], cu_seqlens_q,
                                  cu_seqlens_k, batch, &ex[3], &ex[4], &ex[5]);
}

MXFA_API mxfa_status mxfa_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                   const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *o,
                                   const mxfa_tensor *dout, const mxfa_tensor *lse, const int32_t *cu_seqlens_q,
                                   const int32_t *cu_seqlens_k, int batch, mxfa_tensor *dq, mxfa_tensor *dk,
                                   mxfa_tensor *dv)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(attn_bwd_in_env(ctx, p, q, k, v, o, dout, lse,
                                                 cu_seqlens_q, cu_seqlens_k, batch, dq, dk, dv));
}

static mxfa_status attn_bwd_f64_in_env(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                       const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *dout,
                                       const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch,
                                       mxfa_tensor *dq, mxfa_tensor *dk, mxfa_tensor *dv)
{
    mxfa_attn_params r;
    int32_t dqo[2], dko[2];
    mxfa_view_nd views[5], ex[6];
    CHECK(check_attn(ctx, "mxfa_attn_bwd_f64", p, q, k, v, &cu_seqlens_q, &cu_seqlens_k, batch, NULL, NULL, 1, &r,
                     dqo, dko, views));
    CHECK(check_bwd(ctx, views, NULL, dout, NULL, dq, dk, dv, 1, ex));
    if (cu_seqlens_q == dqo)
        batch = 1;
    return mxfa_truth_attn_bwd(ctx, &r, &views[0], &views[1], &views[2], &ex[1], cu_seqlens_q, cu_seqlens_k, batch,
                               &ex[3], &ex[4], &ex[5]);
}

MXFA_API mxfa_status mxfa_attn_bwd_f64(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                       const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *dout,
                                       const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch,
                                       mxfa_tensor *dq, mxfa_tensor *dk, mxfa_tensor *dv)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(attn_bwd_f64_in_env(ctx, p, q, k, v, dout,
                                                 cu_seqlens_q, cu_seqlens_k, batch, dq, dk, dv));
}

static mxfa_status attn_bwd_mx_in_env(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                      const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *o,
                                      const mxfa_tensor *dout, const mxfa_tensor *lse, const int32_t *cu_seqlens_q,
                                      const int32_t *cu_seqlens_k, int batch, mxfa_tensor *dq, mxfa_mx *dk,
                                      mxfa_mx *dv)
{
    const char *fn = "mxfa_attn_bwd_mx";
    mxfa_attn_params r;
    int32_t dqo[2], dko[2];
    mxfa_view_nd views[5];
    CHECK(check_attn(ctx, fn, p, q, k, v, &cu_seqlens_q, &cu_seqlens_k, batch, NULL, NULL, 0, &r, dqo, dko, views));
    if (cu_seqlens_q == dqo)
        batch = 1;
    if (!dk || !dv)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s: dk and dv are required", fn);
    const int64_t tk = views[1].shape[0], hkv = views[1].shape[1], d = views[1].shape[2];
    int64_t nblk = 0;
    for (int b = 0; b < batch; b++)
        nblk += ((int64_t)cu_seqlens_k[b + 1] - cu_seqlens_k[b] + 31) / 32;
    const int64_t dshape[3] = {tk, hkv, d}, sshape[3] = {nblk, hkv, d / 32};
    mxfa_view_nd dd[2], sd[2];
    mxfa_mx *outs[2] = {dk, dv};
    for (int i = 0; i < 2; i++) {
        const char *what = i ? "dv" : "dk";
        if (outs[i]->block != MXFA_BLOCK_SQUARE || outs[i]->layout != MXFA_LAYOUT_COMPACT)
            return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED, "%s: %s must ask for square blocks in the compact layout", fn,
                             what);
        CHECK(mxfa_check_tensor(ctx, i ? "dv->data" : "dk->data", &outs[i]->data, DT(MXFA_E4M3) | DT(MXFA_E5M2), 3,
                                dshape, 1, &dd[i]));
        if (nblk == 0)
            return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: the batch holds no keys", fn);
        CHECK(mxfa_check_tensor(ctx, i ? "dv->scales" : "dk->scales", &outs[i]->scales, DT(MXFA_E8M0), 3, sshape, 1,
                                &sd[i]));
    }
    /* dK and dV are written after dQ: none of their four tensors may overlap
     * another, an input or dQ */
    const int64_t tq = views[0].shape[0], hq = views[0].shape[1];
    const int64_t qshape[3] = {tq, hq, d}, lshape[2] = {tq, hq};
    const unsigned fl = DT(MXFA_F32) | DT(MXFA_BF16);
    mxfa_view_nd others[7] = {views[0], views[1], views[2]};
    static const char *const other_names[7] = {"q", "k", "v", "o", "dout", "lse", "dq"};
    CHECK(mxfa_check_tensor(ctx, "o", o, fl, 3, qshape, 0, &others[3]));
    CHECK(mxfa_check_tensor(ctx, "dout", dout, fl, 3, qshape, 0, &others[4]));
    CHECK(mxfa_check_tensor(ctx, "lse", lse, DT(MXFA_F32), 2, lshape, 0, &others[5]));
    CHECK(mxfa_check_tensor(ctx, "dq", dq, fl, 3, qshape, 1, &others[6]));
    const mxfa_view_nd *mine[4] = {&dd[0], &sd[0], &dd[1], &sd[1]};
    static const char *const my_names[4] = {"dk->data", "dk->scales", "dv->data", "dv->scales"};
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 7; j++)
            CHECK(mxfa_check_disjoint_nd(ctx, my_names[i], mine[i], other_names[j], &others[j]));
        for (int j = i + 1; j < 4; j++)
            CHECK(mxfa_check_disjoint_nd(ctx, my_names[i], mine[i], my_names[j], mine[j]));
    }
    /* fp32 gradients first, then each (sequence, head) slice in square blocks */
    size_t n = (size_t)(tk * hkv * d);
    float *gk = malloc(n * sizeof *gk), *gv = malloc(n * sizeof *gv);
    if (!gk || !gv) {
        free(gk);
        free(gv);
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "%s: cannot allocate the fp32 gradients", fn);
    }
    mxfa_tensor tk_ = {gk, MXFA_F32, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}}, tv_ = tk_;
    tv_.data = gv;
    /* the fp32 gradients by the backward pass's own path (checks and
     * dispatch), not the public entry point: the environment is set */
    mxfa_status st = attn_bwd_in_env(ctx, &r, q, k, v, o, dout, lse, cu_seqlens_q == dqo ? NULL : cu_seqlens_q,
                                     cu_seqlens_q == dqo ? NULL : cu_seqlens_k, batch, dq, &tk_, &tv_);
    int64_t blk0 = 0;
    for (int b = 0; b < batch && st == MXFA_OK; b++) {
        int64_t len = (int64_t)cu_seqlens_k[b + 1] - cu_seqlens_k[b];
        for (int64_t g = 0; g < hkv && st == MXFA_OK && len > 0; g++)
            for (int i = 0; i < 2 && st == MXFA_OK; i++) {
                mxfa_view src = {(i ? gv : gk) + (cu_seqlens_k[b] * hkv + g) * d, MXFA_F32, len, d, hkv * d, 1,
                                 MXFA_MEM_HOST};
                mxfa_view dst = mxfa_view_slice(&dd[i], 0, 2, cu_seqlens_k[b] * dd[i].stride[0] + g * dd[i].stride[1],
                                                len, d);
                mxfa_view sc = mxfa_view_slice(&sd[i], 0, 2, blk0 * sd[i].stride[0] + g * sd[i].stride[1],
                                               (len + 31) / 32, d / 32);
                mxfa_segment seg = {0, len, 0};
                st = ctx->backend->quantize(ctx, &src, &seg, 1, r.preset, MXFA_BLOCK_SQUARE, &dst, &sc);
            }
        blk0 += (len + 31) / 32;
    }
    free(gk);
    free(gv);
    return st;
}

MXFA_API mxfa_status mxfa_attn_bwd_mx(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                      const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *o,
                                      const mxfa_tensor *dout, const mxfa_tensor *lse, const int32_t *cu_seqlens_q,
                                      const int32_t *cu_seqlens_k, int batch, mxfa_tensor *dq, mxfa_mx *dk,
                                      mxfa_mx *dv)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(attn_bwd_mx_in_env(ctx, p, q, k, v, o, dout, lse,
                                                 cu_seqlens_q, cu_seqlens_k, batch, dq, dk, dv));
}
