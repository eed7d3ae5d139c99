/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Attention forward on the cpu backend: the reference algorithm
 * (cpu/ref/attn_fwd.c) with the same operations in the same order, run as
 * whole tiles through the exact block step, query tiles in parallel. Every
 * row's softmax state is its own, so tiles can run in any order; within a
 * row, key tiles and 32-key blocks go in increasing order as in the
 * reference. Work memory is tile-sized: S and P for one query tile against
 * one key tile, never S x S.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

#define LOG2E_BITS 0x3FB8AA3Bu
#define LN2_BITS 0x3F317218u

/* Everything of one (sequence, kv head) that its query heads share. */
typedef struct kv_side {
    fx_mat kt;          /* K^T [D, Lk]: the B side of S = Q K^T */
    int *sk;            /* scale of key j in D-block db at [db * ldk + j] */
    uint8_t *fk;
    fx_mat v;           /* V [Lk, D]: the B side of O += P V */
    int *sv;            /* scale of (32-key block kb, column e) at [kb * D + e] */
    uint8_t *fv;
    fx_mat vbf;         /* V rounded to bf16, for leak-free diagonal blocks */
    uint8_t *fvbf;
    int64_t lk, ldk, d;
} kv_side;

static void kv_free(kv_side *s)
{
    fx_free(&s->kt), fx_free(&s->v), fx_free(&s->vbf);
    free(s->sk), free(s->fk), free(s->sv), free(s->fv), free(s->fvbf);
    memset(s, 0, sizeof *s);
}

static int kv_build(const cpu_kernels *kern, const mxfa_attn_params *p, const fx_step *st, const mxfa_view *ks,
                    const mxfa_view *vs, kv_side *s)
{
    const int64_t lk = ks->rows, d = ks->cols, nkb = ceil_div(lk, 32), ndb = d / 32;
    const fx_table *t = fx_table_fp8(MXFA_E4M3, st->widen);
    uint8_t *kc = NULL, *kscale = NULL, *vc = NULL, *vscale = NULL;
    s->lk = lk;
    s->d = d;
    if (!fx_alloc(&s->kt, d, lk, MXFA_E4M3) || !fx_alloc(&s->v, nkb * 32, d, MXFA_E4M3))
        return 0;
    s->ldk = s->kt.ld;
    s->sk = calloc((size_t)(ndb * s->ldk), sizeof *s->sk);
    s->fk = calloc((size_t)(ndb * s->ldk), 1);
    s->sv = calloc((size_t)(nkb * d), sizeof *s->sv);
    s->fv = calloc((size_t)(nkb * d), 1);
    if (!s->sk || !s->fk || !s->sv || !s->fv || !mxfa_cpu_quantize_codes(kern, ks, MXFA_BLOCK_ROW, p->preset, &kc, &kscale) ||
        !mxfa_cpu_quantize_codes(kern, vs, MXFA_BLOCK_COL, p->preset, &vc, &vscale)) {
        free(kc), free(kscale);
        return 0;
    }
    mxfa_view kcv = {kc, MXFA_E4M3, lk, d, d, 1, MXFA_MEM_HOST};
    mxfa_view ksv = {kscale, MXFA_E8M0, lk, ndb, ndb, 1, MXFA_MEM_HOST};
    fx_decode_rows(kern, &kcv, &ksv, t, 1, &s->kt, s->sk, s->fk, s->ldk);
    /* table lookups, integer work and exact conversions only: no
     * floating-point environment needed. Plain E4M3 rows go through the
     * vector decoder; the NaN codes (rare) are found one by one. */
    const int vector = t == fx_table_fp8(MXFA_E4M3, 0);
#pragma omp parallel for schedule(static)
    for (int64_t kb = 0; kb < nkb; kb++) {
        for (int64_t e = 0; e < d; e++) {
            uint8_t sb = vscale[kb * d + e];
            s->sv[kb * d + e] = (int)sb - 127;
            s->fv[kb * d + e] = sb == 0xFF ? FX_NAN_SCALE : 0;
        }
        for (int64_t j = kb * 32; j < lk && j < kb * 32 + 32; j++) {
            int64_t at = j * s->v.ld;
            if (!vector) {
                for (int64_t e = 0; e < d; e++)
                    s->fv[kb * d + e] |= (uint8_t)fx_put_fp8(&s->v, t, j, e, vc[j * d + e]);
            } else if (kern->decode_e4m3(&vc[j * d], (int)d, &s->v.v[at], &s->v.e[at], &s->v.code[at])) {
                for (int64_t e = 0; e < d; e++)
                    if ((vc[j * d + e] & 0x7F) == 0x7F)
                        s->fv[kb * d + e] |= FX_SPECIAL;
            }
        }
    }
    free(kc), free(kscale), free(vc), free(vscale);
    if (p->causal == MXFA_CAUSAL) {
        if (!fx_alloc(&s->vbf, nkb * 32, d, MXFA_BF16) || !(s->fvbf = calloc((size_t)(nkb * d), 1)))
            return 0;
        for (int64_t j = 0; j < lk; j++)
            for (int64_t e = 0; e < d; e++)
                s->fvbf[(j / 32) * d + e] |= (uint8_t)fx_put_bf16(&s->vbf, j, e, mxfa_f32_bits_to_bf16(ref_load_f32(vs, j, e)));
    }
    return 1;
}

/* One query tile's work space. */
typedef struct tile_ws {
    fx_mat q, p, pbf;
    int *sq, *sp, *zero;
    uint8_t *fq, *fp, *fpbf, *active, *row_on;
    uint32_t *s, *o, *pbits;
    float *m, *l; /* l: MXFA_ROW_PARTIALS partial sums a row */
} tile_ws;

static void ws_free(tile_ws *w)
{
    fx_free(&w->q), fx_free(&w->p), fx_free(&w->pbf);
    free(w->sq), free(w->sp), free(w->zero), free(w->fq), free(w->fp), free(w->fpbf), free(w->active), free(w->row_on);
    free(w->s), free(w->o), free(w->pbits), free(w->m), free(w->l);
    memset(w, 0, sizeof *w);
}

static int ws_alloc(tile_ws *w, int64_t bm, int64_t bn, int64_t d)
{
    int64_t nb = bn / 32, nd = d / 32, bnp = round_up(bn, KERN_NR);
    memset(w, 0, sizeof *w);
    int ok = fx_alloc(&w->q, bm, d, MXFA_E4M3) && fx_alloc(&w->p, bm, bn, MXFA_E4M3) &&
             fx_alloc(&w->pbf, bm, bn, MXFA_BF16);
    /* zeroed: the block steps read the scales and flags of every row of a
     * group of KERN_MR, also of rows past the tile's end or without keys,
     * whose results they then drop */
    w->sq = calloc((size_t)(nd * bm), sizeof(int));
    w->fq = calloc((size_t)(nd * bm), 1);
    w->sp = calloc((size_t)(nb * bm), sizeof(int));
    w->fp = calloc((size_t)(nb * bm), 1);
    w->fpbf = calloc((size_t)(nb * bm), 1);
    w->zero = calloc((size_t)(bm > d ? bm : d), sizeof(int));
    w->active = malloc((size_t)bm);
    w->row_on = malloc((size_t)bm);
    w->s = malloc((size_t)(bm * bnp) * 4);
    w->o = malloc((size_t)(bm * d) * 4);
    w->pbits = malloc((size_t)bn * 4);
    w->m = malloc((size_t)bm * 4);
    w->l = malloc((size_t)(bm * MXFA_ROW_PARTIALS) * 4);
    return ok && w->sq && w->fq && w->sp && w->fp && w->fpbf && w->zero && w->active && w->row_on && w->s &&
           w->o && w->pbits && w->m && w->l;
}

/* The decoded K and V that one forward call keeps at once (bytes), when
 * more than one key/value head fits. */
#define KV_BUDGET (INT64_C(256) << 20)

typedef struct fwd_job {
    const mxfa_attn_params *p;
    const cpu_kernels *kern;
    fx_step st, st_bf16;
    int64_t lq, lk, d;
    float c;
} fwd_job;

static int64_t key_limit(const fwd_job *job, int64_t i)
{
    return job->p->causal == MXFA_CAUSAL_NONE ? job->lk - 1 : i + job->lk - job->lq;
}

static float f32_of(uint32_t b)
{
    return f32_from_bits(b);
}

/* One query tile [r0, r0 + nr) of one head against all its key tiles. */
static int run_tile(const fwd_job *job, const kv_side *kv, const mxfa_view *qs, int64_t r0, int64_t nr, tile_ws *w,
                    const mxfa_view_nd *o, const mxfa_view_nd *lse, int64_t q0, int64_t h)
{
    const cpu_kernels *kern = job->kern;
    const float *ptab = cpu_softmax_p_table();
    const mxfa_attn_params *p = job->p;
    const int64_t d = job->d, lk = job->lk, bn = p->block_n, nd = d / 32;
    const fx_table *t = fx_table_fp8(MXFA_E4M3, job->st.widen);
    /* Q rows, row blocks along D */
    uint8_t *qc, *qscale;
    mxfa_view qt = *qs;
    qt.base = view_at(qs, r0, 0);
    qt.rows = nr;
    if (!mxfa_cpu_quantize_codes(kern, &qt, MXFA_BLOCK_ROW, p->preset, &qc, &qscale))
        return 0;
    mxfa_view qcv = {qc, MXFA_E4M3, nr, d, d, 1, MXFA_MEM_HOST};
    mxfa_view qsv = {qscale, MXFA_E8M0, nr, nd, nd, 1, MXFA_MEM_HOST};
    fx_decode_rows(kern, &qcv, &qsv, t, 0, &w->q, w->sq, w->fq, p->block_m);
    free(qc), free(qscale);
    for (int64_t i = 0; i < nr; i++)
        w->m[i] = -INFINITY;
    memset(w->l, 0, (size_t)(nr * MXFA_ROW_PARTIALS) * 4);
    memset(w->o, 0, (size_t)(nr * d) * 4);
    const int64_t lim_first = key_limit(job, r0), lim_last = key_limit(job, r0 + nr - 1);
    for (int64_t c0 = 0; c0 < lk && c0 <= lim_last; c0 += bn) {
        const int64_t ncols = round_up(lk - c0 < bn ? lk - c0 : bn, KERN_NR), ldsx = round_up(bn, KERN_NR);
        /* S = Q K^T for the tile, D-block by D-block */
        memset(w->s, 0, (size_t)(nr * ldsx) * 4);
        for (int64_t db = 0; db < nd; db++)
            fx_block(kern, &job->st, &w->q, 0, db * 32, &kv->kt, db * 32, c0, 32, (int)nr, (int)ncols,
                     &w->sq[db * p->block_m], &w->fq[db * p->block_m], &kv->sk[db * kv->ldk + c0],
                     &kv->fk[db * kv->ldk + c0], w->s, ldsx, NULL);
        /* the online softmax, row by row, as the reference does it */
        for (int64_t r = 0; r < nr; r++) {
            const int64_t i = r0 + r, lim = key_limit(job, i);
            int64_t nvis = (lim < lk - 1 ? lim : lk - 1) + 1 - c0; /* keys [c0, c0 + nvis) */
            nvis = nvis < 0 ? 0 : nvis > bn ? bn : nvis;
            float m_new = kern->row_max(&w->s[r * ldsx], (int)nvis, job->c, w->m[r]);
            w->row_on[r] = m_new != -INFINITY;
            if (!w->row_on[r])
                continue;
            float *l = &w->l[r * MXFA_ROW_PARTIALS];
            if (m_new > w->m[r]) {
                float alpha = mxfa_exp2(w->m[r] - m_new);
                for (int64_t e = 0; e < d; e++)
                    w->o[r * d + e] = f32_bits(f32_of(w->o[r * d + e]) * alpha);
                for (int k = 0; k < MXFA_ROW_PARTIALS; k++)
                    l[k] *= alpha;
                w->m[r] = m_new;
            }
            float *pf = (float *)w->pbits;
            kern->softmax_p(&w->s[r * ldsx], (int)nvis, (int)bn, job->c, 0x1p-11f - w->m[r], ptab, pf);
            for (int64_t b0 = 0; b0 < bn; b0 += 32) /* the reference's own step */
                mxfa_ref_row_sum_block(l, &pf[b0]);
            for (int64_t b0 = 0; b0 < bn; b0 += 32) {
                mxfa_block_rule rule = {0x7F, 0, FP8_ROUND_NEAREST_EVEN};
                if (p->p_scale == MXFA_P_DYNAMIC)
                    rule = mxfa_ref_block_rule(&mxfa_fp8_e4m3, MXFA_PRESET_RCEIL, &w->pbits[b0], 32);
                uint8_t codes[32];
                kern->encode(&mxfa_fp8_e4m3, &rule, &w->pbits[b0], 32, codes);
                int blk = (int)(b0 / 32), pexp = (int)rule.scale - 127 - 8, f = rule.scale == 0xFF ? FX_NAN_SCALE : 0;
                if (job->st.widen) {
                    for (int j = 0; j < 32; j++)
                        f |= fx_put_fp8(&w->p, t, r, b0 + j, codes[j]);
                } else {
                    int64_t at = r * w->p.ld + b0;
                    if (kern->decode_e4m3(codes, 32, &w->p.v[at], &w->p.e[at], &w->p.code[at]))
                        f |= FX_SPECIAL;
                }
                w->sp[blk * p->block_m + r] = pexp;
                w->fp[blk * p->block_m + r] = (uint8_t)f;
                if (p->causal == MXFA_CAUSAL) { /* P / 256 in bf16, for diagonal blocks */
                    int fb = 0;
                    for (int j = 0; j < 32; j++) {
                        mma_operand x = mxfa_mma_operand_fp8(&mxfa_fp8_e4m3, codes[j]);
                        fb |= fx_put_bf16(&w->pbf, r, b0 + j, mxfa_mma_widen_bf16_code(&x, pexp, f & FX_NAN_SCALE));
                    }
                    w->fpbf[blk * p->block_m + r] = (uint8_t)fb;
                }
            }
        }
        /* O += P V, 32-key block by block in key order */
        for (int64_t b0 = 0; b0 < bn; b0 += 32) {
            int64_t kb0 = c0 + b0, klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
            if (kb0 >= lk)
                break;
            int any = 0, n = (int)(klast - kb0 + 1), blk = (int)(b0 / 32);
            for (int64_t r = 0; r < nr; r++) {
                w->active[r] = w->row_on[r] && kb0 <= key_limit(job, r0 + r);
                any |= w->active[r];
            }
            if (!any)
                break;
            int diagonal = p->causal == MXFA_CAUSAL && lim_first < klast && lim_last >= kb0;
            if (diagonal)
                fx_block(kern, &job->st_bf16, &w->pbf, 0, b0, &kv->vbf, kb0, 0, n, (int)nr, (int)d, w->zero,
                         &w->fpbf[blk * p->block_m], w->zero, &kv->fvbf[(kb0 / 32) * d], w->o, d, w->active);
            else
                fx_block(kern, &job->st, &w->p, 0, b0, &kv->v, kb0, 0, n, (int)nr, (int)d, &w->sp[blk * p->block_m],
                         &w->fp[blk * p->block_m], &kv->sv[(kb0 / 32) * d], &kv->fv[(kb0 / 32) * d], w->o, d,
                         w->active);
        }
    }
    /* O = O / l, LSE = (m + log2 l) ln 2; rows that saw nothing: 0, -Inf */
    for (int64_t r = 0; r < nr; r++) {
        float l = mxfa_ref_row_sum(&w->l[r * MXFA_ROW_PARTIALS]), lse_v = -INFINITY;
        int seen = l != 0.0f || isnan(l);
        if (seen)
            lse_v = (w->m[r] + mxfa_log2(l)) * f32_from_bits(LN2_BITS);
        for (int64_t e = 0; e < d; e++) {
            float v = seen ? f32_of(w->o[r * d + e]) / l : 0.0f;
            ref_store_f32_3d(o, q0 + r0 + r, h, e, v);
        }
        if (lse) {
            int64_t idx[2] = {q0 + r0 + r, h};
            lse_v = ref_canonical_nan(lse_v);
            memcpy(view_nd_at(lse, idx), &lse_v, 4);
        }
    }
    return 1;
}

mxfa_status mxfa_cpu_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q, const int32_t *cu_k,
                              int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse)
{
    const int64_t hkv = k->shape[1], d = q->shape[2], group = q->shape[1] / hkv, bm = p->block_m;
    fwd_job job;
    job.p = p;
    job.kern = cpu_kern(ctx);
    job.st = fx_step_block(p->model);
    job.st_bf16 = fx_step_bf16(p->model);
    job.d = d;
    job.c = p->softmax_scale * f32_from_bits(LOG2E_BITS);
    for (int b = 0; b < batch; b++) {
        job.lq = (int64_t)cu_q[b + 1] - cu_q[b];
        job.lk = (int64_t)cu_k[b + 1] - cu_k[b];
        if (job.lq == 0)
            continue;
        const int64_t tiles = ceil_div(job.lq, bm);
        /* key/value heads in chunks whose decoded K and V fit a budget, all
         * query tiles of a chunk's heads in one parallel loop: one head's
         * sixteen or so tiles alone leave a thread idle at its end */
        const int64_t per_head = 36 * (job.lk + 64) * (d + 64) + 1;
        int64_t chunk = KV_BUDGET / per_head;
        chunk = chunk < 1 ? 1 : chunk > hkv ? hkv : chunk;
        kv_side *kv = calloc((size_t)chunk, sizeof *kv);
        if (!kv)
            return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention: out of memory");
        for (int64_t g0 = 0; g0 < hkv; g0 += chunk) {
            const int64_t ng = hkv - g0 < chunk ? hkv - g0 : chunk;
            int failed = 0;
            for (int64_t gi = 0; gi < ng && !failed && job.lk > 0; gi++) {
                const int64_t g = g0 + gi;
                mxfa_view ks = mxfa_view_slice(k, 0, 2, cu_k[b] * k->stride[0] + g * k->stride[1], job.lk, d);
                mxfa_view vs = mxfa_view_slice(v, 0, 2, cu_k[b] * v->stride[0] + g * v->stride[1], job.lk, d);
                failed = !kv_build(job.kern, p, &job.st, &ks, &vs, &kv[gi]);
            }
            const int64_t units = failed ? 0 : ng * group * tiles;
#pragma omp parallel if (units > 1)
            {
                CPU_FPENV_ENTER;
                tile_ws w;
                int ok = ws_alloc(&w, bm, p->block_n, d);
#pragma omp for schedule(dynamic)
                for (int64_t u = 0; u < units; u++) {
                    const int64_t gi = u / (group * tiles), h = (g0 + gi) * group + u / tiles % group, ti = u % tiles;
                    mxfa_view qs = mxfa_view_slice(q, 0, 2, cu_q[b] * q->stride[0] + h * q->stride[1], job.lq, d);
                    int64_t r0 = ti * bm, nr = job.lq - r0 < bm ? job.lq - r0 : bm;
                    if (!ok || !run_tile(&job, &kv[gi], &qs, r0, nr, &w, o, lse, cu_q[b], h)) {
#pragma omp atomic write
                        failed = 1;
                    }
                }
                ws_free(&w);
                CPU_FPENV_LEAVE;
            }
            for (int64_t gi = 0; gi < ng; gi++)
                kv_free(&kv[gi]);
            if (failed) {
                free(kv);
                return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention: out of memory");
            }
        }
        free(kv);
    }
    return MXFA_OK;
}
