/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Attention backward on the cpu backend: the reference algorithm
 * (cpu/ref/attn_bwd.c), the same operations in the same order, with every
 * product run as whole tiles through the exact block step. Key/value heads
 * (and sequences) are independent and run in parallel; inside one, key
 * tiles, query tiles and query heads go in the reference's order, since dQ,
 * dK and dV accumulate across them. Work memory is tile-sized.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

#define LOG2E_BITS 0x3FB8AA3Bu

/* Operands with their block scales: element (r, c) has the scale exponent
 * sexp[(r / br) * sc + c / bc] and the block flags flag[...] (fx.h). */
typedef struct bmat {
    fx_mat x;
    int *sexp;
    uint8_t *flag;
    int64_t br, bc, sc, nblk;
} bmat;

static void bmat_free(bmat *m)
{
    fx_free(&m->x);
    free(m->sexp), free(m->flag);
    m->sexp = NULL;
    m->flag = NULL;
}

static int bmat_alloc(bmat *m, int64_t rows, int64_t cols, mxfa_dtype dt, int64_t br, int64_t bc)
{
    m->br = br;
    m->bc = bc;
    m->sc = ceil_div(cols, bc);
    int64_t n = ceil_div(rows, br) * m->sc;
    m->nblk = n;
    m->sexp = calloc((size_t)n, sizeof *m->sexp);
    m->flag = calloc((size_t)n, 1);
    if (!fx_alloc(&m->x, rows, cols, dt) || !m->sexp || !m->flag) {
        bmat_free(m);
        return 0;
    }
    return 1;
}

/* blocks are 32 or 1 long along each side */
static inline int64_t bidx(const bmat *m, int64_t r, int64_t c)
{
    return (m->br == 32 ? r >> 5 : r) * m->sc + (m->bc == 32 ? c >> 5 : c);
}

/* Quantized codes [rows, cols] with scales [ceil(rows/sbr), ceil(cols/sbc)]
 * into m, transposed when asked; each scale block is one block of m.
 * widen: bf16 operands widened with the scales (kept relative to the
 * block's scale, which becomes its sexp) instead of fp8. */
static void bmat_fill(const cpu_kernels *kern, bmat *m, const uint8_t *codes, const uint8_t *scales, int64_t rows,
                      int64_t cols, int64_t sbr, int64_t sbc, int transposed, int widen, int normalized)
{
    const fx_table *t = fx_table_fp8(MXFA_E4M3, normalized);
    int64_t ssc = ceil_div(cols, sbc);
    /* plain E4M3 whose rows in m are whole 32-blocks: the vector decoder,
     * a row of m per call (from a transposed copy if asked), then the block
     * flags; the codes that are NaN, rare, found one by one */
    const int64_t mrows = transposed ? cols : rows, mcols = transposed ? rows : cols;
    if (!widen && !normalized && mcols % 32 == 0) {
        uint8_t *tc = NULL;
        if (transposed && (tc = malloc((size_t)(rows * cols))) != NULL)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++)
                    tc[c * rows + r] = codes[r * cols + c];
        if (!transposed || tc) {
            const uint8_t *src = transposed ? tc : codes;
            for (int64_t mr = 0; mr < mrows; mr++) {
                int64_t at = mr * m->x.ld;
                if (!kern->decode_e4m3(&src[mr * mcols], (int)mcols, &m->x.v[at], &m->x.e[at], &m->x.code[at]))
                    continue;
                for (int64_t mc = 0; mc < mcols; mc++)
                    if ((src[mr * mcols + mc] & 0x7F) == 0x7F)
                        m->flag[bidx(m, mr, mc)] |= FX_SPECIAL;
            }
            free(tc);
            for (int64_t r0 = 0, rb = 0; r0 < rows; r0 += sbr, rb++)
                for (int64_t c0 = 0, cb = 0; c0 < cols; c0 += sbc, cb++) {
                    uint8_t sb = scales[rb * ssc + cb];
                    int64_t bi = transposed ? bidx(m, c0, r0) : bidx(m, r0, c0);
                    m->sexp[bi] = (int)sb - 127;
                    m->flag[bi] |= (uint8_t)(sb == 0xFF ? FX_NAN_SCALE : 0);
                }
            return;
        }
    }
    for (int64_t r0 = 0, rb = 0; r0 < rows; r0 += sbr, rb++)
        for (int64_t c0 = 0, cb = 0; c0 < cols; c0 += sbc, cb++) {
            uint8_t sb = scales[rb * ssc + cb];
            int64_t r1 = r0 + sbr < rows ? r0 + sbr : rows, c1 = c0 + sbc < cols ? c0 + sbc : cols;
            int64_t bi = transposed ? bidx(m, c0, r0) : bidx(m, r0, c0);
            int f = 0;
            /* along m's rows, reading the codes transposed if asked */
            int64_t mr0 = transposed ? c0 : r0, mr1 = transposed ? c1 : r1;
            int64_t mc0 = transposed ? r0 : c0, mc1 = transposed ? r1 : c1;
            for (int64_t mr = mr0; mr < mr1; mr++)
                for (int64_t mc = mc0; mc < mc1; mc++) {
                    uint8_t code = transposed ? codes[mc * cols + mr] : codes[mr * cols + mc];
                    if (widen) { /* a NaN scale widens to NaN operands */
                        mma_operand o = mxfa_mma_operand_fp8(&mxfa_fp8_e4m3, code);
                        f |= fx_put_bf16_shifted(&m->x, mr, mc, mxfa_mma_widen_bf16_code(&o, (int)sb - 127, sb == 0xFF),
                                                 (int)sb - 127);
                    } else {
                        f |= fx_put_fp8(&m->x, t, mr, mc, code);
                    }
                }
            if (!widen && sb == 0xFF)
                f |= FX_NAN_SCALE;
            m->sexp[bi] = (int)sb - 127;
            m->flag[bi] |= (uint8_t)f;
        }
}

/* fp32 values rounded to bf16 into m, transposed when asked; each block
 * stored relative to its largest exponent, which becomes its sexp. */
static void bmat_fill_bf16(bmat *m, const float *x, int64_t rows, int64_t cols, int transposed)
{
    for (int64_t i = 0; i < m->nblk; i++)
        m->sexp[i] = INT_MIN;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t mr = transposed ? c : r, mc = transposed ? r : c, bi = bidx(m, mr, mc);
            int e = fx_bf16_raw(mxfa_f32_bits_to_bf16(f32_bits(x[r * cols + c])));
            m->sexp[bi] = e > m->sexp[bi] ? e : m->sexp[bi];
        }
    for (int64_t i = 0; i < m->nblk; i++)
        m->sexp[i] = m->sexp[i] == INT_MIN ? 0 : m->sexp[i];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t mr = transposed ? c : r, mc = transposed ? r : c, bi = bidx(m, mr, mc);
            int f = fx_put_bf16_shifted(&m->x, mr, mc, mxfa_f32_bits_to_bf16(f32_bits(x[r * cols + c])), m->sexp[bi]);
            m->flag[bi] |= (uint8_t)f;
        }
}

/* One product block through fx_block with A = a (rows ar0.., k from ak0)
 * and B = b (k from bk0, columns bc0..). */
typedef struct scratch {
    int *sa, *sb;
    uint8_t *fa, *fb;
} scratch;

static void product(const cpu_kernels *kern, const fx_step *st, const bmat *a, int64_t ar0, int64_t ak0,
                    const bmat *b, int64_t bk0, int64_t bc0, int kn, int m, int n, uint32_t *acc, int64_t ldc,
                    scratch *w)
{
    for (int i = 0; i < m; i++) {
        int64_t bi = bidx(a, ar0 + i, ak0);
        w->sa[i] = a->sexp[bi];
        w->fa[i] = a->flag[bi];
    }
    for (int j = 0; j < n; j++) {
        int real = bc0 + j < b->x.cols;
        int64_t bi = bidx(b, bk0, real ? bc0 + j : 0);
        w->sb[j] = real ? b->sexp[bi] : 0;
        w->fb[j] = real ? b->flag[bi] : 0;
    }
    fx_block(kern, st, &a->x, ar0, ak0, &b->x, bk0, bc0, kn, m, n, w->sa, w->fa, w->sb, w->fb, acc, ldc, NULL);
}

typedef struct bwd_kv {
    const mxfa_attn_params *p;
    const cpu_kernels *kern;
    fx_step st, st_bf16;
    int64_t lq, lk, d;
    float c, log2e;
    bmat kt, k, ktbf, kbf, vt;      /* per key/value head */
    bmat q, qw, qt, qtw, dout, doutt, douttw; /* per query head (..t: transposed, ..w: bf16) */
    float *lse, *delta;
    /* fp32 bits: dq [Lq][D]; dK and dV transposed, dkt and dvt [D][ldk]:
     * their products run as dK^T += Q^T dS and dV^T += dO^T P, which
     * take dS and P as they are quantized (the block step is symmetric in
     * its two operands, so every element sees the same steps) */
    uint32_t *dq, *dkt, *dvt;
    int64_t ldk;
    /* per tile */
    float *pf, *ds;
    uint32_t *acc;
    bmat pq, pbf, dsq, dsbf;
    uint8_t *diag;
    scratch w;
} bwd_kv;

static int64_t key_limit(const bwd_kv *job, int64_t i)
{
    return job->p->causal == MXFA_CAUSAL_NONE ? job->lk - 1 : i + job->lk - job->lq;
}

/* One query tile against one key tile; 0 when out of memory. */
static int tile(bwd_kv *job, int64_t r0, int64_t nr, int64_t c0)
{
    const cpu_kernels *kern = job->kern;
    const float *etab = cpu_softmax_e_table();
    const mxfa_attn_params *p = job->p;
    const int64_t d = job->d, lk = job->lk, bn = p->block_n, nrp = round_up(nr, 32), bnp = round_up(bn, KERN_NR);
    const int64_t lim_first = key_limit(job, r0), lim_last = key_limit(job, r0 + nr - 1);
    const int64_t nk = lk - c0 < bn ? lk - c0 : bn;
    for (int64_t b0 = 0; b0 < bn; b0 += 32) {
        int64_t kb0 = c0 + b0, klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
        job->diag[b0 / 32] = p->causal == MXFA_CAUSAL && kb0 < lk && lim_first < klast && lim_last >= kb0;
    }
    /* S (D-block by D-block; diagonal key blocks with bf16 operands), then
     * P = E(RN_f16(min(fma(S, c, 2^-11 - LSE log2 e), 0))) where visible */
    memset(job->acc, 0, (size_t)(nr * bnp) * 4);
    for (int64_t b0 = 0; b0 < nk; b0 += 32)
        for (int64_t e0 = 0; e0 < d; e0 += 32) {
            if (job->diag[b0 / 32])
                product(kern, &job->st_bf16, &job->qw, r0, e0, &job->ktbf, e0, c0 + b0, 32, (int)nr, 32,
                        &job->acc[b0], bnp, &job->w);
            else
                product(kern, &job->st, &job->q, r0, e0, &job->kt, e0, c0 + b0, 32, (int)nr, 32, &job->acc[b0], bnp,
                        &job->w);
        }
    memset(job->pf, 0, (size_t)(nrp * bn) * 4);
    for (int64_t r = 0; r < nr; r++) {
        int64_t i = r0 + r, lim = key_limit(job, i);
        if (job->lse[i] == -INFINITY)
            continue;
        const float b = 0x1p-11f - job->lse[i] * job->log2e;
        int64_t n = lim + 1 - c0; /* visible keys: [c0, lim] within the sequence */
        n = n < nk ? n : nk;
        if (n <= 0)
            continue;
        kern->softmax_p(&job->acc[r * bnp], (int)n, (int)n, job->c, b, etab, &job->pf[r * bn]);
    }
    /* P quantized: const E4M3(P * 256) under 2^-8, or dynamic square blocks;
     * P^T is the A side of dV += P^T dO */
    {
        uint8_t *codes = NULL, *scales = NULL;
        int64_t sc = bn / 32;
        if (p->p_scale == MXFA_P_DYNAMIC) {
            mxfa_view pv = {job->pf, MXFA_F32, nrp, bn, bn, 1, MXFA_MEM_HOST};
            if (!mxfa_cpu_quantize_codes(kern, &pv, MXFA_BLOCK_SQUARE, MXFA_PRESET_RCEIL, &codes, &scales))
                return 0;
        } else {
            codes = malloc((size_t)(nrp * bn));
            scales = malloc((size_t)((nrp / 32) * sc));
            if (!codes || !scales) {
                free(codes), free(scales);
                return 0;
            }
            mxfa_block_rule rule = {0x77, 0, FP8_ROUND_NEAREST_EVEN};
            kern->encode(&mxfa_fp8_e4m3, &rule, (const uint32_t *)job->pf, (int)(nrp * bn), codes);
            memset(scales, 0x77, (size_t)((nrp / 32) * sc));
        }
        memset(job->pq.flag, 0, (size_t)job->pq.nblk);
        bmat_fill(kern, &job->pq, codes, scales, nrp, bn, 32, 32, 0, 0, job->st.widen);
        free(codes), free(scales);
    }
    int any_diag = 0;
    for (int64_t b0 = 0; b0 < bn; b0 += 32)
        any_diag |= job->diag[b0 / 32];
    if (any_diag) {
        memset(job->pbf.flag, 0, (size_t)job->pbf.nblk);
        bmat_fill_bf16(&job->pbf, job->pf, nrp, bn, 0);
    }
    /* dV^T += dO^T P over this tile's queries, 32 at a time */
    for (int64_t q0 = 0; q0 < nr; q0 += 32) {
        int n = (int)(nr - q0 < 32 ? nr - q0 : 32);
        for (int64_t b0 = 0; b0 < nk; b0 += 32) {
            uint32_t *acc = &job->dvt[c0 + b0];
            if (job->diag[b0 / 32])
                product(kern, &job->st_bf16, &job->douttw, 0, r0 + q0, &job->pbf, q0, b0, n, (int)d, 32, acc,
                        job->ldk, &job->w);
            else
                product(kern, &job->st, &job->doutt, 0, r0 + q0, &job->pq, q0, b0, n, (int)d, 32, acc, job->ldk,
                        &job->w);
        }
    }
    /* dP = dO V^T, dS = P (dP - delta) where P is not zero */
    memset(job->acc, 0, (size_t)(nr * bnp) * 4);
    for (int64_t b0 = 0; b0 < nk; b0 += 32)
        for (int64_t e0 = 0; e0 < d; e0 += 32)
            product(kern, &job->st, &job->dout, r0, e0, &job->vt, e0, c0 + b0, 32, (int)nr, 32, &job->acc[b0], bnp,
                    &job->w);
    memset(job->ds, 0, (size_t)(nrp * bn) * 4);
    for (int64_t r = 0; r < nr; r++) {
        int64_t i = r0 + r, n = key_limit(job, i) + 1 - c0; /* visible keys */
        n = n < nk ? n : nk;
        const float *pr = &job->pf[r * bn], delta = job->delta[i];
        const uint32_t *dp = &job->acc[r * bnp];
        float *dsr = &job->ds[r * bn];
        for (int64_t j = 0; j < n; j++) { /* a select, so that the loop vectorizes */
            float v = pr[j] * (f32_from_bits(dp[j]) - delta);
            dsr[j] = pr[j] != 0.0f ? v : 0.0f;
        }
    }
    /* dS quantized in square blocks with the preset: A of dQ, B of dK^T;
     * the diagonal blocks take dS in bf16 */
    {
        uint8_t *codes = NULL, *scales = NULL;
        mxfa_view dv = {job->ds, MXFA_F32, nrp, bn, bn, 1, MXFA_MEM_HOST};
        if (!mxfa_cpu_quantize_codes(kern, &dv, MXFA_BLOCK_SQUARE, p->preset, &codes, &scales))
            return 0;
        memset(job->dsq.flag, 0, (size_t)job->dsq.nblk);
        bmat_fill(kern, &job->dsq, codes, scales, nrp, bn, 32, 32, 0, 0, job->st.widen);
        free(codes), free(scales);
        if (any_diag) {
            memset(job->dsbf.flag, 0, (size_t)job->dsbf.nblk);
            bmat_fill_bf16(&job->dsbf, job->ds, nrp, bn, 0);
        }
    }
    /* dK^T += Q^T dS over this tile's queries */
    for (int64_t q0 = 0; q0 < nr; q0 += 32) {
        int n = (int)(nr - q0 < 32 ? nr - q0 : 32);
        for (int64_t b0 = 0; b0 < nk; b0 += 32) {
            uint32_t *acc = &job->dkt[c0 + b0];
            if (job->diag[b0 / 32])
                product(kern, &job->st_bf16, &job->qtw, 0, r0 + q0, &job->dsbf, q0, b0, n, (int)d, 32, acc,
                        job->ldk, &job->w);
            else
                product(kern, &job->st, &job->qt, 0, r0 + q0, &job->dsq, q0, b0, n, (int)d, 32, acc, job->ldk,
                        &job->w);
        }
    }
    /* dQ += dS K over this tile's keys, 32-key block by block */
    for (int64_t b0 = 0; b0 < nk; b0 += 32) {
        int n = (int)(nk - b0 < 32 ? nk - b0 : 32);
        uint32_t *acc = &job->dq[r0 * d];
        if (job->diag[b0 / 32])
            product(kern, &job->st_bf16, &job->dsbf, 0, b0, &job->kbf, c0 + b0, 0, n, (int)nr, (int)d, acc, d, &job->w);
        else
            product(kern, &job->st, &job->dsq, 0, b0, &job->k, c0 + b0, 0, n, (int)nr, (int)d, acc, d, &job->w);
    }
    return 1;
}

static void job_free(bwd_kv *j)
{
    bmat *all[] = {&j->kt, &j->k,    &j->ktbf, &j->kbf,    &j->vt, &j->q,   &j->qw,  &j->qt,
                   &j->qtw, &j->dout, &j->doutt, &j->douttw, &j->pq, &j->pbf, &j->dsq, &j->dsbf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        bmat_free(all[i]);
    free(j->lse), free(j->delta), free(j->dq), free(j->dkt), free(j->dvt), free(j->pf), free(j->ds), free(j->acc);
    free(j->diag), free(j->w.sa), free(j->w.sb), free(j->w.fa), free(j->w.fb);
}

static int job_alloc(bwd_kv *j)
{
    const int64_t lq = j->lq, lk = j->lk, d = j->d, bm = j->p->block_m, bn = j->p->block_n;
    const int64_t bmp = round_up(bm, 32), bnp = round_up(bn, KERN_NR);
    /* product's operands: up to bm rows (a query tile), bn or D columns */
    const int64_t wmax = bmp > bnp ? (bmp > d ? bmp : d) : (bnp > d ? bnp : d);
    int ok = bmat_alloc(&j->kt, d, lk, MXFA_E4M3, 32, 32) && bmat_alloc(&j->k, lk, d, MXFA_E4M3, 32, 32) &&
             bmat_alloc(&j->ktbf, d, lk, MXFA_BF16, 32, 32) && bmat_alloc(&j->kbf, lk, d, MXFA_BF16, 32, 32) &&
             bmat_alloc(&j->vt, d, lk, MXFA_E4M3, 32, 1) && bmat_alloc(&j->q, lq, d, MXFA_E4M3, 32, 32) &&
             bmat_alloc(&j->qw, lq, d, MXFA_BF16, 32, 32) && bmat_alloc(&j->qt, d, lq, MXFA_E4M3, 32, 32) &&
             bmat_alloc(&j->qtw, d, lq, MXFA_BF16, 32, 32) && bmat_alloc(&j->dout, lq, d, MXFA_E4M3, 32, 32) &&
             bmat_alloc(&j->doutt, d, lq, MXFA_E4M3, 32, 32) && bmat_alloc(&j->douttw, d, lq, MXFA_BF16, 32, 32) &&
             bmat_alloc(&j->pq, bmp, bn, MXFA_E4M3, 32, 32) && bmat_alloc(&j->pbf, bmp, bn, MXFA_BF16, 32, 32) &&
             bmat_alloc(&j->dsq, bmp, bn, MXFA_E4M3, 32, 32) && bmat_alloc(&j->dsbf, bmp, bn, MXFA_BF16, 32, 32);
    j->lse = malloc((size_t)lq * 4);
    j->delta = malloc((size_t)lq * 4);
    j->dq = malloc((size_t)(lq * d) * 4);
    j->ldk = round_up(lk, 32);
    j->dkt = malloc((size_t)(d * j->ldk) * 4);
    j->dvt = malloc((size_t)(d * j->ldk) * 4);
    j->pf = malloc((size_t)(bmp * bn) * 4);
    j->ds = malloc((size_t)(bmp * bn) * 4);
    j->acc = malloc((size_t)(bmp * bnp) * 4);
    j->diag = malloc((size_t)(bn / 32));
    j->w.sa = malloc((size_t)wmax * sizeof(int));
    j->w.sb = malloc((size_t)wmax * sizeof(int));
    j->w.fa = malloc((size_t)wmax);
    j->w.fb = malloc((size_t)wmax);
    return ok && j->lse && j->delta && j->dq && j->dkt && j->dvt && j->pf && j->ds && j->acc && j->diag && j->w.sa &&
           j->w.sb && j->w.fa && j->w.fb;
}

/* A [rows, d] slice of a 3-D view as fp32 values. */
static float *load_slice(const mxfa_view_nd *v, int64_t t0, int64_t h, int64_t rows, int64_t d)
{
    float *x = malloc((size_t)(rows * d + 1) * 4);
    if (x)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t e = 0; e < d; e++)
                x[r * d + e] = view_nd_load_f32(v, t0 + r, h, e);
    return x;
}

/* One (sequence, key/value head): its query heads in increasing order. */
static int run_kv(bwd_kv *job, const mxfa_view_nd *q, const mxfa_view_nd *k, const mxfa_view_nd *v,
                  const mxfa_view_nd *o, const mxfa_view_nd *dout, const mxfa_view_nd *lse, int64_t tq0, int64_t tk0,
                  int64_t g, int64_t group, const mxfa_view_nd *dq, const mxfa_view_nd *dk, const mxfa_view_nd *dv)
{
    const mxfa_attn_params *p = job->p;
    const cpu_kernels *kern = job->kern;
    const int64_t lq = job->lq, lk = job->lk, d = job->d, bm = p->block_m, bn = p->block_n;
    float *gk = calloc((size_t)(lk * d + 1), 4), *gv = calloc((size_t)(lk * d + 1), 4);
    int ok = gk && gv;
    if (ok && lk > 0 && lq > 0) {
        ok = job_alloc(job);
        uint8_t *kc = NULL, *ks = NULL, *vc = NULL, *vs = NULL;
        mxfa_view kv = mxfa_view_slice(k, 0, 2, tk0 * k->stride[0] + g * k->stride[1], lk, d);
        mxfa_view vv = mxfa_view_slice(v, 0, 2, tk0 * v->stride[0] + g * v->stride[1], lk, d);
        float *kf = load_slice(k, tk0, g, lk, d);
        ok = ok && kf && mxfa_cpu_quantize_codes(kern, &kv, MXFA_BLOCK_SQUARE, p->preset, &kc, &ks) &&
             mxfa_cpu_quantize_codes(kern, &vv, MXFA_BLOCK_ROW, p->preset, &vc, &vs);
        if (ok) {
            bmat_fill(kern, &job->kt, kc, ks, lk, d, 32, 32, 1, 0, job->st.widen);
            bmat_fill(kern, &job->k, kc, ks, lk, d, 32, 32, 0, 0, job->st.widen);
            bmat_fill(kern, &job->vt, vc, vs, lk, d, 1, 32, 1, 0, job->st.widen);
            if (p->causal == MXFA_CAUSAL) { /* bf16 operands: the diagonal blocks only */
                bmat_fill_bf16(&job->ktbf, kf, lk, d, 1);
                bmat_fill_bf16(&job->kbf, kf, lk, d, 0);
            }
        }
        free(kc), free(ks), free(vc), free(vs), free(kf);
    }
    for (int64_t h = g * group; ok && h < (g + 1) * group && lk > 0 && lq > 0; h++) {
        uint8_t *qc = NULL, *qs = NULL, *oc = NULL, *os = NULL;
        mxfa_view qv = mxfa_view_slice(q, 0, 2, tq0 * q->stride[0] + h * q->stride[1], lq, d);
        mxfa_view ov = mxfa_view_slice(dout, 0, 2, tq0 * dout->stride[0] + h * dout->stride[1], lq, d);
        ok = mxfa_cpu_quantize_codes(kern, &qv, MXFA_BLOCK_SQUARE, p->preset, &qc, &qs) &&
             mxfa_cpu_quantize_codes(kern, &ov, MXFA_BLOCK_SQUARE, p->preset, &oc, &os);
        if (ok) {
            bmat *hm[] = {&job->q, &job->qw, &job->qt, &job->qtw, &job->dout, &job->doutt, &job->douttw};
            for (size_t i = 0; i < sizeof hm / sizeof hm[0]; i++)
                memset(hm[i]->flag, 0, (size_t)hm[i]->nblk);
            bmat_fill(kern, &job->q, qc, qs, lq, d, 32, 32, 0, 0, job->st.widen);
            bmat_fill(kern, &job->qt, qc, qs, lq, d, 32, 32, 1, 0, job->st.widen);
            bmat_fill(kern, &job->dout, oc, os, lq, d, 32, 32, 0, 0, job->st.widen);
            bmat_fill(kern, &job->doutt, oc, os, lq, d, 32, 32, 1, 0, job->st.widen);
            if (p->causal == MXFA_CAUSAL) {
                bmat_fill(kern, &job->qw, qc, qs, lq, d, 32, 32, 0, 1, 0);
                bmat_fill(kern, &job->qtw, qc, qs, lq, d, 32, 32, 1, 1, 0);
                bmat_fill(kern, &job->douttw, oc, os, lq, d, 32, 32, 1, 1, 0);
            }
        }
        free(qc), free(qs), free(oc), free(os);
        if (!ok)
            break;
        /* preprocess: delta_i = sum_d dO * O, fp32 in increasing d */
        for (int64_t i = 0; i < lq; i++) {
            int64_t idx[2] = {tq0 + i, h};
            memcpy(&job->lse[i], view_nd_at(lse, idx), 4);
            float acc = 0.0f;
            for (int64_t e = 0; e < d; e++)
                acc += view_nd_load_f32(dout, tq0 + i, h, e) * view_nd_load_f32(o, tq0 + i, h, e);
            job->delta[i] = acc;
        }
        memset(job->dq, 0, (size_t)(lq * d) * 4);
        memset(job->dkt, 0, (size_t)(d * job->ldk) * 4);
        memset(job->dvt, 0, (size_t)(d * job->ldk) * 4);
        int64_t lim_last_row = key_limit(job, lq - 1);
        for (int64_t c0 = 0; ok && c0 < lk && c0 <= lim_last_row; c0 += bn)
            for (int64_t r0 = 0; ok && r0 < lq; r0 += bm) {
                int64_t nr = r0 + bm < lq ? bm : lq - r0;
                if (key_limit(job, r0 + nr - 1) < c0)
                    continue;
                ok = tile(job, r0, nr, c0);
            }
        if (!ok)
            break;
        for (int64_t i = 0; i < lq; i++)
            for (int64_t e = 0; e < d; e++)
                ref_store_f32_3d(dq, tq0 + i, h, e, f32_from_bits(job->dq[i * d + e]) * p->softmax_scale);
        for (int64_t e = 0; e < d; e++)
            for (int64_t j = 0; j < lk; j++) {
                int64_t x = j * d + e, y = e * job->ldk + j;
                float sk = f32_from_bits(job->dkt[y]) * p->softmax_scale, sv = f32_from_bits(job->dvt[y]);
                gk[x] = h == g * group ? sk : gk[x] + sk;
                gv[x] = h == g * group ? sv : gv[x] + sv;
            }
    }
    if (ok && (lq == 0 || lk == 0))
        for (int64_t h = g * group; h < (g + 1) * group; h++)
            for (int64_t i = 0; i < lq; i++)
                for (int64_t e = 0; e < d; e++)
                    ref_store_f32_3d(dq, tq0 + i, h, e, 0.0f);
    for (int64_t j = 0; ok && j < lk; j++)
        for (int64_t e = 0; e < d; e++) {
            ref_store_f32_3d(dk, tk0 + j, g, e, gk[j * d + e]);
            ref_store_f32_3d(dv, tk0 + j, g, e, gv[j * d + e]);
        }
    free(gk), free(gv);
    return ok;
}

mxfa_status mxfa_cpu_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *o,
                              const mxfa_view_nd *dout, const mxfa_view_nd *lse, const int32_t *cu_q,
                              const int32_t *cu_k, int batch, const mxfa_view_nd *dq, const mxfa_view_nd *dk,
                              const mxfa_view_nd *dv)
{
    const int64_t hkv = k->shape[1], group = q->shape[1] / hkv, units = (int64_t)batch * hkv;
    int failed = 0;
#pragma omp parallel
    {
        CPU_FPENV_ENTER;
#pragma omp for schedule(dynamic)
        for (int64_t u = 0; u < units; u++) {
            int b = (int)(u / hkv);
            int64_t g = u % hkv;
            bwd_kv job;
            memset(&job, 0, sizeof job);
            job.p = p;
            job.kern = cpu_kern(ctx);
            job.st = fx_step_block(p->model);
            job.st_bf16 = fx_step_bf16(p->model);
            job.d = q->shape[2];
            job.log2e = f32_from_bits(LOG2E_BITS);
            job.c = p->softmax_scale * job.log2e;
            job.lq = (int64_t)cu_q[b + 1] - cu_q[b];
            job.lk = (int64_t)cu_k[b + 1] - cu_k[b];
            if (!run_kv(&job, q, k, v, o, dout, lse, cu_q[b], cu_k[b], g, group, dq, dk, dv)) {
#pragma omp atomic write
                failed = 1;
            }
            job_free(&job);
        }
        CPU_FPENV_LEAVE;
    }
    if (failed)
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention backward: out of memory");
    return MXFA_OK;
}
