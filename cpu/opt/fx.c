/* SPDX-License-Identifier: BSD-3-Clause */
/* Decoded operands and the exact block step (fx.h). */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "fx.h"

void fx_free(fx_mat *m)
{
    free(m->v);
    free(m->e);
    free(m->code);
    m->v = NULL;
    m->e = m->code = NULL;
}

int fx_alloc(fx_mat *m, int64_t rows, int64_t cols, mxfa_dtype dtype)
{
    m->rows = rows;
    m->cols = cols;
    m->ld = round_up(cols > 0 ? cols : 1, KERN_NR);
    /* Rows a multiple of 4 KiB apart share their first-level cache sets,
     * and the 32 rows of a B tile then evict each other: one cache line of
     * padding spreads them. */
    if (m->ld % 512 == 0)
        m->ld += 8;
    m->dtype = dtype;
    size_t n = (size_t)((rows > 0 ? rows : 1) * m->ld);
    m->v = calloc(n, sizeof *m->v);
    m->e = calloc(n, sizeof *m->e);
    m->code = calloc(n, sizeof *m->code);
    if (!m->v || !m->e || !m->code) {
        fx_free(m);
        return 0;
    }
    return 1;
}

/* The fields of a finite non-zero operand with the given raw exponent and
 * significand of frac_bits fraction bits, or -1 when out of range. */
static int fields(int raw, uint32_t sig, int frac_bits)
{
    int lsb = raw - frac_bits + __builtin_ctz(sig);
    if (raw < -FX_FIELD_LIMIT || raw > FX_FIELD_LIMIT || -lsb < -FX_FIELD_LIMIT || -lsb > FX_FIELD_LIMIT)
        return -1;
    return (raw + FX_BIAS) | (-lsb + FX_BIAS) << 8;
}

static fx_table tables[2][2]; /* [E5M2?][normalized?] */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (int f = 0; f < 2; f++)
        for (int norm = 0; norm < 2; norm++) {
            const fp8_format *fmt = f ? &mxfa_fp8_e5m2 : &mxfa_fp8_e4m3;
            fx_table *t = &tables[f][norm];
            for (int c = 0; c < 256; c++) {
                mma_operand o = mxfa_mma_operand_fp8(fmt, (uint8_t)c);
                t->v[c] = 0.0;
                t->e[c] = 0;
                t->special[c] = o.cls == MMA_NAN || o.cls == MMA_INF;
                if (o.cls != MMA_FINITE)
                    continue;
                t->v[c] = ldexp(o.sign ? -(double)o.sig : (double)o.sig, o.raw - o.frac_bits);
                int raw = o.raw;
                if (norm) /* the exponent of the value itself */
                    raw = o.raw - o.frac_bits + (31 - __builtin_clz(o.sig));
                int e = fields(raw, o.sig, o.frac_bits);
                if (e < 0)
                    t->special[c] = 1;
                else
                    t->e[c] = (uint16_t)e;
            }
        }
}

const fx_table *fx_table_fp8(mxfa_dtype dtype, int normalized)
{
    pthread_once(&tables_once, build_tables);
    return &tables[dtype == MXFA_E5M2][normalized != 0];
}

int fx_put_bf16(fx_mat *m, int64_t r, int64_t c, uint16_t h)
{
    return fx_put_bf16_shifted(m, r, c, h, 0);
}

int fx_bf16_raw(uint16_t h)
{
    mma_operand o = mxfa_mma_operand_bf16(h);
    return o.cls == MMA_FINITE ? o.raw : INT_MIN;
}

int fx_put_bf16_shifted(fx_mat *m, int64_t r, int64_t c, uint16_t h, int shift)
{
    int64_t i = r * m->ld + c;
    mma_operand o = mxfa_mma_operand_bf16(h);
    m->code[i] = h;
    m->v[i] = 0.0;
    m->e[i] = 0;
    if (o.cls == MMA_NAN || o.cls == MMA_INF)
        return FX_SPECIAL;
    if (o.cls == MMA_ZERO)
        return 0;
    m->v[i] = ldexp(o.sign ? -(double)o.sig : (double)o.sig, o.raw - shift - o.frac_bits);
    int e = fields(o.raw - shift, o.sig, o.frac_bits);
    if (e < 0) /* normal: the double's exponent is the operand's */
        return o.sig >> o.frac_bits ? FX_WIDE : FX_SPECIAL;
    m->e[i] = (uint16_t)e;
    return 0;
}

fx_step fx_step_block(mxfa_model model)
{
    const mma_model_def *def = &mxfa_mma_models[model];
    fx_step st = {def, KERN_IN_EXPONENT, 0, 0, 0};
    switch (def->scaling) {
    case MMA_SCALE_IN_EXPONENT: st.how = KERN_IN_EXPONENT; break;
    case MMA_SCALE_AT_PROMOTION:
        st.how = def->step->frac_bits == MMA_EXACT ? KERN_EXACT_PROMOTE : KERN_TRUNC13_PROMOTE;
        break;
    case MMA_SCALE_INTO_BF16:
        st.how = KERN_IN_EXPONENT;
        st.group = def->bf16_step->group;
        st.widen = 1;
        break;
    }
    return st;
}

fx_step fx_step_bf16(mxfa_model model)
{
    const mma_model_def *def = &mxfa_mma_models[model];
    fx_step st = {def, KERN_IN_EXPONENT, def->bf16_step->group, 1, 0};
    if (def->bf16_step->sum_bits == MMA_EXACT) { /* the exact sum, promoted once */
        st.how = KERN_EXACT_PROMOTE;
        st.group = 0;
    }
    return st;
}

/* A matrix [rows, K] of fp8 codes with its compact scales, decoded as the
 * A side (rows) or, transposed, as the B side ([K, rows]). Scales and
 * flags land at [kb * ld_s + row]. */
void fx_decode_rows(const cpu_kernels *kern, const mxfa_view *x, const mxfa_view *s, const fx_table *t, int transposed,
                    fx_mat *m, int *sexp, uint8_t *flag, int64_t ld_s)
{
    int64_t rows = x->rows, K = x->cols, nkb = ceil_div(K, 32);
    /* whole 32-blocks of E4M3 rows with the plain table: the vector decoder */
    const int vector = !transposed && x->dtype == MXFA_E4M3 && x->cs == 1 && t == fx_table_fp8(MXFA_E4M3, 0);
    /* transposed, with rows a multiple of eight: the vector decoder on each
     * row of m, from a transposed copy of the codes; then the scales and
     * flags, the NaN codes (rare) found one by one */
    uint8_t *tc = NULL;
    if (transposed && rows % 8 == 0 && x->dtype == MXFA_E4M3 && t == fx_table_fp8(MXFA_E4M3, 0) &&
        (tc = malloc((size_t)(rows * K))) != NULL) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < K; k++)
                tc[k * rows + r] = *(const uint8_t *)view_at(x, r, k);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t kb = 0; kb < nkb; kb++) {
                uint8_t sb = *(const uint8_t *)view_at(s, r, kb);
                sexp[kb * ld_s + r] = (int)sb - 127;
                flag[kb * ld_s + r] = sb == 0xFF ? FX_NAN_SCALE : 0;
            }
        int nan_rows = 0;
#pragma omp parallel for schedule(static) reduction(|| : nan_rows)
        for (int64_t k = 0; k < K; k++)
            nan_rows = kern->decode_e4m3(&tc[k * rows], (int)rows, &m->v[k * m->ld], &m->e[k * m->ld],
                                         &m->code[k * m->ld]) || nan_rows;
        if (nan_rows)
            for (int64_t k = 0; k < K; k++)
                for (int64_t r = 0; r < rows; r++)
                    if ((tc[k * rows + r] & 0x7F) == 0x7F)
                        flag[(k / 32) * ld_s + r] |= FX_SPECIAL;
        free(tc);
        return;
    }
/* table lookups and integer work only: no floating-point environment needed */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kb = 0; kb < nkb; kb++) {
            uint8_t sb = *(const uint8_t *)view_at(s, r, kb);
            int f = sb == 0xFF ? FX_NAN_SCALE : 0;
            if (vector && kb * 32 + 32 <= K) {
                int64_t at = r * m->ld + kb * 32;
                if (kern->decode_e4m3((const uint8_t *)view_at(x, r, kb * 32), 32, &m->v[at], &m->e[at], &m->code[at]))
                    f |= FX_SPECIAL;
            } else {
                for (int64_t k = kb * 32; k < K && k < kb * 32 + 32; k++) {
                    uint8_t code = *(const uint8_t *)view_at(x, r, k);
                    f |= transposed ? fx_put_fp8(m, t, k, r, code) : fx_put_fp8(m, t, r, k, code);
                }
            }
            sexp[kb * ld_s + r] = (int)sb - 127;
            flag[kb * ld_s + r] = (uint8_t)f;
        }
}

static mma_operand operand_of(const fx_mat *m, int64_t i)
{
    if (m->dtype == MXFA_BF16)
        return mxfa_mma_operand_bf16(m->code[i]);
    return mxfa_mma_operand_fp8(mxfa_fp8_format(m->dtype), (uint8_t)m->code[i]);
}

/* The reference step for one element. */
static uint32_t fallback(const fx_step *st, const fx_mat *a, int64_t ai, int64_t ak0, const fx_mat *b, int64_t bk0,
                         int64_t bj, int kn, int sa, int nan_a, int sb, int nan_b, uint32_t acc)
{
    mma_operand x[32], y[32];
    for (int k = 0; k < kn; k++) {
        x[k] = operand_of(a, ai * a->ld + ak0 + k);
        y[k] = operand_of(b, (bk0 + k) * b->ld + bj);
    }
    if (st->bf16)
        return mxfa_mma_bf16_steps(st->model, x, y, kn, acc);
    return mxfa_mma_block(st->model, x, sa, nan_a, y, sb, nan_b, kn, acc);
}

/* A row's pending marks and wide flags cleared with plain vector stores:
 * GCC turns a memset of this size, or a loop it recognizes as one, into a
 * string instruction whose start-up cost was half of fx_block's time (the
 * empty asm keeps the stores as they are). The vector type may alias and
 * needs no alignment: wide is a byte array. */
static inline void clear_row(uint32_t *pend, uint8_t *wide)
{
    typedef uint32_t v4su __attribute__((vector_size(16), aligned(1), may_alias));
    const v4su z = {0, 0, 0, 0};
    for (int j = 0; j < KERN_NR; j += 4) {
        *(v4su *)&pend[j] = z;
        __asm__("" ::: "memory");
    }
    *(v4su *)&wide[0] = z;
    *(v4su *)&wide[16] = z;
}

void fx_block(const cpu_kernels *kern, const fx_step *st, const fx_mat *a, int64_t ar0, int64_t ak0, const fx_mat *b,
              int64_t bk0, int64_t bc0, int kn, int m, int n, const int *sa, const uint8_t *fa, const int *sb,
              const uint8_t *fb, uint32_t *acc, int64_t ldc, const uint8_t *active)
{
    int group = st->group > 0 && st->group < kn ? st->group : kn;
    double apad[KERN_MR * 32];
    uint16_t aepad[KERN_MR * 32];
    uint32_t acc0[KERN_MR][KERN_NR];
    /* Pending marks and wide columns: all zero between row tiles, so that
     * clean rows need not clear them; a tile clears what it set. */
    uint32_t pend[KERN_MR][KERN_NR];
    uint8_t wide[KERN_MR][KERN_NR]; /* columns whose every group needs KERN_TRUNCATE_WIDE */
    unsigned npend;
    kern_partial part;
    memset(pend, 0, sizeof pend);
    memset(wide, 0, sizeof wide);
    /* column tiles outside: one tile of B (32 columns of the block) stays in
     * the first-level cache while the rows stream past it */
    for (int j0 = 0; j0 < n; j0 += KERN_NR) {
        const double *bv = &b->v[bk0 * b->ld + bc0 + j0];
        const uint16_t *be = &b->e[bk0 * b->ld + bc0 + j0];
        /* whether any column of the tile is flagged: most tiles are clean,
         * and then so is every row whose own flags are clear */
        uint8_t bhi[32];
        int bhi_ready = 0, cols_flagged = 0;
        for (int j = 0; j < KERN_NR; j++)
            cols_flagged |= fb[j0 + j] | (st->widen && (sb[j0 + j] < -110 || sb[j0 + j] > 110));
        for (int i0 = 0; i0 < m; i0 += KERN_MR) {
            int mr = m - i0 < KERN_MR ? m - i0 : KERN_MR;
            const double *av = &a->v[(ar0 + i0) * a->ld + ak0];
            const uint16_t *ae = &a->e[(ar0 + i0) * a->ld + ak0];
            int64_t lda = a->ld;
            if (mr < KERN_MR) { /* a short tile: the missing rows are zeros */
                memset(apad, 0, sizeof apad);
                memset(aepad, 0, sizeof aepad);
                for (int r = 0; r < mr; r++)
                    for (int k = 0; k < kn; k++) {
                        apad[r * 32 + k] = av[r * lda + k];
                        aepad[r * 32 + k] = ae[r * lda + k];
                    }
                av = apad;
                ae = aepad;
                lda = 32;
            }
            int any_wide = 0;
            unsigned flagged = 0; /* rows whose marks were set here */
            for (int r = 0; r < mr; r++) {
                int i = i0 + r;
                if (group < kn) /* the fallback restarts the block from here */
                    memcpy(acc0[r], &acc[i * ldc + j0], sizeof acc0[r]);
                if (!cols_flagged && !fa[i] && !(st->widen && (sa[i] < -110 || sa[i] > 110)))
                    continue;
                flagged |= 1u << r;
                for (int j = 0; j < KERN_NR; j++) {
                    int fl = fa[i] | fb[j0 + j]; /* 1: the reference decides */
                    pend[r][j] = fl == 0 ? 0 : fl == FX_WIDE ? KERN_TRUNCATE_WIDE : 1;
                    if (st->widen && (sa[i] < -110 || sa[i] > 110 || sb[j0 + j] < -110 || sb[j0 + j] > 110))
                        pend[r][j] = 1; /* widening to bf16 must be exact and normal */
                    wide[r][j] = pend[r][j] == KERN_TRUNCATE_WIDE;
                    any_wide |= wide[r][j];
                }
            }
            npend = 0;
            unsigned rows = 0;
            for (int r = 0; r < mr; r++)
                rows |= (unsigned)(!active || active[i0 + r]) << r;
            for (int g0 = 0; g0 < kn; g0 += group) {
                int gn = kn - g0 < group ? kn - g0 : group;
                if (g0 > 0 && any_wide) /* the fields still cannot be trusted */
                    for (int r = 0; r < mr; r++)
                        for (int j = 0; j < KERN_NR; j++)
                            if (wide[r][j] && pend[r][j] == 0)
                                pend[r][j] = KERN_TRUNCATE_WIDE;
                kern->dot(gn, av + g0, ae + g0, lda, bv + g0 * b->ld, be + g0 * b->ld, b->ld, &part);
                npend = kern->combine(st->how, &part, mr, rows, &sa[i0], &sb[j0], &acc[i0 * ldc + j0], ldc, pend);
                if (npend) {
                    if (!bhi_ready) { /* once per column tile, for all its rows */
                        kern->lsb_bound(kn, be, b->ld, bhi);
                        bhi_ready = 1;
                    }
                    npend = kern->fix(st->how, gn, av + g0, ae + g0, lda, bv + g0 * b->ld, b->ld, bhi + g0, &part, mr,
                                      npend, &sa[i0], &sb[j0], &acc[i0 * ldc + j0], ldc, pend);
                }
            }
            for (int r = 0; r < mr; r++) {
                int i = i0 + r;
                if (!(npend >> r & 1)) {
                    if (flagged >> r & 1)
                        clear_row(pend[r], wide[r]);
                    continue;
                }
                if (group >= kn)
                    memcpy(acc0[r], &acc[i * ldc + j0], sizeof acc0[r]);
                for (int j = 0; j < KERN_NR; j++)
                    if (pend[r][j])
                        acc[i * ldc + j0 + j] =
                            fallback(st, a, ar0 + i, ak0, b, bk0, bc0 + j0 + j, kn, sa[i], fa[i] & FX_NAN_SCALE,
                                     sb[j0 + j], fb[j0 + j] & FX_NAN_SCALE, acc0[r][j]);
                clear_row(pend[r], wide[r]);
            }
        }
    }
}
