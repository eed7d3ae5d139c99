/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MXFP8 attention backward, the executable specification (docs/NUMERICS.md
 * section 7). Q, K, dO and dS are quantized in 32x32 square blocks, so one
 * payload serves both products that reduce over its two axes: the square
 * scale of element (r, c) is that of block (r/32, c/32) whichever way it is
 * read. Loops: for each key tile, query tiles in increasing order; dQ
 * therefore collects key tile after key tile in increasing order.
 */
#include <math.h>
#include <stdlib.h>

#include "mx_decoded.h"

#define LOG2E_BITS 0x3FB8AA3Bu

/* An fp32 value rounded to bf16 at nearest even, as an operand. */
static mma_operand f32_as_bf16(float x)
{
    return mxfa_mma_operand_bf16(mxfa_f32_bits_to_bf16(f32_bits(x)));
}

/*
 * acc + sum over k in [k0, k0 + n) of a[k] * b[k], where a and b are rows of
 * MX operands with their own scales per 32 along k, block by block; or, when
 * `bf16`, the same operands widened to bf16 and summed by the model's bf16
 * step. ascale/bscale give the scale of position k.
 */
typedef struct operand_row {
    const mma_operand *x; /* x[k] for k in [0, len) */
    const mx_decoded *m;         /* scales: (fixed, k) or (k, fixed) */
    int64_t fixed;
    int along_rows;       /* k runs along m's rows (a transposed read) */
    const mma_operand *raw_bf16; /* when set: bf16 values to use on diagonal blocks */
} operand_row;

static int row_sexp(const operand_row *o, int64_t k)
{
    return o->along_rows ? mxd_sexp(o->m, k, o->fixed) : mxd_sexp(o->m, o->fixed, k);
}

static int row_snan(const operand_row *o, int64_t k)
{
    return o->along_rows ? mxd_snan(o->m, k, o->fixed) : mxd_snan(o->m, o->fixed, k);
}

static uint32_t dot_block(const mma_model_def *model, const operand_row *a, const operand_row *b, int64_t k0,
                          int n, int bf16, uint32_t acc)
{
    if (bf16) {
        mma_operand wa[32], wb[32];
        for (int j = 0; j < n; j++) {
            wa[j] = a->raw_bf16 ? a->raw_bf16[k0 + j] : mxfa_mma_widen_bf16(&a->x[k0 + j], row_sexp(a, k0 + j), row_snan(a, k0 + j));
            wb[j] = b->raw_bf16 ? b->raw_bf16[k0 + j] : mxfa_mma_widen_bf16(&b->x[k0 + j], row_sexp(b, k0 + j), row_snan(b, k0 + j));
        }
        return mxfa_mma_bf16_steps(model, wa, wb, n, acc);
    }
    return mxfa_mma_block(model, &a->x[k0], row_sexp(a, k0), row_snan(a, k0), &b->x[k0], row_sexp(b, k0),
                          row_snan(b, k0), n, acc);
}

typedef struct bwd_head {
    const mxfa_attn_params *p;
    const mma_model_def *model;
    int64_t lq, lk, d;
    float c, log2e;
    mx_decoded q, k, v, dout; /* Q, K, dO square; V row blocks along D */
    mma_operand *kbf;  /* K rounded to bf16, [D][Lk] (keys along each row) for diagonal blocks */
    mma_operand *kbf_rows; /* the same, [Lk][D] */
    float *lse, *delta;
    float *dq, *dk, *dv; /* fp32 accumulators: dq [Lq][D], dk and dv [Lk][D] */
} bwd_head;

static int64_t key_limit(const bwd_head *job, int64_t i)
{
    return job->p->causal == MXFA_CAUSAL_NONE ? job->lk - 1 : i + job->lk - job->lq;
}

/* One key tile [c0, c0 + bn) against one query tile [r0, r0 + bm). */
static mxfa_status bwd_tile(mxfa_ctx *ctx, bwd_head *job, int64_t r0, int64_t nr, int64_t c0, int64_t bn)
{
    const int64_t d = job->d, lk = job->lk, lq = job->lq;
    const int64_t nrp = (nr + 31) / 32 * 32; /* rows padded to whole 32-row blocks */
    const int64_t lim_first = key_limit(job, r0), lim_last = key_limit(job, r0 + nr - 1);
    const mma_model_def *model = job->model;
    float *pf = calloc((size_t)(nrp * bn), sizeof *pf), *ds = calloc((size_t)(nrp * bn), sizeof *ds);
    uint8_t *diag = calloc((size_t)(bn / 32), 1);
    mx_decoded pq = {0}, dsq = {0};
    mxfa_status st = MXFA_OK;
    if (!pf || !ds || !diag) {
        st = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention backward: out of memory");
        goto done;
    }
    /* leak-free causal: key blocks that some row of the query tile sees only
     * in part are computed with bf16 operands (no K, P or dS scale spans them) */
    for (int64_t b0 = 0; b0 < bn; b0 += 32) {
        int64_t kb0 = c0 + b0, klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
        diag[b0 / 32] = job->p->causal == MXFA_CAUSAL && kb0 < lk && lim_first < klast && lim_last >= kb0;
    }
    /* S, P = E(RN_f16(min(fma(S, c, b), 0))) with b = fl(2^-11 - fl(LSE
     * log2 e)), E the f16 exponential (in [0, 1]); masked, and rows with
     * LSE = -Inf: 0 */
    for (int64_t r = 0; r < nr; r++) {
        int64_t i = r0 + r, lim = key_limit(job, i);
        float b = 0x1p-11f - job->lse[i] * job->log2e;
        operand_row qa = {&job->q.x[i * d], &job->q, i, 0, NULL};
        for (int64_t j = 0; j < bn; j++) {
            int64_t key = c0 + j;
            if (key > lim || key >= lk || job->lse[i] == -INFINITY)
                continue;
            operand_row kb = {&job->k.x[key * d], &job->k, key, 0, diag[j / 32] ? &job->kbf_rows[key * d] : NULL};
            uint32_t s = 0;
            for (int64_t e0 = 0; e0 < d; e0 += 32)
                s = dot_block(model, &qa, &kb, e0, 32, diag[j / 32], s);
            pf[r * bn + j] = mxfa_ref_softmax_e(f32_from_bits(s), job->c, b);
        }
    }
    /* P quantized: const, E4M3(P * 256) under 2^-8; dynamic, square blocks
     * with the rceil rule. The same bytes serve P (rows) and P^T. */
    {
        mxfa_view pv = {pf, MXFA_F32, nrp, bn, bn, 1, MXFA_MEM_HOST};
        if (job->p->p_scale == MXFA_P_DYNAMIC) {
            if ((st = mx_decoded_quantize(ctx, &pv, MXFA_BLOCK_SQUARE, MXFA_PRESET_RCEIL, &pq)) != MXFA_OK)
                goto done;
        } else {
            if (!mx_decoded_alloc(&pq, nrp, bn, MXFA_BLOCK_SQUARE)) {
                st = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention backward: out of memory");
                goto done;
            }
            for (int64_t r = 0; r < nrp; r++)
                for (int64_t j = 0; j < bn; j++)
                    pq.x[r * bn + j] = pq.t[j * nrp + r] = mxfa_mma_operand_fp8(
                        &mxfa_fp8_e4m3,
                        mxfa_fp8_encode(&mxfa_fp8_e4m3, f32_bits(pf[r * bn + j]), 8, FP8_ROUND_NEAREST_EVEN,
                                        MXFA_SATFINITE));
            for (int64_t i = 0; i < (nrp / 32) * pq.sc; i++) {
                pq.sexp[i] = -8;
                pq.snan[i] = 0;
            }
        }
    }
    /* dV += P^T dO, dP = dO V^T, dS = P (dP - delta) */
    for (int64_t j = 0; j < bn && c0 + j < lk; j++) {
        int64_t key = c0 + j;
        mma_operand pbf[1024];
        int dg = diag[j / 32];
        if (dg)
            for (int64_t r = 0; r < nrp; r++)
                pbf[r] = f32_as_bf16(pf[r * bn + j]);
        for (int64_t e = 0; e < d; e++) {
            uint32_t acc = f32_bits(job->dv[key * d + e]);
            for (int64_t q0 = 0; q0 < nr; q0 += 32) {
                int n = (int)(nr - q0 < 32 ? nr - q0 : 32);
                const mma_operand *a = &pq.t[j * nrp + q0], *b = &job->dout.t[e * lq + r0 + q0];
                if (dg) {
                    mma_operand wb[32];
                    for (int t = 0; t < n; t++)
                        wb[t] = mxfa_mma_widen_bf16(&b[t], mxd_sexp(&job->dout, r0 + q0 + t, e), mxd_snan(&job->dout, r0 + q0 + t, e));
                    acc = mxfa_mma_bf16_steps(model, &pbf[q0], wb, n, acc);
                } else {
                    acc = mxfa_mma_block(model, a, mxd_sexp(&pq, q0, j), mxd_snan(&pq, q0, j), b,
                                         mxd_sexp(&job->dout, r0 + q0, e), mxd_snan(&job->dout, r0 + q0, e), n, acc);
                }
            }
            job->dv[key * d + e] = f32_from_bits(acc);
        }
    }
    for (int64_t r = 0; r < nr; r++) {
        int64_t i = r0 + r, lim = key_limit(job, i);
        operand_row oa = {&job->dout.x[i * d], &job->dout, i, 0, NULL};
        for (int64_t j = 0; j < bn; j++) {
            int64_t key = c0 + j;
            if (key > lim || key >= lk || pf[r * bn + j] == 0.0f)
                continue;
            operand_row vb = {&job->v.x[key * d], &job->v, key, 0, NULL};
            uint32_t dp = 0;
            for (int64_t e0 = 0; e0 < d; e0 += 32)
                dp = dot_block(model, &oa, &vb, e0, 32, 0, dp);
            ds[r * bn + j] = pf[r * bn + j] * (f32_from_bits(dp) - job->delta[i]);
        }
    }
    /* dS quantized in square blocks with the preset */
    {
        mxfa_view dsv = {ds, MXFA_F32, nrp, bn, bn, 1, MXFA_MEM_HOST};
        if ((st = mx_decoded_quantize(ctx, &dsv, MXFA_BLOCK_SQUARE, job->p->preset, &dsq)) != MXFA_OK)
            goto done;
    }
    /* dK += dS^T Q, over this tile's queries */
    for (int64_t j = 0; j < bn && c0 + j < lk; j++) {
        int64_t key = c0 + j;
        int dg = diag[j / 32];
        for (int64_t e = 0; e < d; e++) {
            uint32_t acc = f32_bits(job->dk[key * d + e]);
            for (int64_t q0 = 0; q0 < nr; q0 += 32) {
                int n = (int)(nr - q0 < 32 ? nr - q0 : 32);
                const mma_operand *a = &dsq.t[j * nrp + q0], *b = &job->q.t[e * lq + r0 + q0];
                if (dg) {
                    mma_operand wa[32], wb[32];
                    for (int t = 0; t < n; t++) {
                        wa[t] = f32_as_bf16(ds[(q0 + t) * bn + j]);
                        wb[t] = mxfa_mma_widen_bf16(&b[t], mxd_sexp(&job->q, r0 + q0 + t, e), mxd_snan(&job->q, r0 + q0 + t, e));
                    }
                    acc = mxfa_mma_bf16_steps(model, wa, wb, n, acc);
                } else {
                    acc = mxfa_mma_block(model, a, mxd_sexp(&dsq, q0, j), mxd_snan(&dsq, q0, j), b,
                                         mxd_sexp(&job->q, r0 + q0, e), mxd_snan(&job->q, r0 + q0, e), n, acc);
                }
            }
            job->dk[key * d + e] = f32_from_bits(acc);
        }
    }
    /* dQ += dS K, over this tile's keys, 32-key block by block */
    for (int64_t r = 0; r < nr; r++) {
        int64_t i = r0 + r;
        for (int64_t e = 0; e < d; e++) {
            uint32_t acc = f32_bits(job->dq[i * d + e]);
            for (int64_t b0 = 0; b0 < bn && c0 + b0 < lk; b0 += 32) {
                int64_t kb0 = c0 + b0;
                int n = (int)(lk - kb0 < 32 ? lk - kb0 : 32);
                if (diag[b0 / 32]) {
                    mma_operand wa[32], wb[32];
                    for (int t = 0; t < n; t++) {
                        wa[t] = f32_as_bf16(ds[r * bn + b0 + t]);
                        wb[t] = job->kbf[e * lk + kb0 + t];
                    }
                    acc = mxfa_mma_bf16_steps(model, wa, wb, n, acc);
                } else {
                    acc = mxfa_mma_block(model, &dsq.x[r * bn + b0], mxd_sexp(&dsq, r, b0), mxd_snan(&dsq, r, b0),
                                         &job->k.t[e * lk + kb0], mxd_sexp(&job->k, kb0, e), mxd_snan(&job->k, kb0, e),
                                         n, acc);
                }
            }
            job->dq[i * d + e] = f32_from_bits(acc);
        }
    }
done:
    mx_decoded_free(&pq);
    mx_decoded_free(&dsq);
    free(pf);
    free(ds);
    free(diag);
    return st;
}

mxfa_status mxfa_ref_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *o,
                              const mxfa_view_nd *dout, const mxfa_view_nd *lse, const int32_t *cu_q,
                              const int32_t *cu_k, int batch, const mxfa_view_nd *dq, const mxfa_view_nd *dk,
                              const mxfa_view_nd *dv)
{
    const int64_t hq = q->shape[1], hkv = k->shape[1], d = q->shape[2], group = hq / hkv;
    const int64_t bm = p->block_m, bn = p->block_n;
    bwd_head job;
    memset(&job, 0, sizeof job);
    job.p = p;
    job.model = &mxfa_mma_models[p->model];
    job.d = d;
    job.log2e = f32_from_bits(LOG2E_BITS);
    job.c = p->softmax_scale * job.log2e;
    mxfa_status st = MXFA_OK;
    for (int b = 0; b < batch && st == MXFA_OK; b++) {
        job.lq = (int64_t)cu_q[b + 1] - cu_q[b];
        job.lk = (int64_t)cu_k[b + 1] - cu_k[b];
        const int64_t lq = job.lq, lk = job.lk;
        for (int64_t g = 0; g < hkv && st == MXFA_OK; g++) {
            /* dK and dV of this key/value head: the sum over its query heads,
             * each head's gradient (dK scaled) added in increasing head order */
            float *gk = calloc((size_t)(lk * d + 1), sizeof *gk), *gv = calloc((size_t)(lk * d + 1), sizeof *gv);
            if (!gk || !gv) {
                free(gk), free(gv);
                return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention backward: out of memory");
            }
            if (lk > 0 && lq > 0) {
                mxfa_view ks = mxfa_view_slice(k, 0, 2, cu_k[b] * k->stride[0] + g * k->stride[1], lk, d);
                mxfa_view vs = mxfa_view_slice(v, 0, 2, cu_k[b] * v->stride[0] + g * v->stride[1], lk, d);
                st = mx_decoded_quantize(ctx, &ks, MXFA_BLOCK_SQUARE, p->preset, &job.k);
                if (st == MXFA_OK)
                    st = mx_decoded_quantize(ctx, &vs, MXFA_BLOCK_ROW, p->preset, &job.v);
                job.kbf = malloc((size_t)(lk * d) * sizeof *job.kbf);
                job.kbf_rows = malloc((size_t)(lk * d) * sizeof *job.kbf_rows);
                if (st == MXFA_OK && (!job.kbf || !job.kbf_rows))
                    st = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention backward: out of memory");
                for (int64_t j = 0; st == MXFA_OK && j < lk; j++)
                    for (int64_t e = 0; e < d; e++)
                        job.kbf[e * lk + j] = job.kbf_rows[j * d + e] = f32_as_bf16(view_nd_load_f32(k, cu_k[b] + j, g, e));
            }
            for (int64_t h = g * group; h < (g + 1) * group && st == MXFA_OK && lk > 0 && lq > 0; h++) {
                mxfa_view qs = mxfa_view_slice(q, 0, 2, cu_q[b] * q->stride[0] + h * q->stride[1], lq, d);
                mxfa_view os = mxfa_view_slice(dout, 0, 2, cu_q[b] * dout->stride[0] + h * dout->stride[1], lq, d);
                st = mx_decoded_quantize(ctx, &qs, MXFA_BLOCK_SQUARE, p->preset, &job.q);
                if (st == MXFA_OK && (st = mx_decoded_quantize(ctx, &os, MXFA_BLOCK_SQUARE, p->preset, &job.dout)) != MXFA_OK)
                    mx_decoded_free(&job.q);
                if (st != MXFA_OK)
                    break;
                job.lse = malloc((size_t)lq * sizeof *job.lse);
                job.delta = malloc((size_t)lq * sizeof *job.delta);
                job.dq = calloc((size_t)(lq * d), sizeof *job.dq);
                job.dk = calloc((size_t)(lk * d), sizeof *job.dk);
                job.dv = calloc((size_t)(lk * d), sizeof *job.dv);
                if (!job.lse || !job.delta || !job.dq || !job.dk || !job.dv)
                    st = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention backward: out of memory");
                /* preprocess: delta_i = sum_d dO * O, fp32 in increasing d */
                for (int64_t i = 0; st == MXFA_OK && i < lq; i++) {
                    int64_t idx[2] = {cu_q[b] + i, h};
                    memcpy(&job.lse[i], view_nd_at(lse, idx), 4);
                    float acc = 0.0f;
                    for (int64_t e = 0; e < d; e++)
                        acc += view_nd_load_f32(dout, cu_q[b] + i, h, e) * view_nd_load_f32(o, cu_q[b] + i, h, e);
                    job.delta[i] = acc;
                }
                int64_t lim_last_row = key_limit(&job, lq - 1);
                for (int64_t c0 = 0; st == MXFA_OK && c0 < lk && c0 <= lim_last_row; c0 += bn)
                    for (int64_t r0 = 0; st == MXFA_OK && r0 < lq; r0 += bm) {
                        int64_t nr = r0 + bm < lq ? bm : lq - r0;
                        if (key_limit(&job, r0 + nr - 1) < c0)
                            continue; /* no row of this tile sees these keys */
                        st = bwd_tile(ctx, &job, r0, nr, c0, bn);
                    }
                for (int64_t i = 0; st == MXFA_OK && i < lq; i++)
                    for (int64_t e = 0; e < d; e++)
                        ref_store_f32_3d(dq, cu_q[b] + i, h, e, job.dq[i * d + e] * p->softmax_scale);
                for (int64_t x = 0; st == MXFA_OK && x < lk * d; x++) {
                    float sk = job.dk[x] * p->softmax_scale;
                    gk[x] = h == g * group ? sk : gk[x] + sk;
                    gv[x] = h == g * group ? job.dv[x] : gv[x] + job.dv[x];
                }
                mx_decoded_free(&job.q);
                mx_decoded_free(&job.dout);
                free(job.lse), free(job.delta), free(job.dq), free(job.dk), free(job.dv);
                job.lse = job.delta = job.dq = job.dk = job.dv = NULL;
            }
            if (lq == 0 || lk == 0) /* no pairs: zero gradients (dQ of queries that see no key too) */
                for (int64_t h = g * group; h < (g + 1) * group; h++)
                    for (int64_t i = 0; i < lq; i++)
                        for (int64_t e = 0; e < d; e++)
                            ref_store_f32_3d(dq, cu_q[b] + i, h, e, 0.0f);
            for (int64_t j = 0; st == MXFA_OK && j < lk; j++)
                for (int64_t e = 0; e < d; e++) {
                    ref_store_f32_3d(dk, cu_k[b] + j, g, e, gk[j * d + e]);
                    ref_store_f32_3d(dv, cu_k[b] + j, g, e, gv[j * d + e]);
                }
            mx_decoded_free(&job.k);
            mx_decoded_free(&job.v);
            free(job.kbf), free(job.kbf_rows);
            job.kbf = job.kbf_rows = NULL;
            free(gk), free(gv);
        }
    }
    return st;
}
