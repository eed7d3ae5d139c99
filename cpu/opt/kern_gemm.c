/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu backend's vector kernels: the block-scaled products (kern_vec.h
 * says how they are built). */
#include "kern_vec.h"

void KERN_FN(dot)(int kn, const double *a, const uint16_t *ae, int64_t lda, const double *b, const uint16_t *be,
                int64_t ldb, kern_partial *out)
{
    /* A's fields twice in 32 bits, so that broadcasting one is a plain load */
    uint32_t af[KERN_MR][32];
    for (int r = 0; r < KERN_MR; r++) {
        int k = 0;
        for (; k + 16 <= kn; k += 16) { /* sixteen at a time: GCC leaves this loop scalar */
            v16hu h;
            memcpy(&h, &ae[r * lda + k], sizeof h);
            v16su w = (v16su)cvt_u16_i32(h);
            w |= w << 16;
            memcpy(&af[r][k], &w, sizeof w);
        }
        for (; k < kn; k++)
            af[r][k] = (uint32_t)ae[r * lda + k] * 0x10001u;
    }
    /* the tile's sums and fields stay in registers: rows written out */
    v8df s00 = {0}, s01 = {0}, s02 = {0}, s03 = {0}, s10 = {0}, s11 = {0}, s12 = {0}, s13 = {0};
    v8df s20 = {0}, s21 = {0}, s22 = {0}, s23 = {0}, s30 = {0}, s31 = {0}, s32 = {0}, s33 = {0};
    v64qu x0 = {0}, x1 = {0}, x2 = {0}, x3 = {0};
    const double *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    for (int k = 0; k < kn; k++) {
        const double *bk = b + k * ldb;
        v8df b0 = load8(bk), b1 = load8(bk + 8), b2 = load8(bk + 16), b3 = load8(bk + 24);
        v32hu bx;
        memcpy(&bx, be + k * ldb, sizeof bx);
#define KERN_ROW(r)                                                                                                   \
    do {                                                                                                              \
        double ak = a##r[k];                                                                                          \
        v8df va = {ak, ak, ak, ak, ak, ak, ak, ak};                                                                   \
        s##r##0 += va * b0;                                                                                           \
        s##r##1 += va * b1;                                                                                           \
        s##r##2 += va * b2;                                                                                           \
        s##r##3 += va * b3;                                                                                           \
        uint32_t fk = af[r][k];                                                                                       \
        v16su vf = {fk, fk, fk, fk, fk, fk, fk, fk, fk, fk, fk, fk, fk, fk, fk, fk};                                  \
        x##r = max_u8(x##r, (v64qu)((v32hu)vf + bx));                                                                \
    } while (0)
        KERN_ROW(0);
        KERN_ROW(1);
        KERN_ROW(2);
        KERN_ROW(3);
#undef KERN_ROW
    }
    v8df rows[KERN_MR][4] = {{s00, s01, s02, s03}, {s10, s11, s12, s13}, {s20, s21, s22, s23}, {s30, s31, s32, s33}};
    v64qu xs[KERN_MR] = {x0, x1, x2, x3};
    for (int r = 0; r < KERN_MR; r++) {
        memcpy(out->sum[r], rows[r], sizeof out->sum[r]);
        memcpy(out->fields[r], &xs[r], sizeof out->fields[r]);
    }
}

/* T = S 2^s + acc (exact), cut to 24 bits and narrowed to fp32: exact
 * where the result is normal; a zero where |T| <= 2^-150, whose cut is
 * zero as well. */
static inline v8sf in_exponent_sum(v8df S, v8si s, v8su at)
{
    v8df af = cvt_ps_pd((v8sf)at);
    v8df sc = (v8df)((cvt_i32_i64(s) + 1023) << 52);
    v8df T = S * sc + af;
    return cvt_pd_ps((v8df)((v8di)T & ~SPLAT((INT64_C(1) << 29) - 1)));
}

/* KERN_IN_EXPONENT sixteen lanes at a time: the scalar case below, written
 * with masks instead of branches; the exponent work in 32-bit lanes, the
 * sum in two halves of eight doubles. Returns whether a column is pending. */
static inline int combine_in_exponent(const kern_partial *p, int r, int sa, const int *sb, uint32_t *acc,
                                      uint32_t *pending)
{
    v16si any = {0};
    for (int j0 = 0; j0 < KERN_NR; j0 += 16) {
        v16hu f16;
        v16si pin;
        v16si s;
        v16su a;
        memcpy(&f16, &p->fields[r][j0], 32);
        memcpy(&pin, &pending[j0], 64);
        memcpy(&s, &sb[j0], 64);
        memcpy(&a, &acc[j0], 64);
        s += sa;
        v16si f = cvt_u16_i32(f16), ep = (f & 0xFF) - 128, nl = (f >> 8) - 128;
        v16si ef = (v16si)((a >> 23) & 0xFFu);
        v16si anz = (v16si)((a & 0x7FFFFFFFu) != 0u), pnz = ep >= (FX_PROD_MIN - 128);
        v16si racc = max16(ef, (v16si){0} + 1) - 127;
        v16si floor = (v16si){0} + MMA_EMAX_FLOOR;
        v16si emax = max16(sel16i(pnz, ep + s, floor), sel16i(anz, racc, floor));
        v16si ok = (ef != 255) & (~pnz | (s - nl >= emax - MMA_F_SM100));
        /* the accumulator truncated on the grid 2^(emax - F): its low k bits cleared */
        v16si k = emax - racc - 2;
        v16su kc = (v16su)sel16i(k < 0, (v16si){0}, sel16i(k > 31, (v16si){0} + 31, k));
        v16su m = sel16((v16si)(k >= 24), (v16su){0} + 0x80000000u, ~(v16su){0} << kc);
        v16su at = a & m;
        v8si slo = __builtin_shufflevector(s, s, 0, 1, 2, 3, 4, 5, 6, 7);
        v8si shi = __builtin_shufflevector(s, s, 8, 9, 10, 11, 12, 13, 14, 15);
        v8su alo = __builtin_shufflevector(at, at, 0, 1, 2, 3, 4, 5, 6, 7);
        v8su ahi = __builtin_shufflevector(at, at, 8, 9, 10, 11, 12, 13, 14, 15);
        v8sf rlo = in_exponent_sum(load8(p->sum[r] + j0), slo, alo);
        v8sf rhi = in_exponent_sum(load8(p->sum[r] + j0 + 8), shi, ahi);
        v16su res = (v16su)__builtin_shufflevector(rlo, rhi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        v16si tz = (v16si)((res << 1) == 0u); /* |T| <= 2^-150: the cut result is zero */
        v16su rfe = (res >> 23) & 0xFFu;
        ok &= tz | ((v16si)(rfe != 0u) & (v16si)(rfe != 255u));
        res = sel16(tz, (v16su){0}, res); /* every zero +0 */
        /* pending columns keep their mark */
        ok &= pin == 0;
        v16su out = sel16(ok, res, a);
        v16si np = sel16i(pin != 0, pin, ~ok & KERN_TRUNCATE);
        memcpy(&acc[j0], &out, 64);
        memcpy(&pending[j0], &np, 64);
        any |= np;
    }
    /* whether a column is pending, from the registers (reading the marks
     * back right after storing them stalls) */
    v8si h = __builtin_shufflevector(any, any, 0, 1, 2, 3, 4, 5, 6, 7) |
             __builtin_shufflevector(any, any, 8, 9, 10, 11, 12, 13, 14, 15);
    int32_t o = 0;
    for (int i = 0; i < 8; i++)
        o |= h[i];
    return o != 0;
}

/* Whether any of a row's KERN_NR columns is pending. */
static inline int any_pending(const uint32_t *pending)
{
    uint32_t any = 0;
    for (int i = 0; i < KERN_NR; i++)
        any |= pending[i];
    return any != 0;
}

/*
 * The exact truncation step for the columns the combine marked
 * KERN_TRUNCATE: the group's products each cut toward zero to the grid of
 * its step (the largest exponent, known exactly from the fields, minus F),
 * as sum_k trunc(a_k b_k 2^-g) in integers held in doubles: every product
 * times a power of two is exact, its integer part is below 2^27, and the
 * sum of 32 of them below 2^32. Then the accumulator and the result's cut
 * as in the combine.
 */
static void truncated_sums(int kn, const double *a, const double *b, int64_t ldb, const double *unit, double *out)
{
    v8df m0 = load8(unit), m1 = load8(unit + 8), m2 = load8(unit + 16), m3 = load8(unit + 24);
    v8df t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    for (int k = 0; k < kn; k++) {
        const double *bk = b + k * ldb;
        double ak = a[k];
        v8df va = {ak, ak, ak, ak, ak, ak, ak, ak};
        t0 += __builtin_convertvector(__builtin_convertvector((va * load8(bk)) * m0, v8di), v8df);
        t1 += __builtin_convertvector(__builtin_convertvector((va * load8(bk + 8)) * m1, v8di), v8df);
        t2 += __builtin_convertvector(__builtin_convertvector((va * load8(bk + 16)) * m2, v8di), v8df);
        t3 += __builtin_convertvector(__builtin_convertvector((va * load8(bk + 24)) * m3, v8di), v8df);
    }
    memcpy(out, &t0, sizeof t0);
    memcpy(out + 8, &t1, sizeof t1);
    memcpy(out + 16, &t2, sizeof t2);
    memcpy(out + 24, &t3, sizeof t3);
}

static inline v8di load8i(const int32_t *x)
{
    v8si v;
    memcpy(&v, x, sizeof v);
    return cvt_i32_i64(v);
}

static inline v8su load8su(const uint32_t *x)
{
    v8su v;
    memcpy(&v, x, sizeof v);
    return v;
}

/* whether any lane is nonzero */
static inline int any8(v8si x)
{
    x |= __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3);
    x |= __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5);
    x |= __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6);
    return x[0] != 0;
}

static inline v8di load8u(const uint32_t *x)
{
    v8su v;
    memcpy(&v, x, sizeof v);
    return __builtin_convertvector(v, v8di);
}

static inline v8df pow2v(v8di e) /* e within the normal double range */
{
    return (v8df)((e + 1023) << 52);
}

/* fp32 bits (in 64-bit lanes) of x + y rounded once to nearest even, for
 * exact doubles x and y (add_rne_f32, eight lanes); *ok where the sum is
 * zero or normal in fp32 */
static inline v8di add_rne_f32v(v8df x, v8df y, v8di *ok)
{
    v8df s = x + y, bb = s - x;
    v8df err = (x - (s - bb)) + (y - bb);
    v8di u = (v8di)s, inexact = err != 0.0;
    u += inexact & ((err < 0.0) ^ (s < 0.0)); /* rounded away from zero: step back */
    u |= inexact & 1;
    v8di e = ((u >> 52) & 0x7FF) - 1023, zero = s == 0.0;
    *ok = zero | ((e >= -126) & (e <= 127));
    v8si r = (v8si)cvt_pd_ps((v8df)u);
    return sel(zero, SPLAT(0), __builtin_convertvector((v8su)r, v8di));
}

/* For KERN_TRUNCATE_WIDE: the largest ea + eb over the group's non-zero
 * products, the exponents read from the doubles (normal, so they are the
 * operands' own); NO_PRODUCT where every product is zero. */
#define NO_PRODUCT (-100000)

static inline uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static void exact_emax(int kn, const double *a, const double *b, int64_t ldb, int64_t *out)
{
    v8di m0 = SPLAT(NO_PRODUCT), m1 = m0, m2 = m0, m3 = m0;
    for (int k = 0; k < kn; k++) {
        if (a[k] == 0.0)
            continue;
        v8di ea = SPLAT((int64_t)((bits_of(a[k]) >> 52) & 0x7FF) - 1023);
        const double *bk = b + k * ldb;
#define EXACT_EMAX_PART(m, off)                                                                                       \
    do {                                                                                                              \
        v8df vb = load8(bk + (off));                                                                                  \
        v8di e = ea + ((((v8di)vb) >> 52) & 0x7FF) - 1023, take = (vb != 0.0) & (e > m);                               \
        m = sel(take, e, m);                                                                                          \
    } while (0)
        EXACT_EMAX_PART(m0, 0);
        EXACT_EMAX_PART(m1, 8);
        EXACT_EMAX_PART(m2, 16);
        EXACT_EMAX_PART(m3, 24);
#undef EXACT_EMAX_PART
    }
    memcpy(out, &m0, sizeof m0);
    memcpy(out + 8, &m1, sizeof m1);
    memcpy(out + 16, &m2, sizeof m2);
    memcpy(out + 24, &m3, sizeof m3);
}

/* The same for eight columns, when only they are wanted (two sums, even
 * and odd k, so that the additions overlap; integers, so the order does
 * not matter). */
static void truncated_sums8(int kn, const double *a, const double *b, int64_t ldb, const double *unit, double *out)
{
    v8df m = load8(unit), t0 = {0}, t1 = {0};
    int k = 0;
    for (; k + 1 < kn; k += 2) {
        double a0 = a[k], a1 = a[k + 1];
        v8df va0 = {a0, a0, a0, a0, a0, a0, a0, a0}, va1 = {a1, a1, a1, a1, a1, a1, a1, a1};
        t0 += __builtin_convertvector(__builtin_convertvector((va0 * load8(b + k * ldb)) * m, v8di), v8df);
        t1 += __builtin_convertvector(__builtin_convertvector((va1 * load8(b + (k + 1) * ldb)) * m, v8di), v8df);
    }
    if (k < kn) {
        double a0 = a[k];
        v8df va0 = {a0, a0, a0, a0, a0, a0, a0, a0};
        t0 += __builtin_convertvector(__builtin_convertvector((va0 * load8(b + k * ldb)) * m, v8di), v8df);
    }
    t0 += t1;
    memcpy(out, &t0, sizeof t0);
}

/*
 * The truncated sums when only the k in `cut` can have products off their
 * grids, the others' products being integers in grid units: those sum to
 * S - X, where S is the dot's sum over every k and X the sum over `cut`,
 * and the cut ones are truncated one by one. Exact when every product of
 * the column lies within 46 bits of the largest (ep + nl <= 46, checked by
 * the caller): S and X are then exact doubles, and so is S - X, a sum of
 * products on the grid; times 2^-g it is an integer below 2^32.
 */
static void truncated_sums_sparse(const double *a, const double *b, int64_t ldb, const double *unit, uint32_t cut,
                                  unsigned chunks, const double *s, double *out)
{
    v8df x[KERN_NR / 8] = {{0}}, t[KERN_NR / 8] = {{0}};
    for (; cut; cut &= cut - 1) {
        int k = __builtin_ctz(cut);
        double ak = a[k];
        v8df va = {ak, ak, ak, ak, ak, ak, ak, ak};
        for (int c = 0; c < KERN_NR / 8; c++)
            if (chunks >> c & 1) {
                v8df pk = va * load8(b + k * ldb + 8 * c);
                x[c] += pk;
                t[c] += __builtin_convertvector(__builtin_convertvector(pk * load8(unit + 8 * c), v8di), v8df);
            }
    }
    for (int c = 0; c < KERN_NR / 8; c++) {
        v8df r = (load8(s + 8 * c) - x[c]) * load8(unit + 8 * c) + t[c];
        memcpy(out + 8 * c, &r, sizeof r);
    }
}

/* The k whose products may fall below the coarsest grid 2^gmax: a
 * product's lowest bit is at least lsb(a_k) + min_j lsb(b_kj), that is
 * (FX_BIAS - high field byte of a_k) + (FX_BIAS - bhi[k]). */
static uint32_t cut_mask(int kn, const uint16_t *ae, const uint8_t *bhi, int64_t gmax)
{
    int64_t thr = 2 * FX_BIAS - gmax; /* cut where ha + bhi > thr */
    if (thr < 0)
        thr = 0; /* every k with a nonzero a_k */
    if (thr > 0xFFFF)
        return 0;
#if defined(__AVX512BW__)
    __m512i ha = _mm512_setzero_si512(), hb = _mm512_setzero_si512();
    __mmask32 live = kn >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << kn) - 1);
    ha = _mm512_srli_epi16(_mm512_maskz_loadu_epi16(live, ae), 8);
    hb = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(live, bhi));
    __mmask32 nz = _mm512_test_epi16_mask(ha, ha);
    return _mm512_mask_cmpgt_epu16_mask(nz, _mm512_add_epi16(ha, hb), _mm512_set1_epi16((short)thr));
#else
    uint32_t cut = 0;
    for (int k = 0; k < kn; k++) {
        int ha = ae[k] >> 8;
        cut |= (uint32_t)(ha != 0 && ha + bhi[k] > thr) << k;
    }
    return cut;
#endif
}

/* bhi[k]: the largest high field byte (FX_BIAS - lowest set bit) over the
 * KERN_NR columns of B row k; 0 when the row is all zeros. */
void KERN_FN(lsb_bound)(int kn, const uint16_t *be, int64_t ldb, uint8_t *bhi)
{
    for (int k = 0; k < kn; k++) {
#if defined(__AVX512BW__)
        /* high bytes packed, halved twice, then the largest as the smallest
         * complement (phminposuw) */
        __m256i h = _mm512_cvtepi16_epi8(_mm512_srli_epi16(_mm512_loadu_si512(be + k * ldb), 8));
        __m128i m = _mm_max_epu8(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        m = _mm_and_si128(_mm_max_epu8(m, _mm_srli_epi16(m, 8)), _mm_set1_epi16(0xFF));
        bhi[k] = (uint8_t)(0xFF - _mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi16(0xFF)))));
#else
        uint8_t hm = 0;
        for (int j = 0; j < KERN_NR; j++)
            hm = (uint8_t)(be[k * ldb + j] >> 8) > hm ? (uint8_t)(be[k * ldb + j] >> 8) : hm;
        bhi[k] = hm;
#endif
    }
}

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
/*
 * The truncation step for one row after combine_in_exponent_avx512, which
 * left each marked column's grid g and cut accumulator in the partial and
 * checked that its products lie within 46 bits: the truncated sum as in
 * truncated_sums_sparse, then T = (S - X) 2^s + acc_cut + R 2^(g + s), each
 * step exact (multiples of the grid 2^(g + s) below 2^(g + s + 33)), cut
 * to 24 bits and narrowed as in the combine. Returns whether a column of
 * the row is still pending.
 */
static int fix_row_avx512(int kn, const double *a, const uint16_t *ae, const double *b, int64_t ldb,
                          const uint8_t *bhi, const kern_partial *p, int r, int sa, const int *sb, uint32_t *ac,
                          uint32_t *pend)
{
    const __m512i trunc_mark = _mm512_set1_epi32(KERN_TRUNCATE);
    __mmask16 want[2];
    int32_t gmax = INT32_MIN;
    for (int h = 0; h < 2; h++) {
        want[h] = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(&pend[16 * h]), trunc_mark);
        int32_t m = _mm512_mask_reduce_max_epi32(want[h], _mm512_loadu_si512(&p->grid[r][16 * h]));
        gmax = want[h] && m > gmax ? m : gmax;
    }
    if (!(want[0] | want[1])) /* marks for the reference only */
        return 1;
    /* 2^-g per marked column (0 elsewhere), eight doubles at a time */
    __m512d unit[KERN_NR / 8];
    for (int c = 0; c < KERN_NR / 8; c++) {
        __mmask8 w = (__mmask8)(want[c / 2] >> (8 * (c % 2)));
        __m512i g = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)&p->grid[r][8 * c]));
        unit[c] = _mm512_castsi512_pd(
            _mm512_maskz_slli_epi64(w, _mm512_sub_epi64(_mm512_set1_epi64(1023), g), 52));
    }
    __m512d x[KERN_NR / 8], t[KERN_NR / 8];
    for (int c = 0; c < KERN_NR / 8; c++)
        x[c] = t[c] = _mm512_setzero_pd();
    for (uint32_t cut = cut_mask(kn, ae, bhi, gmax); cut; cut &= cut - 1) {
        int k = __builtin_ctz(cut);
        __m512d va = _mm512_set1_pd(a[k]);
        for (int c = 0; c < KERN_NR / 8; c++) {
            __m512d pk = _mm512_mul_pd(va, _mm512_loadu_pd(b + k * ldb + 8 * c));
            x[c] = _mm512_add_pd(x[c], pk);
            t[c] = _mm512_add_pd(t[c], _mm512_cvtepi64_pd(_mm512_cvttpd_epi64(_mm512_mul_pd(pk, unit[c]))));
        }
    }
    const __m512i cut = _mm512_set1_epi64(~((INT64_C(1) << 29) - 1));
    int undecided = 0;
    for (int h = 0; h < 2; h++) {
        if (!want[h]) {
            undecided |= _mm512_test_epi32_mask(_mm512_loadu_si512(&pend[16 * h]), _mm512_loadu_si512(&pend[16 * h])) != 0;
            continue;
        }
        __m512i s = _mm512_add_epi32(_mm512_loadu_si512(&sb[16 * h]), _mm512_set1_epi32(sa));
        __m512i gs = _mm512_add_epi32(_mm512_loadu_si512(&p->grid[r][16 * h]), s);
        __m512i at = _mm512_loadu_si512(&p->acc_cut[r][16 * h]);
        __m256 half[2];
        for (int q = 0; q < 2; q++) {
            int c = 2 * h + q;
            __m512i s64 = _mm512_cvtepi32_epi64(q ? _mm512_extracti64x4_epi64(s, 1) : _mm512_castsi512_si256(s));
            __m512i gs64 = _mm512_cvtepi32_epi64(q ? _mm512_extracti64x4_epi64(gs, 1) : _mm512_castsi512_si256(gs));
            __m512d p2s = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(s64, _mm512_set1_epi64(1023)), 52));
            __m512d p2g = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(gs64, _mm512_set1_epi64(1023)), 52));
            __m512d af = _mm512_cvtps_pd(_mm256_castsi256_ps(q ? _mm512_extracti64x4_epi64(at, 1)
                                                                : _mm512_castsi512_si256(at)));
            __m512d T = _mm512_fmadd_pd(_mm512_sub_pd(_mm512_loadu_pd(&p->sum[r][8 * c]), x[c]), p2s, af);
            T = _mm512_fmadd_pd(t[c], p2g, T);
            half[q] = _mm512_cvtpd_ps(_mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(T), cut)));
        }
        __m512i res = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(half[0]), half[1], 1));
        __mmask16 tz = _mm512_testn_epi32_mask(res, _mm512_set1_epi32(0x7FFFFFFF));
        __m512i rexp = _mm512_and_si512(res, _mm512_set1_epi32(0x7F800000));
        __mmask16 normal = _mm512_test_epi32_mask(rexp, rexp) &
                           _mm512_cmpneq_epi32_mask(rexp, _mm512_set1_epi32(0x7F800000));
        __mmask16 done = want[h] & (tz | normal);
        _mm512_mask_storeu_epi32(&ac[16 * h], done, _mm512_maskz_mov_epi32((__mmask16)~tz, res));
        _mm512_mask_storeu_epi32(&pend[16 * h], want[h], _mm512_maskz_mov_epi32((__mmask16)~done, _mm512_set1_epi32(1)));
        __m512i pm = _mm512_loadu_si512(&pend[16 * h]);
        undecided |= _mm512_test_epi32_mask(pm, pm) != 0;
    }
    return undecided;
}
#endif

unsigned KERN_FN(fix)(kern_combine how, int kn, const double *a, const uint16_t *ae, int64_t lda, const double *b,
                    int64_t ldb, const uint8_t *bhi, const kern_partial *p, int mr, unsigned rows, const int *sa,
                    const int *sb, uint32_t *acc, int64_t ldc, uint32_t (*pending)[KERN_NR])
{
    unsigned left = 0;
    for (int r = 0; r < mr; r++) {
        if (!(rows >> r & 1))
            continue;
        uint32_t *pend = pending[r], *ac = acc + r * ldc;
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
        /* the combine left the work done: unless an operand is wide (its
         * marks came from fx_block) or the products span too far */
        if (how == KERN_IN_EXPONENT && !(p->dense >> r & 1)) {
            const __m512i wide = _mm512_set1_epi32(KERN_TRUNCATE_WIDE);
            if (!(_mm512_cmpeq_epi32_mask(_mm512_loadu_si512(&pend[0]), wide) |
                  _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(&pend[16]), wide))) {
                left |= (unsigned)fix_row_avx512(kn, a + r * lda, ae + r * lda, b, ldb, bhi, p, r, sa[r], sb, ac, pend)
                        << r;
                continue;
            }
        }
#endif
        if (how == KERN_EXACT_PROMOTE) { /* nothing to truncate: the reference decides */
            for (int j = 0; j < KERN_NR; j++)
                pend[j] = pend[j] != 0;
            left |= (unsigned)any_pending(pend) << r;
            continue;
        }
        double unit[KERN_NR], sum[KERN_NR];
        int64_t grid[KERN_NR], wide_emax[KERN_NR];
        unsigned chunks = 0; /* the groups of eight columns with a marked one */
        int any_wide = 0;
        for (int j0 = 0; j0 < KERN_NR; j0 += 8) {
            v8su pm = load8su(pend + j0);
            chunks |= (unsigned)any8((v8si)((pm == KERN_TRUNCATE) | (pm == KERN_TRUNCATE_WIDE))) << (j0 / 8);
            any_wide |= any8((v8si)(pm == KERN_TRUNCATE_WIDE));
        }
        v8di gmax = SPLAT(INT64_MIN), spread = SPLAT(0);
        if (any_wide)
            exact_emax(kn, a + r * lda, b, ldb, wide_emax);
        /* the grid of each marked column, in units of the unscaled products */
        for (int j0 = 0; j0 < KERN_NR; j0 += 8) {
            v8hu f16;
            memcpy(&f16, &p->fields[r][j0], sizeof f16);
            v8di f = __builtin_convertvector(f16, v8di);
            v8di ep = (f & 0xFF) - 128, s = load8i(sb + j0) + sa[r], av = load8u(ac + j0);
            v8di pm = load8u(pend + j0), g, pnz = ep >= FX_PROD_MIN - 128;
            v8di want = (pm == KERN_TRUNCATE) | (pm == KERN_TRUNCATE_WIDE);
            if (any_wide) {
                v8di wide = pm == KERN_TRUNCATE_WIDE, xe;
                memcpy(&xe, wide_emax + j0, sizeof xe);
                ep = sel(wide, xe, ep);
                pnz = sel(wide, xe > NO_PRODUCT, pnz);
            }
            if (how == KERN_IN_EXPONENT) {
                v8di ef = (av >> 23) & 0xFF, racc = sel(ef == 0, SPLAT(-126), ef - 127);
                v8di floor = SPLAT(MMA_EMAX_FLOOR), anz = (av & 0x7FFFFFFF) != 0;
                v8di e1 = sel(pnz, ep + s, floor), e2 = sel(anz, racc, floor);
                g = sel(e1 > e2, e1, e2) - MMA_F_SM100 - s;
            } else { /* KERN_TRUNC13_PROMOTE: the products alone, unscaled */
                g = sel(ep > MMA_EMAX_FLOOR, ep, SPLAT(MMA_EMAX_FLOOR)) - MMA_F_SM90_FP8;
            }
            g = sel(want, g, SPLAT(0));
            gmax = sel(want & (g > gmax), g, gmax);
            spread |= want & ((f & 0xFF) + (f >> 8) - 256 > 46);
            v8df u = (v8df)(want & (v8di)pow2v(-g));
            memcpy(unit + j0, &u, sizeof u);
            memcpy(grid + j0, &g, sizeof g);
        }
        /* sparse: every marked column's products lie within 46 bits */
        if (!any_wide && !any8(__builtin_convertvector(spread, v8si))) {
            int64_t gm = INT64_MIN;
            for (int i = 0; i < 8; i++)
                gm = gmax[i] > gm ? gmax[i] : gm;
            uint32_t cut = gm == INT64_MIN ? 0 : cut_mask(kn, ae + r * lda, bhi, gm);
            truncated_sums_sparse(a + r * lda, b, ldb, unit, cut, chunks, p->sum[r], sum);
        } else if (chunks & (chunks - 1)) { /* two groups of eight or more */
            truncated_sums(kn, a + r * lda, b, ldb, unit, sum);
        } else {
            for (int c = 0; c < KERN_NR / 8; c++) {
                if (chunks >> c & 1)
                    truncated_sums8(kn, a + r * lda, b + 8 * c, ldb, unit + 8 * c, sum + 8 * c);
                else
                    memset(sum + 8 * c, 0, 8 * sizeof *sum);
            }
        }
        /* the truncated sum meets the accumulator */
        for (int j0 = 0; j0 < KERN_NR; j0 += 8) {
            v8di s = load8i(sb + j0) + sa[r], av = load8u(ac + j0), pm = load8u(pend + j0);
            v8di want = (pm == KERN_TRUNCATE) | (pm == KERN_TRUNCATE_WIDE), g, res, ok;
            memcpy(&g, grid + j0, sizeof g);
            v8df S = load8(sum + j0), af = cvt_ps_pd((v8sf)__builtin_convertvector(av, v8si));
            if (how == KERN_IN_EXPONENT) {
                v8di ef = (av >> 23) & 0xFF, racc = sel(ef == 0, SPLAT(-126), ef - 127), gs = g + s;
                v8di k = gs - (racc - 23); /* accumulator bits below the grid */
                v8di kc = sel(k < 0, SPLAT(0), sel(k > 31, SPLAT(31), k));
                v8di at = av & sel(k >= 24, SPLAT(0x80000000), SPLAT(0xFFFFFFFF) & ~((SPLAT(1) << kc) - 1));
                v8df T = S * pow2v(gs) + cvt_ps_pd((v8sf)__builtin_convertvector(at, v8si));
                v8si rf = (v8si)cvt_pd_ps((v8df)((v8di)T & ~SPLAT((INT64_C(1) << 29) - 1)));
                res = __builtin_convertvector((v8su)rf, v8di);
                v8di rfe = (res >> 23) & 0xFF, zero = (res & 0x7FFFFFFF) == 0; /* |T| <= 2^-150 */
                ok = zero | ((rfe != 0) & (rfe != 255));
                res = sel(zero, SPLAT(0), res);
            } else { /* the partial cut to 14 bits, then promoted */
                v8df part = (v8df)((v8di)(S * pow2v(g)) & ~SPLAT((INT64_C(1) << 39) - 1));
                v8di pz = part == 0.0, anz = (av & 0x7FFFFFFF) != 0, rok;
                v8di rr = add_rne_f32v(part * pow2v(s), af, &rok);
                res = sel(pz, sel(anz, av, SPLAT(0)), rr);
                ok = pz | rok;
            }
            v8di out = sel(want & ok, res, av), np = sel(want, ~ok & 1, pm);
            v8su o32 = __builtin_convertvector(out, v8su), p32 = __builtin_convertvector(np, v8su);
            memcpy(ac + j0, &o32, sizeof o32);
            memcpy(pend + j0, &p32, sizeof p32);
        }
        left |= (unsigned)any_pending(pend) << r;
    }
    return left;
}

/* The promoting steps eight lanes at a time. KERN_EXACT_PROMOTE: the
 * double sum (exact when every product lies within 46 bits of the largest)
 * times 2^s added to the accumulator with one rounding. KERN_TRUNC13_PROMOTE:
 * a zero partial leaves the accumulator (a zero one +0); any other goes to
 * the truncation step, which cuts every product to its grid. */
static void combine_promote(kern_combine how, const kern_partial *p, int r, int sa, const int *sb, uint32_t *acc,
                            uint32_t *pending)
{
    for (int j0 = 0; j0 < KERN_NR; j0 += 8) {
        v8hu f16;
        memcpy(&f16, &p->fields[r][j0], sizeof f16);
        v8di f = __builtin_convertvector(f16, v8di), ep = (f & 0xFF) - 128, nl = (f >> 8) - 128;
        v8di s = load8i(sb + j0) + sa, av = load8u(acc + j0), pm = load8u(pending + j0);
        v8di pnz = ep >= FX_PROD_MIN - 128, anz = (av & 0x7FFFFFFF) != 0, ef = (av >> 23) & 0xFF;
        v8df af = cvt_ps_pd((v8sf)__builtin_convertvector(av, v8si));
        v8di res, ok, np;
        if (how == KERN_EXACT_PROMOTE) {
            v8di rok;
            res = add_rne_f32v(load8(p->sum[r] + j0) * pow2v(s), af, &rok);
            ok = (ef != 0xFF) & (ep + nl <= 46) & rok;
            np = ~ok & 1; /* the reference decides */
        } else {
            res = sel(anz, av, SPLAT(0));
            ok = (ef != 0xFF) & ~pnz;
            np = sel(ef != 0xFF, SPLAT(KERN_TRUNCATE), SPLAT(1)) & ~ok;
        }
        v8di out = sel((pm == 0) & ok, res, av);
        np = sel(pm != 0, pm, np);
        v8su o32 = __builtin_convertvector(out, v8su), p32 = __builtin_convertvector(np, v8su);
        memcpy(acc + j0, &o32, sizeof o32);
        memcpy(pending + j0, &p32, sizeof p32);
    }
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
/*
 * combine_in_exponent for AVX-512, every row of the partial: the same
 * decisions with the lane masks in mask registers, so that a masked store
 * leaves undecided accumulators alone. Where it saves work the values are
 * kept biased: e1 = ep + s from the biased field, the accumulator's cut as
 * an arithmetic shift of the sign bit (counts past 31 give all ones, so
 * k <= 0 needs no clamp), cleared outright for k >= 24 (a zero accumulator
 * of either sign: a zero result becomes +0 anyway), and 2^s as the product
 * of 2^sa and 2^sb, exact in double for any two scales.
 */
static unsigned combine_in_exponent_avx512(kern_partial *p, int mr, unsigned rows, const int *sa,
                                           const int *sb, uint32_t *acc, int64_t ldc, uint32_t (*pending)[KERN_NR])
{
    const __m512i ff = _mm512_set1_epi32(0xFF), one = _mm512_set1_epi32(1);
    __m512d pb[KERN_NR / 8]; /* 2^sb per column */
    for (int c = 0; c < KERN_NR / 8; c++) {
        __m512i e = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)&sb[8 * c]));
        pb[c] = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(e, _mm512_set1_epi64(1023)), 52));
    }
    unsigned left = 0, dense = 0;
    for (int r = 0; r < mr; r++) {
        if (!(rows >> r & 1))
            continue;
        uint32_t *ac = acc + r * ldc, *pend = pending[r];
        const __m512d pa = _mm512_castsi512_pd(_mm512_set1_epi64((int64_t)(sa[r] + 1023) << 52)); /* 2^sa */
        __mmask16 undecided = 0;
#pragma GCC unroll 2
        for (int j0 = 0; j0 < KERN_NR; j0 += 16) {
            __m512i f = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)&p->fields[r][j0]));
            __m512i s = _mm512_add_epi32(_mm512_loadu_si512(&sb[j0]), _mm512_set1_epi32(sa[r] - 128)); /* s - 128 */
            __m512i a = _mm512_loadu_si512(&ac[j0]), pin = _mm512_loadu_si512(&pend[j0]);
            __m512i epb = _mm512_and_si512(f, ff), nlb = _mm512_srli_epi32(f, 8); /* ep + 128, nl + 128 */
            __mmask16 pnz = _mm512_cmpge_epi32_mask(epb, _mm512_set1_epi32(FX_PROD_MIN));
            __m512i ef = _mm512_and_si512(_mm512_srli_epi32(a, 23), ff);
            __mmask16 anz = _mm512_test_epi32_mask(a, _mm512_set1_epi32(0x7FFFFFFF));
            __m512i racc = _mm512_sub_epi32(_mm512_max_epi32(ef, one), _mm512_set1_epi32(127));
            __m512i emax = _mm512_mask_mov_epi32(_mm512_set1_epi32(MMA_EMAX_FLOOR), pnz, _mm512_add_epi32(epb, s));
            emax = _mm512_mask_max_epi32(emax, anz, emax, racc);
            /* products off the grid 2^(emax - F): s - nl < emax - F */
            __m512i low = _mm512_add_epi32(_mm512_sub_epi32(s, nlb), _mm512_set1_epi32(128 + 128 + MMA_F_SM100));
            __mmask16 lowbits = _mm512_cmplt_epi32_mask(low, emax);
            __mmask16 ok = _mm512_cmpneq_epi32_mask(ef, ff) & ~(pnz & lowbits);
            /* the accumulator on the grid: its low k bits cleared */
            __m512i k = _mm512_sub_epi32(_mm512_sub_epi32(emax, racc), _mm512_set1_epi32(2));
            __m512i keep = _mm512_srav_epi32(_mm512_set1_epi32(INT32_MIN), _mm512_sub_epi32(_mm512_set1_epi32(31), k));
            __m512i at = _mm512_maskz_and_epi32(_mm512_cmplt_epi32_mask(k, _mm512_set1_epi32(24)), a, keep);
            /* T = S 2^s + acc, cut to 24 bits, to fp32 */
            const __m512i cut = _mm512_set1_epi64(~((INT64_C(1) << 29) - 1));
            __m512d alo = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_castsi512_ps(at)));
            __m512d ahi = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(at, 1)));
            __m512d tlo = _mm512_fmadd_pd(_mm512_loadu_pd(&p->sum[r][j0]), _mm512_mul_pd(pb[j0 / 8], pa), alo);
            __m512d thi = _mm512_fmadd_pd(_mm512_loadu_pd(&p->sum[r][j0 + 8]), _mm512_mul_pd(pb[j0 / 8 + 1], pa), ahi);
            __m256 rlo = _mm512_cvtpd_ps(_mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(tlo), cut)));
            __m256 rhi = _mm512_cvtpd_ps(_mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(thi), cut)));
            __m512i res = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(rlo), rhi, 1));
            /* |T| <= 2^-150: the cut result is zero; else it must be normal */
            __mmask16 tz = _mm512_testn_epi32_mask(res, _mm512_set1_epi32(0x7FFFFFFF));
            __m512i rexp = _mm512_and_si512(res, _mm512_set1_epi32(0x7F800000));
            __mmask16 normal = _mm512_test_epi32_mask(rexp, rexp) &
                               _mm512_cmpneq_epi32_mask(rexp, _mm512_set1_epi32(0x7F800000));
            /* pending columns keep their mark; the others are decided, or
             * handed to the truncation step with their grid and cut
             * accumulator (products off the grid), or to the reference */
            __mmask16 fresh = _mm512_testn_epi32_mask(pin, pin), done = ok & (tz | normal) & fresh;
            __mmask16 cut_off = fresh & pnz & lowbits & _mm512_cmpneq_epi32_mask(ef, ff);
            _mm512_mask_storeu_epi32(&ac[j0], done, _mm512_maskz_mov_epi32((__mmask16)~tz, res));
            _mm512_mask_storeu_epi32(&pend[j0], (__mmask16)(~done & fresh),
                                     _mm512_mask_mov_epi32(one, cut_off, _mm512_set1_epi32(KERN_TRUNCATE)));
            /* g = emax - F - s in units of the unscaled products */
            _mm512_mask_storeu_epi32(&p->grid[r][j0], cut_off,
                                     _mm512_sub_epi32(emax, _mm512_add_epi32(s, _mm512_set1_epi32(128 + MMA_F_SM100))));
            _mm512_mask_storeu_epi32(&p->acc_cut[r][j0], cut_off, at);
            __mmask16 wide_span = _mm512_mask_cmpgt_epi32_mask(cut_off, _mm512_add_epi32(epb, nlb),
                                                               _mm512_set1_epi32(256 + 46));
            dense |= (unsigned)(wide_span != 0) << r;
            undecided |= (__mmask16)~done;
        }
        left |= (unsigned)(undecided != 0) << r;
    }
    p->dense = dense;
    return left;
}
#endif

unsigned KERN_FN(combine)(kern_combine how, kern_partial *p, int mr, unsigned rows, const int *sa, const int *sb,
                        uint32_t *acc, int64_t ldc, uint32_t (*pending)[KERN_NR])
{
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    if (how == KERN_IN_EXPONENT)
        return combine_in_exponent_avx512(p, mr, rows, sa, sb, acc, ldc, pending);
#endif
    unsigned left = 0;
    for (int r = 0; r < mr; r++) {
        if (!(rows >> r & 1))
            continue;
        if (how == KERN_IN_EXPONENT) {
            left |= (unsigned)combine_in_exponent(p, r, sa[r], sb, acc + r * ldc, pending[r]) << r;
        } else {
            combine_promote(how, p, r, sa[r], sb, acc + r * ldc, pending[r]);
            left |= (unsigned)any_pending(pending[r]) << r;
        }
    }
    return left;
}
