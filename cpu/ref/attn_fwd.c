/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MXFP8 attention forward, the executable specification (docs/NUMERICS.md
 * section 6). Plain loops over sequences, heads, query tiles and key tiles,
 * in the order a tiled kernel works, because the order of the additions is
 * part of the result.
 */
#include <math.h>
#include <stdlib.h>

#include "mx_decoded.h"

#define LOG2E_BITS 0x3FB8AA3Bu /* fl(log2 e) */
#define LN2_BITS 0x3F317218u   /* fl(ln 2) */

/* The query head's state over its key tiles, per row: running max m (log2
 * domain), the denominator's partial sums l and the unnormalized output O. */
typedef struct row_state {
    float m;
    float l[MXFA_ROW_PARTIALS];
    float *o;
} row_state;

/* Everything one (sequence, query head) needs. */
typedef struct head_job {
    const mxfa_attn_params *p;
    const mma_model_def *model;
    mx_decoded q, k, v; /* Q and K with row blocks along D; V with col blocks along the keys */
    float *vbf;       /* V as bf16 values (fp32 bits), [D][Lk], for leak-free diagonal blocks */
    int64_t lq, lk, d;
    float c; /* fl(softmax_scale * log2 e) */
} head_job;

/* Can query row i (0-based in its sequence) see key j? Bottom-right causal. */
static int64_t key_limit(const head_job *job, int64_t i)
{
    if (job->p->causal == MXFA_CAUSAL_NONE)
        return job->lk - 1;
    return i + job->lk - job->lq;
}

static uint32_t dot_qk(const head_job *job, int64_t i, int64_t j)
{
    uint32_t acc = 0;
    for (int64_t b0 = 0; b0 < job->d; b0 += 32)
        acc = mxfa_mma_block(job->model, &job->q.x[i * job->d + b0], mxd_sexp(&job->q, i, b0), mxd_snan(&job->q, i, b0),
                             &job->k.x[j * job->d + b0], mxd_sexp(&job->k, j, b0), mxd_snan(&job->k, j, b0), 32, acc);
    return acc;
}

/* Scratch for one row of one key tile. */
typedef struct tile_scratch {
    float *s;          /* S of the visible keys */
    uint32_t *p;       /* P as fp32 bits */
    mma_operand *pq;   /* P quantized to E4M3 */
    mma_operand *pbf;  /* P/256 in bf16, for diagonal blocks */
    int *pexp;         /* P's scale exponent per 32 keys (with the -8) */
    uint8_t *pnan;
} tile_scratch;

/*
 * The row sum l of the forward pass (docs/NUMERICS.md section 6) is kept as
 * MXFA_ROW_PARTIALS partial sums, all from +0: key j of the sequence is in
 * class j mod 8 (key tiles start at multiples of 32 keys, so that is also its
 * index mod 8 in the tile). A block of 32 keys adds to partial k the sum of
 * its four P of class k, keys k, k + 8, k + 16 and k + 24 of the block, taken
 * in f16: (P0 + P1) + (P2 + P3), each sum rounded to nearest f16 (P, 256 E,
 * is an f16 value); the blocks go in increasing key order, and a growing max
 * scales every partial by alpha before the tile's P are added. This is the
 * shape of the fast kernels: on a Hopper wgmma accumulator a thread holds
 * keys 8j + 2t and 8j + 2t + 1 of its rows as one f16 pair (classes 2t and
 * 2t + 1, so a block's sums are three f16x2 additions and one widening, and
 * the quad's partials combine with two shuffles in the tree below), a CPU
 * vector of 8 lanes holds all eight classes, and on Blackwell a thread owns
 * a row. The f16 sums (at most 1024, and rounded once where fp32 would add
 * P one by one) halve the kernels' work on the sum; docs/NUMERICS.md gives
 * the accuracy.
 *
 * At the end of the row: l = ((L0 + L1) + (L2 + L3)) + ((L4 + L5) + (L6 + L7)),
 * each sum rounded, times 2^-8 (P is 2^8 times the softmax weight, and the
 * products of O see P / 256).
 */
void mxfa_ref_row_sum_block(float *L, const float *p)
{
    for (int k = 0; k < MXFA_ROW_PARTIALS; k++) {
        /* (an fp32 sum of two f16 values rounded to f16 is their exact sum
         * rounded once: 24 >= 2 * 11 + 2 bits) */
        const float lo = f32_round_f16(p[k] + p[k + 8]), hi = f32_round_f16(p[k + 16] + p[k + 24]);
        L[k] += f32_round_f16(lo + hi);
    }
}

float mxfa_ref_row_sum(const float *L)
{
    return (((L[0] + L[1]) + (L[2] + L[3])) + ((L[4] + L[5]) + (L[6] + L[7]))) * 0.00390625f;
}

/* min(z, 8) that keeps a NaN */
/*
 * One query row against one key tile [c0, c0 + bn): the online-softmax
 * update of docs/NUMERICS.md, "Attention forward", step 2. lim_first,
 * lim_last: the key limits of the query tile's first and last rows (for the
 * leak-free rule).
 */
static void row_tile(const head_job *job, int64_t i, int64_t c0, int64_t bn, int64_t lim_first, int64_t lim_last,
                     row_state *rs, tile_scratch *t)
{
    const int64_t d = job->d, lk = job->lk, lim = key_limit(job, i);
    /* keys [c0, c0 + nvis) are visible: not masked, not past the end */
    int64_t nvis = (lim < lk - 1 ? lim : lk - 1) + 1 - c0;
    nvis = nvis < 0 ? 0 : nvis > bn ? bn : nvis;
    /* S = Q K^T under the model; the max over x = S * c */
    float m_new = rs->m;
    for (int64_t j = 0; j < nvis; j++) {
        t->s[j] = f32_from_bits(dot_qk(job, i, c0 + j));
        float x = t->s[j] * job->c;
        if (x > m_new || isnan(x)) /* a NaN score makes the row NaN */
            m_new = x;
    }
    if (m_new == -INFINITY)
        return; /* nothing visible yet: P is zero */
    if (m_new > rs->m) {
        float alpha = mxfa_exp2(rs->m - m_new);
        for (int64_t e = 0; e < d; e++)
            rs->o[e] *= alpha;
        for (int r = 0; r < MXFA_ROW_PARTIALS; r++)
            rs->l[r] *= alpha;
        rs->m = m_new;
    }
    /* P = 256 E(RN_f16(min(fma(S, c, b), 0))), b = 2^-11 - m, in [0, 256]
     * (E the f16 exponential; the cap keeps h <= 0 where the roundings of m
     * and b would take the exact sum above it); 0 for keys not visible. The
     * 2^-11 offsets, on average, the rounding toward zero of E. Then the
     * row sum, a block of 32 keys at a time. */
    const float b = 0x1p-11f - rs->m;
    for (int64_t j = 0; j < bn; j++)
        t->p[j] = f32_bits(j < nvis ? 256.0f * mxfa_ref_softmax_e(t->s[j], job->c, b) : 0.0f);
    for (int64_t b0 = 0; b0 < bn; b0 += 32) {
        float pb[32];
        for (int j = 0; j < 32; j++)
            pb[j] = f32_from_bits(t->p[b0 + j]);
        mxfa_ref_row_sum_block(rs->l, pb);
    }
    /* P to E4M3: const, one scale 2^-8 (P itself is stored); dynamic, the
     * rceil rule per 32 keys. The MMA sees P/256 either way: the -8 is in the
     * scale exponent, so O and l carry the same factor. */
    for (int64_t b0 = 0; b0 < bn; b0 += 32) {
        mxfa_block_rule rule = {0x7F, 0, FP8_ROUND_NEAREST_EVEN};
        if (job->p->p_scale == MXFA_P_DYNAMIC)
            rule = mxfa_ref_block_rule(&mxfa_fp8_e4m3, MXFA_PRESET_RCEIL, &t->p[b0], 32);
        t->pexp[b0 / 32] = (int)rule.scale - 127 - 8;
        t->pnan[b0 / 32] = rule.scale == 0xFF;
        for (int64_t j = b0; j < b0 + 32; j++)
            t->pq[j] = mxfa_mma_operand_fp8(&mxfa_fp8_e4m3, mxfa_ref_encode_element(&mxfa_fp8_e4m3, &rule, t->p[j]));
    }
    /* O += P V, 32-key block by block in key order */
    for (int64_t b0 = 0; b0 < bn; b0 += 32) {
        int64_t kb0 = c0 + b0, klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
        if (kb0 >= lk || kb0 > lim)
            break; /* P is zero from here on in this row */
        int n = (int)(klast - kb0 + 1), blk = (int)(b0 / 32);
        /* leak-free causal: a block that some row of the query tile sees only
         * in part is multiplied in bf16, so that no V scale spans the diagonal */
        int diagonal = job->p->causal == MXFA_CAUSAL && lim_first < klast && lim_last >= kb0;
        if (diagonal)
            for (int j = 0; j < n; j++)
                t->pbf[j] = mxfa_mma_widen_bf16(&t->pq[b0 + j], t->pexp[blk], t->pnan[blk]);
        for (int64_t e = 0; e < d; e++) {
            uint32_t acc = f32_bits(rs->o[e]);
            if (diagonal) {
                mma_operand vb[32];
                for (int j = 0; j < n; j++)
                    vb[j] = mxfa_mma_operand_bf16(mxfa_f32_bits_to_bf16(f32_bits(job->vbf[e * lk + kb0 + j])));
                acc = mxfa_mma_bf16_steps(job->model, t->pbf, vb, n, acc);
            } else {
                /* V^T row e, keys along it: the transposed decode */
                acc = mxfa_mma_block(job->model, &t->pq[b0], t->pexp[blk], t->pnan[blk], &job->v.t[e * lk + kb0],
                                     mxd_sexp(&job->v, kb0, e), mxd_snan(&job->v, kb0, e), n, acc);
            }
            rs->o[e] = f32_from_bits(acc);
        }
    }
}

/* One (sequence, query head): every query tile against its key tiles. */
static mxfa_status run_head(mxfa_ctx *ctx, head_job *job, const mxfa_view_nd *qv, int64_t q0, int64_t h,
                            const mxfa_view_nd *o, const mxfa_view_nd *lse)
{
    const int64_t lq = job->lq, lk = job->lk, d = job->d, bm = job->p->block_m, bn = job->p->block_n;
    mxfa_view qs = mxfa_view_slice(qv, 0, 2, q0 * qv->stride[0] + h * qv->stride[1], lq, d);
    CHECK(mx_decoded_quantize(ctx, &qs, MXFA_BLOCK_ROW, job->p->preset, &job->q));
    row_state *st = calloc((size_t)lq, sizeof *st);
    float *obuf = calloc((size_t)(lq * d), sizeof *obuf);
    tile_scratch t = {malloc((size_t)bn * sizeof(float)), malloc((size_t)bn * sizeof(uint32_t)),
                      malloc((size_t)bn * sizeof(mma_operand)), malloc(32 * sizeof(mma_operand)),
                      malloc((size_t)(bn / 32) * sizeof(int)), malloc((size_t)(bn / 32))};
    mxfa_status status = MXFA_OK;
    if (!st || !obuf || !t.s || !t.p || !t.pq || !t.pbf || !t.pexp || !t.pnan) {
        status = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < lq; i++) {
        st[i].m = -INFINITY;
        for (int r = 0; r < MXFA_ROW_PARTIALS; r++)
            st[i].l[r] = 0.0f;
        st[i].o = obuf + i * d;
    }
    for (int64_t r0 = 0; r0 < lq; r0 += bm) {
        int64_t nr = r0 + bm < lq ? bm : lq - r0;
        int64_t lim_first = key_limit(job, r0), lim_last = key_limit(job, r0 + nr - 1);
        for (int64_t c0 = 0; c0 < lk && c0 <= lim_last; c0 += bn)
            for (int64_t i = r0; i < r0 + nr; i++)
                row_tile(job, i, c0, bn, lim_first, lim_last, &st[i], &t);
    }
    /* O = O / l (rounded once), LSE = (m + log2 l) * ln 2; rows that saw
     * nothing: O = 0, LSE = -Inf */
    for (int64_t i = 0; i < lq; i++) {
        float l = mxfa_ref_row_sum(st[i].l), lse_v = -INFINITY;
        if (l != 0.0f || isnan(l))
            lse_v = (st[i].m + mxfa_log2(l)) * f32_from_bits(LN2_BITS);
        for (int64_t e = 0; e < d; e++) {
            float v = l != 0.0f || isnan(l) ? st[i].o[e] / l : 0.0f;
            ref_store_f32_3d(o, q0 + i, h, e, v);
        }
        if (lse) {
            int64_t idx[2] = {q0 + i, h};
            lse_v = ref_canonical_nan(lse_v);
            memcpy(view_nd_at(lse, idx), &lse_v, 4);
        }
    }
done:
    mx_decoded_free(&job->q);
    free(st);
    free(obuf);
    free(t.s);
    free(t.p);
    free(t.pq);
    free(t.pbf);
    free(t.pexp);
    free(t.pnan);
    return status;
}

mxfa_status mxfa_ref_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q, const int32_t *cu_k,
                              int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse)
{
    const int64_t hq = q->shape[1], hkv = k->shape[1], d = q->shape[2], group = hq / hkv;
    head_job job;
    memset(&job, 0, sizeof job);
    job.p = p;
    job.model = &mxfa_mma_models[p->model];
    job.d = d;
    job.c = p->softmax_scale * f32_from_bits(LOG2E_BITS);
    for (int b = 0; b < batch; b++) {
        job.lq = (int64_t)cu_q[b + 1] - cu_q[b];
        job.lk = (int64_t)cu_k[b + 1] - cu_k[b];
        if (job.lq == 0)
            continue;
        for (int64_t g = 0; g < hkv; g++) {
            mxfa_status st = MXFA_OK;
            if (job.lk > 0) {
                mxfa_view ks = mxfa_view_slice(k, 0, 2, cu_k[b] * k->stride[0] + g * k->stride[1], job.lk, d);
                mxfa_view vs = mxfa_view_slice(v, 0, 2, cu_k[b] * v->stride[0] + g * v->stride[1], job.lk, d);
                st = mx_decoded_quantize(ctx, &ks, MXFA_BLOCK_ROW, p->preset, &job.k);
                if (st == MXFA_OK && (st = mx_decoded_quantize(ctx, &vs, MXFA_BLOCK_COL, p->preset, &job.v)) != MXFA_OK)
                    mx_decoded_free(&job.k);
                if (st != MXFA_OK)
                    return st;
                job.vbf = malloc((size_t)(job.lk * d) * sizeof *job.vbf);
                if (!job.vbf) {
                    mx_decoded_free(&job.k);
                    mx_decoded_free(&job.v);
                    return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention: out of memory");
                }
                for (int64_t j = 0; j < job.lk; j++)
                    for (int64_t e = 0; e < d; e++)
                        job.vbf[e * job.lk + j] = view_nd_load_f32(v, cu_k[b] + j, g, e);
            }
            for (int64_t h = g * group; h < (g + 1) * group && st == MXFA_OK; h++)
                st = run_head(ctx, &job, q, cu_q[b], h, o, lse);
            if (job.lk > 0) {
                mx_decoded_free(&job.k);
                mx_decoded_free(&job.v);
                free(job.vbf);
                job.vbf = NULL;
            }
            if (st != MXFA_OK)
                return st;
        }
    }
    return MXFA_OK;
}
